// Tests written for mutants of fanout.go (Map, Parallel) that lived in make mutate runs
// (docs/development.md): each fails on its mutant.
package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/core/telemetry"
)

// runOnce starts a job of work fn on a fresh in-memory store and delivers it (and what it hands
// on to) at most limit times; it returns the job's state.
func runOnce(t *testing.T, limit int, fn func(ctx context.Context, _ struct{}) error, opts ...jobs.Option) *contract.JobState {
	t.Helper()
	o := newOwner()
	w := jobs.Define(o, "fan", fn, opts...)
	in := newInstance(t, memory.New(), o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	in.deliverAll(t, limit, nil)
	return stateOf(t, in, job)
}

// wantStatus fails t unless the job of state has status and its state's JSON contains msg.
func wantStatus(t *testing.T, state *contract.JobState, status, msg string) {
	t.Helper()
	if got := mustJSON(t, state); state.Job.Status != status || !strings.Contains(got, msg) {
		t.Fatalf("want %s with %s; state %s", status, msg, got)
	}
}

// wantFailed fails t unless the job of state failed with a message containing msg.
func wantFailed(t *testing.T, state *contract.JobState, msg string) {
	t.Helper()
	wantStatus(t, state, contract.StateFailed, msg)
}

// TestFanOutOutsideWork: Map and Parallel outside a work's function are refused as Step is.
func TestFanOutOutsideWork(t *testing.T) {
	ran := false
	if _, err := jobs.Map(context.Background(), "fan", []int{1}, func(context.Context, int) (int, error) { ran = true; return 0, nil }); !errors.Is(err, jobs.ErrNotInWork) {
		t.Fatalf("Map: %v", err)
	}
	if err := jobs.Parallel(context.Background(), func(context.Context) error { ran = true; return nil }); !errors.Is(err, jobs.ErrNotInWork) {
		t.Fatalf("Parallel: %v", err)
	}
	if ran {
		t.Fatal("a function ran outside a work")
	}
}

// TestMapValuesJSONCannotHold: an item, or an item's result, that JSON cannot encode fails the
// job for good, naming the item: its record could not be checked or written.
func TestMapValuesJSONCannotHold(t *testing.T) {
	for _, tc := range []struct {
		name      string
		items     []float64
		result    float64
		runs      int
		wantInMsg string
	}{
		{"item", []float64{1, math.NaN()}, 2, 0, `encode item 1 of fan-out \"scores\": json: unsupported value: NaN`},
		{"result", []float64{1}, math.Inf(1), 1, `encode the result of item 0 of fan-out \"scores\": json: unsupported value: +Inf`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs atomic.Int32
			state := runOnce(t, 1, func(ctx context.Context, _ struct{}) error {
				_, err := jobs.Map(ctx, "scores", tc.items, func(context.Context, float64) (float64, error) {
					runs.Add(1)
					return tc.result, nil
				})
				return err
			})
			wantFailed(t, state, tc.wantInMsg)
			if int(runs.Load()) != tc.runs {
				t.Fatalf("items ran %d times, want %d", runs.Load(), tc.runs)
			}
		})
	}
}

// TestParallelBranchPanics: a branch that panics fails the job, naming the branch, instead of
// crashing the process (no recover up the stack covers a branch's goroutine).
func TestParallelBranchPanics(t *testing.T) {
	state := runOnce(t, 1, func(ctx context.Context, _ struct{}) error {
		return jobs.Parallel(ctx, func(context.Context) error { return nil }, func(context.Context) error { panic("the CRM client is nil") })
	})
	wantFailed(t, state, "branch 1 of a Parallel panicked: the CRM client is nil")
}

