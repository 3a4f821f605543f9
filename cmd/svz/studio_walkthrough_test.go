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
var buildHelloWorld = sync.OnceValues(func() (string, error) { return goBuild("./examples/helloworld") })

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

// studioDocBlock returns the sh block of docs/studio.md's walkthrough.
func studioDocBlock(t *testing.T) string {
	t.Helper()
	blocks := shBlocks(t, "studio.md", "## Try it: a local Studio")
	if len(blocks) != 1 {
		t.Fatalf("the walkthrough section has %d sh blocks, want 1", len(blocks))
	}
	return blocks[0]
}

// TestDevStudioWalkthrough runs docs/studio.md's walkthrough as written from the repository's
// root (ports replaced by free ones): it builds svz and Hello World, runs `svz dev studio` in one
// process and the Hello World binary Studio-connected to it in another. The controller registers
// before it serves, its agent gets its Studio id, a token the stand-in mints opens job.start, and
// the agent reads the parameter the stand-in encrypted. The walkthrough must stop what it started
// and leave the repository as it was (runScript). Then a stand-in that refuses the handshake: the
// controller does not start.
func TestDevStudioWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the programs")
	}
	needTools(t, "bash", "curl", "grep", "mktemp", "seq")
	block := studioDocBlock(t)
	tmp := t.TempDir()
	port, studioPort := freeLoopbackPort(t), freeLoopbackPort(t)
	script := strings.ReplaceAll(block, "127.0.0.1:8000", "127.0.0.1:"+port)
	script = strings.ReplaceAll(script, "127.0.0.1:8800", "127.0.0.1:"+studioPort)
	out := runScript(t, tmp, script, []string{port, studioPort}, "SUPERVAIZER_PORT="+port)
	dir := scriptDir(t, tmp)
	for _, want := range []string{`"agent_server_id":"studio-agent-`, `"message":"Completed 1 cases","greeting":"Bonjour"`,
		`"event_type": "server.register"`, "Studio registration handshake verified", "registered with Studio"} {
		if !strings.Contains(out, want) {
			t.Errorf("the walkthrough's output lacks %s:\n%s", want, out)
		}
	}
	for _, secret := range []string{devstudio.DevControllerKey, "BEGIN PRIVATE KEY"} {
		if strings.Contains(out, secret) {
			t.Errorf("the walkthrough's output shows %q", secret)
		}
	}

	// A stand-in that refuses the handshake: the controller does not start.
	keyFile := filepath.Join(dir, "dev-controller.key")
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
