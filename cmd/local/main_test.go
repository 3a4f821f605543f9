package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core/grant/granttest"
	"github.com/supervaize/svz/examples/helloworld/hello"
	"github.com/supervaize/svz/internal/settingstest"
	"github.com/supervaize/svz/internal/syncbuf"
	"github.com/supervaize/svz/internal/testenv"
)

var bannerRE = regexp.MustCompile(`svz local mode: (http://\S+) `)

// startLocal runs the command as `go run ./cmd/local` would, on a port the kernel picks, and
// returns its output and base URL once it has printed its banner.
func startLocal(t *testing.T, env map[string]string, args ...string) (out *syncbuf.Buffer, base string) {
	t.Helper()
	if env["SUPERVAIZER_DATA_DIR"] == "" {
		env["SUPERVAIZER_DATA_DIR"] = t.TempDir()
	}
	ctx, cancel := context.WithCancel(context.Background())
	out, errOut := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"--port", "0"}, args...), func(k string) string { return env[k] }, out, errOut)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("local mode stopped with %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("local mode did not stop")
		}
	})
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		if m := bannerRE.FindStringSubmatch(out.String()); m != nil {
			return out, m[1]
		}
		select {
		case err := <-done:
			t.Fatalf("local mode exited: %v\n%s", err, errOut.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("local mode printed no banner:\n%s\n%s", out.String(), errOut.String())
	return nil, ""
}

var curlRE = regexp.MustCompile(`(?s)curl -s .*?\}\}'`)

// runCurls runs the printed commands with the real curl, as a user pastes them, and returns the
// JSON-RPC results.
func runCurls(t *testing.T, text string, env ...string) []map[string]any {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		if testenv.InCI() {
			t.Fatal("curl is not installed (scripts/with-services needs it too)")
		}
		t.Skip("curl is not installed")
	}
	cmds := curlRE.FindAllString(text, -1)
	if len(cmds) != 2 {
		t.Fatalf("found %d curl commands in:\n%s", len(cmds), text)
	}
	var results []map[string]any
	for i, c := range cmds {
		cmd := exec.Command("sh", "-c", c)
		cmd.Env = append(os.Environ(), env...)
		got, err := cmd.Output()
		if err != nil {
			t.Fatalf("command %d failed: %v\n%s", i, err, c)
		}
		var resp struct {
			Result map[string]any `json:"result"`
		}
		if err := json.Unmarshal(got, &resp); err != nil || resp.Result == nil {
			t.Fatalf("command %d answered %s", i, got)
		}
		results = append(results, resp.Result)
	}
	return results
}

// checkHello checks the answers of the two commands for Hello World.
func checkHello(t *testing.T, results []map[string]any) {
	t.Helper()
	js, _ := results[0]["job_state"].(map[string]any)
	job, _ := js["job"].(map[string]any)
	if results[0]["status"] != "ok" || job["id"] != "job-1" {
		t.Errorf("job.start answered %v", results[0])
	}
	doc, _ := results[1]["document"].(map[string]any)
	submit, _ := doc["submit"].(map[string]any)
	if results[1]["surface"] != "job.start" || submit["action"] != "job.start" {
		t.Errorf("surface.load answered %v", results[1])
	}
}

// TestPrintedCurlCommandsWork runs the two printed commands on servers started with wildcard
// hosts, which must bind loopback.
func TestPrintedCurlCommandsWork(t *testing.T) {
	for _, host := range []string{"0.0.0.0", "::0", "[::]", ""} {
		t.Run(host, func(t *testing.T) {
			out, base := startLocal(t, map[string]string{}, "--host", host)
			text := out.String()
			if !strings.HasPrefix(base, "http://127.0.0.1:") || !strings.Contains(text, "svz local mode: "+base+" (API key local-dev)") ||
				!strings.Contains(text, "workspace authorization is bypassed") ||
				!strings.Contains(text, "agent      "+base+"/.well-known/agents/v1.0/hello-world-ai-agent_agent.json") {
				t.Fatalf("welcome text:\n%s", text)
			}
			checkHello(t, runCurls(t, text))
		})
	}
}

