package main

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestStampedBuild builds svz with `make build` and the Lambda bootstrap with mk/lambda.mk, as a
// developer and sam build do, and checks the version and revision git gives are stamped in both:
// `svz version` prints them (not "(devel)"), and the bootstrap logs them when it is ready.
func TestStampedBuild(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Skipf("not a git checkout (git %s: %v): nothing to stamp", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	revision := git("rev-parse", "HEAD")
	version := git("describe", "--tags", "--always", "--dirty")
	bin, lambda := t.TempDir(), t.TempDir()
	for _, args := range [][]string{
		{"build", "BIN_DIR=" + bin},
		{"-f", "mk/lambda.mk", "build-ControllerFunction", "ARTIFACTS_DIR=" + lambda, "GOARCH=" + runtime.GOARCH},
	} {
		cmd := exec.Command("make", args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	out, err := exec.Command(filepath.Join(bin, "svz"), "version").Output()
	if err != nil {
		t.Fatalf("svz version: %v", err)
	}
	lines := strings.Split(string(out), "\n")
	if len(lines) < 3 || lines[0] != "svz "+version || lines[1] != "  revision  "+revision {
		t.Errorf("svz version printed:\n%s\nwant svz %s, revision %s", out, version, revision)
	}
	// The bootstrap served over plain HTTP (no Lambda runtime here) logs the stamp when ready.
	cmd := exec.Command(filepath.Join(lambda, "bootstrap"))
	cmd.Env = []string{"SUPERVAIZER_HOST=127.0.0.1", "SUPERVAIZER_PORT=0", "SUPERVAIZER_STORE=memory", "SUPERVAIZER_API_KEY=k-stamp-0123456789abcdef"}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	ready := make(chan map[string]any, 1)
	go func() {
		defer close(ready)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == "controller ready" {
				ready <- line
				return
			}
		}
	}()
	select {
	case line, ok := <-ready:
		if !ok || line["version"] != version || line["revision"] != revision {
			t.Errorf("the bootstrap logged %v; want version %s, revision %s", line, version, revision)
		}
	case <-time.After(30 * time.Second):
		t.Error("the bootstrap did not log that it was ready")
	}
}
