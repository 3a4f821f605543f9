package grant_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/grant/granttest"
	"github.com/supervaize/svz/internal/golden"
)

const (
	apiKey  = "K-a2a-test-key"
	issuer  = "https://studio.test"
	studio1 = "studio-agent-1"
)

var now = time.Date(2026, 5, 18, 11, 30, 0, 0, time.UTC)

// seen records what each handler received: the number of calls and the last verified context.
type seen struct {
	mu    sync.Mutex
	calls int
	ctx   *contract.VerifiedWorkspaceContext
}

func (s *seen) record(c *contract.VerifiedWorkspaceContext) {
	s.mu.Lock()
	s.calls++
	s.ctx = c
	s.mu.Unlock()
}

func (s *seen) get() (int, *contract.VerifiedWorkspaceContext) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls, s.ctx
}

// controller is the real core.Controller serving agent "S" (slug s), Studio agent id studio1 unless
// studioIDs says otherwise, with the Authorizer grant.New picks for settings.
func controller(t *testing.T, cfg grant.Config, studioIDs map[string]string) (*core.Controller, *seen) {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.ServerID = "SRV"
	cfg.Options = append(cfg.Options, grant.WithClock(func() time.Time { return now }), grant.WithLogger(quiet))
	authz, err := grant.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("grant.New: %v", err)
	}
	reg, err := contract.BuildRegistration(contract.RegistrationSpec{
		AgentSlug: "s", DisplayName: "S", A2UICatalogVersion: "s.1",
		Surfaces:         []contract.SurfaceSpec{contract.SurfaceID("job.start")},
		Actions:          []contract.ActionSpec{contract.ActionID("job.start"), contract.ActionID("job.stop"), contract.ActionID("workspace_binding.delete")},
		WorkspaceBinding: &contract.WorkspaceBinding{Required: true, Modes: []string{"bind_existing", "create_and_bind"}},
	})
	if err != nil {
		t.Fatalf("BuildRegistration: %v", err)
	}
	agent, err := core.NewAgent(core.AgentConfig{Name: "S", Version: "1.0", Registration: reg})
	if err != nil {
		t.Fatalf("NewAgent: %v", err)
	}
	s := &seen{}
	action := core.ActionFunc(func(_ context.Context, r *contract.ActionRequest) (*contract.ActionResult, error) {
		s.record(r.WorkspaceAuthorization)
		return &contract.ActionResult{Status: "ok"}, nil
	})
	surface := core.SurfaceFunc(func(_ context.Context, r *contract.SurfaceRequest) (*contract.SurfaceResult, error) {
		s.record(r.WorkspaceAuthorization)
		return &contract.SurfaceResult{Surface: r.Surface, Document: json.RawMessage(`{}`)}, nil
	})
	for _, id := range []string{"job.start", "workspace_binding.options", "workspace_binding.create", "workspace_binding.delete"} {
		agent.HandleAction(id, action)
	}
	for _, id := range []string{"job.start", "workspace_binding.create"} {
		agent.HandleSurface(id, surface)
	}
	if studioIDs == nil {
		studioIDs = map[string]string{"s": studio1}
	}
	ctrl, err := core.New(core.Config{APIKey: apiKey, ServerID: "SRV", Authorizer: authz, StudioAgentIDs: studioIDs, Logger: quiet}, agent)
	if err != nil {
		t.Fatalf("core.New: %v", err)
	}
	t.Cleanup(func() { _ = ctrl.Close() })
	return ctrl, s
}

func pemConfig(iss *granttest.Issuer) grant.Config {
	return grant.Config{Settings: grant.Settings{Required: true, Issuer: issuer, PublicKeyPEM: iss.PublicKeyPEM(), Leeway: grant.DefaultLeeway}}
}

func jwksConfig(url string) grant.Config {
	return grant.Config{Settings: grant.Settings{Required: true, Issuer: issuer, JWKSURL: url, Leeway: grant.DefaultLeeway}}
}

// jwksEndpoint serves body with status on 127.0.0.1.
func jwksEndpoint(t *testing.T, status int, body []byte) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/jwks/"
}

// call is one POST /a2a.
type call struct {
	method    string         // default supervaizer/action.invoke
	params    map[string]any // overrides of spec §12.2's default params; nil value deletes
	header    *string        // X-Supervaize-Workspace-Authorization; nil = absent
	rawHeader bool           // send header as is (default: "Bearer " + token)
}

func bearer(tok string) *string { return &tok }

