// Package httpkit is what the long-running adapters (httpserver, cloudrun) do the same way around
// the controller: one serve-and-drain loop (Server) with bounded headers, turn a handler panic
// into the 500 JSON body, give every request the deadline by which its response must be written,
// close the connection of a refused request whose body was left unread (a caller refused before
// its body was read cannot hold the connection by never sending it), and shut down without cutting
// in-flight responses while ending event streams, which never finish on their own.
//
// Shutting down takes both halves: the Tracker knows the handlers (it ends the streams, refuses
// late requests, cancels what outlives the deadline), and the http.Server knows the connections.
// A handler's return is not the end of its response: net/http writes the buffered body and the
// chunk terminator afterwards. Drain runs both, and returns only once every response is written.
package httpkit

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"
	"time"
)

// InternalErrorBody is the body of a 500 answered for a handler panic, in the reference SDK's
// error shape. It never carries the panic value: that goes to the log only.
func InternalErrorBody(now time.Time) []byte {
	return fmt.Appendf(nil, `{"error":"Internal Error","error_type":"internal_error","detail":"The controller failed to handle the request","timestamp":%q,"status_code":500}`,
		now.UTC().Format("2006-01-02T15:04:05.000000+00:00"))
}

// WriteInternalError answers 500 with InternalErrorBody.
func WriteInternalError(w http.ResponseWriter, now time.Time) {
	h := w.Header()
	for k := range h {
		delete(h, k) // whatever the handler had set describes a response that will not be sent
	}
	h.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusInternalServerError)
	_, _ = w.Write(InternalErrorBody(now))
}

// LogPanic logs a recovered handler panic with its stack.
func LogPanic(log *slog.Logger, r *http.Request, v any) {
	log.Error("handler panicked", "panic", fmt.Sprint(v), "method", r.Method, "path", r.URL.Path, "stack", string(debug.Stack()))
}

// ShuttingDownBody answers requests that arrive once shutdown has begun.
const ShuttingDownBody = `{"detail":"Server is shutting down"}`

// Tracker wraps a handler to recover its panics, bound its requests, and drain it at shutdown.
// A request that has flushed is a stream: Shutdown cancels its context at once so it ends, while
// other requests keep running until they finish or the shutdown deadline passes.
type Tracker struct {
	log     *slog.Logger
	timeout time.Duration

	mu       sync.Mutex
	closing  bool
	active   map[*request]struct{}
	idle     chan struct{} // closed when closing and no request is active
	idleOnce sync.Once
}

type request struct {
	cancel    context.CancelFunc
	streaming bool
}

// NewTracker returns a tracker logging to log. A positive timeout becomes the deadline of every
// request context: the server stops writing a response then, so handlers (and event streams)
// should finish before.
func NewTracker(log *slog.Logger, timeout time.Duration) *Tracker {
	return &Tracker{log: log, timeout: timeout, active: map[*request]struct{}{}, idle: make(chan struct{})}
}

// Handler returns h wrapped by the tracker.
func (t *Tracker) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ctx context.Context
		var cancel context.CancelFunc
		if t.timeout > 0 {
			ctx, cancel = context.WithTimeout(r.Context(), t.timeout)
		} else {
			ctx, cancel = context.WithCancel(r.Context())
		}
		defer cancel() // the request's context ends with its handler, whoever serves it
		req := &request{cancel: cancel}
		if !t.begin(req) {
			w.Header().Set("Connection", "close")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(ShuttingDownBody))
			return
		}
		defer t.end(req)
		tw := &trackedWriter{ResponseWriter: w, t: t, req: req}
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			tw.body = &eofBody{ReadCloser: r.Body}
			r.Body = tw.body
		}
		defer tw.closeIfRefusedUnread()
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler { // a sentinel panic value, as net/http compares it
				panic(v)
			}
			LogPanic(t.log, r, v)
			if tw.wrote {
				// Part of the response is gone: abort it rather than let it look complete.
				panic(http.ErrAbortHandler)
			}
			WriteInternalError(tw, time.Now())
		}()
		h.ServeHTTP(tw, r.WithContext(ctx))
	})
}

func (t *Tracker) begin(req *request) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closing {
		return false
	}
	t.active[req] = struct{}{}
	return true
}

func (t *Tracker) end(req *request) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.active, req)
	t.signalIdle()
}

// streaming marks req as a stream; during shutdown that ends it at once.
func (t *Tracker) streaming(req *request) {
	t.mu.Lock()
	defer t.mu.Unlock()
	req.streaming = true
	if t.closing {
		req.cancel()
	}
}

// signalIdle closes idle once shutdown has begun and nothing is active. The caller holds mu.
func (t *Tracker) signalIdle() {
	if t.closing && len(t.active) == 0 {
		t.idleOnce.Do(func() { close(t.idle) })
	}
}

