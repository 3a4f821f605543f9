package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/deploy"
	"github.com/supervaize/svz/examples/helloworld/hello"
	"github.com/supervaize/svz/internal/devstudio"
)

const testControllerKey = "controller-key-for-svz-tests-77aa11"

// devPrivateKey is one RSA key per test binary (generating one is slow).
var devPrivateKey = sync.OnceValue(func() string {
	k, err := deploy.GeneratePrivateKey()
	if err != nil {
		panic(err)
	}
	return k.Reveal()
})

// runSvz runs svz with args in-process, the environment set to env, and returns stdout, stderr.
func runSvz(t *testing.T, env map[string]string, args ...string) (string, string, error) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	cmd := newRootCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// serveHello serves Hello World, Studio-connected to s but not registering itself (like a
// serverless instance), with extra settings laid over.
func serveHello(t *testing.T, s *devstudio.Server, extra map[string]string) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	env := s.Env("", "http://"+srv.Listener.Addr().String())
	for k, v := range map[string]string{"SUPERVAIZER_API_KEY": testControllerKey, "SUPERVAIZER_SERVER_ID": "svz-cli-test-server",
		"SUPERVAIZER_PRIVATE_KEY": devPrivateKey(), "SUPERVAIZER_STORE": "memory", "SUPERVAIZER_STUDIO_REGISTER": "off"} {
		env[k] = v
	}
	for k, v := range extra {
		env[k] = v
	}
	h, err := hello.Build(context.Background(), func(k string) string { return env[k] }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = h
	srv.Start()
	t.Cleanup(func() { srv.Close(); _ = h.(io.Closer).Close() })
	return srv
}

// registerEnv is the environment of svz studio register for the controller of serveHello.
func registerEnv(s *devstudio.Server) map[string]string {
	return map[string]string{
		"SUPERVAIZE_API_URL": s.URL(), "SUPERVAIZE_WORKSPACE_ID": devstudio.DefaultWorkspace, "SUPERVAIZE_API_KEY": s.APIKey(),
		"SUPERVAIZER_API_KEY": testControllerKey, "SUPERVAIZER_PRIVATE_KEY": devPrivateKey(), "SUPERVAIZER_SERVER_ID": "svz-cli-test-server",
		"SUPERVAIZER_WORKSPACE_AUTH_AUDIENCE": "", "SUPERVAIZER_STUDIO_AGENT_IDS": "", "SUPERVAIZER_LOCAL_MODE": "",
	}
}

func a2aJobStart(t *testing.T, url, token, workspaceID string) map[string]any {
	t.Helper()
	return a2aJobStartKey(t, url, testControllerKey, token, workspaceID)
}