// TestParallelHaltedBranchesReturnNil: a branch that swallows the error of a Sleep that handed
// the job on does not let the code after Parallel run in that delivery: Parallel says the
// delivery ended.
func TestParallelHaltedBranchesReturnNil(t *testing.T) {
	o, c := newOwner(), &counter{}
	w := jobs.Define(o, "naps", func(ctx context.Context, _ struct{}) error {
		if err := jobs.Parallel(ctx, func(ctx context.Context) error {
			_ = jobs.Sleep(ctx, "nap", time.Minute) // swallowed: the delivery still ended
			return nil
		}); err != nil {
			return err
		}
		c.inc("after") // an effect outside a step
		return nil
	})
	in := newInstance(t, memory.New(), o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	if err := in.svc.Deliver(context.Background(), in.q.take()[0].M, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	if c.get("after") != 0 {
		t.Fatalf("the code after Parallel ran %d times in the delivery that slept", c.get("after"))
	}
	in.deliverAll(t, 1, nil)
	if st := stateOf(t, in, job).Job.Status; st != contract.StateCompleted || c.get("after") != 1 {
		t.Fatalf("status %s, the code after Parallel ran %d times", st, c.get("after"))
	}
}

// TestMapBadName: a Map whose name is not a valid step name fails the job before any item runs.
func TestMapBadName(t *testing.T) {
	var runs atomic.Int32
	state := runOnce(t, 1, func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Map(ctx, " ", []int{1}, func(context.Context, int) (int, error) { runs.Add(1); return 0, nil })
		return err
	})
	wantFailed(t, state, `a step name is 1 to`)
	if runs.Load() != 0 {
		t.Fatalf("an item ran %d times", runs.Load())
	}
}

// TestMapInsideAnItem: a Map inside a fan-out item fails the job: an item is one unit.
func TestMapInsideAnItem(t *testing.T) {
	var inner atomic.Int32
	state := runOnce(t, 1, func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Map(ctx, "outer", []int{1}, func(ctx context.Context, n int) ([]int, error) {
			return jobs.Map(ctx, "inner", []int{n}, func(context.Context, int) (int, error) { inner.Add(1); return 0, nil })
		})
		return err
	})
	wantFailed(t, state, `item 0 of fan-out \"outer\" failed: jobs: fan-out \"inner\" runs inside a fan-out item`)
	if inner.Load() != 0 {
		t.Fatalf("the inner fan-out's item ran %d times", inner.Load())
	}
}

// TestMapNamedAsAnotherStep: a Map that takes the name of a recorded Step, Await or Sleep is
// refused, whatever its items: each kind of record alone says the name is not a fan-out's (an
// Await's or a Sleep's, with no items, looks like a fan-out of none but for its answer or its
// timer).
func TestMapNamedAsAnotherStep(t *testing.T) {
	fanOut := func(ctx context.Context, name string, items []int) error {
		_, err := jobs.Map(ctx, name, items, func(context.Context, int) (int, error) { return 0, nil })
		return err
	}
	t.Run("step", func(t *testing.T) {
		state := runOnce(t, 1, func(ctx context.Context, _ struct{}) error {
			if _, err := jobs.Step(ctx, "fetch", func(context.Context) (int, error) { return 1, nil }); err != nil {
				return err
			}
			return fanOut(ctx, "fetch", []int{1})
		})
		wantFailed(t, state, `\"fetch\" is not a fan-out: step names are unique within a work`)
	})
	t.Run("sleep", func(t *testing.T) {
		state := runOnce(t, 2, func(ctx context.Context, _ struct{}) error {
			if err := jobs.Sleep(ctx, "nap", time.Minute); err != nil {
				return err
			}
			return fanOut(ctx, "nap", nil)
		})
		wantFailed(t, state, `\"nap\" is not a fan-out: step names are unique within a work`)
	})
	t.Run("await", func(t *testing.T) {
		o := newOwner()
		w := jobs.Define(o, "fan", func(ctx context.Context, _ struct{}) error {
			if _, err := jobs.Await[review](ctx, "review", contract.Awaiting{}); err != nil {
				return err
			}
			return fanOut(ctx, "review", nil)
		})
		in := newInstance(t, memory.New(), o, newClock(), &queue{})
		job := start(t, in, w, struct{}{})
		in.deliverAll(t, 1, nil)
		answer(t, in, job, "review")
		wantFailed(t, stateOf(t, in, job), `\"review\" is not a fan-out: step names are unique within a work`)
	})
}

// TestMapReplayed: fan-outs of no items and of some, completed in one delivery, are replayed from
// their records in the next: their items do not run again and their results are the same.
func TestMapReplayed(t *testing.T) {
	c := &counter{}
	var got []string
	state := runOnce(t, 2, func(ctx context.Context, _ struct{}) error {
		none, err := jobs.Map(ctx, "none", []int{}, func(context.Context, int) (int, error) { c.inc("none"); return 0, nil })
		if err != nil {
			return err
		}
		some, err := jobs.Map(ctx, "some", []int{1, 2}, func(_ context.Context, n int) (int, error) { c.inc(fmt.Sprint(n)); return 10 * n, nil })
		if err != nil {
			return err
		}
		got = append(got, fmt.Sprint(none, some))
		return jobs.Sleep(ctx, "nap", time.Minute)
	})
	wantStatus(t, state, contract.StateCompleted, "")
	if c.get("none") != 0 || c.get("1") != 1 || c.get("2") != 1 {
		t.Fatalf("items ran %v", c.n)
	}
	if fmt.Sprint(got) != "[[] [10 20] [] [10 20]]" {
		t.Fatalf("results %v, want the same at both deliveries", got)
	}
}

