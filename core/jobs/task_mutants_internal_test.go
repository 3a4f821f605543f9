package jobs

// Tests written for mutants that scripts/mutants found living in task.go (docs/development.md):
// each fails on its mutant.

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
)

var errStoreDown = errors.New("the store is down")

// downStore fails reads or updates of task records (keys without a step's "/s/") while told to.
type downStore struct {
	store.Store
	get, update atomic.Bool
}

func (s *downStore) Get(ctx context.Context, key string) (store.Record, error) {
	if s.get.Load() {
		return store.Record{}, errStoreDown
	}
	return s.Store.Get(ctx, key)
}

func (s *downStore) Update(ctx context.Context, key string, version uint64, v []byte, exp time.Time) (store.Record, error) {
	if s.update.Load() && !strings.Contains(key, "/s/") {
		return store.Record{}, errStoreDown
	}
	return s.Store.Update(ctx, key, version, v, exp)
}

func TestCheckLeaseOutsideWork(t *testing.T) {
	if err := CheckLease(context.Background()); !errors.Is(err, ErrNotInWork) {
		t.Fatalf("CheckLease outside a work: %v", err)
	}
}

// TestCheckLeaseAfterTheDeliveryLostIt: once a delivery knows it lost its task (marked lost, or
// its context cancelled for a lapsed or taken lease), CheckLease says so without asking the
// store, though the record still names this delivery.
func TestCheckLeaseAfterTheDeliveryLostIt(t *testing.T) {
	for name, lose := range map[string]func(*task){
		"marked":  func(t *task) { t.setHalt(lostHalt) },
		"lapsed":  func(t *task) { t.cancel(ErrLeaseLost) },
		"taken":   func(t *task) { t.cancel(errLeaseNow) },
		"control": func(*task) {},
	} {
		t.Run(name, func(t *testing.T) {
			w := newLeaseWorld(t)
			var checked error
			work := Define(regOwner{w.reg}, "x", func(ctx context.Context, _ struct{}) error {
				lose(taskOf(ctx))
				checked = CheckLease(ctx)
				return nil
			})
			w.start(t, work, "job")
			w.deliver(t, "job")
			if want := name != "control"; errors.Is(checked, ErrLeaseLost) != want || !want && checked != nil {
				t.Fatalf("CheckLease: %v, want ErrLeaseLost %v", checked, want)
			}
		})
	}
}

// TestCheckLeaseRenewsALapsedLease: a delivery whose lease lapsed while nobody took the task
// renews it: CheckLease answers nil and the record's lease is extended from now.
func TestCheckLeaseRenewsALapsedLease(t *testing.T) {
	w := newLeaseWorld(t)
	var checked error
	var until time.Time
	work := Define(regOwner{w.reg}, "x", func(ctx context.Context, _ struct{}) error {
		w.now = w.now.Add(time.Hour) // the lease (30 s) lapsed: a pause
		checked = CheckLease(ctx)
		r, _, err := w.svc.load(ctx, taskKey("a", "w", "job"))
		if err != nil {
			return err
		}
		until = r.LeaseUntil
		return nil
	})
	w.start(t, work, "job")
	w.deliver(t, "job")
	if checked != nil || !until.Equal(w.now.Add(DefaultLease)) {
		t.Fatalf("CheckLease: %v, lease until %v, want nil and %v", checked, until, w.now.Add(DefaultLease))
	}
}

// TestCheckLeaseLapsedAndTaken: a lapsed lease that another process took meanwhile is lost:
// ErrLeaseLost, and no later step runs though the work ignores it.
func TestCheckLeaseLapsedAndTaken(t *testing.T) {
	w := newLeaseWorld(t)
	var checked error
	later := 0
	work := Define(regOwner{w.reg}, "x", func(ctx context.Context, _ struct{}) error {
		w.now = w.now.Add(time.Hour)
		w.hold(t, "job", w.now.Add(time.Minute))
		checked = CheckLease(ctx)
		_, err := Step(ctx, "two", func(context.Context) (int, error) { later++; return 2, nil })
		return err
	})
	w.start(t, work, "job")
	w.deliver(t, "job")
	if !errors.Is(checked, ErrLeaseLost) || later != 0 {
		t.Fatalf("CheckLease: %v; the next step ran %d times, want ErrLeaseLost and none", checked, later)
	}
}

