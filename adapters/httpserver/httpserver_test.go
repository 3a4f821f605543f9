package httpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/supervaize/svz/adapters/internal/httpkit"
	"github.com/supervaize/svz/adapters/internal/testkit"
)

func TestListenAddr(t *testing.T) {
	cases := []struct {
		addr, port string
		loopback   bool
		want       string
		wantErr    string
	}{
		{want: ":8000"},
		{port: "9090", want: ":9090"},
		{addr: "127.0.0.1:1234", port: "9090", want: "127.0.0.1:1234"},
		{loopback: true, want: "127.0.0.1:8000"},
		{addr: "0.0.0.0:80", loopback: true, want: "127.0.0.1:80"},
		{addr: "[::]:80", loopback: true, want: "127.0.0.1:80"},
		{addr: "10.0.0.5:80", loopback: true, want: "10.0.0.5:80"},
		{addr: "0.0.0.0:80", want: "0.0.0.0:80"},
		{port: "http", wantErr: `httpserver: listen address ":http": port must be a number from 0 to 65535`},
		{port: "70000", wantErr: `httpserver: listen address ":70000": port must be a number from 0 to 65535`},
		{addr: "localhost", wantErr: `httpserver: listen address "localhost": address localhost: missing port in address`},
	}
	for _, tc := range cases {
		got, err := listenAddr(tc.addr, tc.port, tc.loopback)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("listenAddr(%q, %q): error %v, want %s", tc.addr, tc.port, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("listenAddr(%q, %q, %v) = %q, %v; want %q", tc.addr, tc.port, tc.loopback, got, err, tc.want)
		}
	}
}

// serve runs Serve on a test listener and returns its base URL and a function that stops it and
// returns Serve's result.
func serve(t *testing.T, h http.Handler, opts ...Option) (string, func() error) {
	t.Helper()
	return serveOn(t, testkit.Listen(t), h, opts...)
}

// serveOn is serve on ln.
func serveOn(t *testing.T, ln net.Listener, h http.Handler, opts ...Option) (string, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- Serve(ctx, h, append([]Option{WithListener(ln)}, opts...)...) }()
	stopped := false
	var result error
	stop := func() error {
		if !stopped {
			stopped = true
			cancel()
			select {
			case result = <-errc:
			case <-time.After(20 * time.Second):
				t.Fatal("Serve did not return")
			}
		}
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return "http://" + ln.Addr().String(), stop
}

func TestServeTimeoutsAndDeadline(t *testing.T) {
	log, _ := testkit.Logger()
	deadline := make(chan time.Time, 1)
	base, stop := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dl, _ := r.Context().Deadline()
		deadline <- dl
		_, _ = io.WriteString(w, "ok")
	}), WithLogger(log), WithTimeouts(Timeouts{Write: 30 * time.Second}))
	from := time.Now()
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok" {
		t.Fatalf("body %q", b)
	}
	testkit.WantDeadline(t, <-deadline, from, time.Now(), 30*time.Second, time.Nanosecond)
	if err := stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := http.Get(base + "/"); err == nil {
		t.Fatal("server still accepts after shutdown")
	}
}

// TestServeSlowHeaders checks that a client that never finishes its headers is cut off.
func TestServeSlowHeaders(t *testing.T) {
	log, _ := testkit.Logger()
	base, _ := serve(t, http.NotFoundHandler(), WithLogger(log), WithTimeouts(Timeouts{ReadHeader: 200 * time.Millisecond}))
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	start := time.Now()
	_, err = io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the server kept a connection with unfinished headers open")
	}
	// The 200 ms set, not the default: only the default's wait (or longer) tells them apart on a
	// machine that may run the server seconds late.
	if took := time.Since(start); took >= defaultTimeouts().ReadHeader {
		t.Fatalf("connection closed after %v: the default read-header timeout applied, not the 200 ms set", took)
	}
}

func TestServeFlushes(t *testing.T) {
	log, _ := testkit.Logger()
	release := make(chan struct{})
	base, _ := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: supervaizer.connected\ndata: {}\n\n")
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("flush: %v", err)
		}
		<-release
	}), WithLogger(log))
	defer close(release)
	resp, err := http.Get(base + "/a2a/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "event: supervaizer.connected\n" {
		t.Fatalf("first line before the handler returned: %q, %v", line, err)
	}
}

