package httpkit_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supervaize/svz/adapters/internal/httpkit"
	"github.com/supervaize/svz/adapters/internal/testkit"
)

func TestInternalErrorBody(t *testing.T) {
	now := time.Date(2026, 7, 8, 10, 0, 0, 123456789, time.FixedZone("CEST", 2*3600))
	got := string(httpkit.InternalErrorBody(now))
	want := `{"error":"Internal Error","error_type":"internal_error","detail":"The controller failed to handle the request","timestamp":"2026-07-08T08:00:00.123456+00:00","status_code":500}`
	if got != want {
		t.Fatalf("body:\n got %s\nwant %s", got, want)
	}
	if !json.Valid([]byte(got)) {
		t.Fatal("body is not JSON")
	}
}

var timestampRE = regexp.MustCompile(`"timestamp":"[^"]*"`)

// server serves h on 127.0.0.1 until the test ends.
func server(t *testing.T, h http.Handler) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func TestTrackerPanics(t *testing.T) {
	const secret = "sk-live-123456"
	cases := []struct {
		name       string
		handler    http.HandlerFunc
		wantStatus int
		wantBody   string
		wantErr    bool // the client sees a broken response
	}{
		{
			name: "before writing",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Partial", "1")
				panic("boom " + secret)
			},
			wantStatus: 500,
			wantBody:   `{"error":"Internal Error","error_type":"internal_error","detail":"The controller failed to handle the request","timestamp":"T","status_code":500}`,
		},
		{
			name: "after writing",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", "100")
				_, _ = w.Write([]byte("partial"))
				_ = http.NewResponseController(w).Flush()
				panic(errors.New("late " + secret))
			},
			wantStatus: 200,
			wantErr:    true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			log, logs := testkit.Logger()
			tr := httpkit.NewTracker(log, 0)
			srv := server(t, tr.Handler(tc.handler))
			resp, err := http.Get(srv.URL + "/x")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.wantStatus)
			}
			if tc.wantErr {
				if err == nil {
					t.Fatalf("the response looked complete: %q", body)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if got := timestampRE.ReplaceAllString(string(body), `"timestamp":"T"`); got != tc.wantBody {
					t.Fatalf("body %s, want %s", got, tc.wantBody)
				}
				if resp.Header.Get("X-Partial") != "" || resp.Header.Get("Content-Type") != "application/json" {
					t.Fatalf("headers %v", resp.Header)
				}
			}
			if strings.Contains(string(body), secret) {
				t.Fatal("the panic value leaked into the response")
			}
			if !strings.Contains(logs.String(), `"msg":"handler panicked"`) || !strings.Contains(logs.String(), secret) {
				t.Fatalf("panic not logged: %s", logs)
			}
		})
	}
}

func TestTrackerRequestDeadline(t *testing.T) {
	log, _ := testkit.Logger()
	tr := httpkit.NewTracker(log, time.Minute)
	srv := server(t, tr.Handler(http.HandlerFunc(testkit.WriteDeadline)))
	from := time.Now()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	testkit.WantDeadline(t, testkit.ParseDeadline(t, string(body)), from, time.Now(), time.Minute, time.Nanosecond)
}

// TestTrackerShutdown checks that shutdown ends streams at once, lets ordinary requests finish,
// refuses new ones, and returns when the last request is done.
func TestTrackerShutdown(t *testing.T) {
	log, _ := testkit.Logger()
	tr := httpkit.NewTracker(log, 0)
	release := make(chan struct{})
	started := make(chan string, 2)
	streamEnded := make(chan error, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		started <- "slow"
		<-release
		if r.Context().Err() != nil {
			t.Error("an ordinary request was cancelled by shutdown")
		}
		_, _ = io.WriteString(w, "done")
	})
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: hello\ndata: {}\n\n")
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("flush: %v", err)
		}
		started <- "stream"
		<-r.Context().Done()
		streamEnded <- r.Context().Err()
	})
	srv := server(t, tr.Handler(mux))
	let := sync.OnceFunc(func() { close(release) })
	t.Cleanup(let) // before the server's Close, which waits for /slow, when the test fails early

	slow := make(chan string, 1)
	go func() {
		resp, err := http.Get(srv.URL + "/slow")
		if err != nil {
			slow <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		slow <- string(b)
	}()
	resp, err := http.Get(srv.URL + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "event: hello\n" {
		t.Fatalf("first stream line %q, %v", line, err)
	}
	<-started
	<-started

	done := make(chan error, 1)
	go func() { done <- tr.Shutdown(context.Background()) }()
	select {
	case err := <-streamEnded:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("stream context: %v", err)
		}
	case <-time.After(30 * time.Second): // generous: a loaded machine
		t.Fatal("shutdown did not end the stream")
	}
	// New requests are refused while the slow one drains.
	r2, err := http.Get(srv.URL + "/slow")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r2.Body)
	r2.Body.Close()
	r2.Header.Del("Date")
	wantHeader := http.Header{"Content-Type": {"application/json"}, "Content-Length": {strconv.Itoa(len(httpkit.ShuttingDownBody))}}
	if r2.StatusCode != http.StatusServiceUnavailable || string(b) != httpkit.ShuttingDownBody || !r2.Close || !reflect.DeepEqual(r2.Header, wantHeader) {
		t.Fatalf("during shutdown: %d %v (connection closed %v) %s; want 503 %v (closed) %s", r2.StatusCode, r2.Header, r2.Close, b, wantHeader, httpkit.ShuttingDownBody)
	}
	select {
	case err := <-done:
		t.Fatalf("shutdown returned before the slow request finished: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	let()
	if got := <-slow; got != "done" {
		t.Fatalf("slow request: %q", got)
	}
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

func TestTrackerShutdownDeadline(t *testing.T) {
	log, _ := testkit.Logger()
	tr := httpkit.NewTracker(log, 0)
	cancelled := make(chan struct{})
	started := make(chan struct{})
	srv := server(t, tr.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
		close(cancelled)
	})))
	go func() {
		if resp, err := http.Get(srv.URL); err == nil {
			resp.Body.Close()
		}
	}()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := tr.Shutdown(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "1 request(s) still running") {
		t.Fatalf("shutdown error: %v", err)
	}
	select {
	case <-cancelled:
	case <-time.After(30 * time.Second): // generous: a loaded machine
		t.Fatal("the remaining request was not cancelled")
	}
}

