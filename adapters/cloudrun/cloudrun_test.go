package cloudrun

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"
	"github.com/supervaize/svz/adapters/internal/httpkit"
	"github.com/supervaize/svz/adapters/internal/testkit"
)

// serve runs Serve for h on a loopback listener, with env set, and returns its base URL and a
// stop function returning Serve's result.
func serve(t *testing.T, h http.Handler, env map[string]string, opts ...Option) (string, func() error) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	ln := testkit.Listen(t)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- Serve(ctx, h, append([]Option{WithListener(ln)}, opts...)...) }()
	var stopped bool
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

var timestampRE = regexp.MustCompile(`"timestamp":"[^"]*"`)

const internalErrorBody = `{"error":"Internal Error","error_type":"internal_error","detail":"The controller failed to handle the request","timestamp":"T","status_code":500}`

// testMux is the handler of TestServe and TestRegister.
func testMux(t *testing.T) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/deadline", testkit.WriteDeadline)
	mux.HandleFunc("/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: supervaizer.connected\ndata: {}\n\n")
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("flush: %v", err)
		}
		<-r.Context().Done() // until the client leaves or shutdown ends the stream
	})
	mux.HandleFunc("/panic", func(w http.ResponseWriter, r *http.Request) { panic("boom sk-secret") })
	mux.HandleFunc("/late-panic", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "partial")
		_ = http.NewResponseController(w).Flush()
		panic("late boom")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s", r.Method, r.URL.RequestURI())
	})
	return mux
}

func get(t *testing.T, url string) (int, string, error) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// testCommon checks what Serve and the Functions Framework must do alike.
func testCommon(t *testing.T, base string, logs *testkit.LogBuffer) {
	t.Run("every path reaches the handler", func(t *testing.T) {
		if code, body, _ := get(t, base+"/.well-known/agents/v1.0/x_agent.json?a=1"); code != 200 || body != "GET /.well-known/agents/v1.0/x_agent.json?a=1" {
			t.Fatalf("%d %q", code, body)
		}
	})
	t.Run("Cloud Run timeout is the request deadline", func(t *testing.T) {
		from := time.Now()
		_, body, _ := get(t, base+"/deadline")
		testkit.WantDeadline(t, testkit.ParseDeadline(t, body), from, time.Now(), 30*time.Second, time.Nanosecond)
	})
	t.Run("flushes reach the client", func(t *testing.T) {
		resp, err := http.Get(base + "/events")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close() // the client leaves: the stream ends
		if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || line != "event: supervaizer.connected\n" {
			t.Fatalf("the first event did not flush through: %q %v", line, err)
		}
	})
	t.Run("panic", func(t *testing.T) {
		code, body, _ := get(t, base+"/panic")
		body = timestampRE.ReplaceAllString(body, `"timestamp":"T"`)
		if code != 500 || body != internalErrorBody {
			t.Fatalf("%d %s", code, body)
		}
		if logs != nil && !strings.Contains(logs.String(), `"panic":"boom sk-secret"`) {
			t.Fatalf("panic not logged: %s", logs)
		}
	})
	t.Run("panic after the response started", func(t *testing.T) {
		code, body, err := get(t, base+"/late-panic")
		if code != 200 || err == nil || strings.Contains(body, "panic occurred") {
			t.Fatalf("%d %q %v: the response must end broken", code, body, err)
		}
	})
}

