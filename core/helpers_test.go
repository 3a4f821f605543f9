package core_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
)

const testKey = "K-test-api-key"

// The conformance agent of spec §12.2: slug "s".
const agentName = "S"

// testRegistration declares what the tests call: two surfaces, job.start, and the workspace
// binding bootstrap ids plus one non-bootstrap binding action.
func testRegistration(t testing.TB) *contract.Registration {
	t.Helper()
	reg, err := contract.BuildRegistration(contract.RegistrationSpec{
		AgentSlug:          "s",
		DisplayName:        "S",
		A2UICatalogVersion: "s.1",
		Surfaces:           []contract.SurfaceSpec{contract.SurfaceID("job.start"), contract.SurfaceID("case.step.detail")},
		Actions: []contract.ActionSpec{
			contract.ActionID("job.start"), contract.ActionID("job.stop"),
			contract.ActionID("workspace_binding.delete"),
			contract.ActionDefinition{ID: "job.start.preview", ReadOnly: true, Scope: "job"},
		},
		WorkspaceBinding: &contract.WorkspaceBinding{Required: true, Modes: []string{"bind_existing", "create_and_bind"}},
	})
	if err != nil {
		t.Fatalf("build registration: %v", err)
	}
	return reg
}

type handlers struct {
	actions  map[string]core.ActionFunc
	surfaces map[string]core.SurfaceFunc
}

func newAgent(t testing.TB, h handlers) *core.Agent {
	t.Helper()
	a, err := core.NewAgent(core.AgentConfig{
		Name: agentName, Version: "1.0", Description: "Conformance agent", Author: "svz tests", Tags: []string{"conformance"},
		Registration: testRegistration(t),
		Introduction: &contract.Introduction{Tagline: "Answers the conformance cases", Summary: "The agent of spec §12.2.",
			ExampleGoals: []string{"Start a job"}},
		FullDescription: &contract.FullDescription{Format: "markdown", Content: "# S\n\nThe conformance agent."},
		BillingCatalog:  []contract.BillingCatalogItem{{SKU: "job", Unit: "job", Description: "One job"}},
	})
	if err != nil {
		t.Fatalf("NewAgent: %v", err)
	}
	for id, f := range h.actions {
		a.HandleAction(id, f)
	}
	for id, f := range h.surfaces {
		a.HandleSurface(id, f)
	}
	return a
}

// newController builds a controller with a local-mode authorizer (the real bypass) unless cfg
// sets one.
func newController(t testing.TB, cfg core.Config, h handlers) *core.Controller {
	t.Helper()
	if cfg.APIKey == "" {
		cfg.APIKey = testKey
	}
	if cfg.ServerID == "" {
		cfg.ServerID = "SRV-test"
	}
	if cfg.Authorizer == nil {
		cfg.Authorizer = grant.LocalBypass{ServerID: cfg.ServerID}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return time.Date(2026, 7, 8, 10, 0, 0, 123456000, time.UTC) }
	}
	c, err := core.New(cfg, newAgent(t, h))
	if err != nil {
		t.Fatalf("core.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// params is the default request of spec §12.2 with overrides (a nil value deletes the member).
func params(over map[string]any) map[string]any {
	p := map[string]any{
		"request_id": "request-1",
		"actor":      map[string]any{"user_id": "user-1"},
		"workspace":  map[string]any{"id": "workspace-1", "slug": "workspace"},
		"mission_id": "mission-1",
		"agent_slug": "s",
		"surface":    "job.start",
		"action":     "job.start",
		"input":      map[string]any{},
	}
	for k, v := range over {
		if v == nil {
			delete(p, k)
			continue
		}
		p[k] = v
	}
	return p
}

func rpcBody(t testing.TB, id any, method string, p any) []byte {
	t.Helper()
	env := map[string]any{"jsonrpc": "2.0", "method": method}
	if id != nil {
		env["id"] = id
	}
	if p != nil {
		env["params"] = p
	}
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// post sends body to POST /a2a with the test key and returns the status and the body.
func post(t testing.TB, h http.Handler, body []byte, hdr map[string]string) (int, []byte) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/a2a", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", testKey)
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

func get(t testing.TB, h http.Handler, path string, hdr map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Header(), rec.Body.Bytes()
}

// jsonEq fails unless got and want are the same JSON value.
func jsonEq(t testing.TB, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("response is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad expectation: %v", err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if !bytes.Equal(gb, wb) {
		t.Errorf("JSON differs\n got: %s\nwant: %s", gb, wb)
	}
}

func okAction(res *contract.ActionResult) core.ActionFunc {
	return func(context.Context, *contract.ActionRequest) (*contract.ActionResult, error) { return res, nil }
}

func mustContainNot(t testing.TB, body []byte, secret string) {
	t.Helper()
	if strings.Contains(string(body), secret) {
		t.Errorf("response leaks %q: %s", secret, body)
	}
}

// specAgent is the agent of spec, named by its display name (whose slug is spec.AgentSlug).
func specAgent(t testing.TB, spec contract.RegistrationSpec) *core.Agent {
	t.Helper()
	reg, err := contract.BuildRegistration(spec)
	if err != nil {
		t.Fatal(err)
	}
	a, err := core.NewAgent(core.AgentConfig{Name: spec.DisplayName, Registration: reg})
	if err != nil {
		t.Fatal(err)
	}
	return a
}