func TestServeListenError(t *testing.T) {
	ln := testkit.Listen(t)
	err := Serve(context.Background(), http.NotFoundHandler(), WithAddr(ln.Addr().String()))
	if err == nil || !strings.HasPrefix(err.Error(), "httpserver: listen on "+ln.Addr().String()+": ") ||
		!strings.HasSuffix(err.Error(), "address already in use: another process is using this port; "+PortHint) {
		t.Fatalf("error %v", err)
	}
	if err := Serve(context.Background(), http.NotFoundHandler(), WithAddr("127.0.0.1:x")); err == nil ||
		err.Error() != `httpserver: listen address "127.0.0.1:x": port must be a number from 0 to 65535` {
		t.Fatalf("error %v", err)
	}
}

func TestServeShutdownDeadline(t *testing.T) {
	log, _ := testkit.Logger()
	started := make(chan struct{})
	base, stop := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done() // ignores shutdown until cancelled
	}), WithLogger(log), WithTimeouts(Timeouts{Shutdown: 100 * time.Millisecond}))
	go func() {
		if resp, err := http.Get(base); err == nil {
			resp.Body.Close()
		}
	}()
	<-started
	err := stop()
	if err == nil || !strings.Contains(err.Error(), "httpserver: shutdown: 1 request(s) still running at the shutdown deadline were cancelled") {
		t.Fatalf("Serve: %v", err)
	}
}

// The SIGTERM test runs the server in a child process (this test binary) so that the signal
// reaches a real process, as it does on a platform.
const childEnv = "SVZ_HTTPSERVER_TEST_CHILD"

// floodChildEnv runs the child of TestCapReclaimsWaitingHeadersUnderFileLimit: the server with
// its default cap under a soft RLIMIT_NOFILE of the value given.
const floodChildEnv = "SVZ_HTTPSERVER_TEST_FLOOD_NOFILE"

func TestMain(m *testing.M) {
	if nofile := os.Getenv(floodChildEnv); nofile != "" {
		os.Exit(runFloodChild(nofile))
	}
	if addr := os.Getenv(childEnv); addr != "" {
		os.Exit(runChild(addr))
	}
	os.Exit(m.Run())
}

// runFloodChild serves health and an echo of the path on 127.0.0.1, port 0, with the default
// connection cap under a soft file limit of nofile, and timeouts no test reaches.
func runFloodChild(nofile string) int {
	n, err := strconv.ParseUint(nofile, 10, 64)
	var lim syscall.Rlimit
	if err == nil {
		err = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	if err == nil {
		lim.Cur = n
		err = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "file limit:", err)
		return 1
	}
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == HealthPath {
			_, _ = io.WriteString(w, `{"status":"ok"}`)
			return
		}
		_, _ = io.WriteString(w, "served "+r.URL.Path)
	})
	long := 10 * time.Minute
	if err := Serve(context.Background(), h, WithAddr("127.0.0.1:0"), WithLogger(log),
		WithTimeouts(Timeouts{ReadHeader: long, Read: long, Idle: long})); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func runChild(addr string) int {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	mux := http.NewServeMux()
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		log.Info("slow started")
		time.Sleep(500 * time.Millisecond)
		_, _ = io.WriteString(w, "done")
	})
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: supervaizer.connected\ndata: {}\n\n")
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done()
		log.Info("stream ended")
	})
	if err := Serve(context.Background(), mux, WithAddr(addr), WithLogger(log)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	log.Info("exited cleanly")
	return 0
}

func TestServeSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	// Port 0: the child takes a port from the kernel and logs it.
	cmd, stdout := startChild(t, childEnv+"=127.0.0.1:0")
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	waitLog := func(msg string) string {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("child exited before logging %q", msg)
				}
				if strings.Contains(l, `"msg":"`+msg+`"`) {
					return l
				}
			case <-timeout:
				t.Fatalf("child did not log %q", msg)
			}
		}
	}
	var serving struct{ Addr string }
	if err := json.Unmarshal([]byte(waitLog("serving HTTP")), &serving); err != nil || serving.Addr == "" {
		t.Fatalf("no address in the serving log: %v", err)
	}
	addr := serving.Addr

	stream, err := http.Get("http://" + addr + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	streamBody := make(chan string, 1)
	go func() { b, _ := io.ReadAll(stream.Body); streamBody <- string(b) }()
	slow := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + addr + "/slow")
		if err != nil {
			slow <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		slow <- fmt.Sprintf("%d %s", resp.StatusCode, b)
	}()
	waitLog("slow started")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := <-slow; got != "200 done" {
		t.Fatalf("in-flight request: %q", got)
	}
	if got := <-streamBody; got != "event: supervaizer.connected\ndata: {}\n\n" {
		t.Fatalf("stream body %q", got)
	}
	waitLog("stream ended")
	waitLog("exited cleanly")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
}

