package svztest_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	svzjobs "github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/svztest"
)

// An agent with background work runs it in the harness's in-process pool; WaitJob follows it.
func TestWaitJob(t *testing.T) {
	reg, err := contract.BuildRegistration(contract.RegistrationSpec{
		AgentSlug: "w", DisplayName: "W", A2UICatalogVersion: "w.1",
		Actions: []contract.ActionSpec{contract.ActionID(contract.JobStartAction), contract.ActionID(contract.JobSyncAction)},
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := core.NewAgent(core.AgentConfig{Name: "W", Registration: reg})
	if err != nil {
		t.Fatal(err)
	}
	type in struct {
		Fail bool `json:"fail"`
	}
	w := svzjobs.Define(a, "w.run", func(ctx context.Context, in in) error {
		if _, err := svzjobs.Step(ctx, "one", func(context.Context) (int, error) {
			if in.Fail {
				return 0, svzjobs.Permanent(errors.New("no luck"))
			}
			return 1, nil
		}); err != nil {
			return err
		}
		_, err := svzjobs.Await[struct{}](ctx, "ok", contract.Awaiting{})
		return err
	})
	a.HandleAction(contract.JobStartAction, core.ActionFunc(func(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
		var v in
		if err := req.DecodeInput(&v); err != nil {
			return nil, err
		}
		return w.Started(ctx, req, v)
	}))
	h := svztest.New(t, a)

	h.Invoke(t, contract.JobStartAction, map[string]any{}, svztest.JobID("j-1"))
	res := h.WaitJob(t, "j-1", contract.StateAwaiting)
	if steps := res.JobState.Cases[0].Steps; len(steps) != 2 || steps[0].Status != contract.StateCompleted || steps[1].ID != "j-1-ok" {
		t.Errorf("job.sync = %s", res.JSON)
	}

	h.Invoke(t, contract.JobStartAction, map[string]any{"fail": true}, svztest.JobID("j-2"))
	msgs, fatal := failures(t, func(tb testing.TB) { h.WaitJob(tb, "j-2", contract.StateCompleted) })
	if !fatal || len(msgs) != 1 || !strings.HasPrefix(msgs[0], "svztest: job j-2 is failed, not completed: ") || !strings.Contains(msgs[0], "no luck") {
		t.Errorf("waiting for a job that fails: %q", msgs)
	}
}
