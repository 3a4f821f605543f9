package svztest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	svzjobs "github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/state"
	"github.com/supervaize/svz/core/svztest"
)

// TestConfirmIdempotentSettlesBackgroundWork: job.start starts work that writes the agent's state
// after the call answered. AssertConfirmIdempotent takes each WithState snapshot once the job
// waits or ends, so the work's own write is not taken for a second run.
//
// The order is forced, not timed: the work writes only once released; job.sync (the agent's own)
// answers "pending" first, then releases it; the snapshot releases it too when it is taken
// before any job.sync (no settling), and its second call waits for the write. Without settling,
// the first snapshot sees no record and the second one record: the check fails every time.
func TestConfirmIdempotentSettlesBackgroundWork(t *testing.T) {
	reg, err := contract.BuildRegistration(contract.RegistrationSpec{
		AgentSlug: "bg", DisplayName: "BG", A2UICatalogVersion: "bg.1",
		Actions: []contract.ActionSpec{contract.ActionID(contract.JobStartAction), contract.ActionID(contract.JobSyncAction)},
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := core.NewAgent(core.AgentConfig{Name: "BG", Registration: reg})
	if err != nil {
		t.Fatal(err)
	}
	release, written := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	w := svzjobs.Define(a, "bg.write", func(ctx context.Context, job string) error {
		_, err := svzjobs.Step(ctx, "write", func(ctx context.Context) (bool, error) {
			select {
			case <-release:
			case <-ctx.Done():
				return false, ctx.Err()
			}
			_, created, err := state.Of[note](ctx, "notes").GetOrCreate(ctx, job, note{ID: job})
			if created {
				close(written)
			}
			return created, err
		})
		return err
	})
	a.HandleAction(contract.JobStartAction, core.ActionFunc(func(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
		return w.Started(ctx, req, req.Job())
	}))
	var syncs int
	a.HandleAction(contract.JobSyncAction, core.ActionFunc(func(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
		js, err := svzjobs.State(ctx, req.Job())
		if err != nil {
			return nil, err
		}
		if syncs++; syncs == 1 {
			js.Job.Status = contract.StatePending // not settled either
		} else {
			free()
		}
		return contract.OK(contract.Effect{Type: contract.EffectJobSynced, JobID: req.Job(), Status: js.Job.Status}).WithJobState(js), nil
	}))
	h := svztest.New(t, a)

	list := func() []string {
		var ids []string
		for r, err := range state.Of[note](h.Context(), "notes").All(h.Context(), "") {
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, r.ID)
		}
		return ids
	}
	snapshots := 0
	notes := func() any {
		if snapshots++; snapshots > 1 {
			select {
			case <-written:
			case <-time.After(svztest.WaitJobTimeout):
				t.Fatal("the work never wrote its note")
			}
		}
		ids := list()
		free() // read first: unsettled, the work writes after this snapshot
		return ids
	}
	res := h.AssertConfirmIdempotent(t, contract.JobStartAction, nil, svztest.JobID("job-1"), svztest.IdempotencyKey("k-1"), svztest.WithState(notes))
	if res.JobState == nil || res.JobState.Job.Status != contract.StateActive || string(res.JSON) == "" {
		t.Errorf("result = %+v", res)
	}
	if syncs < 3 {
		t.Errorf("job.sync called %d times: want the pending answer, then until the job ended", syncs)
	}
}
