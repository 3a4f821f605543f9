// Tests written for mutants of step.go (Step, Await, the boundary before a step, a step's
// failure) and timer.go (Sleep) that lived in scripts/mutants runs (docs/development.md): each
// fails on its mutant.
package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/core/telemetry"
)

// TestStepKindsOutsideWork: Step, Await and Progress outside a work's function are refused, the
// step's function not run.
func TestStepKindsOutsideWork(t *testing.T) {
	ctx := context.Background()
	ran := false
	_, stepErr := jobs.Step(ctx, "x", func(context.Context) (int, error) { ran = true; return 1, nil })
	_, awaitErr := jobs.Await[review](ctx, "x", contract.Awaiting{})
	_, answerErr := jobs.AwaitAnswer[review](ctx, "x", contract.Awaiting{})
	for name, err := range map[string]error{"Step": stepErr, "Await": awaitErr, "AwaitAnswer": answerErr, "Progress": jobs.Progress(ctx, "", 1, 2)} {
		if !errors.Is(err, jobs.ErrNotInWork) {
			t.Errorf("%s outside a work: %v", name, err)
		}
	}
	if ran {
		t.Fatal("the step ran outside a work")
	}
}

// oneWay encodes as a JSON string that does not decode back into it.
type oneWay struct{}

func (oneWay) MarshalJSON() ([]byte, error) { return []byte(`"text"`), nil }

