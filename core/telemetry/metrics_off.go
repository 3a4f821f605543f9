//go:build svz_nootel

package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
)

// A binary built with svz_nootel (no OpenTelemetry SDK, so no meter provider to record with)
// links no metric code: every instrument is the zero one, and records nothing. The API is
// metrics.go's.

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

// On is false.
func (c Counter) On() bool { return false }

// Add counts nothing.
func (c Counter) Add(context.Context, int64, ...attribute.KeyValue) {}

// On is false.
func (c UpDownCounter) On() bool { return false }

// Add counts nothing.
func (c UpDownCounter) Add(context.Context, int64, ...attribute.KeyValue) {}
