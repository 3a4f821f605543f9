package jobs

// Tests written for mutants that scripts/mutants found living in task.go (docs/development.md):
// each fails on its mutant.

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/core/telemetry"
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
			w := newLeaseWorldOn(t, st, nil)
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

// renewWorld is a lease world whose renewal timer ticks when the test says, and a work "x" whose
// step "wait" runs until released (or its context ends), telling when it started.
type renewWorld struct {
	*leaseWorld
	tick             chan time.Time
	started, release chan struct{}
	stepErr, cause   error // what the step returned to the work; why its context ended
}

func newRenewWorld(t *testing.T, opts ...Option) *renewWorld {
	r := &renewWorld{tick: make(chan time.Time), started: make(chan struct{}), release: make(chan struct{})}
	r.leaseWorld = newLeaseWorldOn(t, memory.New(), func(time.Duration) <-chan time.Time { return r.tick })
	work := Define(regOwner{r.reg}, "x", func(ctx context.Context, _ struct{}) error {
		_, err := Step(ctx, "wait", func(ctx context.Context) (int, error) {
			close(r.started)
			select {
			case <-r.release:
				return 1, nil
			case <-ctx.Done():
				r.cause = context.Cause(ctx)
				return 0, r.cause
			}
		})
		r.stepErr = err
		return err
	}, opts...)
	r.start(t, work, "job")
	return r
}

// deliverAsync runs the delivery on a goroutine, once the step started returning a channel
// that gives its end.
func (r *renewWorld) deliverAsync(t *testing.T) <-chan error {
	done := make(chan error, 1)
	go func() {
		done <- r.svc.Deliver(context.Background(), Message{Agent: "a", Workspace: "w", Job: "job", Work: "x"}, Delivery{})
	}()
	<-r.started
	return done
}