// TestMapOffTheRecordedPath: a delivery that starts a fan-out it never ran while a step an
// earlier delivery recorded was not reached fails the job before any item runs.
func TestMapOffTheRecordedPath(t *testing.T) {
	var deliveries, runs, after atomic.Int32
	state := runOnce(t, 2, func(ctx context.Context, _ struct{}) error {
		if deliveries.Add(1) == 2 { // the code took another path
			if _, err := jobs.Map(ctx, "other", []int{1}, func(context.Context, int) (int, error) { runs.Add(1); return 0, nil }); err != nil {
				return err
			}
			after.Add(1) // an effect outside a step
			return nil
		}
		if _, err := jobs.Step(ctx, "fetch", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return err
		}
		return jobs.Sleep(ctx, "nap", time.Minute)
	})
	wantFailed(t, state, `step \"fetch\", recorded by an earlier delivery, was not reached by this one`)
	if runs.Load() != 0 || after.Load() != 0 {
		t.Fatalf("the new fan-out's item ran %d times, the code after it %d times", runs.Load(), after.Load())
	}
}

// TestMapOfNoItemsPastTheMargin: a fan-out reached after progress with less than the margin left
// in the delivery hands the job on, as a step does, even with no item to run: it is recorded in
// the next delivery.
func TestMapOfNoItemsPastTheMargin(t *testing.T) {
	o, c := newOwner(), &counter{}
	w := jobs.Define(o, "fan", func(ctx context.Context, _ struct{}) error {
		if _, err := jobs.Step(ctx, "one", func(context.Context) (int, error) { c.inc("one"); return 1, nil }); err != nil {
			return err
		}
		if _, err := jobs.Map(ctx, "none", []int{}, func(context.Context, int) (int, error) { return 0, nil }); err != nil {
			return err
		}
		c.inc("after")
		return nil
	})
	clk := newClock()
	in := newInstance(t, memory.New(), o, clk, &queue{})
	job := start(t, in, w, struct{}{})
	short := jobs.Delivery{Deadline: clk.Now().Add(5 * time.Second)} // under the margin
	if err := in.svc.Deliver(context.Background(), in.q.take()[0].M, short); err != nil {
		t.Fatal(err)
	}
	if c.get("after") != 0 {
		t.Fatal("the fan-out completed past the margin")
	}
	if msgs := in.q.take(); len(msgs) != 1 || msgs[0].Delay != 0 {
		t.Fatalf("dispatched %+v, want the job handed on at once", msgs)
	} else {
		in.q.msgs = msgs
	}
	in.deliverAll(t, 1, nil)
	if st := stateOf(t, in, job).Job.Status; st != contract.StateCompleted || c.get("one") != 1 || c.get("after") != 1 {
		t.Fatalf("status %s, runs %v", st, c.n)
	}
}

// itemFaults wraps a store to count and fail the reads and writes of fan-out items' records
// (keys with "/i/"): Create answers createErr(key, call) first when set (call counts from 1),
// Get fails while readsDown.
type itemFaults struct {
	store.Store
	createErr func(key string, call int) error
	readsDown atomic.Bool
	mu        sync.Mutex
	creates   map[string]int
	gets      int
}

func (s *itemFaults) Create(ctx context.Context, key string, v []byte, exp time.Time) (store.Record, error) {
	if !strings.Contains(key, "/i/") {
		return s.Store.Create(ctx, key, v, exp)
	}
	s.mu.Lock()
	if s.creates == nil {
		s.creates = map[string]int{}
	}
	s.creates[key]++
	n := s.creates[key]
	s.mu.Unlock()
	if s.createErr != nil {
		if err := s.createErr(key, n); err != nil {
			return store.Record{}, err
		}
	}
	return s.Store.Create(ctx, key, v, exp)
}

