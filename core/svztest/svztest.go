// Package svztest holds agents' own test helpers: the Go form of the reference SDK's
// supervaizer.testing. New serves an agent on a real controller in local mode (Invoke, Load,
// Effects, CheckHandlers, Context); AssertConfirmIdempotent is the seeds' conformance check. They
// drive the controller over HTTP, as Studio does, so they test the agent as it is deployed.
package svztest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/store"
)

// eventTimeout bounds the wait for the effect event of the first call.
const eventTimeout = 3 * time.Second

// Option configures New, a call (Invoke, Load, Request, CheckHandlers) or
// AssertConfirmIdempotent: one type for all. Request members (JobID, IdempotencyKey...) and
// WithHeader given to New apply to every call of the harness, given to a call to that call;
// the harness's own settings (WithStore, WithWorkspace, WithRuleCheckpoints, WithLogger) apply
// to New only, and WithState to AssertConfirmIdempotent only: elsewhere they fail the test
// rather than being ignored.
type Option func(*settings)

type settings struct {
	// New's own.
	store       store.Store
	workspace   string
	logger      *slog.Logger
	checkpoints checkpoint.Studio
	newOnly     []string // names of New's options given, to report them given elsewhere

	// Request members and headers, for New (every call) or one call.
	members []func(map[string]any)
	header  http.Header

	// AssertConfirmIdempotent's own.
	state func() any
}

