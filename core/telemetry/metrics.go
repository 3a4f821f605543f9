//go:build !svz_nootel

package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	tnoop "go.opentelemetry.io/otel/trace/noop"
)

// Enabled reports whether anything is recorded: a tracer or a meter provider is set.
func (p Providers) Enabled() bool { return p.Tracers != nil || p.Meters != nil }

// Tracing reports whether spans are recorded: a tracer provider is set.
func (p Providers) Tracing() bool { return p.Tracers != nil }

// Tracer is svz's tracer, OpenTelemetry's no-op one when no provider is set.
func (p Providers) Tracer() trace.Tracer {
	if p.Tracers == nil {
		return tnoop.Tracer{}
	}
	return p.Tracers.Tracer(ScopeName)
}

// Histogram records durations, in seconds, with DurationBuckets. The zero value records nothing.
type Histogram struct{ h metric.Float64Histogram }

// Counter counts. The zero value counts nothing.
type Counter struct{ c metric.Int64Counter }

// UpDownCounter counts up and down. The zero value counts nothing.
type UpDownCounter struct{ c metric.Int64UpDownCounter }

// Histogram makes a duration histogram (unit s), the zero Histogram when no meter provider is set.
func (p Providers) Histogram(name, description string) Histogram {
	if p.Meters == nil {
		return Histogram{}
	}
	h, _ := p.Meter().Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(description),
		metric.WithExplicitBucketBoundaries(DurationBuckets()...))
	return Histogram{h}
}

// Counter makes a counter of unit (such as {job}), the zero Counter when no meter provider is set.
func (p Providers) Counter(name, unit, description string) Counter {
	if p.Meters == nil {
		return Counter{}
	}
	c, _ := p.Meter().Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(description))
	return Counter{c}
}

// UpDownCounter makes an up-down counter of unit, the zero one when no meter provider is set.
func (p Providers) UpDownCounter(name, unit, description string) UpDownCounter {
	if p.Meters == nil {
		return UpDownCounter{}
	}
	c, _ := p.Meter().Int64UpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(description))
	return UpDownCounter{c}
}

// On reports whether h records.
func (h Histogram) On() bool { return h.h != nil }

// Record records v seconds with attrs.
func (h Histogram) Record(ctx context.Context, v float64, attrs ...attribute.KeyValue) {
	if h.h != nil {
		h.h.Record(ctx, v, metric.WithAttributes(attrs...))
	}
}

// RecordSet records v seconds with a set of attributes made once (attribute.NewSet sorts and
// copies; a caller that records the same few sets over and over keeps them).
func (h Histogram) RecordSet(ctx context.Context, v float64, set attribute.Set) {
	if h.h != nil {
		h.h.Record(ctx, v, metric.WithAttributeSet(set))
	}
}

// On reports whether c counts.
func (c Counter) On() bool { return c.c != nil }

// Add adds n with attrs.
func (c Counter) Add(ctx context.Context, n int64, attrs ...attribute.KeyValue) {
	if c.c != nil {
		c.c.Add(ctx, n, metric.WithAttributes(attrs...))
	}
}

// On reports whether c counts.
func (c UpDownCounter) On() bool { return c.c != nil }

// Add adds n (negative to count down) with attrs.
func (c UpDownCounter) Add(ctx context.Context, n int64, attrs ...attribute.KeyValue) {
	if c.c != nil {
		c.c.Add(ctx, n, metric.WithAttributes(attrs...))
	}
}