func (c call) do(t *testing.T, h http.Handler, id int) []byte {
	t.Helper()
	p := map[string]any{
		"request_id": "request-1", "actor": map[string]any{"user_id": "user-1"},
		"workspace": map[string]any{"id": "workspace-1", "slug": "workspace"}, "mission_id": "mission-1",
		"agent_slug": "s", "surface": "job.start", "action": "job.start", "input": map[string]any{},
	}
	for k, v := range c.params {
		if v == nil {
			delete(p, k)
		} else {
			p[k] = v
		}
	}
	method := c.method
	if method == "" {
		method = grant.MethodActionInvoke
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": p})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/a2a", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", apiKey)
	if c.header != nil {
		v := *c.header
		if !c.rawHeader {
			v = "Bearer " + v
		}
		req.Header.Set("X-Supervaize-Workspace-Authorization", v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("HTTP %d: %s", rec.Code, rec.Body)
	}
	return rec.Body.Bytes()
}

// refusal is the exact JSON-RPC answer of a refused call.
func refusal(id int, code grant.Code, msg string) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{
		"code": -32030, "message": msg, "data": map[string]any{"code": code}}})
	return string(b)
}

// sameJSON compares two JSON documents.
func sameJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("response is not JSON: %s", got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad expectation %s", want)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if !bytes.Equal(gb, wb) {
		t.Fatalf("response\n got %s\nwant %s", gb, wb)
	}
}

