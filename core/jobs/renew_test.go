package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/store/memory"
)

// While a long step runs, job.sync shows it active with its progress: the lease renewal writes
// them (the step's own record comes only when it completes).
func TestRenewalShowsRunningStep(t *testing.T) {
	s := memory.New()
	t.Cleanup(func() { _ = s.Close() })
	o := newOwner()
	entered, release := make(chan struct{}), make(chan struct{})
	w := jobs.Define(o, "slow", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Step(ctx, "find", func(ctx context.Context) (int, error) {
			_ = jobs.Progress(ctx, "research", 2, 5)
			close(entered)
			<-release
			return 5, nil
		}, jobs.InCase("research", "work", "Research"))
		return err
	})
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	_, done := deliverInBackground(t, in)
	<-entered
	in.after.fire(t)
	in.after.fire(t) // the second renewal waits until the first one is written
	want := `{"id":"` + job + `-research","lane":"work","title":"Research","status":"active","metadata":{"progress":{"done":2,"total":5}},` +
		`"steps":[{"id":"` + job + `-find","activity":"operation","status":"active","title":"find","outputs":[]}]}`
	if got := mustJSON(t, stateOf(t, in, job).Cases[0]); got != want {
		t.Errorf("case while the step runs:\n%s\nwant\n%s", got, want)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := stateOf(t, in, job); st.Job.Status != contract.StateCompleted || st.Cases[0].Steps[0].Status != contract.StateCompleted {
		t.Errorf("after the step: %s", mustJSON(t, st))
	}
}

// A step that runs for several leases keeps its task: each renewal moves the lease on, in the
// store and in the delivery, which checks its lease before each renewal.
func TestRenewalKeepsTheLease(t *testing.T) {
	o := newOwner()
	entered, release, cancelled := make(chan struct{}), make(chan struct{}), make(chan struct{})
	w := jobs.Define(o, "long", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Step(ctx, "long", func(ctx context.Context) (int, error) {
			close(entered)
			select {
			case <-release:
				return 1, nil
			case <-ctx.Done():
				close(cancelled)
				return 0, ctx.Err()
			}
		})
		return err
	})
	in := newInstance(t, memory.New(), o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	_, done := deliverInBackground(t, in)
	<-entered
	for i := range 6 { // two leases
		in.clock.Add(jobs.DefaultLease / 3)
		select {
		case in.after.ch <- time.Time{}:
		case <-cancelled:
			t.Fatalf("the step was cancelled at renewal %d: the delivery saw its lease lapse", i+1)
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := stateOf(t, in, job).Job.Status; st != contract.StateCompleted || len(in.q.msgs) != 0 {
		t.Fatalf("status %s, %d messages, want completed in the one delivery", st, len(in.q.msgs))
	}
}