// TestStudioRegisterCommand: svz studio register links a controller that does not register
// itself; an instance given the printed settings accepts Studio's tokens and reads its parameter.
func TestStudioRegisterCommand(t *testing.T) {
	s, err := devstudio.Start(context.Background(), devstudio.Config{Parameters: map[string]map[string]string{hello.Slug: {"HELLO_GREETING": "Hej"}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctrl := serveHello(t, s, nil)
	out, stderr, err := runSvz(t, registerEnv(s), "studio", "register", "--url", ctrl.URL+"/")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	regs := s.Registrations()
	if len(regs) != 1 || regs[0].URL != ctrl.URL {
		t.Fatalf("registrations %+v", regs)
	}
	env := sourceExports(t, out, grant.EnvAudience, grant.EnvStudioAgentIDs)
	if env[grant.EnvAudience] != regs[0].Audience || env[grant.EnvStudioAgentIDs] != hello.Slug+"="+regs[0].AgentIDs[hello.Slug] {
		t.Fatalf("printed %q\n%s", env, out)
	}
	for _, o := range []string{out, stderr} {
		if strings.Contains(o, testControllerKey) || strings.Contains(o, s.APIKey()) || strings.Contains(o, "PRIVATE KEY") {
			t.Errorf("a secret in the output:\n%s", o)
		}
	}
	// JSON.
	out, _, err = runSvz(t, registerEnv(s), "studio", "register", "--url", ctrl.URL, "-o", "json")
	var doc struct {
		OK       bool              `json:"ok"`
		Audience string            `json:"audience"`
		AgentIDs map[string]string `json:"agent_ids"`
		Env      map[string]string `json:"env"`
	}
	if err != nil || json.Unmarshal([]byte(out), &doc) != nil || !doc.OK || doc.Audience != regs[0].Audience ||
		doc.AgentIDs[hello.Slug] != regs[0].AgentIDs[hello.Slug] || doc.Env[grant.EnvStudioAgentIDs] != env[grant.EnvStudioAgentIDs] {
		t.Fatalf("json %v %s", err, out)
	}
	// An instance with the printed settings: Studio's tokens open job.start, the parameter arrives.
	inst := serveHello(t, s, env)
	tok, err := s.MintToken(devstudio.TokenRequest{Workspace: devstudio.DefaultWorkspace, Agent: hello.Slug, Scopes: []string{"supervaizer/action.invoke", "job.start"}})
	if err != nil {
		t.Fatal(err)
	}
	res := a2aJobStart(t, inst.URL, tok.Token, s.WorkspaceID(devstudio.DefaultWorkspace))
	effect := res["result"].(map[string]any)["effects"].([]any)[0].(map[string]any)
	if effect["greeting"] != "Hej" || effect["message"] != "Completed 1 cases" {
		t.Fatalf("job.start %v", res)
	}
}

// TestStudioRegisterFailures: every refusal fails with a message naming the step, prints nothing
// on stdout and no secret anywhere.
func TestStudioRegisterFailures(t *testing.T) {
	s, err := devstudio.Start(context.Background(), devstudio.Config{}, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctrl := serveHello(t, s, nil)
	for _, tc := range []struct {
		name, answer string
		env          map[string]string
		url, want    string
	}{
		{"no handshake", devstudio.HandshakeNoHandshake, nil, "", "server.register response did not include supervaizer_handshake"},
		{"key not stored", devstudio.HandshakeKeyMismatch, nil, "", "Studio did not persist the controller API key for server_id=svz-cli-test-server"},
		{"403", devstudio.HandshakeHTTP403, nil, "", "HTTP 403 Forbidden"},
		{"500", devstudio.HandshakeHTTP500, nil, "", "HTTP 500 Internal Server Error"},
		{"non-JSON", devstudio.HandshakeNonJSON, nil, "", "the answer is not valid JSON"},
		{"audience differs", devstudio.HandshakeWrongAudience, map[string]string{grant.EnvAudience: "supervaizer-server:expected"}, "",
			"configured workspace authorization audience does not match Studio's server audience."},
		{"wrong controller key", devstudio.HandshakeValid, map[string]string{"SUPERVAIZER_API_KEY": "not-the-controller-key-123"}, "",
			"HTTP 401: it does not accept SUPERVAIZER_API_KEY " + deploy.Fingerprint("not-the-controller-key-123")},
		{"no controller", devstudio.HandshakeValid, nil, "http://127.0.0.1:1", "the controller: GET /.well-known/agents.json"},
		{"local mode", devstudio.HandshakeValid, map[string]string{"SUPERVAIZER_LOCAL_MODE": "true"}, "", "a local-mode controller never registers"},
		{"no private key", devstudio.HandshakeValid, map[string]string{"SUPERVAIZER_PRIVATE_KEY": ""}, "", "SUPERVAIZER_PRIVATE_KEY is required"},
		{"no studio key", devstudio.HandshakeValid, map[string]string{"SUPERVAIZE_API_KEY": ""}, "", "SUPERVAIZE_API_KEY is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.SetHandshake(tc.answer); err != nil {
				t.Fatal(err)
			}
			env := registerEnv(s)
			for k, v := range tc.env {
				env[k] = v
			}
			url := tc.url
			if url == "" {
				url = ctrl.URL
			}
			before := len(s.Registrations())
			out, stderr, err := runSvz(t, env, "studio", "register", "--url", url)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want %q", err, tc.want)
			}
			if out != "" {
				t.Errorf("stdout on failure: %q", out)
			}
			if len(s.Registrations()) != before {
				t.Error("a failed registration was kept")
			}
			for _, o := range []string{err.Error(), stderr} {
				for _, secret := range []string{testControllerKey, s.APIKey(), "not-the-controller-key-123", "PRIVATE KEY"} {
					if strings.Contains(o, secret) {
						t.Errorf("%q in %s", secret, o)
					}
				}
			}
		})
	}
}

func TestDevRSAKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k.pem")
	out, _, err := runSvz(t, nil, "dev", "rsakey", "--out", path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("%v %v", err, st.Mode())
	}
	pemBytes, _ := os.ReadFile(path)
	if strings.Contains(out, "PRIVATE KEY") || deploy.CheckPrivateKey(deploy.NewSecret(string(pemBytes))) != nil {
		t.Fatalf("output %s", out)
	}
	env := sourceExports(t, out, "SUPERVAIZER_PRIVATE_KEY")
	if env["SUPERVAIZER_PRIVATE_KEY"] != strings.TrimRight(string(pemBytes), "\n") {
		t.Fatal("the printed export does not load the key")
	}
	if _, _, err := runSvz(t, nil, "dev", "rsakey", "--out", path); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("second rsakey: %v", err)
	}
}