func (s *itemFaults) Get(ctx context.Context, key string) (store.Record, error) {
	if strings.Contains(key, "/i/") {
		s.mu.Lock()
		s.gets++
		s.mu.Unlock()
		if s.readsDown.Load() {
			return store.Record{}, errors.New("the store is unreachable")
		}
	}
	return s.Store.Get(ctx, key)
}

// createsOf is how often a record of an item i was created.
func (s *itemFaults) createsOf(i int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, c := range s.creates {
		if strings.HasSuffix(k, fmt.Sprintf("/%d", i)) { // keys end "/i/<fan-out>/<item>"
			n += c
		}
	}
	return n
}

// gotten is how many item records were read.
func (s *itemFaults) gotten() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets
}

// TestItemRecordsRead: the first delivery reads no item record (none can exist yet); a later one
// that cannot read them ends with the store's error, the job not failed, and the next delivery
// replays the fan-out without running its items again.
func TestItemRecordsRead(t *testing.T) {
	o, c := newOwner(), &counter{}
	w := jobs.Define(o, "fan", func(ctx context.Context, _ struct{}) error {
		if _, err := jobs.Map(ctx, "fan", []int{1, 2}, func(_ context.Context, n int) (int, error) { c.inc(fmt.Sprint(n)); return n, nil }); err != nil {
			return err
		}
		return jobs.Sleep(ctx, "nap", time.Minute)
	})
	s := &itemFaults{Store: memory.New()}
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	if err := in.svc.Deliver(context.Background(), in.q.take()[0].M, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	if s.gotten() != 0 {
		t.Fatalf("the first delivery read %d item records", s.gotten())
	}
	msgs := in.q.take()
	if len(msgs) != 1 {
		t.Fatalf("%d messages after the first delivery", len(msgs))
	}
	in.clock.Add(msgs[0].Delay)
	s.readsDown.Store(true)
	err := in.svc.Deliver(context.Background(), msgs[0].M, jobs.Delivery{})
	if err == nil || !strings.Contains(err.Error(), `read the items of fan-out "fan"`) || !strings.Contains(err.Error(), "the store is unreachable") {
		t.Fatalf("a delivery that cannot read the items: %v", err)
	}
	if st := stateOf(t, in, job).Job.Status; st == contract.StateFailed {
		t.Fatal("a store fault failed the job")
	}
	s.readsDown.Store(false)
	if err := in.svc.Deliver(context.Background(), msgs[0].M, jobs.Delivery{}); err != nil { // the queue's redelivery
		t.Fatal(err)
	}
	if st := stateOf(t, in, job).Job.Status; st != contract.StateCompleted || c.get("1") != 1 || c.get("2") != 1 {
		t.Fatalf("status %s, items ran %v", st, c.n)
	}
}

// TestItemWriteRefusedAsInvalid: an item record the store refuses as invalid is not written again
// (it would be refused again) and ends the delivery with the item not counted done.
func TestItemWriteRefusedAsInvalid(t *testing.T) {
	o := newOwner()
	w := jobs.Define(o, "fan", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Map(ctx, "fan", []int{0, 1}, func(_ context.Context, n int) (int, error) { return n, nil }, jobs.Concurrency(1))
		return err
	})
	s := &itemFaults{Store: memory.New(), createErr: func(key string, _ int) error {
		if strings.HasSuffix(key, "/1") {
			return fmt.Errorf("%w: a field the store does not take", store.ErrInvalid)
		}
		return nil
	}}
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	if err := in.svc.Deliver(context.Background(), in.q.take()[0].M, jobs.Delivery{}); err == nil || !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("delivery: %v", err)
	}
	if n := s.createsOf(1); n != 1 {
		t.Fatalf("item 1's record written %d times", n)
	}
	d, err := operator(t, s, in.clock, &queue{}).Show(context.Background(), ref(job))
	if err != nil || len(d.Steps) != 1 {
		t.Fatalf("show: %v %+v", err, d)
	}
	if st := d.Steps[0]; st.Kind != jobs.KindFanOut || st.Status != "active" || st.Items == nil || st.Items.Done != 1 || st.Items.Total != 2 {
		t.Fatalf("fan-out %+v (items %+v), want active, 1 of 2 done", st, st.Items)
	}
}

