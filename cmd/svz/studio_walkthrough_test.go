package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supervaize/svz/examples/helloworld/hello"
	"github.com/supervaize/svz/internal/devstudio"
	"github.com/supervaize/svz/internal/syncbuf"
)

// TestMain lets the test binary run as svz (SVZ_TEST_AS_SVZ=1), so the walkthrough starts
// `svz dev studio` as its own process without building the CLI again.
func TestMain(m *testing.M) {
	if os.Getenv("SVZ_TEST_AS_SVZ") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startDevStudio runs `svz dev studio args...` as a process and returns its printed environment
// block (complete once the SUPERVAIZER_PRIVATE_KEY line is out).
func startDevStudio(t *testing.T, args ...string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, append([]string{"dev", "studio", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), "SVZ_TEST_AS_SVZ=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	block := make(chan string, 1)
	go func() {
		var b strings.Builder
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "export SUPERVAIZER_PRIVATE_KEY=") {
				block <- b.String()
				_, _ = io.Copy(io.Discard, stdout)
				return
			}
		}
		block <- ""
	}()
	select {
	case b := <-block:
		if b == "" {
			t.Fatalf("svz dev studio printed no environment; stderr:\n%s", stderr.String())
		}
		return b
	case <-time.After(60 * time.Second):
		t.Fatalf("svz dev studio did not start; stderr:\n%s", stderr.String())
	}
	return ""
}

// buildHelloWorld builds examples/helloworld once per test run.
var buildHelloWorld = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "svz-walkthrough-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "helloworld")
	cmd := exec.Command("go", "build", "-o", bin, "./examples/helloworld")
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./examples/helloworld: %v\n%s", err, out)
	}
	return bin, nil
})

// controllerProcess runs the Hello World binary with env and waits until it serves or exits.
type controllerProcess struct {
	cmd    *exec.Cmd
	out    *syncbuf.Buffer
	exited chan error
}

func startController(t *testing.T, env []string) *controllerProcess {
	t.Helper()
	bin, err := buildHelloWorld()
	if err != nil {
		t.Fatal(err)
	}
	p := &controllerProcess{cmd: exec.Command(bin), out: &syncbuf.Buffer{}, exited: make(chan error, 1)}
	p.cmd.Env = append(env, "PATH="+os.Getenv("PATH"))
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
		}
	})
	return p
}

// waitHealthy polls the health route until it answers, the process exits, or a minute passes.
func (p *controllerProcess) waitHealthy(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case err := <-p.exited:
			p.exited <- err
			t.Fatalf("the controller exited: %v\n%s", err, p.out.String())
		default:
		}
		if resp, err := http.Get(url + "/.well-known/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the controller did not serve within a minute\n%s", p.out.String())
}

// envList runs the printed block in bash and returns every variable it exports.
func envList(t *testing.T, block string, extra ...string) []string {
	t.Helper()
	names := []string{"SUPERVAIZE_API_URL", "SUPERVAIZE_WORKSPACE_ID", "SUPERVAIZE_API_KEY", "SUPERVAIZER_WORKSPACE_AUTH_REQUIRED",
		"SUPERVAIZER_WORKSPACE_AUTH_ISSUER", "SUPERVAIZER_WORKSPACE_AUTH_JWKS_URL", "SUPERVAIZER_PUBLIC_URL", "SUPERVAIZER_HOST",
		"SUPERVAIZER_SERVER_ID", "SUPERVAIZER_API_KEY", "SUPERVAIZER_PRIVATE_KEY"}
	vals := sourceExports(t, block, names...)
	var out []string
	for _, n := range names {
		if vals[n] == "" {
			t.Fatalf("the printed environment does not set %s:\n%s", n, block)
		}
		out = append(out, n+"="+vals[n])
	}
	return append(out, extra...)
}

