package httpkit

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/supervaize/svz/adapters/internal/testkit"
)

// Tests that each kill a mutant the mutation tester left alive in serve.go (issue 30).

// TestReadHeaderTimeout: the headers are always bounded, by 10 s unless a positive bound is set.
func TestReadHeaderTimeout(t *testing.T) {
	for set, want := range map[time.Duration]time.Duration{
		0: 10 * time.Second, -time.Second: 10 * time.Second, time.Nanosecond: time.Nanosecond, time.Minute: time.Minute,
	} {
		if got := (Server{ReadHeaderTimeout: set}).readHeaderTimeout(); got != want {
			t.Errorf("ReadHeaderTimeout %v: %v, want %v", set, got, want)
		}
	}
}

// serveUntil runs s.Serve on a fresh loopback listener until the returned stop is called, and
// returns its address and stop, which returns what Serve returned.
func serveUntil(t *testing.T, s Server) (string, func() error) {
	t.Helper()
	ln := testkit.Listen(t)
	s.Name, s.Listener = "test", ln
	if s.Log == nil {
		s.Log, _ = testkit.Logger()
	}
	if s.ShutdownTimeout == 0 {
		s.ShutdownTimeout = time.Minute
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	var once sync.Once
	var err error
	stop := func() error {
		once.Do(func() {
			cancel()
			err = <-done
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return ln.Addr().String(), stop
}

// get makes one request on a new connection and returns its status and body.
func get(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	c := dial(t, addr)
	code, _, body := doRequest(t, c, bufio.NewReader(c), "GET", path, true)
	return code, body
}

// TestServeUncapped: MaxConnections 0 is no cap: every request is served, and a clean shutdown
// returns nil.
func TestServeUncapped(t *testing.T) {
	addr, stop := serveUntil(t, Server{HealthPath: "/health", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "served "+r.URL.Path)
	})})
	for range 3 {
		if code, body := get(t, addr, "/a2a"); code != 200 || body != "served /a2a" {
			t.Fatalf("uncapped: %d %q, want the request served", code, body)
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("a clean shutdown returned %v", err)
	}
}

// TestServeCapped: with MaxConnections 1 and the slot serving a request, another connection is in
// the reserve: health is served on it, anything else answered 503 (retry after a second), and
// either answer closes the connection. A clean shutdown (the request let finish) returns nil.
func TestServeCapped(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	addr, stop := serveUntil(t, Server{MaxConnections: 1, HealthPath: "/health", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(entered)
			<-release
		}
		_, _ = io.WriteString(w, "served "+r.URL.Path)
	})})
	var releaseOnce sync.Once
	let := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(let) // before stop, when the test fails early
	slow := dial(t, addr)
	if _, err := io.WriteString(slow, "GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	<-entered
	// The requests ask for keep-alive: the answer on a reserved connection closes it all the same,
	// giving the reserve back.
	for _, tc := range []struct {
		path   string
		code   int
		header http.Header
		body   string
	}{
		{"/a2a", http.StatusServiceUnavailable, http.Header{
			"Connection": {"close"}, "Content-Type": {"application/json"}, "Retry-After": {"1"}, "Content-Length": {strconv.Itoa(len(CapFullBody))},
		}, CapFullBody},
		{"/health", http.StatusOK, http.Header{
			"Connection": {"close"}, "Content-Type": {"text/plain; charset=utf-8"}, "Content-Length": {"14"},
		}, "served /health"},
	} {
		c := dial(t, addr)
		code, header, body := doRequest(t, c, bufio.NewReader(c), "GET", tc.path, false)
		if code != tc.code || !reflect.DeepEqual(header, tc.header) || body != tc.body {
			t.Fatalf("with the slot serving, %s: %d %v %q; want %d %v %q", tc.path, code, header, body, tc.code, tc.header, tc.body)
		}
		if !testkit.ClosedByServer(c) {
			t.Fatalf("with the slot serving, the connection of %s was kept open", tc.path)
		}
	}
	let()
	resp, err := http.ReadResponse(bufio.NewReader(slow), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "served /slow" {
		t.Fatalf("the slow request: %d %q", resp.StatusCode, b)
	}
	if err := stop(); err != nil {
		t.Fatalf("a clean shutdown returned %v", err)
	}
}

// TestServeShutdownCut: a request still running at the shutdown deadline is cancelled, and
// Serve says so.
func TestServeShutdownCut(t *testing.T) {
	entered := make(chan struct{})
	addr, stop := serveUntil(t, Server{ShutdownTimeout: time.Nanosecond, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-r.Context().Done()
	})})
	c := dial(t, addr)
	if _, err := io.WriteString(c, "GET /stuck HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	answered := make(chan struct{})
	go func() {
		_, _ = c.Read(make([]byte, 1)) // an answer, or the connection closed at the shutdown
		close(answered)
	}()
	select {
	case <-entered:
	case <-answered:
		t.Fatal("the request was answered without reaching the handler")
	}
	err := stop()
	const want = "test: shutdown: 1 request(s) still running at the shutdown deadline were cancelled: context deadline exceeded"
	if err == nil || err.Error() != want {
		t.Fatalf("Serve returned %v, want %s", err, want)
	}
}

