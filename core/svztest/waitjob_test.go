package svztest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

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

// Advance moves the controller's clock on and runs the work due by then: a job that sleeps two
// hours completes at once after Advance(2h), and not after a shorter one.
func TestAdvance(t *testing.T) {
	reg, err := contract.BuildRegistration(contract.RegistrationSpec{
		AgentSlug: "s", DisplayName: "S", A2UICatalogVersion: "s.1",
		Actions: []contract.ActionSpec{contract.ActionID(contract.JobStartAction), contract.ActionID(contract.JobSyncAction)},
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := core.NewAgent(core.AgentConfig{Name: "S", Registration: reg})
	if err != nil {
		t.Fatal(err)
	}
	after := make(chan struct{}, 1)
	w := svzjobs.Define(a, "s.run", func(ctx context.Context, _ struct{}) error {
		if err := svzjobs.Sleep(ctx, "cool-down", 2*time.Hour); err != nil {
			return err
		}
		_, err := svzjobs.Step(ctx, "after", func(context.Context) (int, error) { after <- struct{}{}; return 1, nil })
		return err
	})
	a.HandleAction(contract.JobStartAction, core.ActionFunc(func(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
		return w.Started(ctx, req, struct{}{})
	}))
	h := svztest.New(t, a)
	h.Invoke(t, contract.JobStartAction, map[string]any{}, svztest.JobID("j-1"))
	waiting := func() bool {
		res := h.Invoke(t, contract.JobSyncAction, nil, svztest.JobID("j-1"))
		return res.JobState != nil && res.JobState.Job.Extra["waiting"] != nil
	}
	for deadline := time.Now().Add(svztest.WaitJobTimeout); !waiting(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the job did not go to sleep")
		}
	}
	h.Advance(t, time.Hour)
	if res := h.Invoke(t, contract.JobSyncAction, nil, svztest.JobID("j-1")); res.JobState.Job.Status != contract.StateActive || len(after) != 0 {
		t.Fatalf("woke an hour early: %s", res.JSON)
	}
	h.Advance(t, time.Hour)
	h.WaitJob(t, "j-1", contract.StateCompleted)
	if len(after) != 1 {
		t.Fatalf("the step after the sleep ran %d times", len(after))
	}
	if _, fatal := failures(t, func(tb testing.TB) { h.Advance(tb, -time.Second) }); !fatal {
		t.Error("Advance with a negative duration was accepted")
	}
}
