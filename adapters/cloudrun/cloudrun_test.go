package cloudrun

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
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

	"github.com/supervaize/svz/adapters/internal/httpkit"
	"github.com/supervaize/svz/adapters/internal/testkit"
)

// Each Serve registers a function with the framework's process-wide registry, where a name can
// be taken once: every test run gets fresh names.
var run atomic.Int64

func targetName(t *testing.T) string {
	return fmt.Sprintf("Controller%d_%s", run.Add(1), regexp.MustCompile(`\W`).ReplaceAllString(t.Name(), "_"))
}

// serve runs Serve for h on a loopback port with FUNCTION_TARGET set, and returns its base URL
// and a stop function returning Serve's result.
func serve(t *testing.T, h http.Handler, env map[string]string, opts ...Option) (string, func() error) {
	t.Helper()
	t.Setenv("FUNCTION_TARGET", targetName(t))
	for k, v := range env {
		t.Setenv(k, v)
	}
	port := testkit.Port(t, testkit.CloudRun)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		errc <- Serve(ctx, h, append([]Option{WithHost("127.0.0.1"), WithPort(strconv.Itoa(port))}, opts...)...)
	}()
	addr := testkit.Addr(port)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-errc:
			t.Fatalf("Serve: %v", err)
		default:
		}
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the framework does not listen on %s", addr)
		}
	}
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
	return "http://" + addr, stop
}

var timestampRE = regexp.MustCompile(`"timestamp":"[^"]*"`)

func TestServe(t *testing.T) {
	log, logs := testkit.Logger()
	release := make(chan struct{})
	slowStarted := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/deadline", func(w http.ResponseWriter, r *http.Request) {
		dl, ok := r.Context().Deadline()
		fmt.Fprintf(w, "%v %s", ok, time.Until(dl).Round(time.Second))
	})
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
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		close(slowStarted)
		<-release
		_, _ = io.WriteString(w, "done")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s", r.Method, r.URL.RequestURI())
	})
	base, stop := serve(t, mux, map[string]string{"CLOUD_RUN_TIMEOUT_SECONDS": "30"}, WithLogger(log))

	get := func(t *testing.T, path string) (int, string, error) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	t.Run("every path reaches the handler", func(t *testing.T) {
		if code, body, _ := get(t, "/.well-known/agents/v1.0/x_agent.json?a=1"); code != 200 || body != "GET /.well-known/agents/v1.0/x_agent.json?a=1" {
			t.Fatalf("%d %q", code, body)
		}
	})
	t.Run("Cloud Run timeout is the request deadline", func(t *testing.T) {
		if _, body, _ := get(t, "/deadline"); body != "true 30s" {
			t.Fatalf("deadline %q", body)
		}
	})
	t.Run("panic", func(t *testing.T) {
		code, body, _ := get(t, "/panic")
		body = timestampRE.ReplaceAllString(body, `"timestamp":"T"`)
		if code != 500 || body != `{"error":"Internal Error","error_type":"internal_error","detail":"The controller failed to handle the request","timestamp":"T","status_code":500}` {
			t.Fatalf("%d %s", code, body)
		}
		if !strings.Contains(logs.String(), `"panic":"boom sk-secret"`) {
			t.Fatalf("panic not logged: %s", logs)
		}
	})
	t.Run("panic after the response started", func(t *testing.T) {
		code, body, err := get(t, "/late-panic")
		if code != 200 || err == nil || strings.Contains(body, "panic occurred") {
			t.Fatalf("%d %q %v: the response must end broken", code, body, err)
		}
	})

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
	time.Sleep(50 * time.Millisecond) // let shutdown begin before probing it
	if code, body, _ := get(t, "/"); code != 503 || body != httpkit.ShuttingDownBody {
		t.Fatalf("during shutdown: %d %s", code, body)
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
	if err := stop(); err == nil || !strings.HasPrefix(err.Error(), "cloudrun: shutdown: 1 request(s) still running at the shutdown deadline were cancelled") {
		t.Fatalf("Serve: %v", err)
	}
}

func TestServeBadPort(t *testing.T) {
	for _, port := range []string{"http", "0", "65536"} {
		err := Serve(context.Background(), http.NotFoundHandler(), WithPort(port))
		if want := fmt.Sprintf("cloudrun: port %q must be a number from 1 to 65535", port); err == nil || err.Error() != want {
			t.Errorf("port %q: %v", port, err)
		}
	}
}

// A Cloud Run service without FUNCTION_TARGET registers its function at "/", which the
// framework allows once per process, and SIGTERM must reach a real process: this test runs the
// server in a child process (this test binary).
const childEnv = "SVZ_CLOUDRUN_TEST_CHILD"

func TestMain(m *testing.M) {
	if port := os.Getenv(childEnv); port != "" {
		log := slog.New(slog.NewJSONHandler(os.Stdout, nil))
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			log.Info("request", "path", r.URL.Path)
			time.Sleep(300 * time.Millisecond)
			fmt.Fprintf(w, "served %s", r.URL.Path)
		})
		if err := Serve(context.Background(), h, WithHost("127.0.0.1"), WithPort(port), WithLogger(log)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		log.Info("exited cleanly")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestServeWithoutTargetAndSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	port := testkit.Port(t, testkit.CloudRun)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FUNCTION_TARGET=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, childEnv+"="+strconv.Itoa(port), "K_SERVICE=svz-test")
	out := &testkit.LogBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	base := "http://" + testkit.Addr(port)
	var resp *http.Response
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err = http.Get(base + "/.well-known/health"); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("child never served: %v\n%s", err, out)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "served /.well-known/health" {
		t.Fatalf("body %q", b)
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
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(out.String(), `"path":"/a2a"`); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the request never started:\n%s", out)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := <-inflight; got != "served /a2a" {
		t.Fatalf("in-flight request: %q", got)
	}
	if err := cmd.Wait(); err != nil || !strings.Contains(out.String(), `"msg":"exited cleanly"`) {
		t.Fatalf("child: %v\n%s", err, out)
	}
}
