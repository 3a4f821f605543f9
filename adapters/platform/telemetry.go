package platform

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/supervaize/svz/adapters/internal/tracehdr"
	"github.com/supervaize/svz/core/telemetry"
	"github.com/supervaize/svz/internal/envvar"
)

// Telemetry is configured by the standard OTEL_* settings (docs/observability.md). Nothing is
// exported, and no exporter is even built, unless one asks for it: an OTLP endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT, or _TRACES_ / _METRICS_ENDPOINT) or OTEL_TRACES_EXPORTER /
// OTEL_METRICS_EXPORTER=otlp. The SDK and its OTLP/HTTP exporters are linked unless the binary is
// built with the svz_nootel tag (telemetry_sdk.go); such a binary refuses to start when a setting
// asks for export, rather than drop the telemetry silently.

// EnvStoreSpans asks for a span per store request (off by default: a step makes several).
const EnvStoreSpans = "SUPERVAIZER_OTEL_STORE_SPANS"

// exportWanted is what the OTEL_* settings ask to export.
type exportWanted struct{ traces, metrics bool }

func (w exportWanted) any() bool { return w.traces || w.metrics }

// wantedExport reads OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER, OTEL_METRICS_EXPORTER and the OTLP
// endpoints. OTEL_LOGS_EXPORTER is refused: logs go to the platform's log stream, with the trace
// and span ids of the call or delivery that wrote them.
func wantedExport(getenv func(string) string) (exportWanted, error) {
	disabled, err := envvar.Bool(getenv, "OTEL_SDK_DISABLED", false)
	if err != nil {
		return exportWanted{}, fmt.Errorf("platform: %w", err)
	}
	if v := strings.TrimSpace(getenv("OTEL_LOGS_EXPORTER")); v != "" && v != "none" {
		return exportWanted{}, fmt.Errorf("platform: OTEL_LOGS_EXPORTER=%q: svz writes its logs to the platform's log stream (stdout, stderr), each line with its trace and span ids; unset it or set none", v)
	}
	endpoint := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")) != ""
	var w exportWanted
	for _, s := range []struct {
		name, endpoint string
		on             *bool
	}{
		{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &w.traces},
		{"OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", &w.metrics},
	} {
		v, err := envvar.Enum(getenv, s.name, "", "otlp", "none")
		if err != nil {
			return exportWanted{}, fmt.Errorf("platform: %w (svz exports over OTLP/HTTP only)", err)
		}
		*s.on = v == "otlp" || v == "" && (endpoint || strings.TrimSpace(getenv(s.endpoint)) != "")
	}
	if disabled {
		return exportWanted{}, nil
	}
	return w, nil
}

// propagator is the platform's trace-context propagator: OTEL_PROPAGATORS (tracecontext,
// baggage, xray, cloudtrace, none; default tracecontext,baggage), after which the platform's own
// header is read when a request or message has no other (X-Amzn-Trace-Id on Lambda,
// X-Cloud-Trace-Context on Cloud Run): read only, never written.
func propagator(kind platformKind, getenv func(string) string) (propagation.TextMapPropagator, error) {
	raw := strings.TrimSpace(getenv("OTEL_PROPAGATORS"))
	if raw == "" {
		raw = "tracecontext,baggage"
	}
	var ps []propagation.TextMapPropagator
	switch kind {
	case onLambda:
		ps = append(ps, readOnly{tracehdr.XRay{}})
	case onCloudRun:
		ps = append(ps, readOnly{tracehdr.CloudTrace{}})
	}
	for name := range strings.SplitSeq(raw, ",") {
		switch strings.TrimSpace(name) {
		case "tracecontext":
			ps = append(ps, propagation.TraceContext{})
		case "baggage":
			if b := baggage(); b != nil { // nil in a binary built without the SDK (svz_nootel)
				ps = append(ps, b)
			}
		case "xray":
			ps = append(ps, tracehdr.XRay{})
		case "cloudtrace":
			ps = append(ps, tracehdr.CloudTrace{})
		case "none":
			if raw != "none" {
				return nil, fmt.Errorf("platform: OTEL_PROPAGATORS=%q: none stands alone", raw)
			}
		default:
			return nil, fmt.Errorf("platform: OTEL_PROPAGATORS=%q: %q is not one of tracecontext, baggage, xray, cloudtrace, none", raw, strings.TrimSpace(name))
		}
	}
	// Later propagators win on extraction: the platform's header comes first, so a traceparent
	// (a caller's, or a job message's) is the parent when both are there.
	return propagation.NewCompositeTextMapPropagator(ps...), nil
}

// readOnly is a propagator that extracts and never injects.
type readOnly struct{ propagation.TextMapPropagator }

func (readOnly) Inject(context.Context, propagation.TextMapCarrier) {}

// telemetrySetup is what setupTelemetry wired.
type telemetrySetup struct {
	providers telemetry.Providers
	// flush exports what is buffered (Lambda, after every invocation); nil when nothing exports.
	flush func(context.Context)
	// shutdown flushes and stops the exporters (servers, on their way out).
	shutdown func(context.Context) error
}

// setupTelemetry reads the OTEL_* settings: the propagator always (so that logs carry the
// caller's trace ids), the SDK and exporters only when a setting asks for export.
func setupTelemetry(ctx context.Context, kind platformKind, getenv func(string) string, log *slog.Logger) (telemetrySetup, error) {
	prop, err := propagator(kind, getenv)
	if err != nil {
		return telemetrySetup{}, err
	}
	want, err := wantedExport(getenv)
	if err != nil {
		return telemetrySetup{}, err
	}
	storeSpans, err := envvar.Bool(getenv, EnvStoreSpans, false)
	if err != nil {
		return telemetrySetup{}, fmt.Errorf("platform: %w", err)
	}
	setup := telemetrySetup{providers: telemetry.Providers{Propagator: prop, StoreSpans: storeSpans},
		shutdown: func(context.Context) error { return nil }}
	if !want.any() {
		return setup, nil
	}
	return exporters(ctx, kind, getenv, log, want, setup)
}

// traceHandler adds the trace and span ids of the record's context to every log record written
// with one (InfoContext...), in the platform's own fields: on Cloud Run, Cloud Logging's
// logging.googleapis.com/trace (projects/P/traces/T, when GOOGLE_CLOUD_PROJECT names the
// project), logging.googleapis.com/spanId and logging.googleapis.com/trace_sampled; on Lambda,
// xray_trace_id (1-xxxxxxxx-..., the form X-Ray and CloudWatch show); everywhere, trace_id and
// span_id (OpenTelemetry's hex).
type traceHandler struct {
	slog.Handler
	kind    platformKind
	project string
}

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		tid, sid := sc.TraceID().String(), sc.SpanID().String()
		r.AddAttrs(slog.String("trace_id", tid), slog.String("span_id", sid))
		switch h.kind {
		case onLambda:
			r.AddAttrs(slog.String("xray_trace_id", tracehdr.XRayTraceID(sc.TraceID())))
		case onCloudRun:
			if h.project != "" {
				r.AddAttrs(slog.String("logging.googleapis.com/trace", "projects/"+h.project+"/traces/"+tid))
			}
			r.AddAttrs(slog.String("logging.googleapis.com/spanId", sid), slog.Bool("logging.googleapis.com/trace_sampled", sc.IsSampled()))
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return traceHandler{h.Handler.WithAttrs(as), h.kind, h.project}
}

func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{h.Handler.WithGroup(name), h.kind, h.project}
}