// TestA2AEveryFailureCode drives every code of spec §4.5 through POST /a2a on the real controller,
// with tokens minted by granttest (independent of the verifier), and checks the exact answer and
// that no handler ran. The answers are also kept in testdata/a2a_refusals.golden (-update).
func TestA2AEveryFailureCode(t *testing.T) {
	studio := granttest.NewIssuer("studio-2026-05")
	forger := granttest.NewIssuer("studio-2026-05")
	valid := granttest.Valid(now, issuer, grant.MethodActionInvoke, "job.start")
	tok := func(c granttest.Claims) *string { return bearer(studio.Token(c)) }
	withHeader := func(h map[string]any) *string { return bearer(studio.Sign(h, valid)) }

	pemCfg := pemConfig(studio)
	jwksOK := func(t *testing.T) grant.Config {
		return jwksConfig(jwksEndpoint(t, http.StatusOK, granttest.JWKS(studio.JWK(),
			map[string]any{"kid": "rsa-1", "kty": "RSA", "n": "AQAB", "e": "AQAB"},
			map[string]any{"kid": "no-x", "kty": "OKP", "crv": "Ed25519"},
			map[string]any{"kid": "short-x", "kty": "OKP", "crv": "Ed25519", "x": "AAAA"})))
	}
	kid := func(k string) *string {
		h := studio.Header()
		h["kid"] = k
		return withHeader(h)
	}

	cases := []struct {
		name      string
		cfg       func(t *testing.T) grant.Config
		studioIDs map[string]string
		call      call
		code      grant.Code
		msg       string
	}{
		{"not_configured", func(*testing.T) grant.Config { return grant.Config{} }, nil, call{header: tok(valid)},
			grant.CodeNotConfigured, "Workspace authorization is required but is not configured for this Supervaizer server"},
		{"not_configured/local mode with a lone issuer", func(*testing.T) grant.Config {
			return grant.Config{LocalMode: true, Settings: grant.Settings{Issuer: issuer}}
		}, nil, call{}, grant.CodeNotConfigured, "Workspace authorization is required but is not configured for this Supervaizer server"},
		{"not_configured/local mode with a Studio account", func(*testing.T) grant.Config {
			return grant.Config{LocalMode: true, StudioConnected: true}
		}, nil, call{}, grant.CodeNotConfigured, "Workspace authorization is required but is not configured for this Supervaizer server"},
		{"missing", nil, nil, call{}, grant.CodeMissing, "Missing X-Supervaize-Workspace-Authorization header"},
		{"missing/blank header", nil, nil, call{header: bearer("   "), rawHeader: true}, grant.CodeMissing, "Missing X-Supervaize-Workspace-Authorization header"},
		{"malformed/not a JWT", nil, nil, call{header: bearer("not-a-jwt")}, grant.CodeMalformed, "Workspace authorization token must be a compact JWT"},
		{"malformed/bad base64", nil, nil, call{header: bearer("e30.e30*.AA")}, grant.CodeMalformed, "Workspace authorization token is malformed"},
		{"malformed/not objects", nil, nil, call{header: bearer(studio.SignRaw([]byte(`["EdDSA"]`), []byte(`{}`)))},
			grant.CodeMalformed, "Workspace authorization token header and claims must be JSON objects"},
		{"unsupported_alg", nil, nil, call{header: withHeader(map[string]any{"alg": "RS256", "kid": studio.KID})},
			grant.CodeUnsupportedAlg, "Workspace authorization token must be signed with EdDSA"},
		{"missing_kid", jwksOK, nil, call{header: withHeader(map[string]any{"alg": "EdDSA"})},
			grant.CodeMissingKID, "Workspace authorization token header must include kid for JWKS"},
		{"jwks_unavailable", func(t *testing.T) grant.Config {
			return jwksConfig(jwksEndpoint(t, http.StatusServiceUnavailable, nil))
		}, nil,
			call{header: tok(valid)}, grant.CodeJWKSUnavailable,
			"Workspace authorization JWKS could not be loaded; it is fetched again for a call made in 30 s or later: retry then"},
		{"invalid_jwks/no keys list", func(t *testing.T) grant.Config {
			return jwksConfig(jwksEndpoint(t, http.StatusOK, []byte(`{"keys":{}}`)))
		}, nil,
			call{header: tok(valid)}, grant.CodeInvalidJWKS, "Workspace authorization JWKS payload has no keys list"},
		{"invalid_jwks/not objects", func(t *testing.T) grant.Config {
			return jwksConfig(jwksEndpoint(t, http.StatusOK, []byte(`{"keys":["k"]}`)))
		}, nil,
			call{header: tok(valid)}, grant.CodeInvalidJWKS, "Workspace authorization JWKS keys must be JSON objects"},
		{"unknown_kid", jwksOK, nil, call{header: kid("studio-2099-01")}, grant.CodeUnknownKID, "Workspace authorization JWKS has no key matching token kid"},
		{"invalid_jwk/kty", jwksOK, nil, call{header: kid("rsa-1")}, grant.CodeInvalidJWK, "Workspace authorization EdDSA JWK must be OKP/Ed25519"},
		{"invalid_jwk/no x", jwksOK, nil, call{header: kid("no-x")}, grant.CodeInvalidJWK, "Workspace authorization Ed25519 JWK must include x"},
		{"invalid_jwk/bad x", jwksOK, nil, call{header: kid("short-x")}, grant.CodeInvalidJWK, "Workspace authorization Ed25519 JWK x is invalid"},
		{"bad_signature", nil, nil, call{header: bearer(forger.Token(valid))}, grant.CodeBadSignature, "Workspace authorization token signature is invalid"},
		{"bad_signature/jwks", jwksOK, nil, call{header: bearer(forger.Token(valid))}, grant.CodeBadSignature, "Workspace authorization token signature is invalid"},
		{"invalid_claims", nil, nil, call{header: tok(valid.With("exp", "1779100600", "scopes", []string{}))}, grant.CodeInvalidClaims,
			"Workspace authorization token claims are invalid: scopes: workspace authorization token must include scopes; exp: must be an integer"},
		{"wrong_issuer", nil, nil, call{header: tok(valid.With("iss", "https://other.test"))}, grant.CodeWrongIssuer,
			"Workspace authorization token issuer does not match this server configuration"},
		{"wrong_audience", nil, nil, call{header: tok(valid.With("aud", "supervaizer-server:other"))}, grant.CodeWrongAudience,
			"Workspace authorization token audience does not match this server"},
		{"expired", nil, nil, call{header: tok(valid.With("exp", 1, "iat", 1))}, grant.CodeExpired, "Workspace authorization token is expired"},
		{"not_yet_valid", nil, nil, call{header: tok(valid.With("iat", now.Unix()+3600))}, grant.CodeNotYetValid, "Workspace authorization token was issued in the future"},
		{"wrong_server", nil, nil, call{header: tok(valid.With("server_id", "other"))}, grant.CodeWrongServer, "Workspace authorization token server_id does not match this server"},
		{"unknown_agent", nil, nil, call{header: tok(valid), params: map[string]any{"agent_slug": "other"}}, grant.CodeUnknownAgent,
			"Unknown agent_slug for workspace authorization: other"},
		{"wrong_agent/slug", nil, nil, call{header: tok(valid.With("agent_slug", "other"))}, grant.CodeWrongAgent,
			"Workspace authorization token agent_slug does not match the request"},
		{"wrong_agent/id", nil, nil, call{header: tok(valid.With("agent_id", "other"))}, grant.CodeWrongAgent,
			"Workspace authorization token agent_id does not match the request"},
		{"agent_not_registered", nil, map[string]string{}, call{header: tok(valid)}, grant.CodeAgentNotRegistered,
			"Workspace authorization requires the Studio agent id from registration, but this agent has not been linked to Studio"},
		{"wrong_workspace/id", nil, nil, call{header: tok(valid.With("workspace_id", "ws-2"))}, grant.CodeWrongWorkspace,
			"Workspace authorization token workspace_id does not match the request"},
		{"wrong_workspace/slug", nil, nil, call{header: tok(valid), params: map[string]any{"workspace": map[string]any{"id": "workspace-1", "slug": "victim"}}},
			grant.CodeWrongWorkspace, "Workspace authorization token workspace_slug does not match the request"},
		{"missing_scope", nil, nil, call{header: tok(valid.With("scopes", []string{grant.MethodActionInvoke}))}, grant.CodeMissingScope,
			"Workspace authorization token is missing scope(s): job.start"},
		{"missing_scope/surface", nil, nil, call{method: grant.MethodSurfaceLoad, header: tok(valid)}, grant.CodeMissingScope,
			"Workspace authorization token is missing scope(s): supervaizer/surface.load"},
		// Ordering through the controller: the grant is checked before the handler lookup.
		{"missing before handler lookup", nil, nil, call{params: map[string]any{"action": "not.registered"}}, grant.CodeMissing,
			"Missing X-Supervaize-Workspace-Authorization header"},
		{"workspace_binding.delete is not a bootstrap", nil, nil, call{params: map[string]any{"action": "workspace_binding.delete"}}, grant.CodeMissing,
			"Missing X-Supervaize-Workspace-Authorization header"},
	}

	var answers bytes.Buffer
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := pemCfg
			if tc.cfg != nil {
				cfg = tc.cfg(t)
			}
			h, s := controller(t, cfg, tc.studioIDs)
			got := tc.call.do(t, h, i+1)
			sameJSON(t, got, refusal(i+1, tc.code, tc.msg))
			if n, _ := s.get(); n != 0 {
				t.Fatalf("a handler ran %d times for a refused call", n)
			}
			fmt.Fprintf(&answers, "%s\n%s\n\n", tc.name, got)
		})
	}

	// invalid_key cannot reach /a2a: a key that does not load stops the controller at start-up.
	for _, pemKey := range []string{"not a key", "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----\n"} {
		_, err := grant.New(context.Background(), grant.Config{ServerID: "SRV",
			Settings: grant.Settings{Required: true, Issuer: issuer, PublicKeyPEM: pemKey, Leeway: grant.DefaultLeeway}})
		if err == nil || !strings.HasPrefix(err.Error(), "Workspace authorization EdDSA public key could not be loaded: SUPERVAIZER_WORKSPACE_AUTH_PUBLIC_KEY") {
			t.Fatalf("invalid_key at start-up: %v", err)
		}
	}
	golden.Bytes(t, "a2a_refusals.golden", answers.Bytes())
}

