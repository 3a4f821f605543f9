package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
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

// repoRoot is the repository's root, where the walkthroughs start.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// goEnv is the Go settings a walkthrough's go build needs besides PATH (its HOME is a temporary
// directory, where the default caches would be empty).
var goEnv = sync.OnceValues(func() ([]string, error) {
	out, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH", "GOTOOLCHAIN", "GOFLAGS", "GOPROXY").Output()
	if err != nil {
		return nil, fmt.Errorf("go env: %w", err)
	}
	var env []string
	for i, name := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOTOOLCHAIN", "GOFLAGS", "GOPROXY"} {
		if v := strings.Split(string(out), "\n")[i]; v != "" {
			env = append(env, name+"="+v)
		}
	}
	return env, nil
})

// runScript runs a walkthrough's script with bash from the repository's root, as a user pastes
// it, with PATH, the Go settings, HOME and TMPDIR set to tmp (its mktemp -d lands there) and env,
// and returns its output. It fails the test when the script fails, when it leaves a process
// running (anything left in its process group once it exits, stopped then), when a port of ports
// is still taken after it, and when it leaves a new file in the repository's root. The whole run
// is bounded.
func runScript(t *testing.T, tmp, script string, ports []string, env ...string) string {
	t.Helper()
	goenv, err := goEnv()
	if err != nil {
		t.Fatal(err)
	}
	root := repoRoot(t)
	before := rootEntries(t, root)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -e\n"+script)
	// Its own process group: what it leaves running is found there, and stopped with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A process left running keeps the output pipe open: Wait then returns this long after bash
	// exits, and the process is reported below.
	cmd.WaitDelay = 10 * time.Second
	cmd.Dir = root
	cmd.Env = append(append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + tmp, "TMPDIR=" + tmp}, goenv...), env...)
	out, err := cmd.CombinedOutput()
	left := groupProcesses(cmd.Process.Pid)
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if err != nil && !errors.Is(err, exec.ErrWaitDelay) {
		t.Fatalf("the walkthrough failed: %v\n%s", err, out)
	}
	if len(left) > 0 {
		t.Errorf("the walkthrough left processes running:\n%s", strings.Join(left, "\n"))
	}
	for _, port := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err != nil {
			t.Errorf("port %s is still taken after the walkthrough: %v", port, err)
			continue
		}
		ln.Close()
	}
	for name := range rootEntries(t, root) {
		if !before[name] {
			t.Errorf("the walkthrough left %s in the repository", name)
			_ = os.RemoveAll(filepath.Join(root, name))
		}
	}
	return string(out)
}

// rootEntries lists the names in the repository's root.
func rootEntries(t *testing.T, root string) map[string]bool {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, e := range entries {
		names[e.Name()] = true
	}
	return names
}

// groupProcesses lists the processes of process group pgid ("pid command line"), from /proc.
func groupProcesses(pgid int) []string {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []string
	for _, d := range dirs {
		stat, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp …; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 3 || f[2] != strconv.Itoa(pgid) || f[0] == "Z" {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(d, "cmdline"))
		out = append(out, filepath.Base(d)+" "+strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " "))
	}
	return out
}

// scriptDir is the temporary directory a walkthrough made with mktemp -d under tmp.
func scriptDir(t *testing.T, tmp string) string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(tmp, "tmp.*"))
	if len(dirs) != 1 {
		t.Fatalf("want the one directory the walkthrough made with mktemp -d in %s, found %v", tmp, dirs)
	}
	return dirs[0]
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

// TestGrantWalkthrough runs docs/grants.md's walkthrough as written from the repository's root
// (ports replaced by free ones), twice in the same shell's directory ($W): the second run must keep
// the key and its settings, and verify tokens again. Then with the JWKS recipe, which must serve
// the JWKS and not the private key. Each run must stop what it started and leave the repository
// as it was (runScript).
func TestGrantWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	needTools(t, "bash", "curl", "python3", "mktemp", "seq")
	blocks := docBlocks(t)
	tmp := t.TempDir()
	port, jwksPort := freeLoopbackPort(t), freeLoopbackPort(t)
	run := func(s string, env ...string) string {
		t.Helper()
		s = strings.ReplaceAll(s, "127.0.0.1:8000", "127.0.0.1:"+port)
		s = strings.ReplaceAll(s, "8765", jwksPort)
		return runScript(t, tmp, s, []string{port, jwksPort}, append(env, "SUPERVAIZER_PORT="+port)...)
	}
	const ok = `{"jsonrpc":"2.0","id":1,"result":{"status":"ok","effects":[{"type":"job.started","job_id":"job-1"`
	first := run(blocks[0])
	if !strings.Contains(first, ok) {
		t.Fatalf("first run:\n%s", first)
	}
	dir := scriptDir(t, tmp)
	settings, _ := os.ReadFile(filepath.Join(dir, "studio-grant.env"))
	second := run(blocks[0], "W="+dir) // the same shell: $W is set
	if !strings.Contains(second, ok) || !strings.Contains(second, "Kept the existing key pair and settings") {
		t.Fatalf("second run:\n%s", second)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "studio-grant.env")); string(again) != string(settings) || len(settings) == 0 {
		t.Fatal("the second run changed or emptied the settings file")
	}

	// The JWKS recipe, after step 1, instead of the PEM key; the server stopped as it says.
	step1 := blocks[0][:strings.Index(blocks[0], "# 2.")]
	rest := blocks[0][len(step1):]
	// The recipe waits for its server itself: a call made before it serves is refused, and every
	// call for the cooldown after it (the test adds no wait of its own).
	if !strings.Contains(blocks[1], "JWKS_SERVER=$!\nwait_for \"the JWKS server\" curl -sf http://127.0.0.1:8765/studio-grant.jwks.json\n") {
		t.Fatalf("the JWKS recipe does not wait for its server before the first call:\n%s", blocks[1])
	}
	probe := "curl -s -o /dev/null -w 'key:%{http_code}\\n' http://127.0.0.1:" + jwksPort + "/studio-grant.key\n" +
		"curl -s -o /dev/null -w 'jwks:%{http_code}\\n' http://127.0.0.1:" + jwksPort + "/studio-grant.jwks.json\n"
	if !strings.Contains(blocks[1], "then: kill $JWKS_SERVER; wait $JWKS_SERVER") {
		t.Fatalf("the JWKS recipe does not say how to stop its server:\n%s", blocks[1])
	}
	// python3's server ends on the signal itself (status 143): the user's shell only reports it.
	out := run(step1+blocks[1]+probe+rest+"kill $JWKS_SERVER; wait $JWKS_SERVER || true\n", "W="+dir)
	if !strings.Contains(out, "key:404") || !strings.Contains(out, "jwks:200") || !strings.Contains(out, ok) {
		t.Fatalf("JWKS recipe:\n%s", out)
	}
}
