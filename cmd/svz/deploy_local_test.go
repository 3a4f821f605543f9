package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/supervaize/svz/internal/testenv"
)

// TestDeployLocal builds Hello World and runs it on this machine the way each platform would,
// then gates it: Lambda under the Runtime Interface Emulator behind a local Function URL, Cloud
// Run and App Runner as the container's process. Nothing is contacted: there is no cloud here.
func TestDeployLocal(t *testing.T) {
	rie := testenv.Need(t, testenv.RIE)
	t.Setenv("SUPERVAIZER_API_KEY", "k-local-0123456789abcdef0123456789abcdef")
	t.Setenv("SUPERVAIZER_PRIVATE_KEY", "")
	t.Setenv("SUPERVAIZER_WORKSPACE_AUTH_REQUIRED", "")
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1") // anything reaching AWS would fail
	for _, tc := range []struct {
		platform, how string
	}{
		{"lambda", "under the Lambda Runtime Interface Emulator, behind a local Function URL"},
		{"cloud-run", "as a Cloud Run container process"},
		{"app-runner", "as an App Runner service process"},
	} {
		t.Run(tc.platform, func(t *testing.T) {
			out, stderr, err := svz(t, "deploy", "local", "-p", tc.platform, "-n", "hello", "--main", "../../examples/helloworld", "--rie", rie, "-o", "json")
			if err != nil {
				t.Fatalf("local: %v\n%s", err, stderr)
			}
			v := decode(t, out)
			res := v["result"].(map[string]any)
			health, _ := res["health"].(map[string]any)
			if v["ok"] != true || v["command"] != "local" || !strings.HasPrefix(res["url"].(string), "http://127.0.0.1:") ||
				!strings.HasPrefix(res["image"].(string), "sha256:") || health == nil || health["rpc"] != "error -32601" {
				t.Fatalf("document %v", v)
			}
			for _, want := range []string{"(this machine)", "✓ secrets", "SUPERVAIZER_PRIVATE_KEY made for this run only", "✓ run", tc.how, "✓ health",
				"/a2a answered: API key accepted, JSON-RPC reachable (an unknown method answers -32601 as expected)"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("progress lacks %q:\n%s", want, stderr)
				}
			}
			if strings.Contains(stderr, "answered error") {
				t.Errorf("the expected -32601 reads as a failure:\n%s", stderr)
			}
			if strings.Contains(stderr+out, "k-local-0123456789abcdef0123456789abcdef") {
				t.Error("the API key is in the output")
			}
		})
	}
}

// TestDeployLocalControllerRefusesToStart: a configuration the controller refuses stops it before
// it serves; deploy local fails at once with its exit, and shows what it printed.
func TestDeployLocalControllerRefusesToStart(t *testing.T) {
	t.Setenv("SUPERVAIZER_API_KEY", "k-local-0123456789abcdef0123456789abcdef")
	t.Setenv("SUPERVAIZER_WORKSPACE_AUTH_REQUIRED", "true") // without an issuer or a key: refused at start
	_, stderr, err := svz(t, "deploy", "local", "-p", "cloud-run", "-n", "hello", "--main", "../../examples/helloworld")
	want := `deploy local failed at step "health": the controller stopped before it was healthy: exit status 1`
	if err == nil || err.Error() != want {
		t.Fatalf("err %v\nwant %s\n%s", err, want, stderr)
	}
	if !strings.Contains(stderr, "! the controller printed (last lines):") || !strings.Contains(stderr, "SUPERVAIZER_WORKSPACE_AUTH") {
		t.Errorf("the controller's own message is not shown:\n%s", stderr)
	}
}

// TestDeployLocalServe: with --serve the controller keeps serving after the gate, its output on
// stderr, until the command's context ends (Ctrl-C).
func TestDeployLocalServe(t *testing.T) {
	t.Setenv("SUPERVAIZER_API_KEY", "k-local-0123456789abcdef0123456789abcdef")
	t.Setenv("SUPERVAIZER_WORKSPACE_AUTH_REQUIRED", "")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := newRootCmd()
	root.SetOut(io.Discard)
	root.SetErr(w)
	root.SetIn(strings.NewReader(""))
	root.SetArgs([]string{"deploy", "local", "-p", "cloud-run", "-n", "hello", "--main", "../../examples/helloworld", "--serve"})
	done := make(chan error, 1)
	go func() {
		err := root.ExecuteContext(ctx)
		w.Close()
		done <- err
	}()
	lines := bufio.NewScanner(r)
	url := ""
	for url == "" && lines.Scan() {
		if rest, ok := strings.CutPrefix(lines.Text(), "! serving at "); ok {
			url, _, _ = strings.Cut(rest, " ")
		}
	}
	if url == "" {
		t.Fatalf("no serving line: %v", <-done)
	}
	go func() { _, _ = io.Copy(io.Discard, r) }() // keep reading the controller's output
	resp, err := http.Get(url + "/.well-known/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"status":"operational"`) {
		t.Fatalf("health while serving: %d %s", resp.StatusCode, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("interrupted --serve: %v", err)
	}
	if _, err := http.Get(url + "/.well-known/health"); err == nil {
		t.Error("the controller still answers after the command ended")
	}
}