// TestStepResultsJSONCannotHold: a step result JSON cannot encode, or whose encoding does not
// decode back into its type, fails the job for good with an error saying which (the build that
// recorded it is this one: no build is named).
func TestStepResultsJSONCannotHold(t *testing.T) {
	for _, tc := range []struct {
		name string
		work func(ctx context.Context, _ struct{}) error
		want string
	}{
		{"not encoded", func(ctx context.Context, _ struct{}) error {
			_, err := jobs.Step(ctx, "x", func(context.Context) (float64, error) { return math.NaN(), nil })
			return err
		}, `"error":{"message":"step \"x\" failed: encode the result of step \"x\": json: unsupported value: NaN"}`},
		{"not decoded", func(ctx context.Context, _ struct{}) error {
			_, err := jobs.Step(ctx, "x", func(context.Context) (oneWay, error) { return oneWay{}, nil })
			return err
		}, `"error":{"message":"jobs: the recorded result of step \"x\" does not decode into the step's type: json: cannot unmarshal string into Go value of type jobs_test.oneWay"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantFailed(t, runOnce(t, 1, tc.work), tc.want)
		})
	}
}

// TestInCaseWithoutID: a step put in a case with an empty id, or the default case's own id
// ("work"), is in the default case, which keeps the registration's lane and the work's title
// whatever lane and title the step asked for.
func TestInCaseWithoutID(t *testing.T) {
	for name, id := range map[string]string{"empty": "", "the default's": "work"} {
		t.Run(name, func(t *testing.T) {
			state := runOnce(t, 1, func(ctx context.Context, _ struct{}) error {
				_, err := jobs.Step(ctx, "x", func(context.Context) (int, error) { return 1, nil }, jobs.InCase(id, "review", "Review"))
				return err
			})
			want := `"cases":[{"id":"` + jobs.CaseID(state.Job.ID, "work") + `","lane":"work","title":"fan","status":"completed"`
			if got := mustJSON(t, state); !strings.Contains(got, want) {
				t.Fatalf("state %s\nwant %s", got, want)
			}
		})
	}
}

// TestUnitAfterTheTimeout: a Step, an Await or a Sleep reached once the job's timeout has passed (the
// clock moved during the step before) neither runs nor waits: the job fails with its timeout.
func TestUnitAfterTheTimeout(t *testing.T) {
	for _, tc := range []struct {
		name, unit string
		next       func(ctx context.Context, ran *atomic.Int32) error
	}{
		{"step", "two", func(ctx context.Context, ran *atomic.Int32) error {
			_, err := jobs.Step(ctx, "two", func(context.Context) (int, error) { ran.Add(1); return 2, nil })
			return err
		}},
		{"await", "review", func(ctx context.Context, _ *atomic.Int32) error {
			_, err := jobs.Await[review](ctx, "review", contract.Awaiting{})
			return err
		}},
		{"sleep", "nap", func(ctx context.Context, _ *atomic.Int32) error { return jobs.Sleep(ctx, "nap", time.Minute) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, clk := newOwner(), newClock()
			var ran atomic.Int32
			w := jobs.Define(o, "late", func(ctx context.Context, _ struct{}) error {
				if _, err := jobs.Step(ctx, "one", func(context.Context) (int, error) { clk.Add(2 * time.Hour); return 1, nil }); err != nil {
					return err
				}
				return tc.next(ctx, &ran)
			}, jobs.Timeout(time.Hour))
			in := newInstance(t, memory.New(), o, clk, &queue{})
			job := start(t, in, w, struct{}{})
			in.deliverAll(t, 1, nil)
			state := stateOf(t, in, job)
			wantFailed(t, state, `"error":{"message":"the job did not finish within 1h0m0s (its timeout)"}`)
			if got := mustJSON(t, state); ran.Load() != 0 || strings.Contains(got, jobs.StepID(job, tc.unit)) {
				t.Fatalf("the step past the timeout ran %d times; state %s", ran.Load(), got)
			}
		})
	}
}

// TestHandlerAfterTheTimeout: a job that failed by its timeout still has its failure handler
// run (the handler has its own time), and ends failed with the timeout's message only.
func TestHandlerAfterTheTimeout(t *testing.T) {
	o, clk := newOwner(), newClock()
	var got []jobs.Failure
	w := jobs.Define(o, "late", func(context.Context, struct{}) error {
		clk.Add(2 * time.Hour)
		return nil
	}, jobs.Timeout(time.Hour), jobs.OnFailure(func(_ context.Context, _ struct{}, f jobs.Failure) error {
		got = append(got, f)
		return nil
	}))
	in := newInstance(t, memory.New(), o, clk, &queue{})
	job := start(t, in, w, struct{}{})
	in.deliverAll(t, 2, nil)
	want := jobs.Failure{Job: job, Cause: jobs.CauseTimeout, Reason: "the job did not finish within 1h0m0s (its timeout)"}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("the handler got %+v, want %+v once", got, want)
	}
	wantFailed(t, stateOf(t, in, job), `"error":{"message":"the job did not finish within 1h0m0s (its timeout)"}`)
}

// TestStepsShareADelivery: a delivery with no deadline, or one far ahead, runs every step of
// the job; only one with less than the margin left hands the job on after a step.
func TestStepsShareADelivery(t *testing.T) {
	for name, deadline := range map[string]time.Duration{"none": 0, "in an hour": time.Hour} {
		t.Run(name, func(t *testing.T) {
			o, c, clk := newOwner(), &counter{}, newClock()
			in := newInstance(t, memory.New(), o, clk, &queue{})
			job := start(t, in, threeSteps(o, c), map[string]int{"n": 1})
			n := in.deliverAll(t, 3, func() jobs.Delivery {
				if deadline == 0 {
					return jobs.Delivery{}
				}
				return jobs.Delivery{Deadline: clk.Now().Add(deadline)}
			})
			if st := stateOf(t, in, job).Job.Status; n != 1 || st != contract.StateCompleted {
				t.Fatalf("%d deliveries, job %s: want one, completed", n, st)
			}
		})
	}
}

// TestParallelReplaysOutOfOrder: the branches of a Parallel start their steps in any order: a
// branch's new step before another's recorded one is not a change of path.
func TestParallelReplaysOutOfOrder(t *testing.T) {
	var deliveries, bRuns atomic.Int32
	state := runOnce(t, 2, func(ctx context.Context, _ struct{}) error {
		second := deliveries.Add(1) == 2
		aDone, bDone := make(chan struct{}), make(chan struct{})
		return jobs.Parallel(ctx, func(ctx context.Context) error {
			defer close(aDone)
			if second {
				<-bDone // "a", recorded by the first delivery, is reached after "b" started
			}
			_, err := jobs.Step(ctx, "a", func(context.Context) (int, error) { return 1, nil })
			return err
		}, func(ctx context.Context) error {
			defer close(bDone)
			_, err := jobs.Step(ctx, "b", func(context.Context) (int, error) {
				if !second {
					<-aDone // "a" is recorded before "b" fails
					return 0, errBoom
				}
				bRuns.Add(1)
				return 2, nil
			})
			return err
		})
	})
	if state.Job.Status != contract.StateCompleted || bRuns.Load() != 1 {
		t.Fatalf("b completed %d times; state %s", bRuns.Load(), mustJSON(t, state))
	}
}

// TestStepNamedAsASleep: a Step given the name of a Sleep an earlier delivery left sleeping
// fails the job, the step not run.
func TestStepNamedAsASleep(t *testing.T) {
	var deliveries, ran atomic.Int32
	state := runOnce(t, 2, func(ctx context.Context, _ struct{}) error {
		if deliveries.Add(1) == 1 {
			return jobs.Sleep(ctx, "x", time.Minute)
		}
		_, err := jobs.Step(ctx, "x", func(context.Context) (int, error) { ran.Add(1); return 1, nil })
		return err
	})
	wantFailed(t, state, `"error":{"message":"jobs: \"x\" is not a Step: step names are unique within a work"}`)
	if ran.Load() != 0 {
		t.Fatalf("the step ran %d times", ran.Load())
	}
}

// TestUnitsInsideAnItem: a Step, an Await or a Sleep inside a fan-out item fails the job: an item
// is one unit.
func TestUnitsInsideAnItem(t *testing.T) {
	for _, tc := range []struct {
		name string
		unit func(ctx context.Context) error
		want string
	}{
		{"step", func(ctx context.Context) error {
			_, err := jobs.Step(ctx, "x", func(context.Context) (int, error) { return 1, nil })
			return err
		}, `jobs: step \"x\" runs inside a fan-out item: an item is one unit (run its work directly)`},
		{"await", func(ctx context.Context) error {
			_, err := jobs.Await[review](ctx, "x", contract.Awaiting{})
			return err
		}, `jobs: Await \"x\" runs inside a fan-out item`},
		{"sleep", func(ctx context.Context) error { return jobs.Sleep(ctx, "x", time.Minute) }, `jobs: Sleep \"x\" runs inside a fan-out item`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := runOnce(t, 1, func(ctx context.Context, _ struct{}) error {
				_, err := jobs.Map(ctx, "fan", []int{1}, func(ctx context.Context, _ int) (int, error) { return 1, tc.unit(ctx) })
				return err
			})
			wantFailed(t, state, tc.want)
		})
	}
}

// TestStepUnderABadLimit: a Step, or a Map, under a limit without bounds fails the job with the
// limit's error, nothing run: no step recorded, a Map's failed with none of its items done.
func TestStepUnderABadLimit(t *testing.T) {
	bad := jobs.Under(jobs.NewLimit("calls"))
	for _, tc := range []struct {
		name  string
		unit  func(ctx context.Context, ran *bool) error
		steps string // in the job's state
	}{
		{"Step", func(ctx context.Context, ran *bool) error {
			_, err := jobs.Step(ctx, "x", func(context.Context) (int, error) { *ran = true; return 1, nil }, bad)
			return err
		}, `"steps":[]}`},
		{"Map", func(ctx context.Context, ran *bool) error {
			_, err := jobs.Map(ctx, "x", []int{1, 2}, func(context.Context, int) (int, error) { *ran = true; return 1, nil }, bad)
			return err
		}, `"status":"failed","title":"x","outputs":[],"items":{"done":0,"total":2}}]}`},
	} {
		ran := false
		state := runOnce(t, 1, func(ctx context.Context, _ struct{}) error { return tc.unit(ctx, &ran) })
		wantFailed(t, state, `"error":{"message":"jobs: limit \"calls\" needs MaxRunning(n) or Rate(n, per) with n at least 1"}`)
		if got := mustJSON(t, state); ran || !strings.Contains(got, tc.steps) {
			t.Fatalf("%s: ran %v; state %s, want %s", tc.name, ran, got, tc.steps)
		}
	}
}

// TestStepRecordRefusedEndsTheDelivery: a Step whose record the store refuses (too large)
// returns the error of an ended delivery to the work, and the job fails naming the step.
func TestStepRecordRefusedEndsTheDelivery(t *testing.T) {
	o := newOwner()
	var got error
	w := jobs.Define(o, "big", func(ctx context.Context, _ struct{}) error {
		_, got = jobs.Step(ctx, "x", func(context.Context) (int, error) { return 1, nil })
		return got
	})
	in := newInstance(t, &itemStore{Store: memory.New(), keys: "/s/", tooLarge: true}, o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	in.deliverAll(t, 1, nil)
	if got == nil || got.Error() != "jobs: this delivery of the task has ended (the task continues in another delivery, waits, or has finished)" {
		t.Fatalf("the step returned %v", got)
	}
	// No step shows: it never completed, and nothing is left running.
	want := `"status":"failed","source":{"type":"fresh_start"},"error":{"message":"step \"x\" returned 54 B, more than the store holds in a record (1.049 MB, deflated): ` +
		`keep large data in your own state (core/state) and return a reference"}},"cases":[{"id":"` + job + `-work","lane":"work","title":"big","status":"failed","metadata":{},"steps":[]}]}`
	if got := mustJSON(t, stateOf(t, in, job)); !strings.HasSuffix(got, want) {
		t.Fatalf("state %s\nwant …%s", got, want)
	}
}

// TestStepCancelledWithTheDelivery: a step that fails because the delivery's own context ended
// (the platform's deadline, a shutdown) is not a failed attempt: the delivery ends in error so
// that the queue delivers the task again, and the step runs there.
func TestStepCancelledWithTheDelivery(t *testing.T) {
	o := newOwner()
	var runs atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := jobs.Define(o, "cut", func(wctx context.Context, _ struct{}) error {
		_, err := jobs.Step(wctx, "x", func(sctx context.Context) (int, error) {
			if runs.Add(1) == 1 {
				cancel()
				return 0, sctx.Err()
			}
			return 1, nil
		})
		return err
	})
	in := newInstance(t, memory.New(), o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	m := in.q.take()[0].M
	err := in.svc.Deliver(ctx, m, jobs.Delivery{})
	if want := `jobs: delivery of job "` + job + `" ended before its step was recorded: context canceled`; err == nil || err.Error() != want {
		t.Fatalf("delivery: %v, want %s", err, want)
	}
	if q := in.q.take(); len(q) != 0 {
		t.Fatalf("handed on %+v: want the queue's redelivery", q)
	}
	if err := in.svc.Deliver(context.Background(), m, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	if st := stateOf(t, in, job).Job.Status; st != contract.StateCompleted || runs.Load() != 2 {
		t.Fatalf("job %s, step ran %d times: want completed, twice", st, runs.Load())
	}
}

// TestStepAfterTheContextTimedOut: once a step's context ended at the job's timeout, no later
// step of the delivery runs, though the work goes on after the error.
func TestStepAfterTheContextTimedOut(t *testing.T) {
	o, clk := newOwner(), newClock()
	clk.Add(-time.Hour) // the job's deadline (a minute after its start) passed on the real clock the contexts use
	var ran atomic.Int32
	w := jobs.Define(o, "late", func(ctx context.Context, _ struct{}) error {
		_, _ = jobs.Step(ctx, "one", func(ctx context.Context) (int, error) {
			<-ctx.Done()
			return 0, context.Cause(ctx)
		})
		_, err := jobs.Step(ctx, "two", func(context.Context) (int, error) { ran.Add(1); return 2, nil })
		return err
	}, jobs.Timeout(time.Minute))
	in := newInstance(t, memory.New(), o, clk, &queue{})
	job := start(t, in, w, struct{}{})
	in.deliverAll(t, 1, nil)
	wantFailed(t, stateOf(t, in, job), `"error":{"message":"the job did not finish within 1m0s (its timeout)"}`)
	if ran.Load() != 0 {
		t.Fatalf("the step after the timeout ran %d times", ran.Load())
	}
}

// TestStepFailsAfterASleep: a step of a Parallel that fails after another branch's Sleep handed
// the job on does not change how the delivery ends: the job waits for the sleep, not for the
// step's retry.
func TestStepFailsAfterASleep(t *testing.T) {
	o := newOwner()
	w := jobs.Define(o, "nap-and-call", func(ctx context.Context, _ struct{}) error {
		started, slept := make(chan struct{}), make(chan struct{})
		return jobs.Parallel(ctx, func(ctx context.Context) error {
			<-started
			defer close(slept)
			return jobs.Sleep(ctx, "nap", time.Hour)
		}, func(ctx context.Context) error {
			_, err := jobs.Step(ctx, "call", func(context.Context) (int, error) {
				close(started)
				<-slept
				return 0, errBoom
			})
			return err
		})
	})
	in := newInstance(t, memory.New(), o, newClock(), &queue{})
	start(t, in, w, struct{}{})
	if err := in.svc.Deliver(context.Background(), in.q.take()[0].M, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	if got := delays(in.q.take()); got != "[1h0m0s]" {
		t.Fatalf("handed on after %s, want the sleep's hour", got)
	}
}

// TestStepPanics: a step that panics is a failed attempt whose error says so (the process goes
// on): its last attempt fails the job with it.
func TestStepPanics(t *testing.T) {
	state := runOnce(t, 1, func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Step(ctx, "x", func(context.Context) (int, error) { panic("boom") })
		return err
	}, jobs.MaxAttempts(1))
	wantFailed(t, state, `"error":{"message":"step \"x\" failed 1 times; last error: the step panicked: boom\n`)
}

// TestAwaitEndsTheDelivery: Await returns an error while the job waits for its answer: the code
// after it does not run until the answer came.
func TestAwaitEndsTheDelivery(t *testing.T) {
	o, c := newOwner(), &counter{}
	w := jobs.Define(o, "asks", func(ctx context.Context, _ struct{}) error {
		if _, err := jobs.Await[review](ctx, "review", contract.Awaiting{}); err != nil {
			return err
		}
		c.inc("after") // outside a step
		return nil
	})
	in := newInstance(t, memory.New(), o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	in.deliverAll(t, 1, nil)
	if st := stateOf(t, in, job).Job.Status; st != contract.StateAwaiting || c.get("after") != 0 {
		t.Fatalf("job %s, the code after Await ran %d times: want it awaiting, not run", st, c.get("after"))
	}
	answer(t, in, job, "review")
	if st := stateOf(t, in, job).Job.Status; st != contract.StateCompleted || c.get("after") != 1 {
		t.Fatalf("answered: job %s, the code after Await ran %d times", st, c.get("after"))
	}
}

// TestAwaitRefusals: an Await with a name that is not a step name, or the name of a step
// recorded as a Step, fails the job.
func TestAwaitRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		work func(ctx context.Context, _ struct{}) error
		want string
	}{
		{"bad name", func(ctx context.Context, _ struct{}) error {
			_, err := jobs.Await[review](ctx, " ", contract.Awaiting{})
			return err
		}, `"error":{"message":"jobs: a step name is 1 to 200 printable characters, got \" \""}`},
		{"a step's name", func(ctx context.Context, _ struct{}) error {
			if _, err := jobs.Step(ctx, "x", func(context.Context) (int, error) { return 1, nil }); err != nil {
				return err
			}
			_, err := jobs.Await[review](ctx, "x", contract.Awaiting{})
			return err
		}, `"error":{"message":"jobs: \"x\" is not an Await step: step names are unique within a work"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantFailed(t, runOnce(t, 1, tc.work), tc.want)
		})
	}
}

// TestProgressAcrossDeliveries: progress reported in a later delivery shows over what an earlier
// one wrote with the task, while the later delivery still runs.
func TestProgressAcrossDeliveries(t *testing.T) {
	o := newOwner()
	var in *instance
	var job, seen string
	w := jobs.Define(o, "progressing", func(ctx context.Context, _ struct{}) error {
		if err := jobs.Progress(ctx, "", 1, 3); err != nil {
			return err
		}
		if err := jobs.Sleep(ctx, "nap", time.Minute); err != nil {
			return err // the task is written with the progress
		}
		if _, err := jobs.Step(ctx, "two", func(ctx context.Context) (int, error) { return 2, jobs.Progress(ctx, "", 2, 3) }); err != nil {
			return err // its record holds the progress
		}
		_, err := jobs.Step(ctx, "look", func(context.Context) (int, error) {
			seen = mustJSON(t, stateOf(t, in, job))
			return 1, nil
		})
		return err
	})
	in = newInstance(t, memory.New(), o, newClock(), &queue{})
	job = start(t, in, w, struct{}{})
	in.deliverAll(t, 2, nil)
	if want := `"metadata":{"progress":{"done":2,"total":3}}`; !strings.Contains(seen, want) {
		t.Fatalf("state while running %s\nwant %s", seen, want)
	}
}

// TestStepSpansEnd: each step's span, and the failure handler's, ends when it does, with its
// outcome: a span never ended is never exported.
func TestStepSpansEnd(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	o := newOwner()
	w := jobs.Define(o, "traced", func(ctx context.Context, _ struct{}) error {
		if _, err := jobs.Step(ctx, "ok", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return err
		}
		_, err := jobs.Step(ctx, "bad", func(context.Context) (int, error) { return 0, jobs.Permanent(errBoom) })
		return err
	}, jobs.OnFailure(func(context.Context, struct{}, jobs.Failure) error { return nil }))
	q, clk := &queue{}, newClock()
	in := &instance{q: q, clock: clk, after: newManualAfter(), o: o}
	in.svc = jobs.NewService(jobs.Config{Store: memory.New(), Dispatcher: q, Now: clk.Now, After: in.after.After, Logger: quiet,
		Works:     func(string) (*jobs.Registry, time.Duration, bool) { return o.reg, 0, true },
		Telemetry: telemetry.Providers{Tracers: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))}})
	t.Cleanup(in.svc.Close)
	start(t, in, w, struct{}{})
	in.deliverAll(t, 2, nil) // the work's delivery, then its failure handler's
	if got := stepOutcomes(spans, ""); fmt.Sprint(got) != "[step ok completed step bad failed step on-failure completed]" {
		t.Fatalf("ended step spans %v", got)
	}
}

// TestAwaitAnsweredWhileTheStoreFails: an Await whose answer came before it (jobs.Wake) but whose
// write of the task fails (the store is down) ends the delivery in error without taking the
// answer; the next delivery takes it and goes on.
func TestAwaitAnsweredWhileTheStoreFails(t *testing.T) {
	o, c := newOwner(), &counter{}
	w := jobs.Define(o, "asks", func(ctx context.Context, _ struct{}) error {
		if _, err := jobs.Step(ctx, "one", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return err
		}
		if _, err := jobs.Await[review](ctx, "review", contract.Awaiting{}); err != nil {
			return err
		}
		c.inc("after") // outside a step
		return nil
	})
	s := &taskWritesFail{Store: memory.New(), after: "/s/1"} // down once step "one" is recorded
	clk := newClock()
	in := newInstance(t, s, o, clk, &queue{})
	job := start(t, in, w, struct{}{})
	if woke, err := jobs.Wake(in.ctx(), job, contract.StepAwaitingSubmitAction, json.RawMessage(`{"approved":true}`)); woke || err != nil {
		t.Fatalf("Wake before the job waits: %v, %v (want the answer kept)", woke, err)
	}
	m := in.q.take()[0].M
	err := in.svc.Deliver(context.Background(), m, jobs.Delivery{})
	if want := `jobs: delivery of job "` + job + `" ended before its step was recorded: the store is down`; err == nil || err.Error() != want {
		t.Fatalf("delivery: %v, want %s", err, want)
	}
	if c.get("after") != 0 {
		t.Fatalf("the code after Await ran %d times in the failed delivery", c.get("after"))
	}
	s.down.Store(false)
	clk.Add(jobs.DefaultLease + jobs.SkewMargin) // the failed delivery's lease lapses
	if err := in.svc.Deliver(context.Background(), m, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	if st := stateOf(t, in, job).Job.Status; st != contract.StateCompleted || c.get("after") != 1 {
		t.Fatalf("job %s, the code after Await ran %d times: want completed, once", st, c.get("after"))
	}
}

// TestSleepRefusals: a Sleep named as a recorded Step, or one reached before the steps an
// earlier delivery recorded, fails the job.
func TestSleepRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		work func(ctx context.Context, delivery int32) error
		want string
	}{
		{"a step's name", func(ctx context.Context, _ int32) error {
			if _, err := jobs.Step(ctx, "x", func(context.Context) (int, error) { return 1, nil }); err != nil {
				return err
			}
			return jobs.Sleep(ctx, "x", time.Minute)
		}, `"error":{"message":"jobs: \"x\" is not a Sleep step: step names are unique within a work"}`},
		{"off the path", func(ctx context.Context, delivery int32) error {
			if delivery == 2 {
				if err := jobs.Sleep(ctx, "other", time.Minute); err != nil {
					return err
				}
				return errors.New("the sleep off the path returned nil")
			}
			if _, err := jobs.Step(ctx, "a", func(context.Context) (int, error) { return 1, nil }); err != nil {
				return err
			}
			return jobs.Sleep(ctx, "nap", time.Minute)
		}, `"error":{"message":"jobs: step \"a\", recorded by an earlier delivery, was not reached by this one`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var deliveries atomic.Int32
			wantFailed(t, runOnce(t, 2, func(ctx context.Context, _ struct{}) error { return tc.work(ctx, deliveries.Add(1)) }), tc.want)
		})
	}
}

// TestSleepInCase: a Sleep's step shows in the case it was put in once it is over.
func TestSleepInCase(t *testing.T) {
	state := runOnce(t, 2, func(ctx context.Context, _ struct{}) error {
		return jobs.Sleep(ctx, "nap", time.Minute, jobs.InCase("c", "review", "Review"))
	})
	want := `{"id":"` + jobs.CaseID(state.Job.ID, "c") + `","lane":"review","title":"Review","status":"completed","metadata":{},"steps":[{"id":"` + jobs.StepID(state.Job.ID, "nap") + `"`
	if got := mustJSON(t, state); !strings.Contains(got, want) {
		t.Fatalf("state %s\nwant %s", got, want)
	}
}

// TestSleepRecordRefused: a Sleep over whose record the store refuses returns an error: the code
// after it does not run, and the job fails naming the step.
func TestSleepRecordRefused(t *testing.T) {
	o, c := newOwner(), &counter{}
	w := jobs.Define(o, "nap", func(ctx context.Context, _ struct{}) error {
		if err := jobs.Sleep(ctx, "nap", time.Minute); err != nil {
			return err
		}
		c.inc("after") // outside a step
		return nil
	})
	in := newInstance(t, &itemStore{Store: memory.New(), keys: "/s/", tooLarge: true}, o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	in.deliverAll(t, 2, nil)
	wantFailed(t, stateOf(t, in, job), `"error":{"message":"step \"nap\" returned`)
	if c.get("after") != 0 {
		t.Fatalf("the code after the Sleep ran %d times", c.get("after"))
	}
}

// TestSleepAfterAnAwaitInAParallel: a Sleep reached after another branch made the job wait for
// an answer sets no timer: only a delivery that hands the job on keeps the earliest wake-up.
func TestSleepAfterAnAwaitInAParallel(t *testing.T) {
	var slept error
	state := runOnce(t, 1, func(ctx context.Context, _ struct{}) error {
		waited := make(chan struct{})
		return jobs.Parallel(ctx, func(ctx context.Context) error {
			defer close(waited)
			_, err := jobs.Await[review](ctx, "review", contract.Awaiting{})
			return err
		}, func(ctx context.Context) error {
			<-waited
			slept = jobs.Sleep(ctx, "nap", time.Hour)
			return slept
		})
	})
	if got := mustJSON(t, state); state.Job.Status != contract.StateAwaiting || strings.Contains(got, jobs.StepID(state.Job.ID, "nap")) || slept == nil {
		t.Fatalf("Sleep returned %v; state %s: want it awaiting, without the sleep", slept, got)
	}
}

// TestSleepDueWhileHandingOn: a Sleep whose time has come, reached after another branch of a
// Parallel handed the job on, is not recorded by that delivery: the next one records it.
func TestSleepDueWhileHandingOn(t *testing.T) {
	o, clk := newOwner(), newClock()
	var deliveries atomic.Int32
	w := jobs.Define(o, "naps", func(ctx context.Context, _ struct{}) error {
		n := deliveries.Add(1)
		handed := make(chan struct{})
		return jobs.Parallel(ctx, func(ctx context.Context) error {
			if n == 2 {
				<-handed // "nap" is due now, but the job is handed on already
			}
			return jobs.Sleep(ctx, "nap", time.Minute)
		}, func(ctx context.Context) error {
			defer close(handed)
			if n == 1 {
				return nil
			}
			return jobs.Sleep(ctx, "other", time.Hour)
		})
	})
	in := newInstance(t, memory.New(), o, clk, &queue{})
	job := start(t, in, w, struct{}{})
	for range 2 {
		m := in.q.take()[0]
		clk.Add(m.Delay)
		if err := in.svc.Deliver(context.Background(), m.M, jobs.Delivery{}); err != nil {
			t.Fatal(err)
		}
	}
	want := `{"id":"` + jobs.StepID(job, "nap") + `","activity":"operation","status":"pending"`
	if got := mustJSON(t, stateOf(t, in, job)); !strings.Contains(got, want) {
		t.Fatalf("state %s\nwant %s", got, want)
	}
	in.deliverAll(t, 1, nil)
	if st := stateOf(t, in, job).Job.Status; st != contract.StateCompleted {
		t.Fatalf("job %s after the hour", st)
	}
}

// stepOutcomes lists the ended spans named with prefix that carry a step's outcome, as
// "name outcome", in the order they ended.
func stepOutcomes(spans *tracetest.SpanRecorder, prefix string) []string {
	var got []string
	for _, sp := range spans.Ended() {
		if !strings.HasPrefix(sp.Name(), prefix) {
			continue
		}
		for _, a := range sp.Attributes() {
			if string(a.Key) == telemetry.StepOutcome {
				got = append(got, sp.Name()+" "+a.Value.AsString())
			}
		}
	}
	return got
}