// TestLocalModeBindsLoopbackOnly: SUPERVAIZER_HOST as well as --host; an address that is not
// loopback is refused before anything is served.
func TestLocalModeBindsLoopbackOnly(t *testing.T) {
	_, base := startLocal(t, map[string]string{"SUPERVAIZER_HOST": "::0"})
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Errorf("SUPERVAIZER_HOST=::0 served on %s", base)
	}
	for _, args := range [][]string{{"--host", "10.0.0.5"}, {"--host", "192.168.1.20"}, {"--host", "2001:db8::1"}} {
		var out bytes.Buffer
		err := run(context.Background(), append(args, "--port", "0"), func(string) string { return "" }, &out, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "local mode listens on loopback only") || out.Len() != 0 {
			t.Errorf("%v: %v, printed %q", args, err, out.String())
		}
	}
}

// TestChosenKeyStaysSecret: a user's own key is read from the environment by the printed
// commands and never printed.
func TestChosenKeyStaysSecret(t *testing.T) {
	const secret = "my-own-secret-key-123456"
	out, _ := startLocal(t, map[string]string{"SUPERVAIZER_API_KEY": secret})
	text := out.String()
	if strings.Contains(text, secret) || !strings.Contains(text, `-H "X-API-Key: $SUPERVAIZER_API_KEY"`) {
		t.Fatalf("welcome text leaks or misuses the key:\n%s", text)
	}
	checkHello(t, runCurls(t, text, "SUPERVAIZER_API_KEY="+secret))
}

// busyPort returns a port another listener holds until the test ends.
func busyPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// TestHelpAndFlagErrors: each bad flag or setting is reported as itself, with the port it would
// listen on busy (settings are checked before the port is bound), never as the busy port.
func TestHelpAndFlagErrors(t *testing.T) {
	busy := busyPort(t)
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, func(string) string { return "" }, &out, &errOut); err != nil ||
		!strings.HasPrefix(out.String(), "Usage: go run ./cmd/local [--host H] [--port P]") || !strings.Contains(out.String(), "-port") {
		t.Errorf("-h: %v\nstdout %q\nstderr %q", err, out.String(), errOut.String())
	}
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--port", "70000"}, nil, `port "70000": must be a whole number from 0 to 65535`},
		{[]string{"--bogus"}, nil, "flag provided but not defined: -bogus"},
		{[]string{"extra"}, nil, `unexpected arguments ["extra"]`},
		{nil, map[string]string{"SUPERVAIZER_PORT": "abc"}, `SUPERVAIZER_PORT="abc": must be a whole number from 0 to 65535`},
		{nil, map[string]string{"SUPERVAIZER_DISABLE_HELLO_WORLD": "TRUE"}, "SUPERVAIZER_DISABLE_HELLO_WORLD=true leaves no agent to serve"},
		{nil, map[string]string{"SUPERVAIZER_DISABLE_HELLO_WORLD": "sometimes"}, `SUPERVAIZER_DISABLE_HELLO_WORLD="sometimes" is not a boolean`},
		{nil, map[string]string{"SUPERVAIZER_LOG_LEVEL": "verbose"}, `SUPERVAIZER_LOG_LEVEL="verbose": must be one of DEBUG, INFO, WARNING, WARN, ERROR, CRITICAL`},
	} {
		env := map[string]string{"SUPERVAIZER_DATA_DIR": t.TempDir(), "SUPERVAIZER_PORT": busy}
		for k, v := range tc.env {
			env[k] = v
		}
		err := run(context.Background(), tc.args, func(k string) string { return env[k] }, &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "address already in use") {
			t.Errorf("run(%v, %v) = %v, want %q", tc.args, tc.env, err, tc.want)
		}
	}
}

// TestPortInUse: the error names the fix, and nothing is printed.
func TestPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	var printed bytes.Buffer
	err = run(context.Background(), []string{"--port", port}, func(k string) string {
		return map[string]string{"SUPERVAIZER_DATA_DIR": t.TempDir()}[k]
	}, &printed, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "listen on 127.0.0.1:"+port) ||
		!strings.HasSuffix(err.Error(), "another process is using this port; choose a free port with SUPERVAIZER_PORT, e.g. SUPERVAIZER_PORT=8001 (PORT, set by platforms, wins when both are set), or pass --port") ||
		printed.Len() != 0 {
		t.Errorf("port in use: err %v, printed %q", err, printed.String())
	}
}