// TestItemWriteRetried: an item record whose write fails once is written again in the delivery:
// the next delivery finds it.
func TestItemWriteRetried(t *testing.T) {
	o, c := newOwner(), &counter{}
	var got []int
	w := jobs.Define(o, "fan", func(ctx context.Context, _ struct{}) error {
		out, err := jobs.Map(ctx, "fan", []int{7}, func(_ context.Context, n int) (int, error) { c.inc("item"); return 2 * n, nil })
		if err != nil {
			return err
		}
		got = out
		return jobs.Sleep(ctx, "nap", time.Minute)
	})
	s := &itemFaults{Store: memory.New(), createErr: func(_ string, call int) error {
		if call == 1 {
			return errors.New("a network blip")
		}
		return nil
	}}
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	in.deliverAll(t, 2, nil)
	if st := mustJSON(t, stateOf(t, in, job)); !strings.Contains(st, `"status":"completed"`) || c.get("item") != 1 || fmt.Sprint(got) != "[14]" {
		t.Fatalf("item ran %d times, results %v; state %s", c.get("item"), got, st)
	}
	if n := s.createsOf(0); n != 2 {
		t.Fatalf("item 0's record written %d times, want 2 (a failure, then the record)", n)
	}
}

// pollTimer is an instance's timer: the lease renewal's (a third of the lease) never fires; any
// other (a unit waiting in its delivery for a limit's slot) fires at once, counted.
type pollTimer struct{ polls atomic.Int32 }

func (p *pollTimer) After(d time.Duration) <-chan time.Time {
	if d == jobs.DefaultLease/3 {
		return nil
	}
	p.polls.Add(1)
	ch := make(chan time.Time, 1)
	ch <- time.Time{}
	return ch
}

// TestItemsUnderALimitReleaseTheirSlot: an item under a limit of one running frees its slot when
// it ends: the next item of the delivery takes it without waiting.
func TestItemsUnderALimitReleaseTheirSlot(t *testing.T) {
	o, c := newOwner(), &counter{}
	lim := jobs.NewLimit("one-item", jobs.MaxRunning(1))
	w := jobs.Define(o, "fan", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Map(ctx, "fan", []int{1, 2, 3}, func(context.Context, int) (int, error) { c.inc("item"); return 0, nil },
			jobs.Concurrency(1), jobs.Under(lim))
		return err
	})
	q, clk, timer := &queue{}, newClock(), &pollTimer{}
	in := &instance{q: q, clock: clk, o: o}
	in.svc = jobs.NewService(jobs.Config{Store: memory.New(), Dispatcher: q, Now: clk.Now, After: timer.After, Logger: quiet,
		Works: func(string) (*jobs.Registry, time.Duration, bool) { return o.reg, 0, true }})
	t.Cleanup(in.svc.Close)
	job := start(t, in, w, struct{}{})
	if err := in.svc.Deliver(context.Background(), in.q.take()[0].M, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	if st := stateOf(t, in, job).Job.Status; st != contract.StateCompleted || c.get("item") != 3 || timer.polls.Load() != 0 {
		t.Fatalf("status %s, %d items ran, %d waits for a slot", st, c.get("item"), timer.polls.Load())
	}
}

