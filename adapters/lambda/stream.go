package lambda

import (
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/supervaize/svz/adapters/internal/httpkit"
)

// streamChunk is how much written data a streamWriter holds before delivering it unflushed
// (net/http's server buffers 4 KiB; a larger chunk means fewer, larger writes to the runtime).
const streamChunk = 16 << 10

// errHandlerPanicked ends a stream whose handler panicked after the response had started: the
// runtime reports the invocation as failed and the client sees a cut response.
var errHandlerPanicked = errors.New("lambda: the handler panicked after the response had started")

// streamWriter writes a Function URL streaming response (InvokeMode RESPONSE_STREAM). As on a
// server, the status and headers leave with the first delivery (a flush, a full chunk or the end
// of the handler); each Flush delivers what was written so far to the client.
type streamWriter struct {
	header  http.Header
	status  int
	head    bool
	pw      *io.PipeWriter
	ready   chan<- *events.LambdaFunctionURLStreamingResponse
	started bool // status and headers delivered
	buf     []byte
	err     error // the first delivery error: the client is gone
}

func (w *streamWriter) Header() http.Header { return w.header }

func (w *streamWriter) WriteHeader(code int) {
	if w.status != 0 || code < 200 {
		return
	}
	w.status = code
}

func (w *streamWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	if w.err != nil {
		return 0, w.err
	}
	if w.head {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	if len(w.buf) >= streamChunk {
		w.deliver()
	}
	return len(p), w.err
}

// FlushError delivers everything written so far to the client.
func (w *streamWriter) FlushError() error {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	w.deliver()
	return w.err
}

// Flush implements http.Flusher.
func (w *streamWriter) Flush() { _ = w.FlushError() }

// deliver sends the head (once) and the buffered body down the pipe the runtime reads from.
func (w *streamWriter) deliver() {
	if !w.started {
		w.started = true
		h := w.header.Clone()
		sniff(h, w.status, w.buf)
		w.ready <- &events.LambdaFunctionURLStreamingResponse{
			StatusCode: w.status,
			Headers:    joinHeaders(h, false),
			Cookies:    h["Set-Cookie"],
		}
	}
	if len(w.buf) == 0 || w.err != nil {
		return
	}
	_, err := w.pw.Write(w.buf)
	w.buf = w.buf[:0]
	if err != nil {
		w.err = err
	}
}

// finish ends the response once the handler has returned.
func (w *streamWriter) finish() {
	_ = w.FlushError()
	_ = w.pw.Close()
}

// fail ends the response after a handler panic: a 500 when nothing was sent yet, else a broken
// stream.
func (w *streamWriter) fail() {
	if w.started {
		_ = w.pw.CloseWithError(errHandlerPanicked)
		return
	}
	w.header = http.Header{"Content-Type": {"application/json"}}
	w.status = http.StatusInternalServerError
	w.buf = append(w.buf[:0], httpkit.InternalErrorBody(time.Now())...)
	w.finish()
}

var (
	_ http.Flusher                    = (*streamWriter)(nil)
	_ interface{ FlushError() error } = (*streamWriter)(nil)
)
