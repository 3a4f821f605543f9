//go:build svz_nootel

package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	tnoop "go.opentelemetry.io/otel/trace/noop"
)

// A binary built with svz_nootel (no OpenTelemetry SDK, so nothing to record with) links no
// span or metric code: Enabled and Tracing are constants the compiler folds, so every recording
// branch is dead code, and every instrument is the zero one. Providers set by hand in such a
// binary are ignored. The API is metrics.go's.

// Enabled is false: nothing is recorded in this build.
func (p Providers) Enabled() bool { return false }

// Tracing is false.
func (p Providers) Tracing() bool { return false }

// Tracer is OpenTelemetry's no-op tracer.
func (p Providers) Tracer() trace.Tracer { return tnoop.Tracer{} }

// Histogram records nothing in this build.
type Histogram struct{}

// Counter counts nothing in this build.
type Counter struct{}

// UpDownCounter counts nothing in this build.
type UpDownCounter struct{}

// Histogram is the zero Histogram.
func (p Providers) Histogram(name, description string) Histogram { return Histogram{} }

// Counter is the zero Counter.
func (p Providers) Counter(name, unit, description string) Counter { return Counter{} }

// UpDownCounter is the zero UpDownCounter.
func (p Providers) UpDownCounter(name, unit, description string) UpDownCounter {
	return UpDownCounter{}
}

// On is false.
func (h Histogram) On() bool { return false }

// Record records nothing.
func (h Histogram) Record(context.Context, float64, ...attribute.KeyValue) {}

// RecordSet records nothing.
func (h Histogram) RecordSet(context.Context, float64, attribute.Set) {}

// On is false.
func (c Counter) On() bool { return false }

// Add counts nothing.
func (c Counter) Add(context.Context, int64, ...attribute.KeyValue) {}

// On is false.
func (c UpDownCounter) On() bool { return false }

// Add counts nothing.
func (c UpDownCounter) Add(context.Context, int64, ...attribute.KeyValue) {}
