package svztest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/a2ui"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/state"
	"github.com/supervaize/svz/core/svztest"
)

type note struct {
	ID    string  `json:"id"`
	Score float64 `json:"score"`
}

// harnessAgent declares two actions and two surfaces; "broken" fails and the awaiting surface
// has no handler, for CheckHandlers to find.
func harnessAgent(t *testing.T) *core.Agent {
	t.Helper()
	reg, err := contract.BuildRegistration(contract.RegistrationSpec{
		AgentSlug: "h", DisplayName: "H", A2UICatalogVersion: "h.1",
		Surfaces: []contract.SurfaceSpec{contract.SurfaceID("job.start"), contract.SurfaceID("case.step.awaiting")},
		Actions:  []contract.ActionSpec{contract.ActionID("job.start"), contract.ActionID("broken")},
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := core.NewAgent(core.AgentConfig{Name: "H", Registration: reg})
	if err != nil {
		t.Fatal(err)
	}
	a.HandleAction("job.start", core.ActionFunc(func(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
		n := note{ID: "n-1", Score: 2.5}
		if _, err := state.Of[note](ctx, "notes").Upsert(ctx, n.ID, func(v *note) error { *v = n; return nil }); err != nil {
			return nil, err
		}
		return contract.OK(contract.Effect{Type: "noted", Item: n, Count: new(int), Data: map[string]any{"nested": []any{map[string]any{"n": 7}}}}), nil
	}))
	a.HandleAction("broken", core.ActionFunc(func(context.Context, *contract.ActionRequest) (*contract.ActionResult, error) {
		return nil, context.DeadlineExceeded
	}))
	a.HandleSurface("job.start", core.SurfaceFunc(func(ctx context.Context, req *contract.SurfaceRequest) (*contract.SurfaceResult, error) {
		return a2ui.Result(ctx, req.Surface, a2ui.Form{Submit: a2ui.Submit{Action: "job.start"}})
	}))
	return a
}

func TestHarness(t *testing.T) {
	h := svztest.New(t, harnessAgent(t))
	res := h.Invoke(t, "job.start", map[string]any{"x": 1}, svztest.JobID("job-1"))
	item := res.Effects[0].Item.(map[string]any)
	nested := res.Effects[0].Data["nested"].([]any)[0].(map[string]any)
	if item["score"] != 2.5 || nested["n"] != 7.0 {
		t.Errorf("numbers are not float64: item %#v, nested %#v", item, nested)
	}
	if n := svztest.As[note](t, res.Effects[0].Item); n != (note{"n-1", 2.5}) {
		t.Errorf("As = %+v", n)
	}
	if got, err := state.Of[note](h.Context(), "notes").Get(h.Context(), "n-1"); err != nil || got.Score != 2.5 {
		t.Errorf("state of the harness's workspace = %+v, %v", got, err)
	}
	if _, err := state.Of[note](h.Context("other"), "notes").Get(h.Context("other"), "n-1"); err == nil {
		t.Error("another workspace sees the record")
	}
	// Another workspace's call writes its own record.
	if res := h.Invoke(t, "job.start", nil, svztest.Workspace("other")); res.Status != contract.StatusOK {
		t.Errorf("job.start in another workspace = %s", res.JSON)
	}
	effects := h.Effects(t)
	if len(effects) != 2 || effects[0].Effects[0].Type != "noted" || effects[0].Effects[0].Item.(map[string]any)["score"] != 2.5 {
		t.Errorf("effects = %+v", effects)
	}
	form := h.Load(t, "job.start", nil)
	if form.Doc["type"] != "Form" || *form.A2UICatalogVersion != "h.1" {
		t.Errorf("surface = %s", form.JSON)
	}
	if resp := h.Call(t, "supervaizer/action.invoke", map[string]any{"request_id": 1}); resp.Error == nil || resp.Error.Code != -32602 {
		t.Errorf("invalid params = %s", resp.Body)
	}
}

func TestCheckHandlers(t *testing.T) {
	h := svztest.New(t, harnessAgent(t))
	msgs, fatal := failures(t, func(tb testing.TB) { h.CheckHandlers(tb, nil) })
	want := []string{`surface case.step.awaiting answers JSON-RPC -32011 "Surface handler not registered: case.step.awaiting"`,
		`action broken answers JSON-RPC -32603 "Action handler failed"`}
	if fatal || len(msgs) != len(want) {
		t.Fatalf("failures = %q", msgs)
	}
	for i, w := range want {
		if !strings.Contains(msgs[i], w) {
			t.Errorf("failure %d = %q, want %q", i, msgs[i], w)
		}
	}
	msgs, _ = failures(t, func(tb testing.TB) {
		h.CheckHandlers(tb, map[string]any{"broken": svztest.Skip, "case.step.awaiting": svztest.Skip})
	})
	if len(msgs) != 0 {
		t.Errorf("with both skipped: %q", msgs)
	}
}

// countingAgent's job.start needs an integer count and records each run in the state.
func countingAgent(t *testing.T) *core.Agent {
	t.Helper()
	reg, err := contract.BuildRegistration(contract.RegistrationSpec{
		AgentSlug: "c", DisplayName: "C", A2UICatalogVersion: "c.1",
		Actions: []contract.ActionSpec{contract.ActionID("job.start")},
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := core.NewAgent(core.AgentConfig{Name: "C", Registration: reg})
	if err != nil {
		t.Fatal(err)
	}
	a.DeclareInput("job.start", []contract.FieldDefinition{{ID: "count", Label: "Count", Type: contract.FieldInteger, Required: true}})
	a.HandleAction("job.start", core.ActionFunc(func(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
		if err := state.Of[note](ctx, "runs").Create(ctx, req.RequestID, note{ID: req.Job()}); err != nil {
			return nil, err
		}
		return contract.OK(contract.Effect{Type: "job.started", JobID: req.Job()}), nil
	}))
	return a
}

func TestOneOptionType(t *testing.T) {
	// Request members given to New apply to every call; a call's own win.
	h := svztest.New(t, countingAgent(t), svztest.JobID("job-default"))
	if res := h.Invoke(t, "job.start", map[string]any{"count": 1}); res.Effects[0].JobID != "job-default" {
		t.Errorf("job id from New = %s", res.JSON)
	}
	if res := h.Invoke(t, "job.start", map[string]any{"count": 1}, svztest.JobID("job-2")); res.Effects[0].JobID != "job-2" {
		t.Errorf("job id of the call = %s", res.JSON)
	}

	// AssertConfirmIdempotent takes WithState like every other option.
	runs := func() any {
		var ids []string
		for r, err := range state.Of[note](h.Context(), "runs").All(h.Context(), "") {
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, r.ID)
		}
		return ids
	}
	h.AssertConfirmIdempotent(t, "job.start", map[string]any{"count": 1}, svztest.IdempotencyKey("k-1"), svztest.WithState(runs))

	// Options meant for another place fail the test instead of being ignored.
	for _, tc := range []struct {
		name string
		call func(tb testing.TB)
		want string
	}{
		{"WithStore to Invoke", func(tb testing.TB) { h.Invoke(tb, "job.start", nil, svztest.WithStore(h.Store())) },
			"svztest: WithStore given to Invoke: it configures svztest.New"},
		{"WithState to Load", func(tb testing.TB) { h.Load(tb, "job.start", nil, svztest.WithState(runs)) },
			"svztest: WithState given to Load: it configures AssertConfirmIdempotent"},
		{"WithState to New", func(tb testing.TB) { svztest.New(tb, countingAgent(t), svztest.WithState(runs)) },
			"svztest: WithState given to svztest.New: it configures AssertConfirmIdempotent"},
	} {
		msgs, fatal := failures(t, tc.call)
		if !fatal || len(msgs) != 1 || msgs[0] != tc.want {
			t.Errorf("%s: fatal = %v, failures = %q; want %q", tc.name, fatal, msgs, tc.want)
		}
	}
}

func TestConfirmIdempotentSaysTheFirstCallWasRefused(t *testing.T) {
	h := svztest.New(t, countingAgent(t))
	msgs, fatal := failures(t, func(tb testing.TB) {
		h.AssertConfirmIdempotent(tb, "job.start", map[string]any{}, svztest.IdempotencyKey("k-1"))
	})
	if !fatal || len(msgs) != 1 || !strings.HasPrefix(msgs[0], "AssertConfirmIdempotent: the first call was refused: input_required count; the check needs a call the handler accepts") {
		t.Errorf("fatal = %v, failures = %q", fatal, msgs)
	}
}

// reviewAgent's job.start opens a job whose step awaits a review; its awaiting surface builds the
// review only for a real step (Studio always loads it on one) and answers a failure otherwise.
func reviewAgent(t *testing.T, readOnly bool) *core.Agent {
	t.Helper()
	reg, err := contract.BuildRegistration(contract.RegistrationSpec{
		AgentSlug: "r", DisplayName: "R", A2UICatalogVersion: "r.1",
		Surfaces: []contract.SurfaceSpec{contract.SurfaceID(contract.SurfaceStepAwaiting)},
		Actions:  []contract.ActionSpec{contract.ActionID("job.start"), contract.ActionID("job.stop")},
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := core.NewAgent(core.AgentConfig{Name: "R", Registration: reg})
	if err != nil {
		t.Fatal(err)
	}
	fields := []contract.FieldDefinition{{ID: "approved", Label: "Approve", Type: contract.FieldBoolean, Required: true}}
	stopped := false
	a.HandleAction("job.start", core.ActionFunc(func(_ context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
		return contract.OK(contract.Effect{Type: "job.started"}).WithJobState(&contract.JobState{
			Job: contract.Job{ID: req.Job(), AgentSlug: "r", MissionID: req.MissionID, Status: "awaiting", Source: contract.JobSource{Type: contract.SourceFreshStart}},
			Cases: []contract.Case{{ID: "c1", Steps: []contract.Step{
				{ID: "s0", Activity: contract.ActivityOperation, Status: "completed"},
				{ID: "s1", Activity: contract.ActivityOperation, Status: "awaiting", Awaiting: &contract.Awaiting{
					Reason: "review", Surface: contract.SurfaceStepAwaiting, Action: "step.awaiting.submit", Fields: fields}}}}},
		}), nil
	}))
	a.HandleAction("job.stop", core.ActionFunc(func(context.Context, *contract.ActionRequest) (*contract.ActionResult, error) {
		stopped = true
		return contract.OK(), nil
	}))
	a.HandleSurface(contract.SurfaceStepAwaiting, core.SurfaceFunc(func(ctx context.Context, req *contract.SurfaceRequest) (*contract.SurfaceResult, error) {
		if stopped || req.Job() != "svztest-check-job" || req.Case() != "c1" || req.Step() != "s1" {
			return a2ui.Failed(ctx, req.Surface, contract.ResultError{Code: "step_not_found", Message: "no such awaiting step"})
		}
		return a2ui.Result(ctx, req.Surface, a2ui.DocumentReview{
			Document: a2ui.ReviewedDocument{Title: "Report", Field: "report", Value: "# Leads", ReadOnly: readOnly},
			Submit:   a2ui.Submit{Action: "step.awaiting.submit"}, Fields: fields})
	}))
	return a
}

func TestCheckHandlersLoadsStepSurfacesOnAJob(t *testing.T) {
	// The review names a field it does not declare: the surface fails, and CheckHandlers shows it
	// because it loads the surface on the awaiting step of the job job.start opened.
	h := svztest.New(t, reviewAgent(t, false))
	msgs, fatal := failures(t, func(tb testing.TB) { h.CheckHandlers(tb, nil) })
	if fatal || len(msgs) != 1 || !strings.Contains(msgs[0], `surface case.step.awaiting answers JSON-RPC -32603 "Surface handler failed"`) {
		t.Errorf("failures = %q", msgs)
	}
	// A read-only document is valid.
	h = svztest.New(t, reviewAgent(t, true))
	h.CheckHandlers(t, nil)
}