// TestItemRetryShown: an item that failed shows the job waiting for its retry, naming the
// fan-out and when.
func TestItemRetryShown(t *testing.T) {
	o := newOwner()
	w := jobs.Define(o, "fan", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Map(ctx, "fan", []int{1}, func(context.Context, int) (int, error) { return 0, errBoom })
		return err
	}, jobs.Backoff(time.Minute), jobs.MaxAttempts(3))
	in := newInstance(t, memory.New(), o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	if err := in.svc.Deliver(context.Background(), in.q.take()[0].M, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	until := in.clock.Now().Add(time.Minute).Format(time.RFC3339Nano)
	if got := mustJSON(t, stateOf(t, in, job)); !strings.Contains(got, `"waiting":{"reason":"retry","step_id":"`+job+`-fan","until":"`+until+`"}`) {
		t.Fatalf("state %s", got)
	}
}

// TestItemFailsAfterTheDeliveryFailed: an item that fails for good after another branch's step
// failed the job leaves that failure as it is: the first cause is the job's.
func TestItemFailsAfterTheDeliveryFailed(t *testing.T) {
	started, stepFailed := make(chan struct{}), make(chan struct{})
	state := runOnce(t, 1, func(ctx context.Context, _ struct{}) error {
		return jobs.Parallel(ctx, func(ctx context.Context) error {
			_, err := jobs.Map(ctx, "check", []int{1}, func(context.Context, int) (int, error) {
				close(started)
				if err := signalled(stepFailed); err != nil {
					return 0, err
				}
				return 0, jobs.Permanent(errors.New("the lead is malformed"))
			})
			return err
		}, func(ctx context.Context) error {
			defer close(stepFailed)
			if err := signalled(started); err != nil {
				return err
			}
			_, err := jobs.Step(ctx, "send", func(context.Context) (int, error) { return 0, jobs.Permanent(errors.New("the mailbox is gone")) })
			return err
		})
	})
	wantFailed(t, state, `step \"send\" failed: the mailbox is gone`)
}

// TestItemSpansEnd: each item's span ends when the item does, with its outcome: a span never
// ended is never exported.
func TestItemSpansEnd(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	o := newOwner()
	w := jobs.Define(o, "fan", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Map(ctx, "fan", []int{0, 1}, func(_ context.Context, n int) (int, error) {
			if n == 1 {
				return 0, jobs.Permanent(errBoom)
			}
			return n, nil
		}, jobs.Concurrency(1))
		return err
	})
	q, clk := &queue{}, newClock()
	in := &instance{q: q, clock: clk, after: newManualAfter(), o: o}
	in.svc = jobs.NewService(jobs.Config{Store: memory.New(), Dispatcher: q, Now: clk.Now, After: in.after.After, Logger: quiet,
		Works:     func(string) (*jobs.Registry, time.Duration, bool) { return o.reg, 0, true },
		Telemetry: telemetry.Providers{Tracers: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))}})
	t.Cleanup(in.svc.Close)
	start(t, in, w, struct{}{})
	in.deliverAll(t, 1, nil)
	if got := stepOutcomes(spans, "step fan/"); fmt.Sprint(got) != "[step fan/0 completed step fan/1 failed]" {
		t.Fatalf("ended item spans %v", got)
	}
}

// TestItemAfterTheLeaseLapsed: a delivery paused in an item past its lease, while another
// instance took the task over, records nothing for it: the item's record is the taker's result.
func TestItemAfterTheLeaseLapsed(t *testing.T) {
	o := newOwner()
	var runs atomic.Int32
	enteredA, releaseA := make(chan struct{}), make(chan struct{})
	enteredB, releaseB := make(chan struct{}), make(chan struct{})
	outs := make(chan []int, 2) // what Map gave each delivery that got past it
	w := jobs.Define(o, "taken-fan", func(ctx context.Context, in []string) error {
		out, err := jobs.Map(ctx, "fan", in, func(context.Context, string) (int, error) {
			n := int(runs.Add(1))
			if n == 1 { // A's run: held until B runs the item too
				close(enteredA)
				<-releaseA
			} else { // B's run: held until A has ended
				close(enteredB)
				<-releaseB
			}
			return n, nil
		})
		if err != nil {
			return err
		}
		outs <- out
		return nil
	})
	s, clk := &itemFaults{Store: memory.New()}, newClock()
	a := newInstance(t, s, o, clk, &queue{})
	b := newInstance(t, s, o, clk, &queue{})
	job := start(t, a, w, []string{"x"})
	m, doneA := deliverInBackground(t, a)
	if err := signalled(enteredA); err != nil {
		t.Fatalf("A's run of the item: %v", err)
	}
	clk.Add(jobs.DefaultLease + jobs.SkewMargin + time.Second) // A stays paused past its lease
	doneB := make(chan error, 1)
	go func() { doneB <- b.svc.Deliver(context.Background(), m, jobs.Delivery{}) }()
	if err := signalled(enteredB); err != nil {
		t.Fatalf("B's run of the item: %v", err)
	}
	close(releaseA) // A's item returns: A finds its lease taken and writes nothing
	if err := <-doneA; err != nil {
		t.Fatal(err)
	}
	if n := s.createsOf(0); n != 0 {
		t.Fatalf("A, past its lease, wrote the item's record (%d writes)", n)
	}
	close(releaseB)
	if err := <-doneB; err != nil {
		t.Fatal(err)
	}
	if st := stateOf(t, b, job).Job.Status; st != contract.StateCompleted || len(outs) != 1 {
		t.Fatalf("status %s, %d deliveries got past Map; want completed and 1 (B)", st, len(outs))
	}
	if got := fmt.Sprint(<-outs); got != "[2]" {
		t.Fatalf("B's Map gave %s, want [2]: its own result, A recorded none", got)
	}
}