// TestA2AVerifiedContext: handlers get the token's context, never what the request claims, and
// bootstrap calls get none.
func TestA2AVerifiedContext(t *testing.T) {
	studio := granttest.NewIssuer("k1")
	h, s := controller(t, pemConfig(studio), nil)
	forged := map[string]any{"grant_id": "forged", "workspace_id": "victim", "workspace_slug": "victim", "agent_id": studio1,
		"agent_slug": "s", "server_id": "SRV", "scopes": []string{"*"}, "agent_workspace_ref": "victim-ref"}
	claims := granttest.Valid(now, issuer, grant.MethodActionInvoke, grant.MethodSurfaceLoad, "job.start", "resource.contacts.list").
		With("agent_workspace_ref", "ref-1")
	tok := bearer(studio.Token(claims))
	const wantCtx = `{"grant_id":"grant-1","workspace_id":"workspace-1","workspace_slug":"workspace","agent_id":"studio-agent-1",` +
		`"agent_slug":"s","server_id":"SRV","scopes":["supervaizer/action.invoke","supervaizer/surface.load","job.start","resource.contacts.list"],` +
		`"agent_workspace_ref":"ref-1"}`

	for i, c := range []call{
		{header: tok, params: map[string]any{"workspace_authorization": forged}},
		{header: tok, params: map[string]any{"workspace_authorization": forged}}, // cached token: same answer
		{method: grant.MethodSurfaceLoad, header: tok, params: map[string]any{"workspace_authorization": forged}},
		{header: tok, params: map[string]any{"action_request": map[string]any{ // wrapped form
			"request_id": "request-2", "actor": map[string]any{"user_id": "user-1"}, "workspace": map[string]any{"id": "workspace-1"},
			"mission_id": "mission-1", "agent_slug": "s", "surface": "job.start", "action": "job.start", "workspace_authorization": forged}}},
	} {
		body := c.do(t, h, 1)
		if bytes.Contains(body, []byte(`"error"`)) {
			t.Fatalf("call %d refused: %s", i, body)
		}
		n, got := s.get()
		if n != i+1 || got == nil {
			t.Fatalf("call %d: handler calls %d, context %v", i, n, got)
		}
		b, _ := json.Marshal(got)
		if string(b) != wantCtx {
			t.Fatalf("call %d: handler context\n got %s\nwant %s", i, b, wantCtx)
		}
	}

	// Bootstrap ids run without a token and get no context, whatever the request carries.
	for _, c := range []call{
		{params: map[string]any{"action": "workspace_binding.options", "workspace_authorization": forged}},
		{params: map[string]any{"action": "workspace_binding.create", "workspace_authorization": forged}},
		{method: grant.MethodSurfaceLoad, params: map[string]any{"surface": "workspace_binding.create", "workspace_authorization": forged}},
		{header: bearer("garbage"), params: map[string]any{"action": "workspace_binding.options"}},
	} {
		before, _ := s.get()
		body := c.do(t, h, 1)
		n, got := s.get()
		if n != before+1 || got != nil {
			t.Fatalf("bootstrap %v: %s; handler ran %d, context %+v", c.params, body, n-before, got)
		}
	}

	// A valid grant for an action without handler: the lookup answers after the grant.
	body := call{header: bearer(studio.Token(claims.With("scopes", []string{grant.MethodActionInvoke, "job.stop"}))),
		params: map[string]any{"action": "job.stop"}}.do(t, h, 9)
	sameJSON(t, body, `{"jsonrpc":"2.0","id":9,"error":{"code":-32010,"message":"Action handler not registered: job.stop","data":{"agent_slug":"s","action":"job.stop"}}}`)
}

