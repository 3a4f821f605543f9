package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supervaize/svz/internal/testenv"
)

// syncBuffer is a bytes.Buffer safe for the server goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startLocal runs the command as `go run ./cmd/local` would and waits until it answers.
func startLocal(t *testing.T, env map[string]string, args ...string) (out *syncBuffer, base string) {
	t.Helper()
	port := freePort(t)
	env["SUPERVAIZER_DATA_DIR"] = t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	out, errOut := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append(args, "--port", strconv.Itoa(port)), func(k string) string { return env[k] }, out, errOut)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("local mode stopped with %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("local mode did not stop")
		}
	})
	base = "http://127.0.0.1:" + strconv.Itoa(port)
	for range 100 {
		if resp, err := http.Get(base + "/.well-known/health"); err == nil {
			resp.Body.Close()
			return out, base
		}
		select {
		case err := <-done:
			t.Fatalf("local mode exited: %v\n%s", err, errOut.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("local mode did not answer on %s\n%s", base, errOut.String())
	return nil, ""
}

var curlRE = regexp.MustCompile(`(?s)curl -s .*?\}\}'`)

// TestPrintedCurlCommandsWork runs the two printed commands with the real curl, as a user pastes
// them, on a server started with the wildcard host (which must bind loopback).
func TestPrintedCurlCommandsWork(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		if testenv.InCI() {
			t.Fatal("curl is not installed (scripts/with-services needs it too)")
		}
		t.Skip("curl is not installed")
	}
	out, base := startLocal(t, map[string]string{}, "--host", "0.0.0.0")
	text := out.String()
	if !strings.Contains(text, "svz local mode: "+base+" (API key local-dev)") || !strings.Contains(text, "workspace authorization is bypassed") {
		t.Fatalf("welcome text:\n%s", text)
	}
	cmds := curlRE.FindAllString(text, -1)
	if len(cmds) != 2 {
		t.Fatalf("found %d curl commands in:\n%s", len(cmds), text)
	}
	for i, want := range []func(map[string]any) bool{
		func(r map[string]any) bool {
			js, _ := r["job_state"].(map[string]any)
			job, _ := js["job"].(map[string]any)
			return r["status"] == "ok" && job["id"] == "job-1"
		},
		func(r map[string]any) bool {
			doc, _ := r["document"].(map[string]any)
			submit, _ := doc["submit"].(map[string]any)
			return r["surface"] == "job.start" && submit["action"] == "job.start"
		},
	} {
		got, err := exec.Command("sh", "-c", cmds[i]).Output()
		if err != nil {
			t.Fatalf("command %d failed: %v\n%s", i, err, cmds[i])
		}
		var resp struct {
			Result map[string]any `json:"result"`
		}
		if err := json.Unmarshal(got, &resp); err != nil || !want(resp.Result) {
			t.Errorf("command %d answered %s", i, got)
		}
	}
}

// TestChosenKeyStaysSecret: a user's own key is read from the environment by the printed
// commands and never printed.
func TestChosenKeyStaysSecret(t *testing.T) {
	const secret = "my-own-secret-key-123456"
	out, _ := startLocal(t, map[string]string{"SUPERVAIZER_API_KEY": secret})
	if text := out.String(); strings.Contains(text, secret) || !strings.Contains(text, `-H "X-API-Key: $SUPERVAIZER_API_KEY"`) {
		t.Errorf("welcome text leaks or misuses the key:\n%s", text)
	}
}

func TestFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--port", "70000"}, nil, "--port must be between 1 and 65535, got 70000"},
		{[]string{"extra"}, nil, `unexpected arguments ["extra"]`},
		{nil, map[string]string{"SUPERVAIZER_PORT": "http"}, "--port must be between 1 and 65535, got 0"},
		{nil, map[string]string{"SUPERVAIZER_DISABLE_HELLO_WORLD": "TRUE"}, "SUPERVAIZER_DISABLE_HELLO_WORLD=true leaves no agent to serve"},
	} {
		err := run(context.Background(), tc.args, func(k string) string { return tc.env[k] }, &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%v, %v) = %v, want %q", tc.args, tc.env, err, tc.want)
		}
	}
}

func TestBindHost(t *testing.T) {
	for in, want := range map[string]string{"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "127.0.0.1", "[::]": "127.0.0.1", "localhost": "localhost", "::1": "::1"} {
		if got := bindHost(in); got != want {
			t.Errorf("bindHost(%q) = %q, want %q", in, got, want)
		}
	}
}

// With a trust setting the bypass is off: the welcome says so and the commands carry the token
// header. A port in use fails before anything is printed.
func TestWelcomeFollowsTheAuthorizer(t *testing.T) {
	out, _ := startLocal(t, map[string]string{"SUPERVAIZER_WORKSPACE_AUTH_ISSUER": "https://studio.example"})
	text := out.String()
	if strings.Contains(text, "bypassed") || !strings.Contains(text, "Workspace authorization is ON") ||
		strings.Count(text, `-H "X-Supervaize-Workspace-Authorization: Bearer $TOKEN"`) != 2 {
		t.Errorf("welcome text:\n%s", text)
	}

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
	if err == nil || !strings.Contains(err.Error(), "listen on 127.0.0.1:"+port) || printed.Len() != 0 {
		t.Errorf("port in use: err %v, printed %q", err, printed.String())
	}
}
