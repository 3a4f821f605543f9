// Package telemetry is what svz traces and measures, on the OpenTelemetry API only: the names of
// its spans, attributes and instruments, and the providers a controller records them with.
//
// The promise: with zero Providers (nothing configured) every span is OpenTelemetry's no-op and
// no instrument records anything, so the controller pays a few nil checks per call; nothing is
// exported and no connection is made. The SDK and its exporters are wired by the platform layer
// (adapters/platform) from the standard OTEL_* settings, never by core: core imports the API
// only. An incoming trace context (W3C traceparent by default) is honoured even when nothing is
// exported, so log lines written during a call carry the caller's trace id.
//
// docs/observability.md lists every span, attribute and instrument.
package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of every span and instrument svz records.
const ScopeName = "github.com/supervaize/svz"

// Providers are where a controller records its telemetry. The zero value records nothing.
type Providers struct {
	// Tracers makes the tracer of every svz span; nil: no spans (no-op).
	Tracers trace.TracerProvider
	// Meters makes the meter of every svz instrument; nil: no measurements (no-op).
	Meters metric.MeterProvider
	// Propagator reads a caller's trace context from a request's headers and writes it into
	// outgoing requests and job messages; nil: W3C Trace Context (traceparent, tracestate).
	Propagator propagation.TextMapPropagator
	// StoreSpans asks for a span per store request (SUPERVAIZER_OTEL_STORE_SPANS): a job's step
	// makes several, so they are off unless asked for. Store latency is measured either way when
	// Meters is set.
	StoreSpans bool
}

// Meter is svz's meter; nil when no provider is set (Histogram, Counter and UpDownCounter make
// svz's instruments).
func (p Providers) Meter() metric.Meter {
	if p.Meters == nil {
		return nil
	}
	return p.Meters.Meter(ScopeName)
}

// Propagation is the propagator of trace context: Propagator, or W3C Trace Context.
func (p Providers) Propagation() propagation.TextMapPropagator {
	if p.Propagator == nil {
		return propagation.TraceContext{}
	}
	return p.Propagator
}

type providersKey struct{}

// WithProviders returns ctx carrying p: the platform entrypoint puts the providers it wired in
// the context it builds the controller with, and package config gives them to the controller,
// its store and its Studio client.
func WithProviders(ctx context.Context, p Providers) context.Context {
	return context.WithValue(ctx, providersKey{}, p)
}

// FromContext returns the providers ctx carries, the zero Providers when none.
func FromContext(ctx context.Context) Providers {
	p, _ := ctx.Value(providersKey{}).(Providers)
	return p
}

// Inject writes the trace context of ctx into a fresh map (nil when ctx has none): the form a
// job message's trace context travels in (SQS message attributes, a Cloud Tasks task's headers,
// the pool's index entry).
func (p Providers) Inject(ctx context.Context) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	c := propagation.MapCarrier{}
	p.Propagation().Inject(ctx, c)
	if len(c) == 0 {
		return nil
	}
	return c
}

// Extract returns ctx with the trace context carried by c (nil: none) as the remote parent.
func (p Providers) Extract(ctx context.Context, c map[string]string) context.Context {
	if len(c) == 0 {
		return ctx
	}
	return p.Propagation().Extract(ctx, propagation.MapCarrier(c))
}