// TestDevStudioWalkthrough is docs/studio.md: `svz dev studio` in one process, the Hello World
// binary Studio-connected to it in another. The controller registers before it serves, its agent
// gets its Studio id, a token the stand-in mints opens job.start, and the agent reads the
// parameter the stand-in encrypted. A refused handshake stops the controller before it serves.
func TestDevStudioWalkthrough(t *testing.T) {
	dir := t.TempDir()
	params := filepath.Join(dir, "parameters.json")
	if err := os.WriteFile(params, []byte(`{"hello-world-ai-agent": {"HELLO_GREETING": "Bonjour"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "dev-controller.key")
	if _, _, err := runSvz(t, nil, "dev", "rsakey", "--out", keyFile); err != nil {
		t.Fatal(err)
	}
	port := freeLoopbackPort(t)
	controllerURL := "http://127.0.0.1:" + port
	block := startDevStudio(t, "--parameters", params, "--controller-url", controllerURL, "--controller-key", keyFile)
	env := envList(t, block, "PORT="+port, "SUPERVAIZER_STORE=memory")
	studioURL := sourceExports(t, block, "SUPERVAIZE_API_URL")["SUPERVAIZE_API_URL"]

	ctrl := startController(t, env)
	ctrl.waitHealthy(t, controllerURL)

	// Registered: the stand-in knows the server, the controller reports its Studio agent id.
	var regs struct {
		Registrations []devstudio.Registration `json:"registrations"`
	}
	getJSON(t, studioURL+"/registrations", &regs)
	if len(regs.Registrations) != 1 || regs.Registrations[0].URL != controllerURL || regs.Registrations[0].ServerID != "dev-server-1" {
		t.Fatalf("registrations %+v", regs)
	}
	studioID := regs.Registrations[0].AgentIDs[hello.Slug]
	var health struct {
		Agents map[string]struct {
			AgentServerID *string `json:"agent_server_id"`
		} `json:"agents"`
	}
	getJSON(t, controllerURL+"/.well-known/health", &health)
	for _, a := range health.Agents {
		if a.AgentServerID == nil || *a.AgentServerID != studioID {
			t.Fatalf("health does not report the Studio id %s: %+v", studioID, health)
		}
	}

	// A token from `svz dev studio token` opens job.start; the greeting is the encrypted parameter.
	tok, stderr, err := runSvz(t, map[string]string{"SUPERVAIZE_API_URL": studioURL, "SUPERVAIZE_WORKSPACE_ID": ""},
		"dev", "studio", "token", "--agent", hello.Slug, "--scopes", "supervaizer/action.invoke,job.start")
	if err != nil {
		t.Fatalf("%v %s", err, stderr)
	}
	res := a2aJobStartKey(t, controllerURL, devstudio.DevControllerKey, strings.TrimSpace(tok), "ws-"+devstudio.DefaultWorkspace)
	effect := res["result"].(map[string]any)["effects"].([]any)[0].(map[string]any)
	if effect["greeting"] != "Bonjour" || effect["type"] != "job.started" {
		t.Fatalf("job.start %v", res)
	}
	// Without the token the call is refused.
	res = a2aJobStartKey(t, controllerURL, devstudio.DevControllerKey, "", "ws-"+devstudio.DefaultWorkspace)
	if e, _ := res["error"].(map[string]any); e == nil || e["data"].(map[string]any)["code"] != "workspace_authorization_missing" {
		t.Fatalf("no token: %v", res)
	}
	// svz dev studio events lists the registration, the controller's key as a fingerprint only.
	events, _, err := runSvz(t, map[string]string{"SUPERVAIZE_API_URL": studioURL}, "dev", "studio", "events")
	if err != nil || !strings.Contains(events, `"event_type": "server.register"`) || strings.Contains(events, devstudio.DevControllerKey) {
		t.Fatalf("events %v\n%s", err, events)
	}
	if out := ctrl.out.String(); strings.Contains(out, devstudio.DevControllerKey) || strings.Contains(out, devstudio.DefaultAPIKey) || strings.Contains(out, "Bonjour") {
		t.Errorf("the controller logged a secret or a parameter value:\n%s", out)
	}

	// A stand-in that refuses the handshake: the controller does not start.
	port2 := freeLoopbackPort(t)
	url2 := "http://127.0.0.1:" + port2
	block2 := startDevStudio(t, "--handshake", devstudio.HandshakeKeyMismatch, "--controller-url", url2, "--controller-key", keyFile)
	bad := startController(t, envList(t, block2, "PORT="+port2, "SUPERVAIZER_STORE=memory"))
	select {
	case err := <-bad.exited:
		out := bad.out.String()
		if err == nil || !strings.Contains(out, "Studio registration handshake failed: Studio did not persist the controller API key") ||
			strings.Contains(out, devstudio.DevControllerKey) {
			t.Fatalf("exit %v\n%s", err, out)
		}
	case <-time.After(time.Minute):
		t.Fatalf("the controller kept running after a refused handshake\n%s", bad.out.String())
	}
	if resp, err := http.Get(url2 + "/.well-known/health"); err == nil {
		resp.Body.Close()
		t.Fatal("the refused controller serves")
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

func a2aJobStartKey(t *testing.T, url, key, token, workspaceID string) map[string]any {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"supervaizer/action.invoke","params":{"request_id":"r1","actor":{"user_id":"u"},`+
		`"workspace":{"id":%q},"mission_id":"m1","agent_slug":%q,"surface":"job.start","action":"job.start","input":{"count":1},"job_id":"job-1"}}`,
		workspaceID, hello.Slug)
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url+"/a2a", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", key)
	if token != "" {
		req.Header.Set("X-Supervaize-Workspace-Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}
