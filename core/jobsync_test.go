package core_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/jobs/jobstest"
	"github.com/supervaize/svz/core/state"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/core/svztest"
	"github.com/supervaize/svz/internal/golden"
)

// offlineRun is a job the agent ran while Studio could not reach it, kept in its own records.
type offlineRun struct {
	Leads int `json:"leads"`
}

// TestExtendJobSync: a hook extends the job.sync svz serves instead of replacing it: it adds to
// a job's projected state and effects, adopts a job that has no task from the agent's records,
// and leaves job_not_found to svz; its refusal and its failure answer as a handler's.
func TestExtendJobSync(t *testing.T) {
	a, _ := workAgent(t)
	a.ExtendJobSync(func(ctx context.Context, req *contract.ActionRequest, s *core.JobSync) error {
		switch req.Job() {
		case "refused":
			return contract.InputErrors{contract.InvalidField("job_id", "not a job of this agent")}
		case "broken":
			return errors.New("the records are down")
		}
		if s.State != nil { // a job svz runs: the hook adds to its answer
			s.State.Job.Display = &contract.JobDisplay{EntityLabel: "Greeting"}
			s.Effects = append(s.Effects, contract.Effect{Type: "greeting.synced", JobID: req.Job(), Message: "synced by " + req.Actor.UserID})
			return nil
		}
		run, err := state.Of[offlineRun](ctx, "offline").Get(ctx, req.Job())
		if errors.Is(err, state.ErrNotFound) {
			return nil // not the agent's either: svz answers job_not_found
		} else if err != nil {
			return err
		}
		// Adopted: the job the agent ran offline, under the id Studio created for it.
		s.State = &contract.JobState{Job: contract.Job{ID: req.Job(), AgentSlug: req.AgentSlug, MissionID: req.MissionID, Status: contract.StateCompleted,
			Source: contract.JobSource{Type: contract.SourceExternal}, Information: contract.CostIn(float64(run.Leads), "credits")}, Cases: []contract.Case{}}
		s.Effects = append(s.Effects, contract.Effect{Type: "job.adopted", JobID: req.Job()})
		return nil
	})
	h := svztest.New(t, a)
	if err := state.Of[offlineRun](h.Context(), "offline").Create(h.Context(), "offline-1", offlineRun{Leads: 12}); err != nil {
		t.Fatal(err)
	}

	h.Invoke(t, contract.JobStartAction, map[string]string{"name": "ada"}, svztest.JobID("job-1"))
	res := h.WaitJob(t, "job-1", contract.StateCompleted)
	if e := res.Effects; len(e) != 2 || e[0].Type != contract.EffectJobSynced || e[0].Status != contract.StateCompleted ||
		e[1].Type != "greeting.synced" || e[1].Message != "synced by svztest-user" || res.JobState.Job.Display.EntityLabel != "Greeting" ||
		len(res.JobState.Cases[0].Steps) != 2 {
		t.Errorf("extended sync = %s", res.JSON)
	}
	res = h.Invoke(t, contract.JobSyncAction, nil, svztest.JobID("offline-1"))
	golden.JSON(t, "job_sync_adopted.json", res.JSON)
	res = h.Invoke(t, contract.JobSyncAction, nil, svztest.JobID("job-404"))
	if string(res.JSON) != `{"status":"error","effects":[],"errors":[{"code":"job_not_found","message":"No background job \"job-404\" in this workspace"}]}` {
		t.Errorf("unknown job = %s", res.JSON)
	}
	// The adopted job is the workspace's record: another workspace does not see it.
	if res = h.Invoke(t, contract.JobSyncAction, nil, svztest.JobID("offline-1"), svztest.Workspace("other")); res.Errors[0].Code != "job_not_found" {
		t.Errorf("adopted job from another workspace = %s", res.JSON)
	}
	if res = h.Invoke(t, contract.JobSyncAction, nil, svztest.JobID("refused")); !res.Refusal() || res.Errors[0].Message != "not a job of this agent" {
		t.Errorf("refused sync = %s", res.JSON)
	}
	resp := h.Call(t, "supervaizer/action.invoke", h.Request(t, contract.JobSyncAction, nil, svztest.JobID("broken")))
	if resp.Error == nil || resp.Error.Code != -32603 || strings.Contains(string(resp.Body), "records are down") {
		t.Errorf("failing hook = %s", resp.Body)
	}
}

func TestExtendJobSyncMistakes(t *testing.T) {
	hook := func(context.Context, *contract.ActionRequest, *core.JobSync) error { return nil }
	agent := func(actions ...contract.ActionSpec) *core.Agent {
		return specAgent(t, contract.RegistrationSpec{AgentSlug: "v", DisplayName: "V", A2UICatalogVersion: "v.1", Actions: actions})
	}
	twice, _ := workAgent(t)
	twice.ExtendJobSync(hook)
	twice.ExtendJobSync(hook)
	nilHook, _ := workAgent(t)
	nilHook.ExtendJobSync(nil)
	own, _ := workAgent(t)
	own.HandleAction(contract.JobSyncAction, okAction(contract.OK()))
	own.ExtendJobSync(hook)
	undeclared := agent(contract.ActionID(contract.JobStartAction)) // work, but no job.sync
	jobs.Define(undeclared, "v", func(context.Context, struct{}) error { return nil })
	undeclared.ExtendJobSync(hook)
	noWork := agent(contract.ActionID(contract.JobSyncAction)) // job.sync, but no work
	noWork.ExtendJobSync(hook)
	for _, tc := range []struct {
		a    *core.Agent
		want string
	}{
		{twice, `agent "w": ExtendJobSync called twice: one hook per agent`},
		{nilHook, `agent "w": ExtendJobSync: nil hook`},
		{own, `agent "w": ExtendJobSync extends the job.sync svz serves, and the agent has its own job.sync handler: extend that handler instead`},
		{undeclared, `agent "v": ExtendJobSync: the registration declares no job.sync (job_policy.sync)`},
		{noWork, `agent "v": ExtendJobSync: svz serves job.sync only for an agent that defines background work (jobs.Define)`},
	} {
		_, err := core.New(core.Config{APIKey: testKey, Authorizer: grant.LocalBypass{}, Store: memory.New(), Jobs: &jobstest.Queue{}, Logger: quietLogger()}, tc.a)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New = %v\nwant %s", err, tc.want)
		}
	}
}