// TestA2ALocalModeBypass: local mode without Studio and without trust material answers without a
// token, with the unverified local-mode context; any trust setting switches that off.
func TestA2ALocalModeBypass(t *testing.T) {
	h, s := controller(t, grant.Config{LocalMode: true}, map[string]string{})
	body := call{params: map[string]any{"workspace": map[string]any{"id": "team-1", "slug": "team"}}}.do(t, h, 1)
	if bytes.Contains(body, []byte(`"error"`)) {
		t.Fatalf("refused: %s", body)
	}
	_, got := s.get()
	b, _ := json.Marshal(got)
	const want = `{"grant_id":"local-mode","workspace_id":"team-1","workspace_slug":"team","agent_id":"` + "%s" + `",` +
		`"agent_slug":"s","server_id":"SRV","scopes":["supervaizer/action.invoke","job.start"],"agent_workspace_ref":null}`
	if string(b) != fmt.Sprintf(want, contract.DeterministicAgentID("S")) {
		t.Fatalf("local-mode context %s", b)
	}
	sameJSON(t, call{params: map[string]any{"agent_slug": "nope"}}.do(t, h, 2),
		refusal(2, grant.CodeUnknownAgent, "Unknown agent_slug for workspace authorization: nope"))

	studio := granttest.NewIssuer("k1")
	cfg := pemConfig(studio)
	cfg.LocalMode = true
	h, _ = controller(t, cfg, nil)
	sameJSON(t, call{}.do(t, h, 3), refusal(3, grant.CodeMissing, "Missing X-Supervaize-Workspace-Authorization header"))
}

// TestA2AStudioRequiresAuth: a Studio-connected controller does not start without full settings.
func TestA2AStudioRequiresAuth(t *testing.T) {
	for _, s := range []grant.Settings{{}, {Required: true, Issuer: issuer}, {Issuer: issuer, JWKSURL: "https://studio.example/jwks/"}} {
		_, err := grant.New(context.Background(), grant.Config{ServerID: "SRV", StudioConnected: true, Settings: s})
		if err == nil || err.Error() != "Studio-registered Supervaizer v2 A2A requires workspace authorization. Set SUPERVAIZER_WORKSPACE_AUTH_REQUIRED=true "+
			"and configure SUPERVAIZER_WORKSPACE_AUTH_ISSUER plus either SUPERVAIZER_WORKSPACE_AUTH_PUBLIC_KEY or SUPERVAIZER_WORKSPACE_AUTH_JWKS_URL." {
			t.Fatalf("settings %+v: %v", s, err)
		}
	}
}
