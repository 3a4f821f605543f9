package platform

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TestWantedExport: only an endpoint or an explicit otlp exporter turns a signal on; none and
// OTEL_SDK_DISABLED turn it off; other values stop the start naming the variable.
func TestWantedExport(t *testing.T) {
	for _, tc := range []struct {
		env     map[string]string
		want    exportWanted
		wantErr string
	}{
		{map[string]string{}, exportWanted{}, ""},
		{map[string]string{"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on"}, exportWanted{}, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, exportWanted{true, true}, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, exportWanted{true, false}, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://c:4318/v1/metrics"}, exportWanted{false, true}, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_METRICS_EXPORTER": "none"}, exportWanted{true, false}, ""},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, exportWanted{true, false}, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, exportWanted{}, ""},
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, exportWanted{}, "OTEL_TRACES_EXPORTER"},
		{map[string]string{"OTEL_SDK_DISABLED": "maybe"}, exportWanted{}, "OTEL_SDK_DISABLED"},
		{map[string]string{"OTEL_LOGS_EXPORTER": "otlp"}, exportWanted{}, "OTEL_LOGS_EXPORTER"},
		{map[string]string{"OTEL_LOGS_EXPORTER": "none"}, exportWanted{}, ""},
	} {
		got, err := wantedExport(envOf(tc.env))
		if (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) || got != tc.want {
			t.Errorf("%v: %+v %v, want %+v %q", tc.env, got, err, tc.want, tc.wantErr)
		}
	}
}

// TestPropagator: the platform's own header is read only when no traceparent is there, and never
// written; unknown names stop the start.
func TestPropagator(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	const xray = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	const cloud = "5759e988bd862e3fe1be46a994272793/6023947403358210776;o=1"
	for _, tc := range []struct {
		kind      platformKind
		hdr       map[string]string
		wantTrace string
	}{
		{onLambda, map[string]string{"X-Amzn-Trace-Id": xray}, "5759e988bd862e3fe1be46a994272793"},
		{onLambda, map[string]string{"X-Amzn-Trace-Id": xray, "Traceparent": tp}, "4bf92f3577b34da6a3ce929d0e0e4736"},
		{onCloudRun, map[string]string{"X-Cloud-Trace-Context": cloud}, "5759e988bd862e3fe1be46a994272793"},
		{onCloudRun, map[string]string{"X-Cloud-Trace-Context": cloud, "Traceparent": tp}, "4bf92f3577b34da6a3ce929d0e0e4736"},
		{onHTTP, map[string]string{"X-Amzn-Trace-Id": xray}, "00000000000000000000000000000000"},
		{onHTTP, map[string]string{"X-Cloud-Trace-Context": cloud}, "00000000000000000000000000000000"},
	} {
		p, err := propagator(tc.kind, envOf(nil))
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		for k, v := range tc.hdr {
			h.Set(k, v)
		}
		ctx := p.Extract(context.Background(), propagation.HeaderCarrier(h))
		if got := trace.SpanContextFromContext(ctx).TraceID().String(); got != tc.wantTrace {
			t.Errorf("%s %v: trace %s, want %s", tc.kind, tc.hdr, got, tc.wantTrace)
		}
		out := propagation.MapCarrier{}
		p.Inject(ctx, out)
		if _, ok := out["X-Amzn-Trace-Id"]; ok {
			t.Errorf("%s wrote X-Amzn-Trace-Id: %v", tc.kind, out)
		}
		if _, ok := out["X-Cloud-Trace-Context"]; ok {
			t.Errorf("%s wrote X-Cloud-Trace-Context: %v", tc.kind, out)
		}
	}
	for _, bad := range []string{"b3", "tracecontext,none", "xray,,baggage"} {
		if _, err := propagator(onHTTP, envOf(map[string]string{"OTEL_PROPAGATORS": bad})); err == nil || !strings.Contains(err.Error(), "OTEL_PROPAGATORS") {
			t.Errorf("OTEL_PROPAGATORS=%s: %v", bad, err)
		}
	}
}

// TestTraceHandler: a record written with a span's context carries its ids in the platform's
// fields; one without carries none.
func TestTraceHandler(t *testing.T) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: [16]byte{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID: [8]byte{0, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}, TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	for _, tc := range []struct {
		kind    platformKind
		project string
		want    map[string]any
	}{
		{onHTTP, "", map[string]any{"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7"}},
		{onLambda, "", map[string]any{"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7",
			"xray_trace_id": "1-4bf92f35-77b34da6a3ce929d0e0e4736"}},
		{onCloudRun, "p-1", map[string]any{"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7",
			"logging.googleapis.com/trace":  "projects/p-1/traces/4bf92f3577b34da6a3ce929d0e0e4736",
			"logging.googleapis.com/spanId": "00f067aa0ba902b7", "logging.googleapis.com/trace_sampled": true}},
		{onCloudRun, "", map[string]any{"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7",
			"logging.googleapis.com/spanId": "00f067aa0ba902b7", "logging.googleapis.com/trace_sampled": true}},
	} {
		var buf bytes.Buffer
		log, err := newLogger(tc.kind, envOf(map[string]string{"GOOGLE_CLOUD_PROJECT": tc.project}), &buf)
		if err != nil {
			t.Fatal(err)
		}
		log.With("a", 1).InfoContext(ctx, "with")
		log.Info("without")
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		var with, without map[string]any
		if len(lines) != 2 || json.Unmarshal([]byte(lines[0]), &with) != nil || json.Unmarshal([]byte(lines[1]), &without) != nil {
			t.Fatalf("%s: %q", tc.kind, buf.String())
		}
		for k, v := range tc.want {
			if with[k] != v {
				t.Errorf("%s %q: %s = %v, want %v (%v)", tc.kind, tc.project, k, with[k], v, with)
			}
		}
		if len(with)-len(without) != len(tc.want)+1 { // + "a"
			t.Errorf("%s: with %v, without %v", tc.kind, with, without)
		}
	}
	_ = slog.LevelInfo
}
