//go:build !svz_nootel

package traced_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/core/store/traced"
	"github.com/supervaize/svz/core/telemetry"
)

func providers(spans bool) (telemetry.Providers, *tracetest.SpanRecorder, *sdkmetric.ManualReader) {
	rec, reader := tracetest.NewSpanRecorder(), sdkmetric.NewManualReader()
	return telemetry.Providers{Tracers: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)),
		Meters: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), StoreSpans: spans}, rec, reader
}

// TestMeasured: each request is measured by backend, operation and error type, a span per request
// only when asked; the optional interfaces stay; nothing is wrapped when nothing records.
func TestMeasured(t *testing.T) {
	if s := memory.New(); traced.Wrap(s, "memory", telemetry.Providers{}) != store.Store(s) {
		t.Fatal("wrapped without providers")
	}
	for _, spans := range []bool{false, true} {
		p, rec, reader := providers(spans)
		s := traced.Wrap(memory.New(), "memory", p)
		if _, ok := s.(*traced.Store); !ok {
			t.Fatalf("not wrapped: %T", s)
		}
		for _, ok := range []bool{implements[store.Lister](s), implements[store.Log](s), implements[store.UpdateAppender](s), implements[store.Exclusive](s)} {
			if !ok {
				t.Fatal("an optional interface is lost")
			}
		}
		ctx := context.Background()
		if _, err := s.Create(ctx, "k", []byte("v"), store.Never); err != nil {
			t.Fatal(err)
		}
		_, _ = s.Create(ctx, "k", []byte("v"), store.Never)
		_, _ = s.Get(ctx, "absent")
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		got := map[string]uint64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name != telemetry.StoreDuration {
					continue
				}
				for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
					op, _ := dp.Attributes.Value("db.operation.name")
					sys, _ := dp.Attributes.Value("db.system.name")
					et, _ := dp.Attributes.Value("error.type")
					got[sys.AsString()+" "+op.AsString()+" "+et.AsString()] += dp.Count
				}
			}
		}
		want := map[string]uint64{"memory create ": 1, "memory create exists": 1, "memory get not_found": 1}
		if len(got) != len(want) {
			t.Errorf("measured %v, want %v", got, want)
		}
		for k, n := range want {
			if got[k] != n {
				t.Errorf("measured %v, want %v", got, want)
			}
		}
		names := []string{}
		for _, sp := range rec.Ended() {
			names = append(names, sp.Name())
		}
		if wantN := map[bool]int{false: 0, true: 3}[spans]; len(names) != wantN {
			t.Errorf("StoreSpans %v: spans %v", spans, names)
		}
	}
}

func implements[I any](s store.Store) bool { _, ok := s.(I); return ok }