func TestTrackerIdleShutdown(t *testing.T) {
	log, _ := testkit.Logger()
	tr := httpkit.NewTracker(log, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatalf("idle shutdown: %v", err)
	}
}

// serveTracked serves h, wrapped by a new tracker, with an http.Server on ln, or on 127.0.0.1
// when ln is nil.
func serveTracked(t *testing.T, h http.Handler, ln net.Listener) (*http.Server, *httpkit.Tracker, string) {
	t.Helper()
	log, _ := testkit.Logger()
	tr := httpkit.NewTracker(log, 0)
	srv := &http.Server{Handler: tr.Handler(h)}
	if ln == nil {
		ln = testkit.Listen(t)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return srv, tr, ln.Addr().String()
}

// TestDrain checks that Drain returns only once every response has been written, however long
// after its handler returned, while event streams end at once: after Drain, closing every
// connection (which the process exit does) cuts nothing.
func TestDrain(t *testing.T) {
	handled := make(chan struct{})
	streaming := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /unread", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "done") // the request body is left unread
		close(handled)
	})
	mux.HandleFunc("GET /stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: hello\ndata: {}\n\n")
		_ = http.NewResponseController(w).Flush()
		close(streaming)
		<-r.Context().Done()
	})
	srv, tr, addr := serveTracked(t, mux, nil)

	stream, err := http.Get("http://" + addr + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	<-streaming
	pending := testkit.StartUnfinishedPost(t, addr, "/unread")
	<-handled

	drained := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		drained <- httpkit.Drain(ctx, srv, tr)
	}()
	if b, err := io.ReadAll(stream.Body); err != nil || string(b) != "event: hello\ndata: {}\n\n" {
		t.Fatalf("the stream did not end cleanly: %q %v", b, err)
	}
	select {
	case err := <-drained:
		t.Fatalf("Drain returned before the response was written: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := pending.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := <-drained; err != nil {
		t.Fatalf("Drain: %v", err)
	}
	_ = srv.Close()
	if code, body, err := pending.Response(); code != http.StatusOK || body != "done" || err != nil {
		t.Fatalf("response after Drain: %d %q %v", code, body, err)
	}
}

// TestDrainDeadline checks that a connection still open at the deadline (its request body
// unfinished) is closed, and said so.
func TestDrainDeadline(t *testing.T) {
	handled := make(chan struct{})
	srv, tr, addr := serveTracked(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "done")
		close(handled)
	}), nil)
	pending := testkit.StartUnfinishedPost(t, addr, "/")
	<-handled
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := httpkit.Drain(ctx, srv, tr)
	if err == nil || err.Error() != "connections still open at the shutdown deadline were closed: context deadline exceeded" ||
		!errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Drain: %v", err)
	}
	// net/http writes the header after the handler returns: if the shutdown had begun by then,
	// keep-alives are off and the response goes out at once (the connection still waits for the
	// body, and is closed at the deadline); otherwise it waits for the body and is cut. Either
	// way nothing else arrives.
	if code, body, err := pending.Response(); err == nil && (code != http.StatusOK || body != "done") {
		t.Fatalf("after the deadline: %d %q", code, body)
	}
}

// TestDrainHandlerDeadline checks that a handler still running at the deadline is cancelled,
// and Drain reports it.
func TestDrainHandlerDeadline(t *testing.T) {
	started := make(chan struct{})
	srv, tr, addr := serveTracked(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
	}), nil)
	go func() {
		if resp, err := http.Get("http://" + addr); err == nil {
			resp.Body.Close()
		}
	}()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := httpkit.Drain(ctx, srv, tr); err == nil ||
		err.Error() != "1 request(s) still running at the shutdown deadline were cancelled: context deadline exceeded" {
		t.Fatalf("Drain: %v", err)
	}
}

// closeFailsListener is a listener whose Close fails (after closing it).
type closeFailsListener struct{ net.Listener }

func (l closeFailsListener) Close() error {
	_ = l.Listener.Close()
	return errors.New("close: the listener broke")
}

// TestDrainListenerError: every connection went idle in time but the listener did not close
// cleanly: Drain says so, not that connections were cut.
func TestDrainListenerError(t *testing.T) {
	srv, tr, addr := serveTracked(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "done")
	}), closeFailsListener{testkit.Listen(t)})
	// A request answered: the server serves the listener, which its shutdown closes.
	resp, err := http.Get("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := httpkit.Drain(ctx, srv, tr); err == nil || err.Error() != "close the listener: close: the listener broke" {
		t.Fatalf("Drain: %v", err)
	}
}

// BenchmarkTracker measures what the tracker adds to a request: the wrapper, its writer and the
// request context.
func BenchmarkTracker(b *testing.B) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok"}`)
	})
	log, _ := testkit.Logger()
	for _, bc := range []struct {
		name string
		h    http.Handler
	}{{"bare", h}, {"tracked", httpkit.NewTracker(log, time.Minute).Handler(h)}} {
		b.Run(bc.name, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodGet, "/.well-known/health", nil)
			b.ReportAllocs()
			for b.Loop() {
				bc.h.ServeHTTP(httptest.NewRecorder(), r)
			}
		})
	}
}