// TestCheckLeaseStoreDown: CheckLease cannot tell while the store fails: its error says so and
// wraps the store's, never ErrLeaseLost nor nil.
func TestCheckLeaseStoreDown(t *testing.T) {
	for name, c := range map[string]struct {
		lapse bool
		want  string
	}{
		"read":    {false, "jobs: check the lease: the store is down"},
		"renewal": {true, "jobs: renew a lapsed lease: "},
	} {
		t.Run(name, func(t *testing.T) {
			st := &downStore{Store: memory.New()}
			w := newLeaseWorldOn(t, st)
			var checked error
			work := Define(regOwner{w.reg}, "x", func(ctx context.Context, _ struct{}) error {
				if c.lapse {
					w.now = w.now.Add(time.Hour)
					st.update.Store(true)
				} else {
					st.get.Store(true)
				}
				checked = CheckLease(ctx)
				st.get.Store(false)
				st.update.Store(false)
				return nil
			})
			w.start(t, work, "job")
			w.deliver(t, "job")
			if !errors.Is(checked, errStoreDown) || errors.Is(checked, ErrLeaseLost) || !strings.HasPrefix(checked.Error(), c.want) {
				t.Fatalf("CheckLease: %v, want %q wrapping the store's error", checked, c.want)
			}
		})
	}
}

// TestWorkPanics: a work that panics fails its job (a permanent failure naming the log), and the
// process goes on.
func TestWorkPanics(t *testing.T) {
	w := newLeaseWorld(t)
	work := Define(regOwner{w.reg}, "x", func(context.Context, struct{}) error { panic("boom") })
	w.start(t, work, "job")
	w.deliver(t, "job")
	r, _, err := w.svc.load(w.ctx, taskKey("a", "w", "job"))
	if err != nil || r.Status != taskFailed || r.Error != "the work panicked (see the controller's log)" {
		t.Fatalf("the task: %v %+v", err, r)
	}
}

// TestWorkContextEndsWithTheDelivery: what a work left running on its context (a goroutine it
// did not wait for) sees the context end when the delivery does.
func TestWorkContextEndsWithTheDelivery(t *testing.T) {
	w := newLeaseWorld(t)
	var left context.Context
	work := Define(regOwner{w.reg}, "x", func(ctx context.Context, _ struct{}) error {
		left = ctx
		return nil
	})
	w.start(t, work, "job")
	w.deliver(t, "job")
	if left.Err() == nil {
		t.Fatal("the work's context is still live after its delivery")
	}
	if _, ok := w.svc.running.Load(taskKey("a", "w", "job")); ok {
		t.Fatal("the task is still listed as running on this instance after its delivery")
	}
}

// TestHandlerRunsOnItsOwnTime: a failure handler's context ends at the handler's own timeout,
// not at the job's.
func TestHandlerRunsOnItsOwnTime(t *testing.T) {
	w := newLeaseWorld(t)
	w.now = time.Now().UTC() // the contexts' deadlines run on the real clock
	var got time.Time
	work := Define(regOwner{w.reg}, "x", func(context.Context, struct{}) error { return Permanent(errors.New("no")) },
		Timeout(time.Hour),
		OnFailure(func(ctx context.Context, _ struct{}, _ Failure) error {
			got, _ = ctx.Deadline()
			return nil
		}, HandlerTimeout(2*time.Minute)))
	w.start(t, work, "job")
	w.deliver(t, "job") // the work fails; the handler is dispatched
	w.deliver(t, "job") // the handler
	if want := w.now.Add(2 * time.Minute); !got.Equal(want) {
		t.Fatalf("the handler's deadline: %v, want %v (its own timeout)", got, want)
	}
}