func (r *renewWorld) record(t *testing.T) *record {
	t.Helper()
	rec, _, err := r.svc.load(r.ctx, taskKey("a", "w", "job"))
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// askStop writes a stop into the job's record, as job.stop on another instance does.
func (r *renewWorld) askStop(t *testing.T) {
	t.Helper()
	if _, err := r.svc.update(r.ctx, taskKey("a", "w", "job"), func(rec *record) (bool, error) {
		rec.Stop = true
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestRenewalExtendsTheLease: a renewal while the step runs extends the lease from now and
// leaves the job running: it completes when the step does.
func TestRenewalExtendsTheLease(t *testing.T) {
	r := newRenewWorld(t)
	done := r.deliverAsync(t)
	r.now = r.now.Add(DefaultLease / 3)
	r.tick <- r.now
	r.tick <- r.now // the second tick is taken once the first renewal ended
	if got := r.record(t).LeaseUntil; !got.Equal(r.now.Add(DefaultLease)) {
		t.Fatalf("lease until %v after a renewal, want %v", got, r.now.Add(DefaultLease))
	}
	close(r.release)
	if err := <-done; err != nil || r.stepErr != nil || r.record(t).Status != taskCompleted {
		t.Fatalf("delivery %v, step %v, task %+v: want it completed", err, r.stepErr, r.record(t))
	}
}

// TestRenewalSeesTheStop: a stop written by another instance while the step runs reaches the
// delivery at its next renewal: the step's context is cancelled and the job stops.
func TestRenewalSeesTheStop(t *testing.T) {
	r := newRenewWorld(t)
	done := r.deliverAsync(t)
	r.askStop(t)
	r.tick <- r.now
	if err := <-done; err != nil || !errors.Is(r.cause, errStopped) || r.record(t).Status != taskStopped {
		t.Fatalf("delivery %v, step cancelled by %v, task %+v: want it stopped", err, r.cause, r.record(t))
	}
}

// TestRenewalFindsTheLeaseLapsed: a renewal tick that finds this delivery's lease already past
// (a pause) cancels the step and ends the delivery without writing: another instance may hold
// the task by now.
func TestRenewalFindsTheLeaseLapsed(t *testing.T) {
	r := newRenewWorld(t)
	done := r.deliverAsync(t)
	before := r.record(t)
	r.now = r.now.Add(time.Hour)
	r.tick <- r.now
	if err := <-done; err != nil || !errors.Is(r.cause, ErrLeaseLost) {
		t.Fatalf("delivery %v, step cancelled by %v: want a lost lease", err, r.cause)
	}
	if after := r.record(t); after.Status != before.Status || !after.LeaseUntil.Equal(before.LeaseUntil) || after.Holder != before.Holder {
		t.Fatalf("the task was written: %+v, was %+v", after, before)
	}
}

// TestRenewalEndsAWorkOutsideAStep: the same as the two tests above for a work that waits on its
// context outside any step and then returns nil: a stop stops the job; a lapsed lease, or one
// another process took before the renewal's write, ends the delivery as lost, unwritten, whatever
// the work returns.
func TestRenewalEndsAWorkOutsideAStep(t *testing.T) {
	for _, c := range []struct {
		name    string
		before  func(r *renewWorld)
		want    func(t *testing.T, r *renewWorld, before *record)
		outcome string // the delivery's span
	}{
		{"stop", func(r *renewWorld) {
			r.askStop(t)
		}, func(t *testing.T, r *renewWorld, _ *record) {
			if st := r.record(t).Status; st != taskStopped {
				t.Fatalf("task %s, want stopped", st)
			}
		}, "stopped"},
		{"lapsed", func(r *renewWorld) { r.now = r.now.Add(time.Hour) }, func(t *testing.T, r *renewWorld, before *record) {
			if after := r.record(t); after.Status != before.Status || after.Error != "" || !after.LeaseUntil.Equal(before.LeaseUntil) {
				t.Fatalf("the task was written: %+v, was %+v", after, before)
			}
		}, "lost"},
		{"taken", func(r *renewWorld) { r.hold(t, "job", r.now.Add(time.Hour)) }, func(t *testing.T, r *renewWorld, before *record) {
			if after := r.record(t); after.Status != before.Status || after.Holder != "another-process" || !after.LeaseUntil.Equal(r.now.Add(time.Hour)) {
				t.Fatalf("the task was written over the new holder's: %+v", after)
			}
		}, "lost"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &renewWorld{tick: make(chan time.Time), started: make(chan struct{})}
			r.leaseWorld = newLeaseWorldOn(t, memory.New(), func(time.Duration) <-chan time.Time { return r.tick })
			spans := tracetest.NewSpanRecorder()
			r.svc.tel = newJobsTelemetry(telemetry.Providers{Tracers: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))})
			work := Define(regOwner{r.reg}, "x", func(ctx context.Context, _ struct{}) error {
				close(r.started)
				<-ctx.Done()
				return nil
			})
			r.start(t, work, "job")
			done := r.deliverAsync(t)
			before := r.record(t)
			c.before(r)
			r.tick <- r.now
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			c.want(t, r, before)
			if got := deliveryOutcome(spans); got != c.outcome {
				t.Fatalf("the delivery's outcome %q, want %q", got, c.outcome)
			}
		})
	}
}

// deliveryOutcome is the outcome the last ended span of a delivery of work "x" carries.
func deliveryOutcome(spans *tracetest.SpanRecorder) string {
	var outcome string
	for _, sp := range spans.Ended() {
		for _, a := range sp.Attributes() {
			if sp.Name() == "deliver x" && string(a.Key) == telemetry.JobOutcome {
				outcome = a.Value.AsString()
			}
		}
	}
	return outcome
}

// TestStepKey: the key of a step is "<job>/<step>"; outside a step, or outside any work, there is
// none.
func TestStepKey(t *testing.T) {
	w := newLeaseWorld(t)
	var inStep, outside string
	work := Define(regOwner{w.reg}, "x", func(ctx context.Context, _ struct{}) error {
		outside = StepKey(ctx)
		_, err := Step(ctx, "one", func(ctx context.Context) (int, error) { inStep = StepKey(ctx); return 1, nil })
		return err
	})
	w.start(t, work, "job")
	w.deliver(t, "job")
	if none := StepKey(context.Background()); inStep != "job/one" || outside != "" || none != "" {
		t.Fatalf("StepKey in a step %q, outside it %q, outside a work %q; want \"job/one\", \"\", \"\"", inStep, outside, none)
	}
}

// TestDeliveryEndsOnceTaken: a delivery whose end finds another process holding the task tries
// its write once (a lost lease is not a failing store to retry): one refused update, the new
// holder's record left as it is.
func TestDeliveryEndsOnceTaken(t *testing.T) {
	st := &scriptedUpdates{Store: memory.New(), key: taskKey("a", "w", "job")}
	w := newLeaseWorldOn(t, st, nil)
	var updates atomic.Int32
	work := Define(regOwner{w.reg}, "x", func(ctx context.Context, _ struct{}) error {
		w.hold(t, "job", w.now.Add(time.Hour))
		st.mu.Lock()
		for range 8 {
			st.script = append(st.script, func() error { updates.Add(1); return nil })
		}
		st.mu.Unlock()
		return nil
	})
	w.start(t, work, "job")
	w.deliver(t, "job")
	r, _, err := w.svc.load(w.ctx, taskKey("a", "w", "job"))
	if err != nil || updates.Load() != 1 || r.Holder != "another-process" || r.Status != taskPending {
		t.Fatalf("%d updates of the task as the delivery ended; the task %+v (%v): want 1, left to its new holder", updates.Load(), r, err)
	}
}

// TestWorkErrorWinsOverUnreachedSteps: a work that fails before reaching the steps an earlier
// delivery recorded fails with its own error, not as having changed its steps.
func TestWorkErrorWinsOverUnreachedSteps(t *testing.T) {
	w := newLeaseWorld(t)
	var deliveries atomic.Int32
	work := Define(regOwner{w.reg}, "x", func(ctx context.Context, _ struct{}) error {
		if deliveries.Add(1) > 1 {
			return Permanent(errors.New("given up"))
		}
		if _, err := Step(ctx, "one", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return err
		}
		_, err := Step(ctx, "two", func(context.Context) (int, error) { return 0, errors.New("not yet") })
		return err
	})
	w.start(t, work, "job")
	w.deliver(t, "job")
	w.now = w.now.Add(time.Hour) // past the retry's backoff
	w.deliver(t, "job")
	r, _, err := w.svc.load(w.ctx, taskKey("a", "w", "job"))
	if err != nil || deliveries.Load() != 2 || r.Status != taskFailed || r.Error != "given up" {
		t.Fatalf("after %d deliveries: %v %s %q, want failed with the work's error", deliveries.Load(), err, r.Status, r.Error)
	}
}

// onFailureNop is a failure handler that does nothing.
func onFailureNop(context.Context, struct{}, Failure) error { return nil }

// TestDeliveryEndsStoppedWithItsHandler: a job stopped while it runs ends failing, its handler
// to run, when the handler also runs for stopped jobs; a job that cancels itself (jobs.Cancel)
// ends stopped with its label, its handler left out.
func TestDeliveryEndsStoppedWithItsHandler(t *testing.T) {
	t.Run("stopped", func(t *testing.T) {
		r := newRenewWorld(t, OnFailure(onFailureNop, AlsoWhenStopped()))
		done := r.deliverAsync(t)
		r.askStop(t)
		r.tick <- r.now
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if rec := r.record(t); rec.Status != taskFailing || rec.Failure == nil || rec.Failure.Cause != CauseStopped || rec.Failure.Status != taskStopped {
			t.Fatalf("task %s, failure %+v: want failing, its handler to run for a stop", rec.Status, rec.Failure)
		}
	})
	t.Run("stopped, its handler for failures only", func(t *testing.T) {
		r := newRenewWorld(t, OnFailure(onFailureNop))
		done := r.deliverAsync(t)
		r.askStop(t)
		r.tick <- r.now
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if rec := r.record(t); rec.Status != taskStopped || rec.Failure != nil {
			t.Fatalf("task %s, failure %+v: want stopped, no handler", rec.Status, rec.Failure)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		w := newLeaseWorld(t)
		work := Define(regOwner{w.reg}, "x", func(ctx context.Context, _ struct{}) error {
			if _, err := w.svc.update(ctx, taskKey("a", "w", "job"), func(rec *record) (bool, error) {
				rec.Stop = true // a stop asked meanwhile changes nothing
				return true, nil
			}); err != nil {
				return err
			}
			return Cancel("not needed")
		}, OnFailure(onFailureNop, AlsoWhenStopped()))
		w.start(t, work, "job")
		w.deliver(t, "job")
		r, _, err := w.svc.load(w.ctx, taskKey("a", "w", "job"))
		if err != nil || r.Status != taskStopped || r.Failure != nil || r.Cancel != "not needed" {
			t.Fatalf("task %v %s, failure %+v, cancel %q: want stopped with its label, no handler", err, r.Status, r.Failure, r.Cancel)
		}
	})
}

// TestStopSeenAtTheDeliverysEnd: a stop written while the step ran, seen by no renewal, stops the
// job when the delivery ends handing on (here for a retry); its message is cleared.
func TestStopSeenAtTheDeliverysEnd(t *testing.T) {
	w := newLeaseWorld(t)
	work := Define(regOwner{w.reg}, "x", func(ctx context.Context, _ struct{}) error {
		_, err := Step(ctx, "one", func(context.Context) (int, error) {
			if _, err := w.svc.update(w.ctx, taskKey("a", "w", "job"), func(rec *record) (bool, error) {
				rec.Stop = true
				return true, nil
			}); err != nil {
				return 0, Permanent(err)
			}
			return 0, errors.New("not yet")
		})
		return err
	})
	w.start(t, work, "job")
	w.deliver(t, "job")
	r, _, err := w.svc.load(w.ctx, taskKey("a", "w", "job"))
	if err != nil || r.Status != taskStopped || r.Error != "" || !r.NotBefore.IsZero() || r.Wait != nil {
		t.Fatalf("task %v %s %q, not before %v, wait %+v: want stopped, due for no retry", err, r.Status, r.Error, r.NotBefore, r.Wait)
	}
}

// TestFailingJobsStepsEnd: the job's end as its failure handler is due settles its steps: the
// step that failed for good is shown failed, not running; a handler that fails, to be retried,
// is counted in the failure, never shown as a step of the work.
func TestFailingJobsStepsEnd(t *testing.T) {
	w := newLeaseWorld(t)
	w.now = time.Now().UTC() // the handler's deadline runs on the real clock
	work := Define(regOwner{w.reg}, "x", func(ctx context.Context, _ struct{}) error {
		_, err := Step(ctx, "one", func(context.Context) (int, error) { return 0, Permanent(errors.New("no")) })
		return err
	}, OnFailure(func(context.Context, struct{}, Failure) error { return errors.New("not yet") }))
	w.start(t, work, "job")
	w.deliver(t, "job") // the work fails; the handler is due
	r, _, err := w.svc.load(w.ctx, taskKey("a", "w", "job"))
	if err != nil || r.Status != taskFailing || len(r.Open) != 1 || r.Open[0].Name != "one" || r.Open[0].Status != stepFailed {
		t.Fatalf("task %v %s, open steps %+v: want failing, step one failed", err, r.Status, r.Open)
	}
	w.deliver(t, "job") // the handler fails, to be retried
	r, _, err = w.svc.load(w.ctx, taskKey("a", "w", "job"))
	if err != nil || r.Status != taskFailing || r.Failure == nil || r.Failure.Tries != 1 || r.open(onFailureStep) != nil {
		t.Fatalf("task %v %s, failure %+v, open steps %+v: want failing, the handler tried once, not a step", err, r.Status, r.Failure, r.Open)
	}
}

// TestTimeoutReachesTheHandler: a job past its timeout gives its handler the timeout as cause.
func TestTimeoutReachesTheHandler(t *testing.T) {
	w := newLeaseWorld(t)
	w.now = time.Now().UTC() // the handler's deadline runs on the real clock
	var got Failure
	work := Define(regOwner{w.reg}, "x", func(ctx context.Context, _ struct{}) error {
		w.now = w.now.Add(2 * time.Hour) // past the job's timeout
		return nil
	}, Timeout(time.Hour), OnFailure(func(_ context.Context, _ struct{}, f Failure) error {
		got = f
		return nil
	}))
	w.start(t, work, "job")
	w.deliver(t, "job")
	w.deliver(t, "job") // the handler
	if got.Cause != CauseTimeout || got.Reason != "the job did not finish within 1h0m0s (its timeout)" {
		t.Fatalf("the handler's failure: %+v, want the timeout", got)
	}
}

// TestStoppedJobsHandlerOutlastsARenewal: the failure handler of a stopped job (AlsoWhenStopped)
// runs through its delivery's lease renewals: a renewal that finds the job stopped cancels the
// work, never that handler.
func TestStoppedJobsHandlerOutlastsARenewal(t *testing.T) {
	r := &renewWorld{tick: make(chan time.Time), started: make(chan struct{})}
	r.leaseWorld = newLeaseWorldOn(t, memory.New(), func(time.Duration) <-chan time.Time { return r.tick })
	r.now = time.Now().UTC() // the handler's deadline runs on the real clock
	handling, proceed, cancelled := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	work := Define(regOwner{r.reg}, "x", func(ctx context.Context, _ struct{}) error {
		close(r.started)
		<-ctx.Done()
		return nil
	}, OnFailure(func(ctx context.Context, _ struct{}, f Failure) error {
		close(handling)
		select {
		case <-proceed:
			return nil
		case <-ctx.Done():
			cancelled <- context.Cause(ctx)
			return context.Cause(ctx)
		}
	}, AlsoWhenStopped()))
	r.start(t, work, "job")
	done := r.deliverAsync(t)
	r.askStop(t)
	r.tick <- r.now // the renewal finds the stop: the work is cancelled, the handler is due
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	handled := make(chan error, 1)
	go func() {
		handled <- r.svc.Deliver(context.Background(), Message{Agent: "a", Workspace: "w", Job: "job", Work: "x"}, Delivery{})
	}()
	<-handling
	for range 2 { // the second tick is taken once the first renewal is over
		select {
		case r.tick <- r.now:
		case cause := <-cancelled:
			t.Fatalf("the handler was cancelled by a renewal: %v", cause)
		}
	}
	close(proceed)
	if err := <-handled; err != nil {
		t.Fatal(err)
	}
	if rec := r.record(t); rec.Status != taskStopped || len(cancelled) != 0 {
		t.Fatalf("task %s (handler cancelled: %d): want stopped once its handler ran", rec.Status, len(cancelled))
	}
}

// scriptedUpdates runs the next of its steps at each update of the record under key, before it:
// a step that returns an error refuses the update with it. Updates past the script land.
type scriptedUpdates struct {
	store.Store
	key    string
	mu     sync.Mutex
	script []func() error
}

func (s *scriptedUpdates) Update(ctx context.Context, key string, version uint64, v []byte, exp time.Time) (store.Record, error) {
	var step func() error
	if key == s.key {
		s.mu.Lock()
		if len(s.script) > 0 {
			step, s.script = s.script[0], s.script[1:]
		}
		s.mu.Unlock()
	}
	if step != nil {
		if err := step(); err != nil {
			return store.Record{}, err
		}
	}
	return s.Store.Update(ctx, key, version, v, exp)
}

// TestRenewalTicks: a renewal extends the lease and the job's limit slot from now; one whose
// write fails is logged and tried again at the next tick; one that fails as the delivery ends
// (its context cancelled meanwhile) is not logged.
func TestRenewalTicks(t *testing.T) {
	const failed = "lease renewal failed: retrying at the next tick"
	st := &scriptedUpdates{Store: memory.New(), key: taskKey("a", "w", "job")}
	r := &renewWorld{tick: make(chan time.Time), started: make(chan struct{})}
	r.leaseWorld = newLeaseWorldOn(t, st, func(time.Duration) <-chan time.Time { return r.tick })
	logs := make(chan slog.Record, 8)
	r.svc.log = slog.New(recordsOf{failed, logs})
	lim := NewLimit("p", MaxRunning(1))
	var tk *task
	work := Define(regOwner{r.reg}, "x", func(ctx context.Context, _ struct{}) error {
		_, err := Step(ctx, "wait", func(ctx context.Context) (int, error) {
			tk = taskOf(ctx)
			close(r.started)
			<-ctx.Done()
			return 0, context.Cause(ctx)
		})
		return err
	}, Limited(lim))
	r.start(t, work, "job")
	done := r.deliverAsync(t)
	renewed := r.now.Add(10 * time.Second)
	goC := make(chan struct{}) // C's write waits for it: the test reads what B wrote meanwhile
	st.mu.Lock()
	st.script = []func() error{
		func() error { r.now = renewed; return errStoreDown },              // A: refused
		func() error { return nil },                                        // B: renewed
		func() error { <-goC; tk.cancel(errStopped); return errStoreDown }, // C: refused as the delivery ends
	}
	st.mu.Unlock()
	for range 3 { // A; B, taken once A was handled; C, once B was
		r.tick <- time.Time{}
	}
	if len(logs) != 1 {
		t.Fatalf("%d logs %q after a failed renewal, want 1", len(logs), failed)
	}
	want := renewed.Add(DefaultLease)
	got, err := st.Store.Get(context.Background(), lim.key("a", "w"))
	var slots limitRecord
	if err == nil {
		err = decodeJSON(got.Value, &slots)
	}
	if lease := r.record(t).LeaseUntil; err != nil || len(slots.Slots) != 1 || !slots.Slots[0].Until.Equal(want) || !lease.Equal(want) {
		t.Fatalf("after a renewal: slots %+v (%v), the task's lease until %s; want both until %s", slots.Slots, err, lease, want)
	}
	close(goC)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(logs) != 1 {
		t.Fatalf("%d logs %q, want only the first failure's", len(logs), failed)
	}
}

// TestWriteOfARecordJSONCannotHold: a task write whose record cannot be encoded (a lease past
// year 9999) is an error, the stored record left as it was.
func TestWriteOfARecordJSONCannotHold(t *testing.T) {
	st := memory.New()
	w := newLeaseWorldOn(t, st, nil)
	key := taskKey("a", "w", "job")
	rec := &record{Agent: "a", Workspace: "w", Holder: "d", LeaseUntil: w.now.Add(time.Minute)}
	b, err := w.svc.encode(rec)
	if err != nil {
		t.Fatal(err)
	}
	before, err := st.Create(context.Background(), key, b, store.Never)
	if err != nil {
		t.Fatal(err)
	}
	tk := &task{svc: w.svc, key: key, rec: rec, version: before.Version, holder: "d"}
	err = tk.write(context.Background(), func(r *record) bool {
		r.LeaseUntil = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
		return true
	})
	after, gerr := st.Get(context.Background(), key)
	if err == nil || !strings.HasPrefix(err.Error(), "jobs: encode the task record: ") || gerr != nil ||
		after.Version != before.Version || string(after.Value) != string(before.Value) {
		t.Fatalf("write of a lease in year 10000: %v; stored version %d (was %d), %v", err, after.Version, before.Version, gerr)
	}
}

// TestRetryAtOnceWaitsForNothing: a step retried with no backoff (Backoff(0)) hands the job on
// due at once: the record shows no wait and no time it is due.
func TestRetryAtOnceWaitsForNothing(t *testing.T) {
	w := newLeaseWorld(t)
	work := Define(regOwner{w.reg}, "x", func(ctx context.Context, _ struct{}) error {
		_, err := Step(ctx, "one", func(context.Context) (int, error) { return 0, errors.New("not yet") })
		return err
	}, Backoff(0))
	w.start(t, work, "job")
	w.deliver(t, "job")
	r, _, err := w.svc.load(w.ctx, taskKey("a", "w", "job"))
	if err != nil || r.Status != taskPending || r.Wait != nil || !r.NotBefore.IsZero() {
		t.Fatalf("task %v %s, wait %+v, not before %v: want pending, due at once", err, r.Status, r.Wait, r.NotBefore)
	}
}

// TestCheckLeaseRenewalConflictsThroughout: a lapsed lease whose renewal meets a conflict at each
// of its rounds, the record still this delivery's, is neither renewed nor lost: CheckLease says
// the record keeps changing.
func TestCheckLeaseRenewalConflictsThroughout(t *testing.T) {
	st := &scriptedUpdates{Store: memory.New(), key: taskKey("a", "w", "job")}
	w := newLeaseWorldOn(t, st, nil)
	var checked error
	work := Define(regOwner{w.reg}, "x", func(ctx context.Context, _ struct{}) error {
		w.now = w.now.Add(time.Hour)
		st.mu.Lock()
		for range maxWriteRounds {
			st.script = append(st.script, func() error { return store.ErrConflict })
		}
		st.mu.Unlock()
		checked = CheckLease(ctx)
		return nil
	})
	w.start(t, work, "job")
	w.deliver(t, "job")
	if want := "jobs: renew a lapsed lease: jobs: the task record keeps changing under concurrent writes"; checked == nil || checked.Error() != want {
		t.Fatalf("CheckLease: %v, want %q", checked, want)
	}
}

// queueDown is a queue that refuses every message.
type queueDown struct{}

func (queueDown) Dispatch(context.Context, Message, time.Duration) error { return errStoreDown }

// TestHandOnUndispatched: a delivery that hands its job on (a retry) to a queue that refuses the
// message fails with the queue's error, the record left pending for this message's redelivery.
func TestHandOnUndispatched(t *testing.T) {
	w := newLeaseWorld(t)
	work := Define(regOwner{w.reg}, "x", func(ctx context.Context, _ struct{}) error {
		_, err := Step(ctx, "one", func(context.Context) (int, error) { return 0, errors.New("not yet") })
		return err
	})
	w.start(t, work, "job")
	w.svc.cfg.Dispatcher = queueDown{}
	err := w.svc.Deliver(context.Background(), Message{Agent: "a", Workspace: "w", Job: "job", Work: "x"}, Delivery{})
	r, _, lerr := w.svc.load(w.ctx, taskKey("a", "w", "job"))
	if !errors.Is(err, errStoreDown) || !strings.Contains(err.Error(), `jobs: hand job "job" on to a new delivery: `) || lerr != nil || r.Status != taskPending || r.Holder != "" {
		t.Fatalf("delivery: %v; task %v %s held by %q: want the queue's error, the task pending, unheld", err, lerr, r.Status, r.Holder)
	}
}
