// Tests written for mutants of failure.go (OnFailure's handler) that lived in scripts/mutants
// runs (docs/development.md): each fails on its mutant.
package jobs_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/store/memory"
)

// failFor defines on o the work "fails" whose step fails it for good with errBoom, with opts.
func failFor(o owner, opts ...jobs.Option) *jobs.Work[struct{}] {
	return jobs.Define(o, "fails", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Step(ctx, "call", func(context.Context) (int, error) { return 0, jobs.Permanent(errBoom) })
		return err
	}, opts...)
}

const callFailed = `step \"call\" failed: boom`

// TestHandlerFailsPermanently: a failure handler that returns a permanent error is not retried,
// whatever MaxAttempts allows: the job fails with the handler's error.
func TestHandlerFailsPermanently(t *testing.T) {
	o := newOwner()
	var runs atomic.Int32
	w := failFor(o, jobs.MaxAttempts(3), jobs.OnFailure(func(context.Context, struct{}, jobs.Failure) error {
		runs.Add(1)
		return jobs.Permanent(errBoom)
	}))
	in := newInstance(t, memory.New(), o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	in.deliverAll(t, 4, nil)
	wantFailed(t, stateOf(t, in, job), `"error":{"message":"`+callFailed+`; the failure handler failed: boom"}`)
	if runs.Load() != 1 {
		t.Fatalf("the handler ran %d times, want once", runs.Load())
	}
}

// TestHandlerOutOfTime: a failure handler whose own time ran out is not a failed attempt to
// retry: the job fails at once, saying the handler did not finish.
func TestHandlerOutOfTime(t *testing.T) {
	o, clk := newOwner(), newClock()
	clk.Add(-time.Hour) // the handler's deadline (a minute after the failure) passed on the real clock its context uses
	var runs atomic.Int32
	w := failFor(o, jobs.MaxAttempts(3), jobs.OnFailure(func(ctx context.Context, _ struct{}, _ jobs.Failure) error {
		runs.Add(1)
		<-ctx.Done()
		return context.Cause(ctx)
	}, jobs.HandlerTimeout(time.Minute)))
	in := newInstance(t, memory.New(), o, clk, &queue{})
	job := start(t, in, w, struct{}{})
	in.deliverAll(t, 4, nil)
	wantFailed(t, stateOf(t, in, job), `"error":{"message":"`+callFailed+`; the failure handler did not finish within 1m0s"}`)
	if runs.Load() != 1 {
		t.Fatalf("the handler ran %d times, want once", runs.Load())
	}
}

// TestHandlerRecordedNotRunAgain: a handler whose run was recorded, in a delivery that could not
// write the task's end (the store went down), is not run again by the next delivery, which ends
// the job.
func TestHandlerRecordedNotRunAgain(t *testing.T) {
	o, clk := newOwner(), newClock()
	var runs atomic.Int32
	w := failFor(o, jobs.OnFailure(func(context.Context, struct{}, jobs.Failure) error { runs.Add(1); return nil }))
	s := &taskWritesFail{Store: memory.New(), after: "/s/1"} // the handler's record is the job's first
	in := newInstance(t, s, o, clk, &queue{})
	job := start(t, in, w, struct{}{})
	if err := in.svc.Deliver(context.Background(), in.q.take()[0].M, jobs.Delivery{}); err != nil { // the work fails
		t.Fatal(err)
	}
	m := in.q.take()[0].M
	if err := in.svc.Deliver(context.Background(), m, jobs.Delivery{}); err == nil {
		t.Fatal("the handler's delivery recorded its end on a store that is down")
	}
	s.down.Store(false)
	clk.Add(jobs.DefaultLease + jobs.SkewMargin) // its lease lapses
	if err := in.svc.Deliver(context.Background(), m, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	wantFailed(t, stateOf(t, in, job), `"error":{"message":"`+callFailed+`"}`)
	if runs.Load() != 1 {
		t.Fatalf("the handler ran %d times, want once", runs.Load())
	}
}

// TestHandlerRemovedByANewBuild: a job that failed under a build with a failure handler, whose
// handler's delivery runs on a build without one, ends failed as it failed.
func TestHandlerRemovedByANewBuild(t *testing.T) {
	s, clk, q := memory.New(), newClock(), &queue{}
	old, next := newOwner(), newOwner()
	w := failFor(old, jobs.OnFailure(func(context.Context, struct{}, jobs.Failure) error { return nil }))
	failFor(next)
	in := newInstance(t, s, old, clk, q)
	job := start(t, in, w, struct{}{})
	if err := in.svc.Deliver(context.Background(), in.q.take()[0].M, jobs.Delivery{}); err != nil { // the work fails
		t.Fatal(err)
	}
	if st := stateOf(t, in, job).Job.Status; st != contract.StateFailed {
		t.Fatalf("job %s after the work failed", st)
	}
	newInstance(t, s, next, clk, q).deliverAll(t, 1, nil)
	wantFailed(t, stateOf(t, in, job), `"error":{"message":"`+callFailed+`"}`)
}
