package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
)

const (
	actionInvoke = "supervaizer/action.invoke"
	surfaceLoad  = "supervaizer/surface.load"
)

// TestRPCErrors covers every JSON-RPC error class of spec §2.6 and the standard parse/batch
// errors, with exact bodies (spec §12.2 cases 5–8 included).
func TestRPCErrors(t *testing.T) {
	c := newController(t, core.Config{}, handlers{})
	cases := []struct {
		name string
		body string
		want string
	}{
		{"parse error", `{"jsonrpc": "2.0", "id": 1,`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`},
		{"empty body", ``, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"x"}]`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request","data":{"detail":"batch requests are not supported: send one request object per call"}}}`},
		{"scalar", `42`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request","data":{"detail":"the request must be a JSON object"}}}`},
		{"case 5: unknown method", `{"jsonrpc":"2.0","id":"rpc-1","method":"missing.method"}`,
			`{"jsonrpc":"2.0","id":"rpc-1","error":{"code":-32601,"message":"Method not found: missing.method"}}`},
		{"case 6: no id, no id back", `{"jsonrpc":"2.0","method":"missing.method"}`,
			`{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found: missing.method"}}`},
		{"null id, no id back", `{"jsonrpc":"2.0","id":null,"method":"missing.method"}`,
			`{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found: missing.method"}}`},
		{"jsonrpc may be omitted", `{"id":3,"method":"missing.method"}`,
			`{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"Method not found: missing.method"}}`},
		{"integral float id is an integer", `{"id":7.0,"method":"missing.method"}`,
			`{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"Method not found: missing.method"}}`},
		{"case 7: jsonrpc 1.0", `{"jsonrpc":"1.0","id":5,"method":"supervaizer/action.invoke"}`,
			`{"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"Invalid JSON-RPC request","data":{"errors":[{"type":"literal_error","loc":["jsonrpc"],"msg":"Input should be '2.0'"}]}}}`},
		{"case 7: params is a list", `{"jsonrpc":"2.0","id":5,"method":"supervaizer/action.invoke","params":[1,2]}`,
			`{"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"Invalid JSON-RPC request","data":{"errors":[{"type":"dict_type","loc":["params"],"msg":"Input should be a valid dictionary"}]}}}`},
		{"bool id read as an integer, also in an invalid envelope", `{"jsonrpc":"1","id":true,"method":"m"}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Invalid JSON-RPC request","data":{"errors":[{"type":"literal_error","loc":["jsonrpc"],"msg":"Input should be '2.0'"}]}}}`},
		{"method missing", `{"jsonrpc":"2.0","id":"a"}`,
			`{"jsonrpc":"2.0","id":"a","error":{"code":-32602,"message":"Invalid JSON-RPC request","data":{"errors":[{"type":"missing","loc":["method"],"msg":"Field required"}]}}}`},
		{"method not a string, bad id not echoed", `{"jsonrpc":"2.0","id":{"x":1},"method":7}`,
			`{"jsonrpc":"2.0","error":{"code":-32602,"message":"Invalid JSON-RPC request","data":{"errors":[{"type":"id_type","loc":["id"],"msg":"Input should be a valid string or integer"},{"type":"string_type","loc":["method"],"msg":"Input should be a valid string"}]}}}`},
		{"case 8: action request incomplete", `{"jsonrpc":"2.0","id":8,"method":"supervaizer/action.invoke","params":{"request_id":"r"}}`,
			`{"jsonrpc":"2.0","id":8,"error":{"code":-32602,"message":"Invalid Supervaizer v2 action request","data":{"errors":[` +
				`{"type":"missing","loc":["actor"],"msg":"Field required"},{"type":"missing","loc":["workspace"],"msg":"Field required"},` +
				`{"type":"missing","loc":["mission_id"],"msg":"Field required"},{"type":"missing","loc":["agent_slug"],"msg":"Field required"},` +
				`{"type":"missing","loc":["surface"],"msg":"Field required"},{"type":"missing","loc":["action"],"msg":"Field required"}]}}}`},
		{"numeric request_id is not coerced", string(rpcBody(t, 9, actionInvoke, params(map[string]any{"request_id": 12}))),
			`{"jsonrpc":"2.0","id":9,"error":{"code":-32602,"message":"Invalid Supervaizer v2 action request","data":{"errors":[{"type":"string_type","loc":["request_id"],"msg":"Input should be a valid string"}]}}}`},
		{"nested errors carry their path", string(rpcBody(t, 10, actionInvoke, params(map[string]any{"actor": map[string]any{}, "workspace": map[string]any{"id": 3}, "input": "x"}))),
			`{"jsonrpc":"2.0","id":10,"error":{"code":-32602,"message":"Invalid Supervaizer v2 action request","data":{"errors":[` +
				`{"type":"missing","loc":["actor","user_id"],"msg":"Field required"},{"type":"string_type","loc":["workspace","id"],"msg":"Input should be a valid string"},` +
				`{"type":"dict_type","loc":["input"],"msg":"Input should be a valid dictionary"}]}}}`},
		{"mission must match mission_id", string(rpcBody(t, 11, actionInvoke, params(map[string]any{"mission": map[string]any{"id": "other", "metadata": "{}"}}))),
			`{"jsonrpc":"2.0","id":11,"error":{"code":-32602,"message":"Invalid Supervaizer v2 action request","data":{"errors":[` +
				`{"type":"dict_type","loc":["mission","metadata"],"msg":"Input should be a valid dictionary; mission metadata must be a JSON object"},` +
				`{"type":"value_error","loc":["mission"],"msg":"Value error, mission.id must equal mission_id"}]}}}`},
		{"surface request incomplete", `{"jsonrpc":"2.0","id":12,"method":"supervaizer/surface.load","params":{}}`,
			`{"jsonrpc":"2.0","id":12,"error":{"code":-32602,"message":"Invalid Supervaizer v2 surface request","data":{"errors":[` +
				`{"type":"missing","loc":["request_id"],"msg":"Field required"},{"type":"missing","loc":["actor"],"msg":"Field required"},` +
				`{"type":"missing","loc":["workspace"],"msg":"Field required"},{"type":"missing","loc":["mission_id"],"msg":"Field required"},` +
				`{"type":"missing","loc":["agent_slug"],"msg":"Field required"},{"type":"missing","loc":["surface"],"msg":"Field required"}]}}}`},
		{"unknown agent (local mode)", string(rpcBody(t, 13, actionInvoke, params(map[string]any{"agent_slug": "nope"}))),
			`{"jsonrpc":"2.0","id":13,"error":{"code":-32030,"message":"Unknown agent_slug for workspace authorization: nope","data":{"code":"workspace_authorization_unknown_agent"}}}`},
		{"case 13: no action handler", string(rpcBody(t, 14, actionInvoke, params(nil))),
			`{"jsonrpc":"2.0","id":14,"error":{"code":-32010,"message":"Action handler not registered: job.start","data":{"agent_slug":"s","action":"job.start"}}}`},
		{"case 13: no surface handler", string(rpcBody(t, 15, surfaceLoad, params(nil))),
			`{"jsonrpc":"2.0","id":15,"error":{"code":-32011,"message":"Surface handler not registered: job.start","data":{"agent_slug":"s","surface":"job.start"}}}`},
		{"bootstrap action of an unknown agent", string(rpcBody(t, 16, actionInvoke, params(map[string]any{"agent_slug": "nope", "action": "workspace_binding.options"}))),
			`{"jsonrpc":"2.0","id":16,"error":{"code":-32010,"message":"Action handler not registered: workspace_binding.options","data":{"agent_slug":"nope","action":"workspace_binding.options"}}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, c, []byte(tc.body), nil)
			if status != http.StatusOK {
				t.Fatalf("status %d, want 200: %s", status, body)
			}
			jsonEq(t, body, tc.want)
		})
	}
}

// TestNotConfigured is spec §12.2 case 9: without trust material outside local mode every
// non-bootstrap call is refused before any handler runs; bootstrap calls run (case 12).
func TestNotConfigured(t *testing.T) {
	var ran atomic.Int32
	var gotCtx atomic.Pointer[contract.VerifiedWorkspaceContext]
	count := func(res *contract.ActionResult) core.ActionFunc {
		return func(_ context.Context, r *contract.ActionRequest) (*contract.ActionResult, error) {
			ran.Add(1)
			if r.WorkspaceAuthorization != nil {
				gotCtx.Store(r.WorkspaceAuthorization)
			}
			return res, nil
		}
	}
	ok := &contract.ActionResult{Status: "ok", Effects: []contract.Effect{{Type: "bound"}}}
	c := newController(t, core.Config{Authorizer: grant.NotConfigured{}}, handlers{
		actions: map[string]core.ActionFunc{
			"job.start": count(ok), "workspace_binding.options": count(ok), "workspace_binding.delete": count(ok),
			"workspace_binding.create": count(ok),
		},
		surfaces: map[string]core.SurfaceFunc{"workspace_binding.create": func(_ context.Context, r *contract.SurfaceRequest) (*contract.SurfaceResult, error) {
			ran.Add(1)
			return &contract.SurfaceResult{Surface: r.Surface, Document: json.RawMessage(`{"type":"Form"}`)}, nil
		}},
	})
	notConfigured := `{"code":-32030,"message":"Workspace authorization is required but is not configured for this Supervaizer server","data":{"code":"workspace_authorization_not_configured"}}`
	for _, tc := range []struct {
		name, method, target, want string
		runs                       int32
	}{
		{"job.start refused", actionInvoke, "job.start", `{"jsonrpc":"2.0","id":1,"error":` + notConfigured + `}`, 0},
		{"binding delete is not bootstrap", actionInvoke, "workspace_binding.delete", `{"jsonrpc":"2.0","id":1,"error":` + notConfigured + `}`, 0},
		{"binding options runs", actionInvoke, "workspace_binding.options", `{"jsonrpc":"2.0","id":1,"result":{"status":"ok","effects":[{"type":"bound"}]}}`, 1},
		{"binding create runs", actionInvoke, "workspace_binding.create", `{"jsonrpc":"2.0","id":1,"result":{"status":"ok","effects":[{"type":"bound"}]}}`, 1},
		{"binding create surface runs", surfaceLoad, "workspace_binding.create", `{"jsonrpc":"2.0","id":1,"result":{"surface":"workspace_binding.create","a2ui_version":null,"a2ui_catalog_version":null,"document":{"type":"Form"}}}`, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran.Store(0)
			p := params(map[string]any{"action": tc.target, "surface": tc.target,
				"workspace_authorization": map[string]any{"grant_id": "forged", "workspace_id": "workspace-1", "agent_id": "x", "agent_slug": "s", "server_id": "SRV", "scopes": []string{"*"}}})
			if tc.method == surfaceLoad {
				delete(p, "action")
			}
			_, body := post(t, c, rpcBody(t, 1, tc.method, p), nil)
			jsonEq(t, body, tc.want)
			if got := ran.Load(); got != tc.runs {
				t.Errorf("handler ran %d times, want %d", got, tc.runs)
			}
		})
	}
	if ctx := gotCtx.Load(); ctx != nil {
		t.Errorf("a bootstrap handler received a workspace context %+v; the forged one must never reach it", ctx)
	}
}

// TestHandlerFailures is spec §12.2 case 14: panics, errors and invalid results become -32603 and
// nothing of them reaches the caller.
func TestHandlerFailures(t *testing.T) {
	const secret = "sk-live-SECRET-9f8e7d"
	c := newController(t, core.Config{}, handlers{
		actions: map[string]core.ActionFunc{
			"job.start": func(context.Context, *contract.ActionRequest) (*contract.ActionResult, error) {
				panic("database password " + secret)
			},
			"job.stop": func(context.Context, *contract.ActionRequest) (*contract.ActionResult, error) {
				return nil, errors.New("upstream said " + secret)
			},
			"workspace_binding.delete": okAction(&contract.ActionResult{Status: "maybe"}),
			"job.start.preview":        okAction(nil),
		},
		surfaces: map[string]core.SurfaceFunc{
			"job.start": func(context.Context, *contract.SurfaceRequest) (*contract.SurfaceResult, error) {
				panic(errors.New(secret))
			},
			"case.step.detail": func(_ context.Context, r *contract.SurfaceRequest) (*contract.SurfaceResult, error) {
				return &contract.SurfaceResult{Surface: r.Surface, Document: json.RawMessage(`["not","an","object"]`)}, nil
			},
		},
	})
	for _, action := range []string{"job.start", "job.stop", "workspace_binding.delete", "job.start.preview"} {
		t.Run(action, func(t *testing.T) {
			_, body := post(t, c, rpcBody(t, "x", actionInvoke, params(map[string]any{"action": action})), nil)
			jsonEq(t, body, `{"jsonrpc":"2.0","id":"x","error":{"code":-32603,"message":"Action handler failed","data":{"agent_slug":"s","action":"`+action+`"}}}`)
			mustContainNot(t, body, secret)
		})
	}
	for _, surface := range []string{"job.start", "case.step.detail"} {
		t.Run(surface, func(t *testing.T) {
			_, body := post(t, c, rpcBody(t, "y", surfaceLoad, params(map[string]any{"surface": surface})), nil)
			jsonEq(t, body, `{"jsonrpc":"2.0","id":"y","error":{"code":-32603,"message":"Surface handler failed","data":{"agent_slug":"s","surface":"`+surface+`"}}}`)
			mustContainNot(t, body, secret)
		})
	}
}

// TestResults covers the two null/omit regimes (spec §12.2 cases 15–16) and what handlers see.
func TestResults(t *testing.T) {
	var seen atomic.Pointer[contract.ActionRequest]
	c := newController(t, core.Config{}, handlers{
		actions: map[string]core.ActionFunc{
			"job.start": func(_ context.Context, r *contract.ActionRequest) (*contract.ActionResult, error) {
				seen.Store(r)
				return &contract.ActionResult{Status: "ok", ReplaySafety: &contract.ReplaySafety{DedupeKeys: []string{"job-123", "rev-1"}}}, nil
			},
		},
		surfaces: map[string]core.SurfaceFunc{
			"job.start": func(_ context.Context, r *contract.SurfaceRequest) (*contract.SurfaceResult, error) {
				v := "v0.8"
				return &contract.SurfaceResult{Surface: r.Surface, A2UIVersion: &v, Document: json.RawMessage(`{"type":"Form","fields":[]}`)}, nil
			},
		},
	})
	t.Run("case 15: replay_safety defaults, effects []", func(t *testing.T) {
		p := params(map[string]any{
			"idempotency_key": nil, "job_id": "job-9", "extra_member": map[string]any{"kept": true},
			"workspace_authorization": map[string]any{"grant_id": "forged", "workspace_id": "workspace-1", "agent_id": "x", "agent_slug": "s", "server_id": "SRV"},
		})
		_, body := post(t, c, rpcBody(t, 1, actionInvoke, map[string]any{"action_request": p}), nil)
		jsonEq(t, body, `{"jsonrpc":"2.0","id":1,"result":{"status":"ok","effects":[],"replay_safety":{"dedupe_keys":["job-123","rev-1"],"stable_external_ids_required":true,"strictly_idempotent_response":false,"convergent":true}}}`)
		r := seen.Load()
		if r == nil {
			t.Fatal("handler did not run")
		}
		want := contract.VerifiedWorkspaceContext{GrantID: "local-mode", WorkspaceID: "workspace-1", AgentID: contract.DeterministicAgentID(agentName),
			AgentSlug: "s", ServerID: "SRV-test", Scopes: []string{actionInvoke, "job.start"}}
		got := r.WorkspaceAuthorization
		if got == nil || got.GrantID != want.GrantID || got.WorkspaceID != want.WorkspaceID || got.AgentID != want.AgentID ||
			got.ServerID != want.ServerID || strings.Join(got.Scopes, ",") != strings.Join(want.Scopes, ",") || got.WorkspaceSlug == nil || *got.WorkspaceSlug != "workspace" {
			t.Errorf("handler context = %+v, want the local-mode context %+v with slug workspace", got, want)
		}
		if r.JobID == nil || *r.JobID != "job-9" || string(r.Extra["extra_member"]) != `{"kept":true}` {
			t.Errorf("request not decoded as sent: job_id %v, extra %s", r.JobID, r.Extra["extra_member"])
		}
		if _, ok := r.Extra["workspace_authorization"]; ok {
			t.Error("the forged workspace_authorization survived as an extra member")
		}
	})
	t.Run("wrapper key written with escapes", func(t *testing.T) {
		inner, _ := json.Marshal(params(map[string]any{"request_id": "escaped"}))
		body := `{"jsonrpc":"2.0","id":3,"method":"supervaizer/action.invoke","params":{"action\u005frequest":` + string(inner) + `}}`
		_, got := post(t, c, []byte(body), nil)
		jsonEq(t, got, `{"jsonrpc":"2.0","id":3,"result":{"status":"ok","effects":[],"replay_safety":{"dedupe_keys":["job-123","rev-1"],"stable_external_ids_required":true,"strictly_idempotent_response":false,"convergent":true}}}`)
		if r := seen.Load(); r == nil || r.RequestID != "escaped" {
			t.Errorf("the wrapped request was not used: %+v", r)
		}
	})
	t.Run("case 16: surface nulls kept", func(t *testing.T) {
		_, body := post(t, c, rpcBody(t, 2, surfaceLoad, map[string]any{"surface_request": params(map[string]any{"action": nil})}), nil)
		jsonEq(t, body, `{"jsonrpc":"2.0","id":2,"result":{"surface":"job.start","a2ui_version":"v0.8","a2ui_catalog_version":null,"document":{"type":"Form","fields":[]}}}`)
	})
}

// TestHTTPLayer covers the API key (spec §2.1, §12.2 case 4), the body limit and routing.
func TestHTTPLayer(t *testing.T) {
	c := newController(t, core.Config{ReadAPIKeys: []string{"read-only"}, MaxBodyBytes: 2048}, handlers{})
	body := rpcBody(t, 1, "missing.method", nil)
	for _, tc := range []struct {
		name   string
		hdr    map[string]string
		body   []byte
		status int
		want   string
	}{
		{"no key", map[string]string{"X-API-Key": ""}, body, 401, `{"detail":"Invalid or missing API key"}`},
		{"wrong key", map[string]string{"X-API-Key": "K-test-api-kez"}, body, 401, `{"detail":"Invalid or missing API key"}`},
		{"key prefix", map[string]string{"X-API-Key": "K-test"}, body, 401, `{"detail":"Invalid or missing API key"}`},
		{"read key cannot write", map[string]string{"X-API-Key": "read-only"}, body, 403, `{"detail":"Insufficient scope"}`},
		{"key checked before the body", map[string]string{"X-API-Key": ""}, []byte(`{"jsonrpc":`), 401, `{"detail":"Invalid or missing API key"}`},
		{"any content type", map[string]string{"Content-Type": "text/plain"}, body, 200,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found: missing.method"}}`},
		{"no content type", map[string]string{"Content-Type": ""}, body, 200,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found: missing.method"}}`},
		{"over the limit", nil, []byte(`{"pad":"` + strings.Repeat("a", 3000) + `"}`), 413, `{"detail":"Request body too large: the limit is 2048 bytes"}`},
		{"at the limit", nil, []byte(`{"method":"m","pad":"` + strings.Repeat("a", 2048-len(`{"method":"m","pad":""}`)) + `"}`), 200,
			`{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found: m"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, got := post(t, c, tc.body, tc.hdr)
			if status != tc.status {
				t.Errorf("status %d, want %d", status, tc.status)
			}
			jsonEq(t, got, tc.want)
		})
	}
	t.Run("events need a key", func(t *testing.T) {
		status, _, got := get(t, c, "/a2a/events", nil)
		if status != 401 {
			t.Errorf("status %d, want 401", status)
		}
		jsonEq(t, got, `{"detail":"Invalid or missing API key"}`)
	})
	t.Run("routing", func(t *testing.T) {
		for _, tc := range []struct {
			method, path string
			status       int
			want         string
		}{
			{"GET", "/nope", 404, `{"detail":"Not Found"}`},
			{"GET", "/a2a", 405, `{"detail":"Method Not Allowed"}`},
			{"POST", "/.well-known/health", 405, `{"detail":"Method Not Allowed"}`},
			{"GET", "/.well-known/agents/nonexistent_agent.json", 404, `{"detail":"Not Found"}`},
			{"GET", "/.well-known/agents/v2.0/s_agent.json", 404, `{"detail":"Not Found"}`},
			{"GET", "/.well-known/agents/v1.0/s_agent.json/x", 404, `{"detail":"Not Found"}`},
		} {
			req, _ := http.NewRequest(tc.method, tc.path, nil)
			rec := httptest.NewRecorder()
			c.ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Errorf("%s %s: status %d, want %d", tc.method, tc.path, rec.Code, tc.status)
			}
			jsonEq(t, rec.Body.Bytes(), tc.want)
			if rec.Header().Get("X-Content-Type-Options") != "nosniff" || rec.Header().Get("Referrer-Policy") != "no-referrer" {
				t.Errorf("%s %s: security headers missing: %v", tc.method, tc.path, rec.Header())
			}
		}
	})
}

// TestNewRejectsMistakes: handler registration errors surface at start, all at once.
func TestNewRejectsMistakes(t *testing.T) {
	a := newAgent(t, handlers{})
	noop := okAction(&contract.ActionResult{Status: "ok"})
	a.HandleAction("job.unknown", noop)
	a.HandleAction("job.start", noop)
	a.HandleAction("job.start", noop)
	a.HandleSurface("mission.analytics", core.SurfaceFunc(func(context.Context, *contract.SurfaceRequest) (*contract.SurfaceResult, error) { return nil, nil }))
	a.HandleAction("job.stop", nil)
	_, err := core.New(core.Config{APIKey: "k", Authorizer: grant.NotConfigured{}, StudioAgentIDs: map[string]string{"ghost": "1"}}, a, a)
	if err == nil {
		t.Fatal("New accepted broken handler registrations")
	}
	for _, want := range []string{
		`agent "s": handler for undeclared action "job.unknown": declare it in the registration's actions`,
		`agent "s": two handlers for action "job.start"`,
		`agent "s": handler for undeclared surface "mission.analytics": declare it in the registration's surfaces`,
		`agent "s": nil handler for action "job.stop"`,
		`two agents have the slug "s"`,
		`SUPERVAIZER_STUDIO_AGENT_IDS names "ghost", which this controller does not serve`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if _, err := core.New(core.Config{}, newAgent(t, handlers{})); err == nil ||
		!strings.Contains(err.Error(), "an API key is required (SUPERVAIZER_API_KEY)") || !strings.Contains(err.Error(), "a workspace authorizer is required") {
		t.Errorf("New without key and authorizer: %v", err)
	}
}

func TestNewAgentRejectsSlugMismatch(t *testing.T) {
	_, err := core.NewAgent(core.AgentConfig{Name: "Other Agent", Registration: testRegistration(t)})
	if err == nil || err.Error() != "Supervaizer v2 registration agent.slug must match Agent.slug: 's' != 'other-agent'" {
		t.Errorf("err = %v", err)
	}
	_, err = core.NewAgent(core.AgentConfig{Name: "S", ID: "wrong", Registration: testRegistration(t)})
	want := "Agent id 'wrong' does not match deterministic id for name 'S' ('" + contract.DeterministicAgentID("S") + "'); omit id or use the expected value"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
}

// failingAuthorizer fails every call the way no refusal does (a store or network fault).
type failingAuthorizer struct{ err error }

func (a failingAuthorizer) Authorize(context.Context, grant.Call) (*contract.VerifiedWorkspaceContext, error) {
	return nil, a.err
}

// TestAuthorizerFailure: an authorizer failure that is not a refusal is a JSON-RPC internal error
// (HTTP 200, no data, the id echoed, nothing of the cause), never -32030, and no handler runs.
// The reference answers HTTP 500 with its error body there (docs/differences.md).
func TestAuthorizerFailure(t *testing.T) {
	const secret = "jwks fetch https://user:pa55@keys.example/jwks failed"
	ran := false
	c := newController(t, core.Config{Authorizer: failingAuthorizer{errors.New(secret)}}, handlers{
		actions: map[string]core.ActionFunc{"job.start": func(context.Context, *contract.ActionRequest) (*contract.ActionResult, error) {
			ran = true
			return &contract.ActionResult{Status: "ok"}, nil
		}},
	})
	for _, tc := range []struct {
		name string
		id   any
		want string
	}{
		{"action", "rpc-7", `{"jsonrpc":"2.0","id":"rpc-7","error":{"code":-32603,"message":"Internal error"}}`},
		{"no id", nil, `{"jsonrpc":"2.0","error":{"code":-32603,"message":"Internal error"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, c, rpcBody(t, tc.id, actionInvoke, params(nil)), nil)
			if status != http.StatusOK {
				t.Errorf("status %d, want 200", status)
			}
			jsonEq(t, body, tc.want)
			mustContainNot(t, body, "pa55")
		})
	}
	_, body := post(t, c, rpcBody(t, 3, surfaceLoad, params(nil)), nil)
	jsonEq(t, body, `{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"Internal error"}}`)
	if ran {
		t.Error("a handler ran although the call was not authorized")
	}
}

// TestNotifications: a request without an id, or with a null one, is served like any other and
// answered without an id member, whatever the outcome (the reference dumps its envelope with
// exclude_none: spec §2.1, §12.2 case 6).
func TestNotifications(t *testing.T) {
	ran := 0
	h := handlers{
		actions: map[string]core.ActionFunc{
			"job.start": func(context.Context, *contract.ActionRequest) (*contract.ActionResult, error) {
				ran++
				return &contract.ActionResult{Status: "ok", Effects: []contract.Effect{{Type: "job.started", JobID: "job-1"}}}, nil
			},
			"job.stop": func(context.Context, *contract.ActionRequest) (*contract.ActionResult, error) {
				return nil, errors.New("boom")
			},
		},
		surfaces: map[string]core.SurfaceFunc{"job.start": func(_ context.Context, r *contract.SurfaceRequest) (*contract.SurfaceResult, error) {
			return &contract.SurfaceResult{Surface: r.Surface, Document: json.RawMessage(`{}`)}, nil
		}},
	}
	local := newController(t, core.Config{}, h)
	refusing := newController(t, core.Config{Authorizer: grant.NotConfigured{}}, h)
	for _, tc := range []struct {
		name   string
		c      *core.Controller
		method string
		params any
		want   string
	}{
		{"action result", local, actionInvoke, params(nil),
			`{"jsonrpc":"2.0","result":{"status":"ok","effects":[{"type":"job.started","job_id":"job-1"}]}}`},
		{"surface result", local, surfaceLoad, params(nil),
			`{"jsonrpc":"2.0","result":{"surface":"job.start","a2ui_version":null,"a2ui_catalog_version":null,"document":{}}}`},
		{"invalid params", local, actionInvoke, map[string]any{"request_id": 1},
			`{"jsonrpc":"2.0","error":{"code":-32602,"message":"Invalid Supervaizer v2 action request","data":{"errors":[` +
				`{"type":"string_type","loc":["request_id"],"msg":"Input should be a valid string"},{"type":"missing","loc":["actor"],"msg":"Field required"},` +
				`{"type":"missing","loc":["workspace"],"msg":"Field required"},{"type":"missing","loc":["mission_id"],"msg":"Field required"},` +
				`{"type":"missing","loc":["agent_slug"],"msg":"Field required"},{"type":"missing","loc":["surface"],"msg":"Field required"},` +
				`{"type":"missing","loc":["action"],"msg":"Field required"}]}}}`},
		{"action not registered", local, actionInvoke, params(map[string]any{"action": "workspace_binding.delete"}),
			`{"jsonrpc":"2.0","error":{"code":-32010,"message":"Action handler not registered: workspace_binding.delete","data":{"agent_slug":"s","action":"workspace_binding.delete"}}}`},
		{"handler failed", local, actionInvoke, params(map[string]any{"action": "job.stop"}),
			`{"jsonrpc":"2.0","error":{"code":-32603,"message":"Action handler failed","data":{"agent_slug":"s","action":"job.stop"}}}`},
		{"workspace authorization", refusing, actionInvoke, params(nil),
			`{"jsonrpc":"2.0","error":{"code":-32030,"message":"Workspace authorization is required but is not configured for this Supervaizer server","data":{"code":"workspace_authorization_not_configured"}}}`},
	} {
		for _, id := range []string{"absent", "null"} {
			t.Run(tc.name+"/"+id, func(t *testing.T) {
				env := map[string]any{"jsonrpc": "2.0", "method": tc.method, "params": tc.params}
				if id == "null" {
					env["id"] = nil
				}
				body, err := json.Marshal(env)
				if err != nil {
					t.Fatal(err)
				}
				status, got := post(t, tc.c, body, nil)
				if status != http.StatusOK {
					t.Errorf("status %d, want 200", status)
				}
				jsonEq(t, got, tc.want)
			})
		}
	}
	if ran != 2 {
		t.Errorf("job.start ran %d times, want 2 (once per id form)", ran)
	}
}