// TestWelcomeWithVerification: with trust settings the bypass is off; the banner says how to mint
// one token for both commands, and the printed commands, run with such a token, both succeed.
func TestWelcomeWithVerification(t *testing.T) {
	iss := granttest.NewIssuer("dev")
	const issuer = "https://studio.svz-dev.invalid"
	out, _ := startLocal(t, map[string]string{
		"SUPERVAIZER_WORKSPACE_AUTH_REQUIRED":   "true",
		"SUPERVAIZER_WORKSPACE_AUTH_ISSUER":     issuer,
		"SUPERVAIZER_WORKSPACE_AUTH_PUBLIC_KEY": iss.PublicKeyPEM(),
		"SUPERVAIZER_SERVER_ID":                 "dev-server-1",
		"SUPERVAIZER_STUDIO_AGENT_IDS":          hello.Slug + "=dev-agent-1",
	})
	text := out.String()
	const mint = "TOKEN=$(svz dev token --agent hello-world-ai-agent --workspace local --scopes supervaizer/action.invoke,supervaizer/surface.load,job.start)"
	if strings.Contains(text, "bypassed") || !strings.Contains(text, "Workspace authorization is ON") || !strings.Contains(text, mint) ||
		strings.Count(text, `-H "X-Supervaize-Workspace-Authorization: Bearer $TOKEN"`) != 2 {
		t.Fatalf("welcome text:\n%s", text)
	}
	// How to get svz: from this repository (no release to install "@latest" from), and where it lands.
	if !strings.Contains(text, "  (svz, the CLI: in this svz repository, go install ./cmd/svz puts it in $(go env GOPATH)/bin, which must be on your PATH (or go run ./cmd/svz))\n") ||
		strings.Contains(text, "@latest") {
		t.Fatalf("welcome text, how to install svz:\n%s", text)
	}
	// The token the printed command mints: the scopes it names, for the printed workspace.
	tok := iss.Token(granttest.Valid(time.Now(), issuer, "supervaizer/action.invoke", "supervaizer/surface.load", "job.start").With(
		"aud", "supervaizer-server:dev-server-1", "server_id", "dev-server-1", "agent_id", "dev-agent-1",
		"agent_slug", hello.Slug, "workspace_id", "local", "workspace_slug", nil))
	checkHello(t, runCurls(t, text, "TOKEN="+tok))
}

// TestHalfConfiguredTrustRefused: an issuer and a key without REQUIRED would answer every call
// "not configured"; it does not start.
func TestHalfConfiguredTrustRefused(t *testing.T) {
	env := map[string]string{
		"SUPERVAIZER_DATA_DIR":                  t.TempDir(),
		"SUPERVAIZER_WORKSPACE_AUTH_ISSUER":     "https://studio.example",
		"SUPERVAIZER_WORKSPACE_AUTH_PUBLIC_KEY": granttest.NewIssuer("k").PublicKeyPEM(),
	}
	var out bytes.Buffer
	err := run(context.Background(), []string{"--port", "0"}, func(k string) string { return env[k] }, &out, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "SUPERVAIZER_WORKSPACE_AUTH_REQUIRED is not true") || out.Len() != 0 {
		t.Fatalf("run: %v, printed %q", err, out.String())
	}
}

// TestBadSettings runs the table every controller binary is held to (settingstest), with the
// port busy: a bad setting is reported as the bad setting.
func TestBadSettings(t *testing.T) {
	busy := busyPort(t)
	for _, c := range append(settingstest.Bad(), settingstest.URLs()...) {
		if _, ok := c.Env["SUPERVAIZER_LOCAL_MODE"]; ok {
			continue // cmd/local is local mode whatever the environment says
		}
		t.Run(c.Name, func(t *testing.T) {
			env := map[string]string{"SUPERVAIZER_DATA_DIR": t.TempDir(), "SUPERVAIZER_PORT": busy}
			for k, v := range c.Env {
				env[k] = v
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				done <- run(ctx, nil, func(k string) string { return env[k] }, &bytes.Buffer{}, &bytes.Buffer{})
			}()
			select {
			case err := <-done:
				settingstest.Check(t, c, err)
				if err != nil && strings.Contains(err.Error(), "address already in use") {
					t.Errorf("%s: reported as the busy port: %v", c.Name, err)
				}
			case <-time.After(60 * time.Second):
				t.Errorf("%s: still serving after a minute", c.Name)
			}
		})
	}
}
