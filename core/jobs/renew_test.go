package jobs_test

import (
	"context"
	"testing"

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
