package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/supervaize/svz/internal/testenv"
)

// shBlocks returns the sh blocks of the section of docs/<doc> that starts with heading, in order.
func shBlocks(t *testing.T, doc, heading string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", doc))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, heading)
	if start < 0 {
		t.Fatalf("docs/%s has no %q section", doc, heading)
	}
	section := text[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// docBlocks returns the sh blocks of docs/grants.md's walkthrough section, in order.
func docBlocks(t *testing.T) []string {
	t.Helper()
	blocks := shBlocks(t, "grants.md", "## Try it locally")
	if len(blocks) != 2 {
		t.Fatalf("the walkthrough section has %d sh blocks, want 2 (walkthrough, JWKS)", len(blocks))
	}
	return blocks
}

// needTools skips the test when a tool its walkthrough runs is missing (fails it under CI).
func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if testenv.InCI() {
				t.Fatalf("%s is not installed", tool)
			}
			t.Skipf("%s is not installed", tool)
		}
	}
}

// goBuild builds the program at pkg (a path from the repository's root) as go run would.
func goBuild(pkg string) (string, error) {
	dir, err := os.MkdirTemp("", "svz-walkthrough-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin, nil
}

// svzShim writes into dir a program named svz that runs this test binary as svz.
func svzShim(t *testing.T, dir string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	svz := filepath.Join(dir, "svz")
	if err := os.WriteFile(svz, []byte("#!/bin/sh\nSVZ_TEST_AS_SVZ=1 exec '"+self+"' \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return svz
}

// runScript runs a walkthrough's script with bash in dir, as a user pastes it, with PATH, HOME=dir
// and env, and returns its output; it fails the test when the script fails. Whatever the script
// leaves running is stopped with it, and the whole run is bounded (walkthroughs wait for servers
// with unbounded loops).
func runScript(t *testing.T, dir, script string, env ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -e\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n"+script)
	// Its own process group, so that a timeout also stops what it started in the background.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the walkthrough failed: %v\n%s", err, out)
	}
	return string(out)
}

func freeLoopbackPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// buildBinaries builds svz and cmd/local, as `go run` would.
func buildBinaries(t *testing.T) (svz, local string) {
	t.Helper()
	dir := t.TempDir()
	svz, local = filepath.Join(dir, "svz"), filepath.Join(dir, "local")
	for bin, pkg := range map[string]string{svz: "github.com/supervaize/svz/cmd/svz", local: "github.com/supervaize/svz/cmd/local"} {
		if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	return svz, local
}

// TestGrantWalkthrough runs docs/grants.md's walkthrough as a user pastes it (go run replaced by
// the same binaries, ports by free ones), twice in the same directory: the second run must keep
// the key and its settings, and verify tokens again. Then with the JWKS recipe, which must serve
// the JWKS and not the private key.
func TestGrantWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	needTools(t, "bash", "curl", "python3")
	blocks := docBlocks(t)
	svz, local := buildBinaries(t)
	dir := t.TempDir()
	port, jwksPort := freeLoopbackPort(t), freeLoopbackPort(t)
	run := func(s string) string {
		t.Helper()
		s = strings.ReplaceAll(s, "go run ./cmd/svz", `"$SVZ"`)
		s = strings.ReplaceAll(s, "go run ./cmd/local", `"$LOCAL"`)
		s = strings.ReplaceAll(s, "127.0.0.1:8000", "127.0.0.1:"+port)
		s = strings.ReplaceAll(s, "8765", jwksPort)
		return runScript(t, dir, s, "SVZ="+svz, "LOCAL="+local, "SUPERVAIZER_PORT="+port)
	}
	const ok = `{"jsonrpc":"2.0","id":1,"result":{"status":"ok","effects":[{"type":"job.started","job_id":"job-1"`
	first := run(blocks[0])
	if !strings.Contains(first, ok) {
		t.Fatalf("first run:\n%s", first)
	}
	settings, _ := os.ReadFile(filepath.Join(dir, "studio-grant.env"))
	second := run(blocks[0])
	if !strings.Contains(second, ok) || !strings.Contains(second, "Kept the existing key pair and settings") {
		t.Fatalf("second run:\n%s", second)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "studio-grant.env")); string(again) != string(settings) || len(settings) == 0 {
		t.Fatal("the second run changed or emptied the settings file")
	}

	// The JWKS recipe, after step 1, instead of the PEM key.
	step1 := blocks[0][:strings.Index(blocks[0], "# 2.")]
	rest := blocks[0][len(step1):]
	probe := "until curl -sf http://127.0.0.1:" + jwksPort + "/studio-grant.jwks.json >/dev/null; do sleep 1; done\n" +
		"curl -s -o /dev/null -w 'key:%{http_code}\\n' http://127.0.0.1:" + jwksPort + "/studio-grant.key\n" +
		"curl -s -o /dev/null -w 'jwks:%{http_code}\\n' http://127.0.0.1:" + jwksPort + "/studio-grant.jwks.json\n"
	out := run(step1 + blocks[1] + probe + rest)
	if !strings.Contains(out, "key:404") || !strings.Contains(out, "jwks:200") || !strings.Contains(out, ok) {
		t.Fatalf("JWKS recipe:\n%s", out)
	}
}
