package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/supervaize/svz/internal/testenv"
)

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// makeInvoke runs `make invoke` from the repository root as a user would.
func makeInvoke(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command("make", append([]string{"--no-print-directory", "invoke", "RIE=" + testenv.Need(t, testenv.RIE), "INVOKE_DIR=" + t.TempDir()}, args...)...)
	cmd.Dir = repoRoot()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("make: %v", err)
	}
	return out.String(), errOut.String(), code
}

// TestMakeInvoke: `make invoke EVENT=…` builds the bootstrap as sam build does and runs it under
// the Runtime Interface Emulator with each sample event and events/env.json, without Docker, and
// prints the function's response.
func TestMakeInvoke(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot(), "events", "*.json"))
	if err != nil || len(files) < 5 {
		t.Fatalf("sample events: %v %v", files, err)
	}
	for _, f := range files {
		if filepath.Base(f) == "env.json" {
			continue
		}
		event := "events/" + filepath.Base(f)
		want := map[string]string{
			"events/function-url-health.json":        `"status":"operational"`,
			"events/function-url-a2a-job-start.json": `"result":`,
			"events/function-url-a2a-surface.json":   `"result":`,
			"events/apigw-rest-api-health.json":      `"status":"operational"`,
			"events/function-url-agents.json":        `"agents":[`,
		}[event]
		t.Run(filepath.Base(event), func(t *testing.T) {
			stdout, stderr, code := makeInvoke(t, "EVENT="+event)
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			var resp struct {
				StatusCode int    `json:"statusCode"`
				Body       string `json:"body"`
			}
			if err := json.Unmarshal([]byte(stdout), &resp); err != nil {
				t.Fatalf("stdout is not the function's response: %v\n%s", err, stdout)
			}
			if resp.StatusCode != 200 || !strings.Contains(resp.Body, want) {
				t.Fatalf("response %d %s, want %s", resp.StatusCode, resp.Body, want)
			}
			if !strings.Contains(stderr, "(rapid)") {
				t.Errorf("the emulator's log is not on stderr:\n%s", stderr)
			}
		})
	}
}

// TestMakeInvokeFailures: no event, and a function that fails at init, exit non-zero saying why.
func TestMakeInvokeFailures(t *testing.T) {
	_, stderr, code := makeInvoke(t)
	if code != 2 || !strings.Contains(stderr, "EVENT is required, e.g. make invoke EVENT=events/function-url-health.json") {
		t.Errorf("without EVENT: exit %d\n%s", code, stderr)
	}
	env := filepath.Join(t.TempDir(), "env.json")
	// Workspace authorization required without an issuer: the controller refuses to start.
	if err := os.WriteFile(env, []byte(`{"ControllerFunction":{"SUPERVAIZER_API_KEY":"k-0123456789abcdef0123456789abcdef","SUPERVAIZER_STORE":"memory","SUPERVAIZER_WORKSPACE_AUTH_REQUIRED":"true"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := makeInvoke(t, "EVENT=events/function-url-health.json", "ENV_VARS="+env)
	if code == 0 || !strings.Contains(stderr, "lambda-invoke: the invocation failed") || !strings.Contains(stdout, "Runtime.") {
		t.Errorf("init failure: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
}
