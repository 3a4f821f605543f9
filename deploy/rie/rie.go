// Package rie runs a Lambda bootstrap on this machine under the AWS Lambda Runtime Interface
// Emulator (aws-lambda-rie, no Docker) and invokes it: with raw events (Invoke), or with HTTP
// requests that FunctionURL turns into Function URL events, turning the function's answers
// (buffered, or in the RESPONSE_STREAM framing) back into HTTP responses, as a Function URL does.
//
// It serves `make invoke`, `svz deploy local --platform lambda` and the deploy tests.
package rie

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Module is the Go module of the emulator; `go install Module+"/cmd/aws-lambda-rie@latest"`
// installs it.
const Module = "github.com/aws/aws-lambda-runtime-interface-emulator"

// Find returns the emulator's path: path when given, else aws-lambda-rie on PATH, else in the Go
// bin directory (where go install puts it). The error says how to install it.
func Find(path string) (string, error) {
	if path != "" {
		p, err := exec.LookPath(path)
		if err != nil {
			return "", fmt.Errorf("the Lambda Runtime Interface Emulator %s: %w", path, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("aws-lambda-rie"); err == nil {
		return p, nil
	}
	var dirs []string
	if out, err := exec.Command("go", "env", "GOBIN").Output(); err == nil && strings.TrimSpace(string(out)) != "" {
		dirs = append(dirs, strings.TrimSpace(string(out)))
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, p := range filepath.SplitList(strings.TrimSpace(string(out))) {
			if p != "" {
				dirs = append(dirs, filepath.Join(p, "bin"))
			}
		}
	}
	for _, d := range dirs {
		if p, err := exec.LookPath(filepath.Join(d, "aws-lambda-rie")); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("the Lambda Runtime Interface Emulator (aws-lambda-rie) is not installed: run go install %s/cmd/aws-lambda-rie@latest (or make rie), or give its path", Module)
}

// Options say what to run.
type Options struct {
	RIE       string    // path of aws-lambda-rie
	Bootstrap string    // path of the bootstrap executable
	Env       []string  // the function's environment, exactly (the emulator adds the Runtime API address)
	Dir       string    // working directory ("" = the current one)
	Output    io.Writer // what the emulator and the bootstrap print; nil drops it
}

// Emulator is one running aws-lambda-rie with its bootstrap.
type Emulator struct {
	// URL is the invocation endpoint.
	URL string

	cmd     *exec.Cmd
	exited  chan struct{}
	exitErr error
	out     *syncWriter
	stop    sync.Once
}

// startWait bounds the wait for the emulator to listen. It is generous: a loaded machine can take
// seconds to start a process; an emulator that exits ends the wait at once.
const startWait = time.Minute

// Start runs the bootstrap under the emulator and returns once the emulator listens (the
// emulator starts the bootstrap at the first invocation, as Lambda does). Two loopback ports are
// picked for it; when another process takes one first, Start tries new ones.
func Start(ctx context.Context, o Options) (*Emulator, error) {
	const attempts = 3
	for i := 1; ; i++ {
		e, lost, err := start(ctx, o)
		if !lost || i == attempts {
			return e, err
		}
	}
}

func start(ctx context.Context, o Options) (e *Emulator, lostPort bool, err error) {
	api, err := freeAddr()
	if err != nil {
		return nil, false, err
	}
	runtime, err := freeAddr()
	if err != nil {
		return nil, false, err
	}
	if api == runtime {
		return nil, true, errors.New("no two free loopback ports")
	}
	out := &syncWriter{w: o.Output}
	cmd := exec.Command(o.RIE, "--runtime-interface-emulator-address", api, "--runtime-api-address", runtime, o.Bootstrap)
	cmd.Env = o.Env
	if cmd.Env == nil {
		cmd.Env = []string{} // exactly the given environment, never the caller's
	}
	cmd.Dir = o.Dir
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, false, fmt.Errorf("start %s: %w", o.RIE, err)
	}
	e = &Emulator{URL: "http://" + api + "/2015-03-31/functions/function/invocations", cmd: cmd, exited: make(chan struct{}), out: out}
	go func() {
		e.exitErr = cmd.Wait()
		close(e.exited)
	}()
	deadline := time.NewTimer(startWait)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if c, err := net.Dial("tcp", api); err == nil {
			c.Close()
			return e, false, nil
		}
		select {
		case <-e.exited:
			lost := strings.Contains(out.String(), "address already in use")
			return nil, lost, fmt.Errorf("the emulator exited before listening (%v): %s", e.exitErr, lastLines(out.String(), 5))
		case <-deadline.C:
			_ = e.Stop()
			return nil, false, fmt.Errorf("the emulator does not listen on %s after %s", api, startWait)
		case <-ctx.Done():
			_ = e.Stop()
			return nil, false, ctx.Err()
		case <-tick.C:
		}
	}
}

// freeAddr returns a loopback address nothing listens on now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}

// Exited is closed when the emulator ends.
func (e *Emulator) Exited() <-chan struct{} { return e.exited }

// Err is how the emulator ended, once Exited is closed.
func (e *Emulator) Err() error {
	select {
	case <-e.exited:
		return e.exitErr
	default:
		return nil
	}
}

// Output returns what the emulator and the bootstrap printed so far (the last 64 KiB).
func (e *Emulator) Output() string { return e.out.String() }

// Stop ends the emulator (SIGTERM, then SIGKILL after 10 s) and waits for it.
func (e *Emulator) Stop() error {
	e.stop.Do(func() {
		_ = e.cmd.Process.Signal(syscall.SIGTERM)
		t := time.NewTimer(10 * time.Second)
		defer t.Stop()
		select {
		case <-e.exited:
		case <-t.C:
			_ = e.cmd.Process.Kill()
			<-e.exited
		}
	})
	return nil
}

// Invocation is the emulator's answer to one event.
type Invocation struct {
	// Status is 200 when the function answered; another status is a failed invocation (an init
	// error, a crash), which a Function URL reports as 502.
	Status int
	// Payload is the function's response, or the error document.
	Payload []byte
}

// Invoke sends one event and returns the answer.
func (e *Emulator) Invoke(ctx context.Context, event []byte) (Invocation, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL, bytes.NewReader(event))
	if err != nil {
		return Invocation{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Invocation{}, fmt.Errorf("invoke: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Invocation{}, fmt.Errorf("invoke: read the answer: %w", err)
	}
	return Invocation{Status: resp.StatusCode, Payload: b}, nil
}

// syncWriter forwards to w and keeps the last 64 KiB.
type syncWriter struct {
	mu   sync.Mutex
	w    io.Writer
	tail []byte
}

const keep = 64 << 10

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tail = append(s.tail, p...)
	if len(s.tail) > keep {
		s.tail = s.tail[len(s.tail)-keep:]
	}
	if s.w != nil {
		_, _ = s.w.Write(p)
	}
	return len(p), nil
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.tail)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
