// Package lambda serves an http.Handler on AWS Lambda. Each invocation's event is detected as a
// Function URL, API Gateway REST (v1) or HTTP API (v2), or ALB request, converted to the
// http.Request a server would have read, and the handler's response converted back to that
// source's payload: base64 bodies, multi-value headers and query strings, and cookies included.
//
// Background work (core/jobs) travels through SQS: Queue sends a task's reference to the queue,
// and the queue's event source mapping invokes the same function with SQS events, which WithJobs
// runs, reporting the messages to deliver again (ReportBatchItemFailures). Only the mapping
// delivers tasks: no HTTP route does. The queue's dead-letter queue is mapped to the function too:
// WithDeadLetters recognises its records by their event source ARN and fails their jobs, saying
// why, instead of running them.
//
// In local mode (WithLoopbackOnly: sam local start-api, the Runtime Interface Emulator), an HTTP
// event whose Host header is not loopback is refused as local mode's plain server refuses it.
//
// The request context carries the invocation deadline. A handler panic becomes a 500 JSON body.
// Buffered responses cannot flush, so an event stream answers what it has and ends (poll mode);
// with WithStreaming, Function URL responses stream (InvokeMode RESPONSE_STREAM) and every flush
// reaches the client.
//
// aws-lambda-go runs the runtime loop; this package fills its gaps: one handler for every event
// source, and a streaming response writer that flushes.
package lambda

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	awslambda "github.com/aws/aws-lambda-go/lambda"
	"github.com/supervaize/svz/adapters/internal/httpkit"
	"github.com/supervaize/svz/core/telemetry"
)

type config struct {
	stream      bool
	loopback    bool
	log         *slog.Logger
	deliver     DeliverFunc
	maxReceives int
	// deadLetter fails the jobs of the records from the queue deadLetterARN (WithDeadLetters).
	deadLetter    DeadLetterFunc
	deadLetterARN string
	tel           telemetry.Providers
	flush         func(context.Context)
}

// Option configures NewHandler and Start.
type Option func(*config)

// WithStreaming answers Function URL events with streamed responses, for a Function URL whose
// InvokeMode is RESPONSE_STREAM. Other sources are always buffered.
func WithStreaming() Option { return func(c *config) { c.stream = true } }

// WithLoopbackOnly refuses every HTTP event whose Host header is not a loopback address or
// localhost (httpkit.NotLoopbackHost) with the answer of local mode's plain server: 403
// {"detail": …} naming the fix. Local mode under sam local serves a public API key on
// 127.0.0.1:3000, which a web page whose name was rebound to 127.0.0.1 (DNS rebinding) could
// otherwise call. SQS events are not HTTP requests: they are served as always.
func WithLoopbackOnly() Option { return func(c *config) { c.loopback = true } }

// WithLogger sets the logger (slog.Default() otherwise).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithTelemetry reads the trace context of SQS messages with p's propagator (trace.go).
func WithTelemetry(p telemetry.Providers) Option { return func(c *config) { c.tel = p } }

// WithFlush calls flush at the end of every invocation, before its answer: Lambda freezes the
// sandbox afterwards, so spans and measurements still buffered would leave late or never.
func WithFlush(flush func(context.Context)) Option { return func(c *config) { c.flush = flush } }

type adapter struct {
	h http.Handler
	config
}

// NewHandler returns the aws-lambda-go handler serving HTTP events with h. Start runs it; its
// Invoke serves one event payload and returns the whole response payload.
func NewHandler(h http.Handler, opts ...Option) awslambda.Handler {
	a := &adapter{h: h, config: config{log: slog.Default()}}
	for _, o := range opts {
		o(&a.config)
	}
	return awslambda.NewHandler(a.invoke)
}

// Start runs the Lambda runtime loop serving h. It does not return: the runtime owns the process
// and exits it on a fatal runtime error.
func Start(h http.Handler, opts ...Option) {
	awslambda.Start(NewHandler(h, opts...))
}