func TestServe(t *testing.T) {
	log, logs := testkit.Logger()
	release := make(chan struct{})
	slowStarted := make(chan struct{})
	mux := testMux(t)
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		close(slowStarted)
		<-release
		_, _ = io.WriteString(w, "done")
	})
	base, stop := serve(t, mux, map[string]string{"CLOUD_RUN_TIMEOUT_SECONDS": "30", "FUNCTION_TARGET": "Controller"}, WithLogger(log))
	testCommon(t, base, logs)
	if want := `"msg":"serving Cloud Run function","target":"Controller","addr":"` + strings.TrimPrefix(base, "http://") + `"`; !strings.Contains(logs.String(), want) {
		t.Fatalf("log %s\nwant %s", logs, want)
	}

	// A stream and a slow request are in flight when shutdown begins.
	stream, err := http.Get(base + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	br := bufio.NewReader(stream.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "event: supervaizer.connected\n" {
		t.Fatalf("the first event did not flush through: %q %v", line, err)
	}
	slow := make(chan string, 1)
	go func() {
		resp, err := http.Get(base + "/slow")
		if err != nil {
			slow <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		slow <- string(b)
	}()
	<-slowStarted
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	// Shutdown ends the stream: the client sees the rest of the event, then the end.
	if rest, err := io.ReadAll(br); err != nil || string(rest) != "data: {}\n\n" {
		t.Fatalf("stream after shutdown: %q %v", rest, err)
	}
	// Nothing new is served: the connection is refused, or answered 503 when it was accepted
	// just before the listener closed.
	probe := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	if resp, err := probe.Get(base + "/"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 503 || string(b) != httpkit.ShuttingDownBody {
			t.Fatalf("during shutdown: %d %s", resp.StatusCode, b)
		}
	}
	close(release)
	if got := <-slow; got != "done" {
		t.Fatalf("in-flight request: %q", got)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

func TestServeShutdownDeadline(t *testing.T) {
	log, _ := testkit.Logger()
	started := make(chan struct{})
	base, stop := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
	}), nil, WithLogger(log), WithShutdownTimeout(100*time.Millisecond))
	go func() {
		if resp, err := http.Get(base); err == nil {
			resp.Body.Close()
		}
	}()
	<-started
	if err := stop(); err == nil || err.Error() != "cloudrun: shutdown: 1 request(s) still running at the shutdown deadline were cancelled: context deadline exceeded" {
		t.Fatalf("Serve: %v", err)
	}
}

func TestServeBadSettings(t *testing.T) {
	taken := testkit.Listen(t).Addr().String()
	for _, tc := range []struct {
		name    string
		timeout string
		opts    []Option
		want    string
	}{
		{"port name", "", []Option{WithPort("http")}, `cloudrun: port "http" must be a number from 0 to 65535`},
		{"negative port", "", []Option{WithPort("-1")}, `cloudrun: port "-1" must be a number from 0 to 65535`},
		{"port too large", "", []Option{WithPort("65536")}, `cloudrun: port "65536" must be a number from 0 to 65535`},
		{"port taken", "", []Option{WithHost("127.0.0.1"), WithPort(strings.TrimPrefix(taken, "127.0.0.1:"))}, "cloudrun: listen on " + taken + ": listen tcp " + taken + ": bind: address already in use: another process is using this port; choose a free port with PORT"},
		{"timeout unit", "30s", nil, `cloudrun: CLOUD_RUN_TIMEOUT_SECONDS="30s": must be a whole number from 1 to 86400 seconds`},
		{"timeout zero", "0", nil, `cloudrun: CLOUD_RUN_TIMEOUT_SECONDS="0": must be a whole number from 1 to 86400 seconds`},
		{"timeout too long", "86401", nil, `cloudrun: CLOUD_RUN_TIMEOUT_SECONDS="86401": must be a whole number from 1 to 86400 seconds`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CLOUD_RUN_TIMEOUT_SECONDS", tc.timeout)
			log, _ := testkit.Logger()
			err := Serve(context.Background(), http.NotFoundHandler(), append(tc.opts, WithLogger(log))...)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error %v, want %s", err, tc.want)
			}
		})
	}
}

// TestRegister serves a registered function with the Functions Framework itself, as the main a
// buildpack generates for a source deployment does.
func TestRegister(t *testing.T) {
	t.Setenv("CLOUD_RUN_TIMEOUT_SECONDS", "30")
	testCommon(t, framework(t, testMux(t)), nil)
}

// Each framework server registers a function in the framework's process-wide registry, where a
// name can be taken once.
var registered atomic.Int64

// framework registers h with Register and serves it with funcframework.StartHostPort on a
// loopback port, and returns the base URL. The framework's server cannot be stopped: it lives
// until the test binary exits.
func framework(t *testing.T, h http.Handler) string {
	t.Helper()
	name := fmt.Sprintf("Controller%d", registered.Add(1))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /whoami", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, name) })
	mux.Handle("/", h)
	Register(name, mux)
	t.Setenv("FUNCTION_TARGET", name) // read when the framework starts
	for attempt := 1; attempt <= 3; attempt++ {
		if base, ok := startFramework(t, name); ok {
			return base
		}
	}
	t.Fatal("the framework lost its port to other processes 3 times")
	return ""
}