// TestConnectionCap: with a cap of 3, three requests being served hold the server (a connection
// serving a request is never reclaimed); the reserve takes the next connections for health only;
// any connection beyond is closed as soon as accepted (the warning says so), health still
// answers, and the held requests are still served. Nothing is timed: every wait is an end bounded
// by 30 s.
func TestConnectionCap(t *testing.T) {
	log, logs := testkit.Logger()
	ln := testkit.Listen(t)
	const capN = 3
	started, release := make(chan struct{}, capN), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == HealthPath:
			_, _ = io.WriteString(w, `{"status":"ok"}`)
			return
		case strings.HasPrefix(r.URL.Path, "/held-"):
			started <- struct{}{}
			<-release
		}
		_, _ = io.WriteString(w, "served "+r.URL.Path)
	})
	serveOn(t, ln, h, WithLogger(log), WithMaxConnections(capN), WithTimeouts(Timeouts{ReadHeader: 10 * time.Minute, Read: 10 * time.Minute}))
	addr := ln.Addr().String()
	dial := func(partial string) net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if partial != "" {
			_, _ = io.WriteString(c, partial) // may fail on a connection already closed
		}
		return c
	}
	// A whole request on a new connection: its status and body, or an error when it was closed.
	get := func(path string) (int, string, error) {
		c := dial("GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0, "", err
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}

	held := make([]net.Conn, capN)
	for i := range held {
		held[i] = dial("GET /held-" + strconv.Itoa(i) + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		<-started // being served: not waiting for a request, so never reclaimed
	}
	// These come after the held ones: with no connection waiting for a request to reclaim, they
	// fill the reserve (which has 2 s to send its headers) and go beyond it.
	beyond := make([]net.Conn, httpkit.ReservedConnections+5)
	for i := range beyond {
		beyond[i] = dial("GET /beyond HTTP/1.1\r\nHost: x\r\n")
	}
	for i, c := range beyond {
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, err := io.ReadAll(c)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("connection %d beyond the cap still open after 30 s", i)
		}
	}
	if !strings.Contains(logs.String(), "connection refused: the connection cap is reached (SUPERVAIZER_MAX_CONNECTIONS) and every connection is serving a request") {
		t.Fatalf("no connection was refused at accept:\n%s", logs.String())
	}

	// The reserve answers health, and only health, while the cap is reached.
	if code, body, err := get(HealthPath); err != nil || code != http.StatusOK || body != `{"status":"ok"}` {
		t.Fatalf("health at the cap: %d %q %v", code, body, err)
	}
	if code, body, err := get("/other"); err != nil || code != http.StatusServiceUnavailable || body != httpkit.CapFullBody {
		t.Fatalf("another route at the cap: %d %q %v", code, body, err)
	}

	// The held requests were kept: each is answered once let go.
	close(release)
	for i, c := range held {
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("held connection %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if want := "served /held-" + strconv.Itoa(i); resp.StatusCode != http.StatusOK || string(b) != want {
			t.Fatalf("held connection %d: %d %q", i, resp.StatusCode, b)
		}
	}
	// Their slots are given back once closed: a request is served again.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		code, body, err := get("/again")
		if err == nil && code == http.StatusOK && body == "served /again" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the held connections closed: %d %q %v", code, body, err)
		}
	}
}

func TestDefaultMaxConnections(t *testing.T) {
	for nofile, want := range map[uint64]int{0: 1, 1: 1, 4: 3, 1024: 768, 20000: 4096, 1 << 20: 4096} {
		if got := httpkit.DefaultMaxConnectionsFor(nofile); got != want {
			t.Errorf("nofile %d: %d, want %d", nofile, got, want)
		}
	}
}

