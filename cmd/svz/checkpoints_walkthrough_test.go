package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/supervaize/svz/internal/testenv"
)

// buildLeadgen builds examples/leadgen once per test run.
var buildLeadgen = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "svz-walkthrough-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "leadgen")
	cmd := exec.Command("go", "build", "-o", bin, "./examples/leadgen")
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./examples/leadgen: %v\n%s", err, out)
	}
	return bin, nil
})

// TestCheckpointsWalkthrough runs docs/checkpoints.md's walkthrough as a user pastes it (go run
// replaced by the same programs, ports by free ones): `svz dev studio` pausing the before
// checkpoint, the lead-generation agent Studio-connected to it; a governed job.start pauses its
// import, the resume allows it, and the job completes. The snapshot token is never printed.
func TestCheckpointsWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the programs")
	}
	for _, tool := range []string{"bash", "curl", "grep", "sed"} {
		if _, err := exec.LookPath(tool); err != nil {
			if testenv.InCI() {
				t.Fatalf("%s is not installed", tool)
			}
			t.Skipf("%s is not installed", tool)
		}
	}
	blocks := shBlocks(t, "checkpoints.md", "## Try it")
	if len(blocks) != 1 {
		t.Fatalf("the walkthrough section has %d sh blocks, want 1", len(blocks))
	}
	leadgen, err := buildLeadgen()
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	svz := filepath.Join(dir, "svz")
	if err := os.WriteFile(svz, []byte("#!/bin/sh\nSVZ_TEST_AS_SVZ=1 exec '"+self+"' \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	port, studioPort := freeLoopbackPort(t), freeLoopbackPort(t)
	script := strings.ReplaceAll(blocks[0], "go run ./cmd/svz", `"$SVZ"`)
	script = strings.ReplaceAll(script, "go run ./examples/leadgen", `"$LEADGEN"`)
	script = strings.ReplaceAll(script, "127.0.0.1:8000", "127.0.0.1:"+port)
	script = strings.ReplaceAll(script, "127.0.0.1:8800", "127.0.0.1:"+studioPort)
	script = "set -e\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + script
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "SVZ=" + svz, "LEADGEN=" + leadgen, "SUPERVAIZER_PORT=" + port}
	outb, err := cmd.CombinedOutput()
	out := string(outb)
	if err != nil {
		t.Fatalf("the walkthrough failed: %v\n%s", err, out)
	}
	for _, want := range []string{`{"id":"job-1-import","activity":"operation","status":"awaiting"`, `"decision": "pause"`,
		`"status":"ok","effects":[{"type":"rule.checkpoint.resumed","job_id":"job-1","status":"allow","summary":{"checkpoint_id":"chk-1"}}]`,
		`{"id":"job-1-import","activity":"operation","status":"completed"`, "registered with Studio"} {
		if !strings.Contains(out, want) {
			t.Errorf("the walkthrough's output lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "tok-dev-1") {
		t.Errorf("the walkthrough's output shows the snapshot token:\n%s", out)
	}
}
