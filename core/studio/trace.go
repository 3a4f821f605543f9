package studio

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/supervaize/svz/core/telemetry"
)

// callTelemetry records a client span per Studio call (registration, parameters, context, rule
// checkpoints: its step names it) and its duration, and sends the call's trace context to Studio.
// Never a header, a body or the API key.
type callTelemetry struct {
	p        telemetry.Providers
	tracer   trace.Tracer
	duration telemetry.Histogram
}

func newCallTelemetry(p telemetry.Providers) *callTelemetry {
	return &callTelemetry{p: p, tracer: p.Tracer(),
		duration: p.Histogram(telemetry.StudioDuration, "Duration of the controller's calls to Studio, retries included.")}
}

// studioCall is one call's span.
type studioCall struct {
	t    *callTelemetry
	ctx  context.Context
	span trace.Span
	step string
}

func (t *callTelemetry) start(ctx context.Context, k call) (context.Context, *studioCall) {
	if !t.p.Enabled() {
		return ctx, nil
	}
	host := ""
	if u, err := url.Parse(k.url); err == nil {
		host = u.Host
	}
	ctx, span := t.tracer.Start(ctx, "studio "+k.step, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String(telemetry.StudioStep, k.step), attribute.String(telemetry.HTTPMethod, k.method), attribute.String(telemetry.ServerAddress, host)))
	return ctx, &studioCall{t: t, ctx: ctx, span: span, step: k.step}
}

// end ends the span with the answer's status (0: none came) after attempts tries.
func (c *studioCall) end(status, attempts int, began time.Time) {
	if c == nil {
		return
	}
	attrs := []attribute.KeyValue{attribute.String(telemetry.StudioStep, c.step)}
	if status != 0 {
		attrs = append(attrs, attribute.Int(telemetry.HTTPStatus, status))
	}
	if status < 200 || status > 299 {
		errType := "no_answer"
		if status != 0 {
			errType = strconv.Itoa(status)
		}
		attrs = append(attrs, attribute.String(telemetry.ErrorType, errType))
		c.span.SetStatus(codes.Error, errType)
	}
	c.span.SetAttributes(append(attrs, attribute.Int(telemetry.Attempts, attempts))...)
	c.span.End()
	c.t.duration.Record(c.ctx, time.Since(began).Seconds(), attrs...)
}

// inject writes ctx's trace context into a request's headers.
func (t *callTelemetry) inject(ctx context.Context, h http.Header) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		t.p.Propagation().Inject(ctx, propagation.HeaderCarrier(h))
	}
}