func newSettings(opts []Option) *settings {
	s := &settings{header: http.Header{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

// onlyFor fails t when options meant for another place were given: where names the caller.
func (s *settings) onlyFor(t testing.TB, where string, newAllowed, stateAllowed bool) {
	t.Helper()
	if len(s.newOnly) > 0 && !newAllowed {
		t.Fatalf("svztest: %s given to %s: it configures svztest.New", strings.Join(s.newOnly, ", "), where)
	}
	if s.state != nil && !stateAllowed {
		t.Fatalf("svztest: WithState given to %s: it configures AssertConfirmIdempotent", where)
	}
}

// WithHeader adds a header to every request, e.g. the workspace-authorization token.
func WithHeader(name, value string) Option {
	return func(s *settings) { s.header.Add(name, value) }
}

// WithState observes the agent's own side effects in AssertConfirmIdempotent: state returns a
// snapshot of them (jobs created, messages sent, rows written...), compared as JSON after each
// call. Without it only the controller's effect events witness a second run.
func WithState(state func() any) Option {
	return func(s *settings) { s.state = state }
}

// AssertConfirmIdempotent is the seeds' assert_confirm_idempotent: it sends req (which must carry
// an idempotency_key) twice to the controller h through POST /a2a, the second time as a retry
// with a new request_id, and fails t unless
//
//   - both calls answer a result, byte for byte the same;
//   - the second carries replay_safety.strictly_idempotent_response = true;
//   - the second published no supervaizer.effect event on GET /a2a/events (the controller
//     publishes one per handler run, so a second run shows there);
//   - the state given by WithState did not change during the second call.
//
// Background work the call started writes state of its own: before each snapshot of WithState,
// the check waits (up to WaitJobTimeout) until the job of the call (the request's job_id, the
// answer's job_state) waits or ends, following it with job.sync as Studio does; a controller that
// answers no job state for it has none to wait for.
//
// The first call must run the handler: use a fresh idempotency_key. It returns the result, as
// Harness.Invoke does.
func AssertConfirmIdempotent(t testing.TB, h http.Handler, apiKey string, req contract.ActionRequest, opts ...Option) *Result {
	t.Helper()
	o := newSettings(opts)
	o.onlyFor(t, "AssertConfirmIdempotent", false, true)
	if len(o.members) > 0 {
		t.Fatalf("svztest: request members given to the package-level AssertConfirmIdempotent: set them on req (or use Harness.AssertConfirmIdempotent)")
	}
	if req.IdempotencyKey == nil || *req.IdempotencyKey == "" {
		t.Fatalf("AssertConfirmIdempotent: the request has no idempotency_key")
	}
	c := client{t: t, h: h, apiKey: apiKey, header: o.header}

	stream := c.openStream()
	defer stream.close()

	first := c.invoke("svztest-confirm-1", req)
	event, ok := stream.waitFor(req.RequestID, eventTimeout)
	if !ok {
		t.Fatalf("AssertConfirmIdempotent: the first call (request_id %q) published no %s event within %s: "+
			"the handler did not run (was the idempotency_key used before?) or the controller publishes no effects",
			req.RequestID, effectEvent, eventTimeout)
	}
	var firstRes contract.ActionResult
	if err := json.Unmarshal(first, &firstRes); err != nil {
		t.Fatalf("AssertConfirmIdempotent: decode the first result: %v", err)
	}
	jobs := jobsOf(req, &firstRes)
	stateBefore := o.snapshot(t, func() { c.settle(req, jobs) })

	retry := req
	retry.RequestID = req.RequestID + "-retry"
	second := c.invoke("svztest-confirm-2", retry)
	stateAfter := o.snapshot(t, func() { c.settle(req, jobs) })

	events := c.eventsAfter(event.id)
	retryRan := false
	for _, ev := range events {
		retryRan = retryRan || ev.requestID == retry.RequestID
	}
	if retryRan && firstRes.Status == contract.StatusError {
		// A refusal changes nothing and so does not consume the key: the retry runs again, by design.
		t.Fatalf("AssertConfirmIdempotent: the first call was refused: %s; the check needs a call the handler accepts\nfirst: %s",
			refusal(firstRes.Errors), first)
	}
	if !bytes.Equal(first, second) {
		t.Errorf("AssertConfirmIdempotent: the retry answered another result\nfirst: %s\nretry: %s", first, second)
	}
	res := decodeResult(t, req.Action, second)
	if rs := res.ReplaySafety; rs == nil || rs.StrictlyIdempotentResponse == nil || !*rs.StrictlyIdempotentResponse {
		t.Errorf("AssertConfirmIdempotent: the retry's result does not set replay_safety.strictly_idempotent_response = true: %s", second)
	}
	for _, ev := range events {
		if ev.requestID == retry.RequestID {
			t.Errorf("AssertConfirmIdempotent: the retry ran the handler again: it published %s %s", effectEvent, ev.data)
		}
	}
	if stateBefore != stateAfter {
		t.Errorf("AssertConfirmIdempotent: the retry changed the agent's state\nbefore: %s\nafter:  %s", stateBefore, stateAfter)
	}
	return res
}

// jobsOf are the jobs a call names: its job_id and its answer's job_state.
func jobsOf(req contract.ActionRequest, res *contract.ActionResult) []string {
	var out []string
	if req.Job() != "" {
		out = append(out, req.Job())
	}
	if res.JobState != nil && res.JobState.Job.ID != "" && res.JobState.Job.ID != req.Job() {
		out = append(out, res.JobState.Job.ID)
	}
	return out
}

// settle waits until each of jobs waits or ends (its job.sync status is neither active nor
// pending, or it shows what it waits for: a timer, a retry, a limit's turn), so that the state
// compared is not one its background work is still writing. A
// job.sync answered with a JSON-RPC error (none served) or without job_state ends the wait.
func (c client) settle(req contract.ActionRequest, jobs []string) {
	c.t.Helper()
	deadline := time.Now().Add(WaitJobTimeout)
	for i, job := range jobs {
		for n := 0; ; n++ {
			sync := req
			sync.RequestID = fmt.Sprintf("%s-settle-%d-%d", req.RequestID, i, n)
			sync.Action, sync.JobID, sync.IdempotencyKey, sync.Input = contract.JobSyncAction, &job, nil, json.RawMessage(`{}`)
			raw, ok := c.call("svztest-settle", sync)
			var res contract.ActionResult
			if !ok || json.Unmarshal(raw, &res) != nil || res.JobState == nil {
				break
			}
			if st := res.JobState.Job.Status; st != contract.StateActive && st != contract.StatePending || res.JobState.Job.Extra["waiting"] != nil {
				break // it ended, or waits: for an answer, a timer, a retry or a limit's turn
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("AssertConfirmIdempotent: the background work of job %s still runs after %s (job.sync: %s): the state is compared once it waits or ends", job, WaitJobTimeout, raw)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// refusal lists the errors of a refused result: "input_required count, input_min budget".
func refusal(errs []contract.ResultError) string {
	if len(errs) == 0 {
		return "status error, no errors"
	}
	parts := make([]string, len(errs))
	for i, e := range errs {
		parts[i] = e.Code
		if e.Field != "" {
			parts[i] += " " + e.Field
		}
	}
	return strings.Join(parts, ", ")
}

// snapshot is the WithState snapshot, taken once settle returned ("" without WithState).
func (o *settings) snapshot(t testing.TB, settle func()) string {
	t.Helper()
	if o.state == nil {
		return ""
	}
	settle()
	b, err := json.Marshal(o.state())
	if err != nil {
		t.Fatalf("AssertConfirmIdempotent: encode the state snapshot: %v", err)
	}
	return string(b)
}

// client talks to the controller under test.
type client struct {
	t      testing.TB
	h      http.Handler
	apiKey string
	header http.Header
}

func (c client) request(ctx context.Context, method, path string, body []byte) *http.Request {
	r := httptest.NewRequestWithContext(ctx, method, path, bytes.NewReader(body))
	for k, vs := range c.header {
		for _, v := range vs {
			r.Header.Add(k, v)
		}
	}
	r.Header.Set("X-API-Key", c.apiKey)
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	return r
}

// invoke sends supervaizer/action.invoke and returns the JSON of its result.
func (c client) invoke(id string, req contract.ActionRequest) json.RawMessage {
	c.t.Helper()
	res, ok := c.call(id, req)
	if !ok {
		c.t.Fatalf("AssertConfirmIdempotent: call %s answered %s; want a JSON-RPC result", id, res)
	}
	return res
}

// call sends supervaizer/action.invoke: the JSON of its result (true), or the answer's body when
// it is not a JSON-RPC result (false).
func (c client) call(id string, req contract.ActionRequest) (json.RawMessage, bool) {
	c.t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "supervaizer/action.invoke", "params": req})
	if err != nil {
		c.t.Fatalf("AssertConfirmIdempotent: encode the request: %v", err)
	}
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, c.request(context.Background(), http.MethodPost, "/a2a", body))
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &resp) != nil || resp.Error != nil || resp.Result == nil {
		return fmt.Appendf(nil, "HTTP %d %s", rec.Code, rec.Body.Bytes()), false
	}
	return resp.Result, true
}

const effectEvent = "supervaizer.effect"

type event struct {
	id, name, data, requestID string
}

// readEvents parses a server-sent event stream, calling fn for each event until fn returns
// false or the stream ends.
func readEvents(r io.Reader, fn func(event) bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var ev event
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.name == effectEvent {
				var d struct {
					RequestID string `json:"request_id"`
				}
				_ = json.Unmarshal([]byte(ev.data), &d)
				ev.requestID = d.RequestID
			}
			if ev.name != "" && !fn(ev) {
				return
			}
			ev = event{}
		case strings.HasPrefix(line, "id:"):
			ev.id = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		case strings.HasPrefix(line, "event:"):
			ev.name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			ev.data += strings.TrimSpace(strings.TrimPrefix(line, "data:"))
		}
	}
}

// eventsAfter polls GET /a2a/events with Last-Event-ID: with a writer that cannot flush, the
// controller answers the buffered events after id and ends the response.
func (c client) eventsAfter(id string) []event {
	c.t.Helper()
	r := c.request(context.Background(), http.MethodGet, "/a2a/events", nil)
	r.Header.Set("Last-Event-ID", id)
	w := &pollWriter{header: http.Header{}}
	c.h.ServeHTTP(w, r)
	if w.code != http.StatusOK {
		c.t.Fatalf("AssertConfirmIdempotent: GET /a2a/events: HTTP %d %s", w.code, w.body.Bytes())
	}
	var out []event
	readEvents(&w.body, func(ev event) bool {
		if ev.name == effectEvent {
			out = append(out, ev)
		}
		return true
	})
	return out
}

// pollWriter is a ResponseWriter without Flush, as a buffering platform gives.
type pollWriter struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (w *pollWriter) Header() http.Header { return w.header }
func (w *pollWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.body.Write(b)
}
func (w *pollWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

// stream is a live GET /a2a/events subscription.
type stream struct {
	cancel context.CancelFunc
	pr     *io.PipeReader
	events chan event
	done   chan struct{}
}

// openStream subscribes to the effect stream and returns once the controller has sent the
// connected event, so no later effect can be missed.
func (c client) openStream() *stream {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	s := &stream{cancel: cancel, pr: pr, events: make(chan event, 64), done: make(chan struct{})}
	w := &streamWriter{header: http.Header{}, pw: pw, status: make(chan int, 1)}
	go func() {
		defer close(s.done)
		c.h.ServeHTTP(w, c.request(ctx, http.MethodGet, "/a2a/events", nil))
		w.WriteHeader(0) // a handler that wrote nothing
		pw.Close()
	}()
	go func() {
		defer close(s.events)
		readEvents(pr, func(ev event) bool { s.events <- ev; return true })
		_, _ = io.Copy(io.Discard, pr)
	}()
	if code := <-w.status; code != http.StatusOK {
		s.close()
		c.t.Fatalf("AssertConfirmIdempotent: GET /a2a/events: HTTP %d", code)
	}
	select {
	case ev, ok := <-s.events:
		if ok && ev.name == "supervaizer.connected" {
			return s
		}
		s.close()
		c.t.Fatalf("AssertConfirmIdempotent: GET /a2a/events did not start with supervaizer.connected (got %q)", ev.name)
	case <-time.After(eventTimeout):
		s.close()
		c.t.Fatalf("AssertConfirmIdempotent: GET /a2a/events sent nothing within %s", eventTimeout)
	}
	return nil
}

// waitFor returns the first effect event of requestID.
func (s *stream) waitFor(requestID string, timeout time.Duration) (event, bool) {
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				return event{}, false
			}
			if ev.name == effectEvent && ev.requestID == requestID {
				return ev, true
			}
		case <-deadline:
			return event{}, false
		}
	}
}

func (s *stream) close() {
	s.cancel()
	s.pr.Close()
	<-s.done
	for range s.events { // drain, so the reader goroutine ends
	}
}

// streamWriter is a flushing ResponseWriter that pipes the body to the event reader.
type streamWriter struct {
	header  http.Header
	pw      *io.PipeWriter
	status  chan int
	written bool
}

func (w *streamWriter) Header() http.Header { return w.header }
func (w *streamWriter) WriteHeader(code int) {
	if !w.written {
		w.written = true
		w.status <- code
	}
}
func (w *streamWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(b)
}
func (w *streamWriter) Flush() {}