// Shutdown refuses new requests (503), ends the streams, and waits for the other handlers to
// return. When ctx ends first it cancels every remaining request and returns ctx's error. The
// responses may still be being written when it returns: see Drain.
func (t *Tracker) Shutdown(ctx context.Context) error {
	t.mu.Lock()
	t.closing = true
	for req := range t.active {
		if req.streaming {
			req.cancel()
		}
	}
	t.signalIdle()
	t.mu.Unlock()
	select {
	case <-t.idle:
		return nil
	case <-ctx.Done():
	}
	t.mu.Lock()
	n := len(t.active)
	for req := range t.active {
		req.cancel()
	}
	t.mu.Unlock()
	return fmt.Errorf("%d request(s) still running at the shutdown deadline were cancelled: %w", n, ctx.Err())
}

// Drain shuts down srv, whose handler t wraps. srv stops accepting connections and closes each
// one once idle, that is once its response has been written to the end; meanwhile t ends the
// event streams (their connections would never become idle), answers 503 to requests already
// read, and waits for the other handlers. Drain returns nil when all of that is done before ctx
// ends. Otherwise the remaining requests are cancelled and the connections closed, and Drain
// says what was cut.
func Drain(ctx context.Context, srv *http.Server, t *Tracker) error {
	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.Shutdown(ctx) }()
	handlersErr := t.Shutdown(ctx)
	connsErr := <-srvErr
	if handlersErr == nil && connsErr == nil {
		return nil
	}
	_ = srv.Close()
	if handlersErr != nil {
		return handlersErr
	}
	if ctx.Err() == nil { // every connection went idle, but a listener did not close cleanly
		return fmt.Errorf("close the listener: %w", connsErr)
	}
	return fmt.Errorf("connections still open at the shutdown deadline were closed: %w", connsErr)
}

// trackedWriter records whether the response has started and when the handler flushes. It
// unwraps to the server's writer so http.ResponseController reaches deadlines and hijacking.
type trackedWriter struct {
	http.ResponseWriter
	t       *Tracker
	req     *request
	body    *eofBody // nil when the request has no body
	wrote   bool
	refused bool // the status is 400 or above
	flush   bool
}

// eofBody records whether the handler read the request body to its end.
type eofBody struct {
	io.ReadCloser
	eof bool
}

func (b *eofBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

// refusedUnread reports a refusal (status 400 or above) of a request whose body the handler did
// not read to the end: the body will never be read, so the connection must not wait for it.
func (w *trackedWriter) refusedUnread() bool { return w.refused && w.body != nil && !w.body.eof }

// start is called before the response header goes out, with its status. For a refusal that left
// the body unread the connection closes after the response: otherwise net/http reads (up to 256
// KiB of) the body before sending the header, so a caller refused before its body was read (no
// API key) that promises a body and never sends it would get no answer until the read timeout.
// A success that ignores the body keeps net/http's behaviour (the body is drained for keep-alive).
func (w *trackedWriter) start(code int) {
	if w.wrote {
		return
	}
	w.wrote = true
	w.refused = code >= 400
	if w.refusedUnread() {
		w.Header().Set("Connection", "close")
	}
}

// Lingering close of a refused request whose body was not read (nginx's lingering_close): the
// body still on its way is read and dropped for at most refusedBodyGrace and refusedBodyLinger
// bytes, then the connection closes. net/http alone would either wait for the body until the read
// timeout (a caller promising a body it never sends holds the connection) or, for a large body,
// close with unread data, which resets a client still sending before it can read the answer.
const (
	refusedBodyGrace  = time.Second
	refusedBodyLinger = 8 << 20
)

// closeIfRefusedUnread drops what is left of a refused request's body, within the bounds above,
// once the response is written.
func (w *trackedWriter) closeIfRefusedUnread() {
	if !w.refusedUnread() {
		return
	}
	rc := http.NewResponseController(w.ResponseWriter)
	_ = rc.Flush() // the answer goes out before the lingering read
	_ = rc.SetReadDeadline(time.Now().Add(refusedBodyGrace))
	_, _ = io.CopyN(io.Discard, w.body, refusedBodyLinger)
}

func (w *trackedWriter) WriteHeader(code int) {
	if code >= 200 {
		w.start(code)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *trackedWriter) Write(p []byte) (int, error) {
	w.start(http.StatusOK)
	return w.ResponseWriter.Write(p)
}

// FlushError flushes to the client; the first flush marks the request as a stream.
func (w *trackedWriter) FlushError() error {
	w.start(http.StatusOK)
	if !w.flush {
		w.flush = true
		w.t.streaming(w.req)
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Flush implements http.Flusher for handlers that type-assert it.
func (w *trackedWriter) Flush() { _ = w.FlushError() }

// Unwrap returns the server's writer (for http.ResponseController).
func (w *trackedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

var (
	_ http.Flusher                              = (*trackedWriter)(nil)
	_ interface{ FlushError() error }           = (*trackedWriter)(nil)
	_ interface{ Unwrap() http.ResponseWriter } = (*trackedWriter)(nil)
)