// failingListener's Accept fails once fail is closed; closed is closed by its first Close.
type failingListener struct {
	net.Listener
	fail, closed chan struct{}
	once         sync.Once
}

func (l *failingListener) Accept() (net.Conn, error) {
	<-l.fail
	return nil, errors.New("accept: the listener broke")
}

func (l *failingListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

// hookHandler runs hook on the record of msg, before writing it.
type hookHandler struct {
	slog.Handler
	msg  string
	hook func()
}

func (h hookHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.hook()
	}
	return h.Handler.Handle(ctx, r)
}

// TestServeErrorAtShutdown: when the listener breaks as the shutdown begins (the server's Serve
// returns its error, not http.ErrServerClosed), Serve returns that error rather than nil.
func TestServeErrorAtShutdown(t *testing.T) {
	ln := &failingListener{Listener: testkit.Listen(t), fail: make(chan struct{}), closed: make(chan struct{})}
	// As "shutting down" is logged, after Serve saw ctx end and before it shuts the server down,
	// the listener breaks; the log waits until net/http's Serve has returned (it closes its
	// listener on the way out), so that the error is not one of the shutdown.
	log := slog.New(hookHandler{Handler: slog.NewTextHandler(io.Discard, nil), msg: "shutting down", hook: func() {
		close(ln.fail)
		<-ln.closed
	}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := Server{Name: "test", Listener: ln, Handler: http.NotFoundHandler(), Log: log, ShutdownTimeout: time.Minute}.Serve(ctx)
	if err == nil || err.Error() != "test: serve: accept: the listener broke" {
		t.Fatalf("Serve returned %v, want the listener's error", err)
	}
}

// TestServeListenerBroken: a listener that breaks while serving stops Serve with its error,
// naming the address.
func TestServeListenerBroken(t *testing.T) {
	ln := &failingListener{Listener: testkit.Listen(t), fail: make(chan struct{}), closed: make(chan struct{})}
	close(ln.fail)
	log, _ := testkit.Logger()
	err := Server{Name: "test", Listener: ln, Handler: http.NotFoundHandler(), Log: log, ShutdownTimeout: time.Minute}.Serve(context.Background())
	if want := "test: serve " + ln.Addr().String() + ": accept: the listener broke"; err == nil || err.Error() != want {
		t.Fatalf("Serve returned %v, want %s", err, want)
	}
}

// TestServeReleasesSignals: once Serve has returned, SIGTERM is the process's again (it ends it):
// Serve no longer turns it into a shutdown. Run in a child process, which the signal kills.
func TestServeReleasesSignals(t *testing.T) {
	// Both processes serve, then shut down at once: the parent too, so that coverage (which sees
	// the parent only) counts this test as one of Serve's.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	log, _ := testkit.Logger()
	if err := (Server{Name: "test", Listener: testkit.Listen(t), Handler: http.NotFoundHandler(), Log: log, ShutdownTimeout: time.Minute}).Serve(ctx); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("HTTPKIT_SIGNAL_CHILD") == "1" {
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
		select {} // the signal ends the process; if it is caught, the parent ends it at its bound
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeReleasesSignals$")
	cmd.Env = append(os.Environ(), "HTTPKIT_SIGNAL_CHILD=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(30 * time.Second): // generous: a loaded machine
		_ = cmd.Process.Kill()
		<-exited
		t.Fatal("SIGTERM after Serve returned did not end the process")
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("the child ended with %v, want killed by SIGTERM", cmd.ProcessState)
	}
}

// TestListen: an address in use names the fix; another failure names the address.
func TestListen(t *testing.T) {
	taken := testkit.Listen(t)
	_, err := Listen(taken.Addr().String(), "choose a free port with PORT")
	if !errors.Is(err, syscall.EADDRINUSE) || !strings.HasSuffix(err.Error(), ": another process is using this port; choose a free port with PORT") {
		t.Errorf("an address in use: %v", err)
	}
	if _, err := Listen("127.0.0.1:65536", "hint"); err == nil || !strings.HasPrefix(err.Error(), "listen on 127.0.0.1:65536: ") || strings.Contains(err.Error(), "hint") {
		t.Errorf("an invalid port: %v", err)
	}
	ln, err := Listen("127.0.0.1:0", "hint")
	if err != nil {
		t.Fatal(err)
	}
	_ = ln.Close()
}
