//go:build svz_nootel

package telemetry_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/core/store/traced"
	"github.com/supervaize/svz/core/telemetry"
)

// TestOffRecordsNothing: a binary built with svz_nootel records nothing, even with providers
// set by hand: the constant Enabled and Tracing let the compiler drop every recording branch.
func TestOffRecordsNothing(t *testing.T) {
	p := telemetry.Providers{Tracers: sdktrace.NewTracerProvider(), Meters: sdkmetric.NewMeterProvider(), StoreSpans: true}
	if p.Enabled() || p.Tracing() {
		t.Fatal("recording in a svz_nootel build")
	}
	if _, ok := p.Tracer().(noop.Tracer); !ok {
		t.Fatalf("tracer %T, want the no-op one", p.Tracer())
	}
	if p.Histogram("h", "").On() || p.Counter("c", "1", "").On() || p.UpDownCounter("u", "1", "").On() {
		t.Fatal("an instrument records")
	}
	s := memory.New()
	if got := traced.Wrap(s, "memory", p); got != s {
		t.Fatalf("store wrapped: %T", got)
	}
	ctx := telemetry.WithProviders(context.Background(), p)
	if !telemetry.FromContext(ctx).StoreSpans {
		t.Fatal("providers lost")
	}
}