// TestCapReclaimsWaitingHeadersUnderFileLimit: a server with the default cap under a file limit
// of 256 (cap 192), flooded with (file limit + 500) connections that each send part of their
// headers and nothing more, stays reachable: each new connection takes the slot of the oldest
// one still waiting for its headers, so the oldest 564 are closed and the newest 192 kept; a
// health check and a request then get in the same way, and every kept connection is served once
// it finishes its headers. Real sockets; every wait is on what the server does, bounded by 30 s.
func TestCapReclaimsWaitingHeadersUnderFileLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	const nofile = 256
	_, stdout := startChild(t, floodChildEnv+"="+strconv.Itoa(nofile))
	var logs syncLines
	go logs.read(stdout)
	var serving struct {
		Addr           string
		MaxConnections int `json:"max_connections"`
	}
	if err := json.Unmarshal([]byte(logs.wait(t, `"msg":"serving HTTP"`)), &serving); err != nil || serving.Addr == "" {
		t.Fatalf("no address in the serving log: %v", err)
	}
	capN := serving.MaxConnections
	if capN != httpkit.DefaultMaxConnectionsFor(nofile) {
		t.Fatalf("the child's cap is %d, want the default under a file limit of %d: %d", capN, nofile, httpkit.DefaultMaxConnectionsFor(nofile))
	}

	dial := func(what string) net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", serving.Addr)
		if err != nil {
			t.Fatalf("dial %s: %v", what, err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	flood := make([]net.Conn, nofile+500)
	for i := range flood {
		flood[i] = dial("flood connection " + strconv.Itoa(i))
		if _, err := io.WriteString(flood[i], "GET /flood-"+strconv.Itoa(i)+" HTTP/1.1\r\nHost: x\r\n"); err != nil {
			t.Fatalf("flood connection %d: %v", i, err)
		}
	}
	// The accept queue is first in, first out: the oldest are the ones closed.
	closed := len(flood) - capN
	for i := range closed {
		if !testkit.ClosedByServer(flood[i]) {
			t.Fatalf("flood connection %d, among the oldest %d, is still open after 30 s", i, closed)
		}
	}
	// Both keep their connection (keep-alive): the cap stays full, so each takes a slot from a
	// flood connection.
	get := func(path string) (int, string) {
		t.Helper()
		c := dial(path)
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("GET %s during the flood: %v", path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(HealthPath); code != http.StatusOK || body != `{"status":"ok"}` {
		t.Fatalf("health during the flood: %d %q", code, body)
	}
	if code, body := get("/a2a"); code != http.StatusOK || body != "served /a2a" {
		t.Fatalf("a request during the flood: %d %q", code, body)
	}
	// Each took the slot of the oldest flood connection left; the others are served once they
	// finish their headers.
	for i := closed; i < closed+2; i++ {
		if !testkit.ClosedByServer(flood[i]) {
			t.Fatalf("flood connection %d was not reclaimed for the health check or the request", i)
		}
	}
	for i := closed + 2; i < len(flood); i++ {
		if _, err := io.WriteString(flood[i], "Connection: close\r\n\r\n"); err != nil {
			t.Fatalf("kept flood connection %d: %v", i, err)
		}
		_ = flood[i].SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(flood[i]), nil)
		if err != nil {
			t.Fatalf("kept flood connection %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if want := "served /flood-" + strconv.Itoa(i); resp.StatusCode != http.StatusOK || string(b) != want {
			t.Fatalf("kept flood connection %d: %d %q", i, resp.StatusCode, b)
		}
	}
	logs.wait(t, `connection reclaimed: the connection cap is reached`)
}

// startChild runs this test binary as a child (see TestMain) with env added, its stderr the
// test's, and returns it with its stdout; it is killed when the test ends. The race detector's
// default second of sleep at exit would let a child finish writing what it should have waited
// for: it is off.
func startChild(t *testing.T, env string) (*exec.Cmd, io.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env, "GORACE=atexit_sleep_ms=0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, stdout
}

// syncLines collects a child's output lines for tests to wait on.
type syncLines struct {
	mu    sync.Mutex
	lines []string
	more  chan struct{}
}

func (s *syncLines) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		s.mu.Lock()
		s.lines = append(s.lines, sc.Text())
		if s.more != nil {
			close(s.more)
			s.more = nil
		}
		s.mu.Unlock()
	}
}

// wait returns the first line containing sub, waiting for it at most 30 s.
func (s *syncLines) wait(t *testing.T, sub string) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for seen := 0; ; {
		s.mu.Lock()
		for ; seen < len(s.lines); seen++ {
			if strings.Contains(s.lines[seen], sub) {
				l := s.lines[seen]
				s.mu.Unlock()
				return l
			}
		}
		if s.more == nil {
			s.more = make(chan struct{})
		}
		more := s.more
		s.mu.Unlock()
		select {
		case <-more:
		case <-timeout:
			t.Fatalf("the child did not log %q within 30 s", sub)
		}
	}
}