// TestMapNamedAsAnOpenStep: a Map that takes the name of a step still open (a Step failed, to be
// retried; an Await answered since the last delivery) should fail the job, naming the clash, as
// Step and Sleep do (TestSleepNamedAsAnOpenStep), and not run the fan-out over the open step
// (losing the Await's answer).
func TestMapNamedAsAnOpenStep(t *testing.T) {
	items := []int{1}
	fanOut := func(ctx context.Context, runs *atomic.Int32) error {
		_, err := jobs.Map(ctx, "fetch", items, func(context.Context, int) (int, error) { runs.Add(1); return 0, nil })
		return err
	}
	failedStep := func(t *testing.T) {
		var deliveries, runs atomic.Int32
		state := runOnce(t, 3, func(ctx context.Context, _ struct{}) error {
			if deliveries.Add(1) == 1 {
				_, err := jobs.Step(ctx, "fetch", func(context.Context) (int, error) { return 0, errors.New("try again") })
				return err
			}
			return fanOut(ctx, &runs)
		})
		wantFailed(t, state, `\"fetch\" is not a fan-out: step names are unique within a work`)
		if runs.Load() != 0 {
			t.Fatalf("the item ran %d times", runs.Load())
		}
	}
	t.Run("failed step", failedStep)
	answeredAwait := func(t *testing.T) {
		o := newOwner()
		var deliveries, runs atomic.Int32
		w := jobs.Define(o, "fan", func(ctx context.Context, _ struct{}) error {
			if deliveries.Add(1) == 1 {
				_, err := jobs.Await[review](ctx, "fetch", contract.Awaiting{})
				return err
			}
			return fanOut(ctx, &runs)
		})
		in := newInstance(t, memory.New(), o, newClock(), &queue{})
		job := start(t, in, w, struct{}{})
		in.deliverAll(t, 1, nil)
		answer(t, in, job, "fetch")
		wantFailed(t, stateOf(t, in, job), `\"fetch\" is not a fan-out: step names are unique within a work`)
		if runs.Load() != 0 {
			t.Fatalf("the item ran %d times", runs.Load())
		}
	}
	t.Run("answered await", answeredAwait)
	// No items: the step's status alone tells an open Await from an open fan-out.
	items = nil
	t.Run("answered await, no items", answeredAwait)
	t.Run("failed step, no items", failedStep)
}

// TestItemPastTheLeaseWithTheStoreDown: an item that returns after the delivery's lease lapsed,
// nobody having taken the task, while the store refuses the lease's renewal, records nothing
// and ends the delivery: the fan-out never completes without that item's result, and the next
// delivery runs the item again. The store refuses one write, the renewal's.
func TestItemPastTheLeaseWithTheStoreDown(t *testing.T) {
	o := newOwner()
	var runs atomic.Int32
	entered, release := make(chan struct{}), make(chan struct{})
	outs := make(chan []int, 2) // what Map gave each delivery that got past it
	w := jobs.Define(o, "down-fan", func(ctx context.Context, in []string) error {
		out, err := jobs.Map(ctx, "fan", in, func(context.Context, string) (int, error) {
			n := int(runs.Add(1))
			if n == 1 { // the first delivery's run: held past the lease
				close(entered)
				<-release
			}
			return n, nil
		})
		if err != nil {
			return err
		}
		outs <- out
		return nil
	})
	s, clk := &taskWritesFail{Store: memory.New(), after: "\x00none", once: true}, newClock()
	in := newInstance(t, s, o, clk, &queue{})
	job := start(t, in, w, []string{"x"})
	m, done := deliverInBackground(t, in)
	if err := signalled(entered); err != nil {
		t.Fatalf("the item's first run: %v", err)
	}
	clk.Add(jobs.DefaultLease + time.Second)
	s.down.Store(true)
	close(release)
	if err := <-done; err != nil || len(outs) != 0 || s.down.Load() {
		t.Fatalf("the delivery past its lease: %v, %d got past Map (the outage still on: %v); want nil and none", err, len(outs), s.down.Load())
	}
	clk.Add(jobs.SkewMargin)
	if err := in.svc.Deliver(context.Background(), m, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	if st := stateOf(t, in, job).Job.Status; st != contract.StateCompleted || len(outs) != 1 {
		t.Fatalf("status %s, %d deliveries got past Map; want completed and 1", st, len(outs))
	}
	if got := fmt.Sprint(<-outs); got != "[2]" || runs.Load() != 2 {
		t.Fatalf("Map gave %s after %d runs; want [2] after 2", got, runs.Load())
	}
}
