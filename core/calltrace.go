package core

import (
	"context"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/telemetry"
)

// callTelemetry records a span and a latency per /a2a call (package telemetry names them). With
// nothing configured it only reads the caller's trace context, so that log lines carry its ids.
type callTelemetry struct {
	p        telemetry.Providers
	prop     propagation.TextMapPropagator
	tracer   trace.Tracer
	duration telemetry.Histogram
	streams  telemetry.UpDownCounter
	sets     sync.Map // durationKey → attribute.Set
}

func newCallTelemetry(p telemetry.Providers) *callTelemetry {
	return &callTelemetry{p: p, prop: p.Propagation(), tracer: p.Tracer(),
		duration: p.Histogram(telemetry.CallDuration, "Duration of the controller's JSON-RPC calls (POST /a2a)."),
		streams:  p.UpDownCounter(telemetry.EventStreams, "{stream}", "Open effect stream clients (GET /a2a/events) of this instance."),
	}
}

// call is what one /a2a call's telemetry learns as it goes; nil when nothing is recorded.
//
// Its attributes are gathered as the call goes and given to the span once, with its final name,
// when it ends: one SetAttributes instead of five (each takes the span's lock and grows its
// slice), a measurable part of what exporting adds to a call (make bench-controller).
type call struct {
	span    trace.Span
	started time.Time
	name    string
	method  string
	kind    string // telemetry.Action or telemetry.Surface
	target  string // the action or surface, telemetry.OtherAttribute when not registered
	outcome string
	decided bool // a result or an error set outcome: the span says it
	attrs   []attribute.KeyValue
	buf     [16]attribute.KeyValue // attrs' first backing array: a call sets at most 16
}

// callSpanName names a call's span until its method is known.
const callSpanName = "POST /a2a"

type callKey struct{}

func callOf(ctx context.Context) *call {
	c, _ := ctx.Value(callKey{}).(*call)
	return c
}

// start reads the caller's trace context from r and, when telemetry is on, starts the call's
// span (a server span, child of that context).
func (t *callTelemetry) start(r *http.Request, now time.Time) (context.Context, *call) {
	ctx := t.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	if !t.p.Enabled() {
		return ctx, nil
	}
	ctx, span := t.tracer.Start(ctx, callSpanName, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(now),
		trace.WithAttributes(attribute.String(telemetry.HTTPMethod, http.MethodPost), attribute.String(telemetry.HTTPRoute, "/a2a")))
	c := &call{span: span, started: now, name: callSpanName, method: telemetry.OtherAttribute, outcome: "rpc_error"}
	c.attrs = c.buf[:0]
	return context.WithValue(ctx, callKey{}, c), c
}

// envelope notes the JSON-RPC method and id.
func (c *call) envelope(method string, id []byte) {
	if c == nil {
		return
	}
	c.method = telemetry.OtherAttribute
	if method == grant.MethodActionInvoke || method == grant.MethodSurfaceLoad {
		c.method = method // a known method names the span; another, sent by the caller, would make names unbounded
		c.name = method
	}
	c.attrs = append(c.attrs, attribute.String(telemetry.RPCSystem, telemetry.JSONRPCSystem), attribute.String(telemetry.RPCMethod, method),
		attribute.String(telemetry.RPCJSONRPCVersion, telemetry.JSONRPCVersion2))
	if len(id) > 0 {
		c.attrs = append(c.attrs, attribute.String(telemetry.RPCJSONRPCID, string(id)))
	}
}

// request notes the call's target and identities (the workspace as the request names it; a
// refused grant answers rpc error -32030, outcome "refused"): kind is telemetry.Action or telemetry.Surface;
// registered says the agent serves target (else the span's name keeps the method only, and the
// metric says telemetry.OtherAttribute: a caller cannot make a span name or a metric's series
// unbounded; the span's attribute says what was asked).
func (c *call) request(kind, target string, registered bool, agent, requestID string, job *string, workspace string) {
	if c == nil {
		return
	}
	c.kind, c.target = kind, telemetry.OtherAttribute
	if registered {
		c.target = target
		c.name = c.method + " " + target
	}
	c.attrs = append(c.attrs, attribute.String(kind, target), attribute.String(telemetry.Agent, agent), attribute.String(telemetry.RequestID, requestID))
	if job != nil {
		c.attrs = append(c.attrs, attribute.String(telemetry.Job, *job))
	}
	if workspace != "" {
		c.attrs = append(c.attrs, attribute.String(telemetry.Workspace, workspace))
	}
}

// result notes a handler's result: its status and, for a status "error" result, its first
// error's code; replayed when the idempotency gate answered without running the handler.
func (c *call) result(status string, errs []contract.ResultError, replayed bool) {
	if c == nil {
		return
	}
	c.outcome, c.decided = status, true
	c.attrs = append(c.attrs, attribute.Bool(telemetry.Replayed, replayed))
	if status != contract.StatusOK && len(errs) > 0 {
		c.attrs = append(c.attrs, attribute.String(telemetry.ResultCode, errs[0].Code))
	}
}

// end ends the call's span with the answer's JSON-RPC error, if any, and records its duration.
func (t *callTelemetry) end(ctx context.Context, c *call, resp rpcResponse, now time.Time) {
	if c == nil {
		return
	}
	if e := resp.Error; e != nil {
		c.outcome = "rpc_error"
		if e.Code == CodeWorkspaceAuthorizationFailed {
			c.outcome = "refused"
		}
		c.attrs = append(c.attrs, attribute.Int(telemetry.RPCJSONRPCCode, e.Code), attribute.String(telemetry.RPCJSONRPCMessage, e.Message))
		if e.Code == CodeInternalError {
			c.span.SetStatus(codes.Error, e.Message)
		}
	}
	if c.name != callSpanName {
		c.span.SetName(c.name)
	}
	if resp.Error != nil || c.decided {
		c.attrs = append(c.attrs, attribute.String(telemetry.Outcome, c.outcome))
	}
	c.span.SetAttributes(append(c.attrs, attribute.Int(telemetry.HTTPStatus, http.StatusOK))...)
	c.span.End(trace.WithTimestamp(now))
	if t.duration.On() {
		t.duration.RecordSet(ctx, now.Sub(c.started).Seconds(), t.durationSet(c))
	}
}

// durationKey is what tells a call's duration measurements apart: few values each (known
// methods, statuses, registered targets, else telemetry.OtherAttribute).
type durationKey struct{ method, outcome, kind, target string }

// durationSet returns the attributes of c's duration, made once per key.
func (t *callTelemetry) durationSet(c *call) attribute.Set {
	k := durationKey{c.method, c.outcome, c.kind, c.target}
	if s, ok := t.sets.Load(k); ok {
		return s.(attribute.Set)
	}
	attrs := []attribute.KeyValue{attribute.String(telemetry.RPCSystem, telemetry.JSONRPCSystem), attribute.String(telemetry.RPCMethod, c.method),
		attribute.String(telemetry.Outcome, c.outcome)}
	if c.kind != "" {
		attrs = append(attrs, attribute.String(c.kind, c.target))
	}
	s, _ := t.sets.LoadOrStore(k, attribute.NewSet(attrs...))
	return s.(attribute.Set)
}

// streamOpened counts an open effect stream until the returned function is called.
func (t *callTelemetry) streamOpened(ctx context.Context) func() {
	if !t.streams.On() {
		return func() {}
	}
	t.streams.Add(ctx, 1)
	return func() { t.streams.Add(context.WithoutCancel(ctx), -1) }
}
