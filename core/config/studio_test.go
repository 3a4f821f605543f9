//go:build !svz_nostudio

package config_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/supervaize/svz/examples/helloworld/hello"
	"github.com/supervaize/svz/internal/devstudio"
	"github.com/supervaize/svz/internal/syncbuf"
)

const (
	apiKey = "controller-key-for-config-tests-9c8b7a"
	slug   = hello.Slug
)

var privateKey = sync.OnceValue(func() string {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
})

func startStandIn(t *testing.T, cfg devstudio.Config) *devstudio.Server {
	t.Helper()
	s, err := devstudio.Start(context.Background(), cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// studioEnv is a long-running controller's environment, connected to the stand-in s.
func studioEnv(s *devstudio.Server, publicURL string) map[string]string {
	m := s.Env("", publicURL)
	m["SUPERVAIZER_API_KEY"] = apiKey
	m["SUPERVAIZER_SERVER_ID"] = "config-test-server"
	m["SUPERVAIZER_PRIVATE_KEY"] = privateKey()
	m["SUPERVAIZER_STORE"] = "memory"
	return m
}

func build(t *testing.T, m map[string]string) (http.Handler, string, error) {
	t.Helper()
	var logs syncbuf.Buffer
	h, err := hello.Build(context.Background(), func(k string) string { return m[k] }, slog.New(slog.NewTextHandler(&logs, nil)))
	if err == nil {
		t.Cleanup(func() { _ = h.(io.Closer).Close() })
	}
	return h, logs.String(), err
}

func invoke(t *testing.T, h http.Handler, token, workspaceID, action string) map[string]any {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "supervaizer/action.invoke", "params": map[string]any{
		"request_id": "r1", "actor": map[string]any{"user_id": "u"}, "workspace": map[string]any{"id": workspaceID}, "mission_id": "m1",
		"agent_slug": slug, "surface": "job.start", "action": action, "input": map[string]any{"count": 1}, "job_id": "job-1"}})
	req := httptest.NewRequest(http.MethodPost, "/a2a", bytes.NewReader(body))
	req.Header.Set("X-API-Key", apiKey)
	req.Header.Set("X-Supervaize-Workspace-Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	return out
}

func token(t *testing.T, s *devstudio.Server, scopes ...string) string {
	t.Helper()
	tok, err := s.MintToken(devstudio.TokenRequest{Workspace: devstudio.DefaultWorkspace, Agent: slug, Scopes: scopes})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Token
}

// TestLongRunningServerRegistersAtStart: a plain HTTP controller with the Studio settings registers
// before it serves, gets its audience and agent ids from the handshake, looks its parameters up,
// and accepts the tokens Studio signs.
func TestLongRunningServerRegistersAtStart(t *testing.T) {
	s := startStandIn(t, devstudio.Config{Parameters: map[string]map[string]string{slug: {"HELLO_GREETING": "Bonjour"}}})
	h, logs, err := build(t, studioEnv(s, "http://127.0.0.1:8000"))
	if err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	regs := s.Registrations()
	if len(regs) != 1 || regs[0].URL != "http://127.0.0.1:8000" || regs[0].ServerID != "config-test-server" || s.AgentLookups() != 1 {
		t.Fatalf("registrations %+v, %d lookups", regs, s.AgentLookups())
	}
	if strings.Contains(logs, apiKey) || strings.Contains(logs, s.APIKey()) {
		t.Errorf("logs hold a key:\n%s", logs)
	}
	// Health shows the Studio agent id.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/.well-known/health", nil))
	if !strings.Contains(rec.Body.String(), `"agent_server_id":"`+regs[0].AgentIDs[slug]+`"`) {
		t.Errorf("health %s", rec.Body)
	}
	out := invoke(t, h, token(t, s, "supervaizer/action.invoke", "job.start"), s.WorkspaceID(devstudio.DefaultWorkspace), "job.start")
	res, _ := out["result"].(map[string]any)
	effects, _ := res["effects"].([]any)
	if len(effects) != 1 || effects[0].(map[string]any)["greeting"] != "Bonjour" {
		t.Fatalf("job.start %v", out)
	}
	// A token for another action is refused: the grant is the stand-in's, verified for real.
	out = invoke(t, h, token(t, s, "supervaizer/action.invoke", "job.sync"), s.WorkspaceID(devstudio.DefaultWorkspace), "job.start")
	if e, _ := out["error"].(map[string]any); e == nil || !strings.Contains(e["message"].(string), "missing scope(s): job.start") {
		t.Errorf("wrong scope: %v", out)
	}
	if s.AgentLookups() != 1 {
		t.Errorf("%d lookups: a long-running server looks up once at start, then within the cache lifetime never", s.AgentLookups())
	}
}

// TestStartFailsWithoutAValidHandshake: every refused registration stops the start, naming the
// step, with no key in the error or the logs.
func TestStartFailsWithoutAValidHandshake(t *testing.T) {
	s := startStandIn(t, devstudio.Config{})
	for _, answer := range devstudio.HandshakeAnswers {
		if answer == devstudio.HandshakeValid || answer == devstudio.HandshakeHang {
			continue
		}
		t.Run(answer, func(t *testing.T) {
			if err := s.SetHandshake(answer); err != nil {
				t.Fatal(err)
			}
			env := studioEnv(s, "http://127.0.0.1:8000")
			if answer == devstudio.HandshakeWrongAudience {
				env["SUPERVAIZER_WORKSPACE_AUTH_AUDIENCE"] = "supervaizer-server:studio-srv-expected"
			}
			if answer == devstudio.HandshakeWrongAgentID {
				env["SUPERVAIZER_STUDIO_AGENT_IDS"] = slug + "=studio-agent-known"
			}
			_, logs, err := build(t, env)
			if err == nil || !strings.HasPrefix(err.Error(), "studio: server.register (POST "+s.URL()+"/w/dev-workspace/api/v1/ctrl-events/)") {
				t.Fatalf("start: %v", err)
			}
			for _, secret := range []string{apiKey, s.APIKey(), "BEGIN PRIVATE KEY"} {
				if strings.Contains(err.Error(), secret) || strings.Contains(logs, secret) {
					t.Errorf("%.8s… in the error or logs:\n%v\n%s", secret, err, logs)
				}
			}
		})
	}
}

// TestNoRegistration: local mode, serverless instances and SUPERVAIZER_STUDIO_REGISTER=off never
// register; a serverless instance looks parameters up on the first call that reads one, once.
func TestNoRegistration(t *testing.T) {
	s := startStandIn(t, devstudio.Config{Parameters: map[string]map[string]string{slug: {"HELLO_GREETING": "Hallo"}}})
	// The outcome, as svz deploy writes it into a function's configuration.
	if _, _, err := build(t, studioEnv(s, "https://fn.example")); err != nil {
		t.Fatal(err)
	}
	reg := s.Registrations()[0]
	before := len(s.Events())
	lookups := s.AgentLookups()

	local := studioEnv(s, "http://127.0.0.1:8000")
	local["SUPERVAIZER_LOCAL_MODE"] = "true"
	if _, logs, err := build(t, local); err != nil {
		t.Fatalf("local: %v\n%s", err, logs)
	}
	off := studioEnv(s, "")
	off["SUPERVAIZER_STUDIO_REGISTER"] = "off"
	off["SUPERVAIZER_WORKSPACE_AUTH_AUDIENCE"] = reg.Audience
	if _, logs, err := build(t, off); err != nil {
		t.Fatalf("off: %v\n%s", err, logs)
	}
	lambda := studioEnv(s, "https://fn.example")
	lambda["AWS_LAMBDA_RUNTIME_API"] = "127.0.0.1:9001"
	lambda["SUPERVAIZER_WORKSPACE_AUTH_AUDIENCE"] = reg.Audience
	lambda["SUPERVAIZER_STUDIO_AGENT_IDS"] = slug + "=" + reg.AgentIDs[slug]
	h, logs, err := build(t, lambda)
	if err != nil {
		t.Fatalf("lambda: %v\n%s", err, logs)
	}
	if n := len(s.Events()) - before; n != 0 || s.AgentLookups() != lookups {
		t.Fatalf("%d events, %d lookups at start", n, s.AgentLookups()-lookups)
	}
	ws := s.WorkspaceID(devstudio.DefaultWorkspace)
	if out := invoke(t, h, token(t, s, "supervaizer/action.invoke", "job.sync"), ws, "job.sync"); out["result"] == nil || s.AgentLookups() != lookups {
		t.Fatalf("job.sync %v, %d lookups", out, s.AgentLookups()-lookups)
	}
	for range 3 {
		out := invoke(t, h, token(t, s, "supervaizer/action.invoke", "job.start"), ws, "job.start")
		if e := out["result"].(map[string]any)["effects"].([]any)[0].(map[string]any); e["greeting"] != "Hallo" {
			t.Fatalf("job.start %v", out)
		}
	}
	if n := s.AgentLookups() - lookups; n != 1 {
		t.Errorf("%d lookups for three calls, want 1", n)
	}
}

func TestStudioSettingsRefusals(t *testing.T) {
	s := startStandIn(t, devstudio.Config{})
	for _, tc := range []struct {
		name string
		mod  func(map[string]string)
		want string
	}{
		{"bad private key", func(m map[string]string) {
			m["SUPERVAIZER_PRIVATE_KEY"] = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----"
		},
			"SUPERVAIZER_PRIVATE_KEY (fingerprint "},
		{"no private key", func(m map[string]string) { delete(m, "SUPERVAIZER_PRIVATE_KEY") }, "SUPERVAIZER_PRIVATE_KEY is required to register with Studio"},
		{"no public url", func(m map[string]string) { delete(m, "SUPERVAIZER_PUBLIC_URL") }, "SUPERVAIZER_PUBLIC_URL is required to register with Studio"},
		{"no workspace", func(m map[string]string) { delete(m, "SUPERVAIZE_WORKSPACE_ID") }, "SUPERVAIZE_WORKSPACE_ID is required"},
		{"register setting", func(m map[string]string) { m["SUPERVAIZER_STUDIO_REGISTER"] = "sometimes" }, `SUPERVAIZER_STUDIO_REGISTER="sometimes": must be one of auto, off`},
		{"no verification", func(m map[string]string) {
			for _, k := range []string{"SUPERVAIZER_WORKSPACE_AUTH_REQUIRED", "SUPERVAIZER_WORKSPACE_AUTH_ISSUER", "SUPERVAIZER_WORKSPACE_AUTH_JWKS_URL"} {
				delete(m, k)
			}
		}, "Studio-registered Supervaizer v2 A2A requires workspace authorization"},
		{"half-configured verification", func(m map[string]string) { delete(m, "SUPERVAIZER_WORKSPACE_AUTH_REQUIRED") }, "workspace authorization is half configured"},
		{"serverless without key, agent with parameters", func(m map[string]string) {
			delete(m, "SUPERVAIZER_PRIVATE_KEY")
			m["K_SERVICE"] = "svc"
		}, `SUPERVAIZER_PRIVATE_KEY is required: agent "hello-world-ai-agent" declares parameters`},
		{"parameters ttl", func(m map[string]string) { m["SUPERVAIZER_STUDIO_PARAMETERS_TTL"] = "1s" }, "SUPERVAIZER_STUDIO_PARAMETERS_TTL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := studioEnv(s, "http://127.0.0.1:8000")
			tc.mod(m)
			before := len(s.Events())
			_, _, err := build(t, m)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want %q", err, tc.want)
			}
			if len(s.Events()) != before {
				t.Error("Studio was called by a controller that cannot start")
			}
		})
	}
	// Without Studio the key is not used, so not read: a controller that is not Studio-connected
	// pays nothing for it at cold start.
	if _, _, err := build(t, map[string]string{"SUPERVAIZER_PRIVATE_KEY": "nope", "SUPERVAIZER_STORE": "memory"}); err != nil {
		t.Errorf("unused key without Studio: %v", err)
	}
}
