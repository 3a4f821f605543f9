package httpkit

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supervaize/svz/adapters/internal/testkit"
)

// Tests that each kill a mutant the mutation tester left alive in httpkit.go (issue 30).

// TestTrackerContextEndsWithHandler: the context a handler gets ends when the handler returns,
// even when its parent never does (a server other than net/http, which cancels its own).
func TestTrackerContextEndsWithHandler(t *testing.T) {
	for _, timeout := range []time.Duration{0, time.Hour} {
		log, _ := testkit.Logger()
		var ctx context.Context
		h := NewTracker(log, timeout).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ctx = r.Context() }))
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
		if err := ctx.Err(); err != context.Canceled {
			t.Errorf("timeout %v: the handler's context after it returned: %v, want %v", timeout, err, context.Canceled)
		}
	}
}

// doneWatched reports when Done is first called: Tracker.Shutdown calls it once it has begun
// refusing requests and ending streams, to wait for the handlers.
type doneWatched struct {
	context.Context
	called chan struct{}
	once   sync.Once
}

func (c *doneWatched) Done() <-chan struct{} {
	c.once.Do(func() { close(c.called) })
	return c.Context.Done()
}

// TestTrackerStreamDuringShutdown: a request that starts streaming once shutdown has begun is
// ended at once, as the streams running when it began were; shutdown then returns. Requests that
// ended before do not count as the tracker gone idle: nothing is signalled before shutdown.
func TestTrackerStreamDuringShutdown(t *testing.T) {
	log, _ := testkit.Logger()
	tr := NewTracker(log, 0)
	flushNow, giveUp := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(giveUp) }) // a handler left waiting by a failed test returns
	entered, ended := make(chan struct{}), make(chan error, 1)
	h := tr.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/stream" {
			return
		}
		close(entered)
		<-flushNow
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-giveUp:
		}
		ended <- r.Context().Err()
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/done", nil))
	select {
	case <-tr.idle:
		t.Fatal("a request ended before any shutdown signalled the tracker idle")
	default:
	}

	served := make(chan struct{})
	go func() {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/stream", nil))
		close(served)
	}()
	<-entered
	ctx := &doneWatched{Context: context.Background(), called: make(chan struct{})}
	shut := make(chan error, 1)
	go func() { shut <- tr.Shutdown(ctx) }()
	<-ctx.called // shutdown has begun: the stream starts now
	close(flushNow)
	select {
	case err := <-shut:
		if err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	case <-time.After(30 * time.Second): // generous: a loaded machine
		t.Fatal("a stream begun during shutdown was not ended")
	}
	if err := <-ended; err != context.Canceled {
		t.Fatalf("the stream's context: %v, want %v", err, context.Canceled)
	}
	<-served
}

// TestTrackerPanicKinds: http.ErrAbortHandler is net/http's own (passed on, not logged nor
// answered 500); a panic once the response has started, by a Write or a Flush, aborts it rather
// than append the 500 body to it. (A panic before is answered 500: TestTrackerPanics.)
func TestTrackerPanicKinds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler func(w http.ResponseWriter)
		panic   any // what ServeHTTP panics with
		code    int
		body    string
		logged  bool
	}{
		{"abort before writing", func(http.ResponseWriter) { panic(http.ErrAbortHandler) }, http.ErrAbortHandler, 200, "", false},
		{"after a write", func(w http.ResponseWriter) { _, _ = io.WriteString(w, "partial"); panic("boom") }, http.ErrAbortHandler, 200, "partial", true},
		{"after a flush", func(w http.ResponseWriter) { w.(http.Flusher).Flush(); panic("boom") }, http.ErrAbortHandler, 200, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, logs := testkit.Logger()
			h := NewTracker(log, 0).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { tc.handler(w) }))
			rec := httptest.NewRecorder()
			var got any
			func() {
				defer func() { got = recover() }()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			}()
			if body := rec.Body.String(); got != tc.panic || rec.Code != tc.code || body != tc.body {
				t.Fatalf("panicked with %v, answered %d %q; want %v, %d %q", got, rec.Code, body, tc.panic, tc.code, tc.body)
			}
			if logged := strings.Contains(logs.String(), `"msg":"handler panicked"`); logged != tc.logged {
				t.Fatalf("panic logged %v, want %v:\n%s", logged, tc.logged, logs)
			}
		})
	}
}

// lingerWriter stands for net/http's writer as http.ResponseController reaches it: it records
// what the tracker does with the response and the connection, in order.
type lingerWriter struct {
	header   http.Header
	events   []string
	deadline time.Time
}

func (w *lingerWriter) Header() http.Header { return w.header }
func (w *lingerWriter) WriteHeader(code int) {
	w.events = append(w.events, "header "+strconv.Itoa(code))
}
func (w *lingerWriter) Write(p []byte) (int, error) {
	w.events = append(w.events, "write "+string(p))
	return len(p), nil
}
func (w *lingerWriter) FlushError() error {
	w.events = append(w.events, "flush")
	return nil
}
func (w *lingerWriter) SetReadDeadline(t time.Time) error {
	w.events = append(w.events, "read deadline")
	w.deadline = t
	return nil
}

// zeroBody is a request body of n zero bytes that records how much was read, in w's events.
type zeroBody struct {
	n, read int
	w       *lingerWriter
}

func (b *zeroBody) Read(p []byte) (int, error) {
	if b.read == 0 {
		b.w.events = append(b.w.events, "read body")
	}
	n := min(len(p), b.n-b.read)
	if n == 0 {
		return 0, io.EOF
	}
	clear(p[:n])
	b.read += n
	return n, nil
}

func (b *zeroBody) Close() error { return nil }

// TestRefusedBodyLingers: a refusal that left the body unread is sent (flushed) first; then what
// is left of the body is read and dropped, within refusedBodyGrace and up to refusedBodyLinger
// bytes, and the connection closes. A refusal after the body was read, or a success, leaves the
// connection to net/http.
func TestRefusedBodyLingers(t *testing.T) {
	const size = refusedBodyLinger + 1 // more than is read
	for _, tc := range []struct {
		name    string
		handler func(w http.ResponseWriter, r *http.Request)
		events  []string
		header  http.Header
		read    int
	}{
		{"refused unread", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, "no") // the response started already: still a refusal
		}, []string{"header 401", "write no", "flush", "read deadline", "read body"}, http.Header{"Connection": {"close"}}, refusedBodyLinger},
		{"refused read", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusBadRequest)
		}, []string{"read body", "header 400"}, http.Header{}, size},
		{"success unread", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "ok")
		}, []string{"write ok"}, http.Header{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, _ := testkit.Logger()
			w := &lingerWriter{header: http.Header{}}
			body := &zeroBody{n: size, w: w}
			r := httptest.NewRequest(http.MethodPost, "/", nil)
			r.Body, r.ContentLength = body, size
			before := time.Now()
			NewTracker(log, 0).Handler(http.HandlerFunc(tc.handler)).ServeHTTP(w, r)
			after := time.Now()
			if !reflect.DeepEqual(w.events, tc.events) || !reflect.DeepEqual(w.header, tc.header) || body.read != tc.read {
				t.Fatalf("events %q, header %v, %d bytes read; want %q, %v, %d", w.events, w.header, body.read, tc.events, tc.header, tc.read)
			}
			if tc.read == refusedBodyLinger && (w.deadline.Before(before.Add(refusedBodyGrace)) || w.deadline.After(after.Add(refusedBodyGrace))) {
				t.Fatalf("read deadline %v after the request began (which took %v), want %v", w.deadline.Sub(before), after.Sub(before), refusedBodyGrace)
			}
		})
	}
}
