package jobs

// Tests written for mutants of step.go that lived in scripts/mutants runs (docs/development.md)
// and need the package's inside (a lease taken by another process, the record a delivery writes
// while it runs): each fails on its mutant.

import (
	"context"
	"errors"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/core/telemetry"
)

// TestBackoff: a retry's delay doubles from the base with each try, up to MaxBackoff however
// many tries there were.
func TestBackoff(t *testing.T) {
	for _, c := range []struct {
		tries int
		want  time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {9, 256 * time.Second}, {10, MaxBackoff}, {200, MaxBackoff}} {
		if got := backoff(time.Second, c.tries); got != c.want {
			t.Errorf("backoff after %d tries: %v, want %v", c.tries, got, c.want)
		}
	}
}

// TestUnitAfterTheLeaseWasTaken: a Step reached once the lease lapsed and another process took
// the task (or the store cannot say it did not), or an Await whose write finds the task taken,
// ends the delivery as lost, writing nothing more: no step runs though the work ignores the
// error.
func TestUnitAfterTheLeaseWasTaken(t *testing.T) {
	for _, tc := range []struct {
		name        string
		lapse, down bool
		unit        func(ctx context.Context, ran *int) error
	}{
		{"step", true, false, func(ctx context.Context, ran *int) error {
			_, err := Step(ctx, "one", func(context.Context) (int, error) { *ran++; return 1, nil })
			return err
		}},
		{"step, the store down", true, true, func(ctx context.Context, ran *int) error {
			_, err := Step(ctx, "one", func(context.Context) (int, error) { *ran++; return 1, nil })
			return err
		}},
		{"await", false, false, func(ctx context.Context, _ *int) error {
			_, err := Await[struct{}](ctx, "review", contract.Awaiting{})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &downStore{Store: memory.New()}
			w := newLeaseWorldOn(t, st, nil)
			spans := tracetest.NewSpanRecorder()
			w.svc.tel = newJobsTelemetry(telemetry.Providers{Tracers: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))})
			var unitErr error
			ran := 0
			work := Define(regOwner{w.reg}, "x", func(ctx context.Context, _ struct{}) error {
				if tc.lapse {
					w.now = w.now.Add(time.Hour)
				}
				if tc.down {
					st.update.Store(true)
				} else {
					w.hold(t, "job", w.now.Add(time.Minute))
				}
				unitErr = tc.unit(ctx, &ran)
				st.update.Store(false)
				_, err := Step(ctx, "later", func(context.Context) (int, error) { ran++; return 2, nil })
				return err
			})
			w.start(t, work, "job")
			w.deliver(t, "job")
			if !errors.Is(unitErr, errHalted) || ran != 0 {
				t.Fatalf("the unit returned %v; steps ran %d times", unitErr, ran)
			}
			outcome := deliveryOutcome(spans)
			if r, _, err := w.svc.load(w.ctx, taskKey("a", "w", "job")); err != nil || outcome != "lost" || r.Status != taskPending {
				t.Fatalf("the delivery's outcome %q, the task %+v (%v): want lost, the task left pending", outcome, r, err)
			}
		})
	}
}

// TestFailedStepNotShownRunning: a renewal while the work goes on after a step failed does not
// show the step running: it waits for its retry.
func TestFailedStepNotShownRunning(t *testing.T) {
	tick := make(chan time.Time)
	w := newLeaseWorldOn(t, memory.New(), func(time.Duration) <-chan time.Time { return tick })
	var open []string
	work := Define(regOwner{w.reg}, "x", func(ctx context.Context, _ struct{}) error {
		_, err := Step(ctx, "call", func(context.Context) (int, error) { return 0, errors.New("boom") })
		tick <- w.now
		tick <- w.now // taken once the first renewal wrote the task
		r, _, lerr := w.svc.load(ctx, taskKey("a", "w", "job"))
		if lerr != nil {
			return lerr
		}
		for _, st := range r.Open {
			open = append(open, st.Name+"="+st.Status)
		}
		return err
	})
	w.start(t, work, "job")
	w.deliver(t, "job")
	if len(open) != 0 {
		t.Fatalf("open steps after the renewal %v, want none", open)
	}
}

// TestAwaitWritesTheProgress: the write that makes an Await wait carries what the delivery
// knows: the progress reported before it shows at once.
func TestAwaitWritesTheProgress(t *testing.T) {
	w := newLeaseWorld(t)
	var cases []caseRecord
	work := Define(regOwner{w.reg}, "x", func(ctx context.Context, _ struct{}) error {
		if err := Progress(ctx, "", 1, 2); err != nil {
			return err
		}
		_, err := Await[struct{}](ctx, "review", contract.Awaiting{})
		r, _, lerr := w.svc.load(ctx, taskKey("a", "w", "job"))
		if lerr != nil {
			return lerr
		}
		cases = r.Cases
		return err
	})
	w.start(t, work, "job")
	w.deliver(t, "job")
	if want := []caseRecord{{ID: defaultCase, Done: 1, Total: 2, Progress: true, Ver: 1}}; len(cases) != 1 || cases[0] != want[0] {
		t.Fatalf("cases written with the wait %+v, want %+v", cases, want)
	}
}

// TestHandlerAfterTheLeaseWasTaken: a failure handler's delivery whose lease lapsed, and was
// taken by another process, before the handler started does not run it.
func TestHandlerAfterTheLeaseWasTaken(t *testing.T) {
	w := newLeaseWorld(t)
	ran := 0
	work := Define(regOwner{w.reg}, "x", func(context.Context, struct{}) error { return Permanent(errors.New("no")) },
		OnFailure(func(context.Context, struct{}, Failure) error { ran++; return nil }))
	w.start(t, work, "job")
	w.deliver(t, "job") // the work fails
	w.svc.cfg.Bind = func(ctx context.Context, _ string, _ *contract.VerifiedWorkspaceContext) context.Context {
		w.now = w.now.Add(time.Hour) // a pause past the lease, meanwhile taken
		w.hold(t, "job", w.now.Add(time.Minute))
		return ctx
	}
	w.deliver(t, "job") // the handler's
	if r, _, err := w.svc.load(w.ctx, taskKey("a", "w", "job")); err != nil || ran != 0 || r.Status != taskFailing {
		t.Fatalf("the handler ran %d times; the task %+v (%v): want it left failing", ran, r, err)
	}
}
