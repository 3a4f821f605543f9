package core_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/a2ui"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/idempotency"
	"github.com/supervaize/svz/core/state"
	"github.com/supervaize/svz/core/store/memory"
)

func fptr(f float64) *float64 { return &f }

// rpc posts one JSON-RPC request and returns the answer's body.
func rpc(t testing.TB, h http.Handler, env map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	code, out := post(t, h, b, nil)
	if code != http.StatusOK {
		t.Fatalf("HTTP %d %s", code, out)
	}
	return bytes.TrimSpace(out)
}

// planAgent is an agent whose job_policy.setup declares a typed plan and whose contacts resource
// has fields: svz checks job.start, job.start.preview and resource create/update against them.
func planAgent(t *testing.T, seen *[]string) *core.Agent {
	t.Helper()
	plan := &contract.SetupPlan{Steps: []contract.SetupStep{{ID: "s", Title: "S", Fields: []contract.FieldDefinition{
		{ID: "count", Label: "Count", Type: contract.FieldInteger, Required: true, Validation: &contract.FieldValidation{Min: fptr(1)}},
		{ID: "mode", Label: "Mode", Type: contract.FieldSelect, Default: "fast", Options: []contract.FieldOption{{Value: "fast", Label: "Fast"}, {Value: "custom", Label: "Custom"}}},
		{ID: "budget", Label: "Budget", Type: contract.FieldNumber, Required: true, DependsOn: &contract.DependsOn{Field: "mode", In: []string{"custom"}}},
	}}}}
	reg, err := contract.BuildRegistration(contract.RegistrationSpec{
		AgentSlug: "s", DisplayName: "S", A2UICatalogVersion: "s.7",
		Surfaces:  []contract.SurfaceSpec{contract.SurfaceID("job.start")},
		Actions:   []contract.ActionSpec{contract.ActionID("custom.run")},
		JobPolicy: &contract.JobPolicy{Setup: &contract.JobSetupPolicy{Plan: plan}},
		Resources: []contract.ResourceDefinition{{ID: "contacts", Label: "Contacts", Operations: []string{"create", "update"},
			Fields: []contract.ResourceFieldDefinition{{ID: "email", Label: "Email", Required: true}, {ID: "owner", Label: "Owner", ReadOnly: true}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := core.NewAgent(core.AgentConfig{Name: "S", Registration: reg})
	if err != nil {
		t.Fatal(err)
	}
	record := core.ActionFunc(func(_ context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
		*seen = append(*seen, req.Action+" "+string(req.Input))
		return contract.OK(contract.Effect{Type: "ran"}), nil
	})
	for _, id := range []string{"job.start", "job.start.preview", "step.awaiting.submit", "resource.contacts.create", "resource.contacts.update", "custom.run"} {
		a.HandleAction(id, record)
	}
	a.DeclareInput("custom.run", []contract.FieldDefinition{{ID: "when", Label: "When", Type: contract.FieldDate, Required: true}})
	return a
}

func TestDeclaredInputIsCheckedBeforeTheHandler(t *testing.T) {
	var seen []string
	s := memory.New()
	c, err := core.New(core.Config{APIKey: testKey, ServerID: "SRV", Authorizer: grant.LocalBypass{ServerID: "SRV"}, Store: s, Gate: idempotency.New(s)}, planAgent(t, &seen))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	invoke := func(action, input string, extra map[string]any) string {
		p := map[string]any{"request_id": "r", "actor": map[string]any{"user_id": "u"}, "workspace": map[string]any{"id": "w"},
			"mission_id": "m", "agent_slug": "s", "surface": "job.start", "action": action, "input": json.RawMessage(input)}
		for k, v := range extra {
			p[k] = v
		}
		var resp struct {
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(rpc(t, c, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "supervaizer/action.invoke", "params": p}), &resp); err != nil {
			t.Fatal(err)
		}
		return string(resp.Result)
	}
	key := map[string]any{"idempotency_key": "k-1", "job_id": "job-1"}
	for _, tc := range []struct{ action, input, want string }{
		{"job.start", `{"count":"0","mode":"custom"}`, `{"status":"error","effects":[],"errors":[` +
			`{"code":"input_min","message":"Input should be greater than or equal to 1","field":"count"},` +
			`{"code":"input_required","message":"Field required","field":"budget"}]}`},
		{"job.start.preview", `{"mode":"slow"}`, `{"status":"error","effects":[],"errors":[{"code":"input_option","message":"Input should be 'fast' or 'custom'","field":"mode"}]}`},
		{"resource.contacts.create", `{"owner":"x"}`, `{"status":"error","effects":[],"errors":[{"code":"input_required","message":"Field required","field":"email"}]}`},
		{"custom.run", `{"when":"tomorrow"}`, `{"status":"error","effects":[],"errors":[{"code":"input_type","message":"Input should be a valid date in the format YYYY-MM-DD","field":"when"}]}`},
	} {
		if got := invoke(tc.action, tc.input, key); got != tc.want {
			t.Errorf("%s %s = %s\nwant %s", tc.action, tc.input, got, tc.want)
		}
	}
	if len(seen) != 0 {
		t.Errorf("a handler ran on refused input: %q", seen)
	}
	// The same key with the corrected input runs: the refusal did not consume it. The handler
	// gets the coerced input (defaults in, inactive fields out, read-only members dropped).
	for _, tc := range []struct{ action, input string }{
		{"job.start", `{"count":"2","budget":"junk"}`},
		{"job.start.preview", `{"budget":5}`},
		{"resource.contacts.create", `{"email":"a@b","owner":"forged"}`},
		{"resource.contacts.update", `{"owner":"forged","email":"a@b"}`},
		{"step.awaiting.submit", `{"anything":1}`},
		{"custom.run", `{"when":"2026-01-31"}`},
	} {
		if got := invoke(tc.action, tc.input, key); !strings.HasPrefix(got, `{"status":"ok"`) {
			t.Errorf("%s %s = %s", tc.action, tc.input, got)
		}
	}
	want := []string{
		`job.start {"count":2,"mode":"fast"}`, `job.start.preview {}`, `resource.contacts.create {"email":"a@b"}`,
		`resource.contacts.update {"email":"a@b"}`, `step.awaiting.submit {"anything":1}`, `custom.run {"when":"2026-01-31"}`,
	}
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Errorf("handlers saw\n%s\nwant\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
}

func TestDeclareInputMistakes(t *testing.T) {
	var seen []string
	a := planAgent(t, &seen)
	a.DeclareInput("undeclared", nil)
	a.DeclareInput("custom.run", []contract.FieldDefinition{{ID: "x", Label: "X"}, {ID: "x", Label: "X again"}, {ID: "l", Label: "L", Type: "list"}})
	_, err := core.New(core.Config{APIKey: testKey, Authorizer: grant.LocalBypass{}}, a)
	for _, want := range []string{`input fields for undeclared action "undeclared"`, `field "x" is declared twice`, `item_fields is required when type is list`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New = %v; want it to report %q", err, want)
		}
	}
}

// verifiedAs is an authorizer that proves a workspace other than the one the request names.
type verifiedAs string

func (v verifiedAs) Authorize(_ context.Context, call grant.Call) (*contract.VerifiedWorkspaceContext, error) {
	return &contract.VerifiedWorkspaceContext{GrantID: "g", WorkspaceID: string(v), AgentSlug: call.AgentSlug, Scopes: call.RequiredScopes()}, nil
}

// TestHandlersReachStateOfTheVerifiedWorkspace: handlers get the state scope of the workspace the
// grant proves, whatever workspace the request names, and the agent's A2UI versions.
func TestHandlersReachStateOfTheVerifiedWorkspace(t *testing.T) {
	s := memory.New()
	a := newAgent(t, handlers{
		actions: map[string]core.ActionFunc{"job.start": func(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
			err := state.Of[map[string]string](ctx, "jobs").Create(ctx, "job-1", map[string]string{"by": req.Workspace.ID})
			return contract.OK(), err
		}},
		surfaces: map[string]core.SurfaceFunc{"job.start": func(ctx context.Context, req *contract.SurfaceRequest) (*contract.SurfaceResult, error) {
			n := 0
			for range state.Of[map[string]string](ctx, "jobs").All(ctx, "") {
				n++
			}
			return a2ui.Result(ctx, req.Surface, a2ui.Form{Title: strings.Repeat("j", n), Submit: a2ui.Submit{Action: "job.start"}})
		}},
	})
	c, err := core.New(core.Config{APIKey: testKey, ServerID: "SRV", Authorizer: verifiedAs("ws-proven"), Store: s}, a)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	params := map[string]any{"request_id": "r", "actor": map[string]any{"user_id": "u"}, "workspace": map[string]any{"id": "ws-spoofed"},
		"mission_id": "m", "agent_slug": "s", "surface": "job.start", "action": "job.start"}
	if out := rpc(t, c, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "supervaizer/action.invoke", "params": params}); !strings.Contains(string(out), `"status":"ok"`) {
		t.Fatalf("job.start = %s", out)
	}
	proven := state.NewContext(context.Background(), s, "s", "ws-proven")
	if v, err := state.Of[map[string]string](proven, "jobs").Get(proven, "job-1"); err != nil || v["by"] != "ws-spoofed" {
		t.Errorf("record in the proven workspace = %v, %v", v, err)
	}
	spoofed := state.NewContext(context.Background(), s, "s", "ws-spoofed")
	if _, err := state.Of[map[string]string](spoofed, "jobs").Get(spoofed, "job-1"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("record under the request's workspace: %v, want none", err)
	}
	out := rpc(t, c, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "supervaizer/surface.load", "params": params})
	want := `{"jsonrpc":"2.0","id":1,"result":{"surface":"job.start","a2ui_version":"v0.8","a2ui_catalog_version":"s.1",` +
		`"document":{"type":"Form","title":"j","fields":[],"submit":{"action":"job.start"}}}}`
	if string(out) != want {
		t.Errorf("surface = %s\nwant %s", out, want)
	}
}

func TestServeResourceOfAnUndeclaredResource(t *testing.T) {
	a := newAgent(t, handlers{})
	core.ServeResource[map[string]any](a, "contacts", "email")
	if _, err := core.New(core.Config{APIKey: testKey, Authorizer: grant.LocalBypass{}}, a); err == nil || !strings.Contains(err.Error(), `no resource "contacts" is declared`) {
		t.Errorf("New = %v", err)
	}
}

// TestDataResourceCallbacksReachState: DataResource callbacks get the state scope of the verified
// workspace too, whatever workspace header the call carries.
func TestDataResourceCallbacksReachState(t *testing.T) {
	type item struct {
		ID string `json:"id"`
	}
	a := newAgent(t, handlers{})
	a.AddDataResource(core.DataResource[item]{Name: "items", List: func(ctx context.Context, _ *core.DataContext) ([]item, error) {
		var out []item
		for r, err := range state.Of[item](ctx, "items").All(ctx, "") {
			if err != nil {
				return nil, err
			}
			out = append(out, r.Value)
		}
		return out, nil
	}})
	s := memory.New()
	proven := state.NewContext(context.Background(), s, "s", "ws-proven")
	if err := state.Of[item](proven, "items").Create(proven, "i-1", item{ID: "i-1"}); err != nil {
		t.Fatal(err)
	}
	c, err := core.New(core.Config{APIKey: testKey, ServerID: "SRV", Authorizer: verifiedAs("ws-proven"), Store: s}, a)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp := dreq{"GET", "/api/agents/s/data/items/", map[string]string{core.HeaderWorkspaceID: "ws-spoofed"}, ""}.do(t, c, "token")
	if resp.Code != http.StatusOK || !strings.Contains(resp.Body.String(), `"id":"i-1"`) {
		t.Errorf("list = %d %s; want the proven workspace's record", resp.Code, resp.Body)
	}
}
