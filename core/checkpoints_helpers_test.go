package core_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/core/contract"
)

// governedAgent declares rule checkpoints and one guarded step; its job.start runs it when the
// job is governed.
func governedAgent(t *testing.T, declare bool, explicitResume bool) (*core.Agent, error) {
	t.Helper()
	spec := contract.RegistrationSpec{AgentSlug: "gov", DisplayName: "Gov", A2UICatalogVersion: "gov.1",
		Actions: []contract.ActionSpec{contract.ActionID("job.start")}}
	if declare {
		spec.RuleCheckpoints = &contract.RuleCheckpoints{Phases: []string{"before", "after"}}
	}
	reg, err := contract.BuildRegistration(spec)
	if err != nil {
		t.Fatal(err)
	}
	a, err := core.NewAgent(core.AgentConfig{Name: "Gov", Registration: reg})
	if err != nil {
		t.Fatal(err)
	}
	step := checkpoint.Define(a, "send", checkpoint.Funcs[string, string]{
		Effect:       func(_ context.Context, in string) (string, error) { return "sent " + in, nil },
		AfterContext: func(_, out string) (any, error) { return map[string]string{"out": out}, nil },
	})
	a.HandleAction("job.start", core.ActionFunc(func(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
		g, err := checkpoint.FromJobStart(ctx, req)
		if err != nil {
			return nil, err
		}
		out, err := checkpoint.RunGuardedStep(ctx, g, step, checkpoint.Occurrence{JobID: *req.JobID, CaseID: "c", StepID: "s", OccurrenceID: "o"},
			map[string]string{"op": "send"}, "hello")
		if err != nil {
			return nil, err
		}
		return contract.OK(contract.Effect{Type: "job.started", Status: out.StepStatus()}), nil
	}))
	if explicitResume {
		a.HandleAction(contract.RuleCheckpointResumeAction, core.ActionFunc(func(context.Context, *contract.ActionRequest) (*contract.ActionResult, error) {
			return contract.OK(), nil
		}))
	}
	return a, nil
}

// invokeGov calls action of agent gov on c, for job j1, case c.
func invokeGov(t *testing.T, c *core.Controller, action, input string) map[string]any {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"supervaizer/action.invoke","params":{"request_id":"r","actor":{"user_id":"u"},` +
		`"workspace":{"id":"w"},"mission_id":"m","agent_slug":"gov","surface":"job.start","action":"` + action + `","input":` + input +
		`,"job_id":"j1","case_id":"c"}}`
	r := httptest.NewRequest(http.MethodPost, "/a2a", strings.NewReader(body))
	r.Header.Set("X-API-Key", testKey)
	w := httptest.NewRecorder()
	c.ServeHTTP(w, r)
	var out map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	return out
}