// startFramework starts the framework on a free port and returns its base URL once it serves
// the function name, or false when another process took the port first.
func startFramework(t *testing.T, name string) (string, bool) {
	t.Helper()
	port := strconv.Itoa(testkit.FreePort(t))
	base := "http://127.0.0.1:" + port
	errc := make(chan error, 1)
	go func() { errc <- funcframework.StartHostPort("127.0.0.1", port) }()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-errc:
			if strings.Contains(err.Error(), "address already in use") {
				return "", false
			}
			t.Fatalf("the framework does not serve: %v", err)
		default:
		}
		if resp, err := http.Get(base + "/whoami"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) == name {
				return base, true
			}
		}
	}
	t.Fatalf("the framework does not serve %s at %s", name, base)
	return "", false
}

// The SIGTERM test runs Serve in a child process (this test binary), as Cloud Run runs it: a
// service without FUNCTION_TARGET, on the port of PORT, stopped by a signal.
const childEnv = "SVZ_CLOUDRUN_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	os.Exit(m.Run())
}

func runChild() int {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: supervaizer.connected\ndata: {}\n\n")
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done()
		log.Info("stream ended")
	})
	mux.HandleFunc("POST /unread", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "served /unread") // net/http writes it once the body is read
		log.Info("unread handled")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		log.Info("request", "path", r.URL.Path)
		time.Sleep(300 * time.Millisecond)
		fmt.Fprintf(w, "served %s", r.URL.Path)
	})
	if err := Serve(context.Background(), mux, WithHost("127.0.0.1"), WithLogger(log)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	log.Info("exited cleanly")
	return 0
}

// TestServeWithoutTargetAndSIGTERM checks that on SIGTERM the process exits only after every
// in-flight response has been written to the end, including one net/http is still writing
// after its handler returned, and after ending the event streams cleanly.
func TestServeWithoutTargetAndSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FUNCTION_TARGET=") && !strings.HasPrefix(kv, "CLOUD_RUN_TIMEOUT_SECONDS=") && !strings.HasPrefix(kv, "GORACE=") {
			env = append(env, kv)
		}
	}
	// Port 0: the child takes a port from the kernel and logs it. The race detector's default
	// second of sleep at exit would let the child finish writing what it should have waited for.
	cmd.Env = append(env, childEnv+"=1", "K_SERVICE=svz-test", "PORT=0", "GORACE=atexit_sleep_ms=0")
	out := &testkit.LogBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()
	waitLog := func(want string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), want); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the child never logged %s:\n%s", want, out)
			}
		}
	}
	addr := testkit.ServingAddr(t, out)
	base := "http://" + addr
	if code, body, err := get(t, base+"/.well-known/health"); code != 200 || body != "served /.well-known/health" || err != nil {
		t.Fatalf("%d %q %v", code, body, err)
	}

	stream, err := http.Get(base + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	br := bufio.NewReader(stream.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "event: supervaizer.connected\n" {
		t.Fatalf("first event: %q %v", line, err)
	}
	inflight := make(chan string, 1)
	go func() {
		resp, err := http.Get(base + "/a2a")
		if err != nil {
			inflight <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		inflight <- string(b)
	}()
	waitLog(`"path":"/a2a"`)
	pending := testkit.StartUnfinishedPost(t, addr, "/unread")
	waitLog(`"msg":"unread handled"`)

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if rest, err := io.ReadAll(br); err != nil || string(rest) != "data: {}\n\n" {
		t.Fatalf("the stream did not end cleanly: %q %v", rest, err)
	}
	if got := <-inflight; got != "served /a2a" {
		t.Fatalf("in-flight request: %q", got)
	}
	// Every handler has returned; one response is still unwritten. A server that stopped at
	// its handlers would have let the process exit by now.
	select {
	case <-exited:
		t.Fatalf("the child exited (%v) before writing every response:\n%s", waitErr, out)
	case <-time.After(300 * time.Millisecond):
	}
	if err := pending.Finish(); err != nil {
		t.Fatalf("the child closed the unfinished request: %v", err)
	}
	if code, body, err := pending.Response(); code != 200 || body != "served /unread" || err != nil {
		t.Fatalf("response finished after SIGTERM: %d %q %v", code, body, err)
	}
	<-exited
	if waitErr != nil || !strings.Contains(out.String(), `"msg":"exited cleanly"`) {
		t.Fatalf("child: %v\n%s", waitErr, out)
	}
	for _, want := range []string{`"msg":"shutting down"`, `"msg":"stream ended"`} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("the child did not log %s:\n%s", want, out)
		}
	}
}