// invoke serves one event. Its result is the buffered payload (encoded by aws-lambda-go) or, for
// a streamed response, a reader of the streaming framing.
func (a *adapter) invoke(ctx context.Context, ev *event) (any, error) {
	if a.flush != nil {
		defer a.flush(ctx)
	}
	k, err := ev.detect()
	if err != nil {
		return nil, err
	}
	if k == srcSQS {
		return a.serveSQS(ctx, ev.Records)
	}
	r, hosts, err := ev.request(ctx, k)
	if err == nil {
		invocationTrace(ctx, r.Header)
	}
	var bad *badRequest
	switch {
	case errors.As(err, &bad):
		a.log.Warn("bad request", "source", k.String(), "reason", bad.reason)
		return a.badRequest(k, len(ev.MultiValueHeaders) > 0), nil
	case err != nil:
		return nil, err
	}
	h := a.h
	if a.loopback {
		if reason := notLoopbackHosts(hosts); reason != "" {
			h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { httpkit.RefuseNotLoopback(w, r, a.log, reason) })
		}
	}
	if a.stream && k == srcFunctionURL {
		return a.serveStream(h, r), nil
	}
	w := newBufferedWriter(r.Method)
	a.serveBuffered(h, w, r)
	return w.response(k, len(ev.MultiValueHeaders) > 0, a.log), nil
}

// notLoopbackHosts says why an event's Host header values do not name this machine, or "" when
// they do: every value must (a multi-value event may carry several), and there must be one.
func notLoopbackHosts(hosts []string) string {
	if len(hosts) == 0 {
		return httpkit.NotLoopbackHost("")
	}
	for _, h := range hosts {
		if reason := httpkit.NotLoopbackHost(h); reason != "" {
			return reason
		}
	}
	return ""
}

// badRequestBody answers a request no server would accept, in the controller's error shape.
const badRequestBody = `{"detail":"Bad Request"}`

// badRequest answers 400 in the mode the event expects.
func (a *adapter) badRequest(k source, multiValue bool) any {
	if a.stream && k == srcFunctionURL {
		return &events.LambdaFunctionURLStreamingResponse{
			StatusCode: http.StatusBadRequest,
			Headers:    map[string]string{"Content-Type": "application/json"},
			Body:       strings.NewReader(badRequestBody),
		}
	}
	w := newBufferedWriter("")
	w.header.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write([]byte(badRequestBody))
	return w.response(k, multiValue, a.log)
}

func (a *adapter) serveBuffered(h http.Handler, w *bufferedWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler { // a sentinel panic value, as net/http compares it
				httpkit.LogPanic(a.log, r, v)
			}
			// Nothing has left yet: the partial response is replaced by a clean 500.
			w.reset()
			httpkit.WriteInternalError(w, time.Now())
		}
		w.finish()
	}()
	h.ServeHTTP(w, r)
}

// serveStream runs the handler in its own goroutine and returns as soon as the status and
// headers are known; the runtime then reads the body as the handler writes and flushes it.
func (a *adapter) serveStream(h http.Handler, r *http.Request) io.Reader {
	ready := make(chan *events.LambdaFunctionURLStreamingResponse, 1)
	pr, pw := io.Pipe()
	w := &streamWriter{header: make(http.Header), head: r.Method == http.MethodHead, pw: pw, ready: ready}
	go func() {
		defer func() {
			if v := recover(); v != nil {
				if v != http.ErrAbortHandler { // a sentinel panic value, as net/http compares it
					httpkit.LogPanic(a.log, r, v)
				}
				w.fail()
			}
		}()
		h.ServeHTTP(w, r)
		w.finish()
	}()
	resp := <-ready
	resp.Body = pr
	return resp
}

// ReportInitError tells the Lambda Runtime API at runtimeAPI (AWS_LAMBDA_RUNTIME_API) that the
// function failed to initialize, so the invocation fails with err's message instead of an
// anonymous exit. The process should exit afterwards.
func ReportInitError(ctx context.Context, runtimeAPI string, err error) error {
	body, jerr := json.Marshal(struct {
		Message    string   `json:"errorMessage"`
		Type       string   `json:"errorType"`
		StackTrace []string `json:"stackTrace"`
	}{err.Error(), "Runtime.InitError", []string{}})
	if jerr != nil {
		return fmt.Errorf("lambda: report init error: %w", jerr)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	url := "http://" + runtimeAPI + "/2018-06-01/runtime/init/error"
	req, rerr := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if rerr != nil {
		return fmt.Errorf("lambda: report init error: %w", rerr)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Lambda-Runtime-Function-Error-Type", "Runtime.InitError")
	// The Runtime API is link-local: never through a proxy the environment may configure.
	client := &http.Client{Transport: &http.Transport{}}
	resp, rerr := client.Do(req)
	if rerr != nil {
		return fmt.Errorf("lambda: report init error: %w", rerr)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("lambda: report init error: %s answered %s", strings.TrimSuffix(url, "/init/error"), resp.Status)
	}
	return nil
}
