//go:build !svz_nootel

package platform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/supervaize/svz/internal/buildinfo"
	"github.com/supervaize/svz/internal/envvar"
)

// exporters builds the OpenTelemetry SDK's providers with OTLP/HTTP exporters, as the OTEL_*
// settings say (docs/observability.md), sets them as OpenTelemetry's global providers too (so
// that an agent's own instrumentation joins the same traces), and returns them in setup.
func exporters(ctx context.Context, kind platformKind, getenv func(string) string, log *slog.Logger, want exportWanted, setup telemetrySetup) (telemetrySetup, error) {
	res, err := otelResource(kind, getenv)
	if err != nil {
		return setup, err
	}
	var flushes []func(context.Context) error
	var stops []func(context.Context) error
	if want.traces {
		o, err := otlpOptions(getenv, "TRACES", "/v1/traces")
		if err != nil {
			return setup, err
		}
		sampler, err := otelSampler(getenv)
		if err != nil {
			return setup, err
		}
		exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(o.url), otlptracehttp.WithHeaders(o.headers),
			otlptracehttp.WithTimeout(o.timeout), otlptracehttp.WithCompression(otlptracehttp.Compression(o.compression)))
		if err != nil {
			return setup, fmt.Errorf("platform: the OTLP trace exporter: %w", err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res), sdktrace.WithSampler(sampler))
		setup.providers.Tracers = tp
		flushes, stops = append(flushes, tp.ForceFlush), append(stops, tp.Shutdown)
		otel.SetTracerProvider(tp)
	}
	if want.metrics {
		o, err := otlpOptions(getenv, "METRICS", "/v1/metrics")
		if err != nil {
			return setup, err
		}
		every, err := envvar.Int(getenv, "OTEL_METRIC_EXPORT_INTERVAL", 60000, 1, 24*3600*1000)
		if err != nil {
			return setup, fmt.Errorf("platform: %w (milliseconds between metric exports)", err)
		}
		exp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(o.url), otlpmetrichttp.WithHeaders(o.headers),
			otlpmetrichttp.WithTimeout(o.timeout), otlpmetrichttp.WithCompression(otlpmetrichttp.Compression(o.compression)))
		if err != nil {
			return setup, fmt.Errorf("platform: the OTLP metric exporter: %w", err)
		}
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res),
			sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(time.Duration(every)*time.Millisecond))))
		setup.providers.Meters = mp
		flushes, stops = append(flushes, mp.ForceFlush), append(stops, mp.Shutdown)
		otel.SetMeterProvider(mp)
	}
	otel.SetTextMapPropagator(setup.providers.Propagator)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("telemetry export failed", "error", err) }))
	setup.flush = func(ctx context.Context) {
		for _, f := range flushes {
			if err := f(ctx); err != nil {
				log.WarnContext(ctx, "telemetry flush failed", "error", err)
			}
		}
	}
	setup.shutdown = func(ctx context.Context) error {
		var errs []error
		for _, f := range stops {
			errs = append(errs, f(ctx))
		}
		return errors.Join(errs...)
	}
	log.Info("telemetry export on", "traces", want.traces, "metrics", want.metrics)
	return setup, nil
}

// otlpSettings are one signal's exporter settings.
type otlpSettings struct {
	url         string
	headers     map[string]string
	timeout     time.Duration
	compression int // otlptracehttp / otlpmetrichttp Compression: 0 none, 1 gzip
}

// otlpOptions reads OTEL_EXPORTER_OTLP_{signal}_* and their OTEL_EXPORTER_OTLP_* defaults: the
// endpoint (the signal's full URL, or the base URL + path; http://localhost:4318 by default),
// the protocol (http/protobuf only), headers, timeout (ms) and compression (gzip, none).
func otlpOptions(getenv func(string) string, signal, path string) (otlpSettings, error) {
	get := func(name string) (string, string) {
		specific := "OTEL_EXPORTER_OTLP_" + signal + "_" + name
		if v := strings.TrimSpace(getenv(specific)); v != "" {
			return specific, v
		}
		general := "OTEL_EXPORTER_OTLP_" + name
		return general, strings.TrimSpace(getenv(general))
	}
	var s otlpSettings
	if name, v := get("PROTOCOL"); v != "" && v != "http/protobuf" {
		return s, fmt.Errorf("platform: %s=%q: svz exports over OTLP/HTTP with protobuf: set http/protobuf (the collector's port 4318) or leave it unset", name, v)
	}
	name, v := get("ENDPOINT")
	switch {
	case v == "":
		s.url = "http://localhost:4318" + path
	case strings.HasSuffix(name, "_"+signal+"_ENDPOINT"):
		s.url = v
	default:
		s.url = strings.TrimRight(v, "/") + path
	}
	if u, err := url.Parse(s.url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return s, fmt.Errorf("platform: %s must be an http(s) URL without credentials, such as http://localhost:4318 (credentials go in OTEL_EXPORTER_OTLP_HEADERS)", name)
	}
	name, v = get("HEADERS")
	h, err := otlpHeaders(v)
	if err != nil {
		return s, fmt.Errorf("platform: %s: %w", name, err)
	}
	s.headers = h
	name, v = get("TIMEOUT")
	ms := int64(10000)
	if v != "" {
		if ms, err = strconv.ParseInt(v, 10, 64); err != nil || ms < 1 || ms > 600000 {
			return s, fmt.Errorf("platform: %s=%q: a whole number of milliseconds from 1 to 600000", name, v)
		}
	}
	s.timeout = time.Duration(ms) * time.Millisecond
	switch name, v = get("COMPRESSION"); v {
	case "", "none":
	case "gzip":
		s.compression = 1
	default:
		return s, fmt.Errorf("platform: %s=%q: gzip or none", name, v)
	}
	return s, nil
}

// otlpHeaders parses key=value pairs separated by commas, values percent-encoded (the OTEL_*
// headers format). An error names the pair's position, never its value (a header may hold a key).
func otlpHeaders(v string) (map[string]string, error) {
	h := map[string]string{}
	if v == "" {
		return h, nil
	}
	for i, pair := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		dec, err := url.PathUnescape(strings.TrimSpace(val))
		if !ok || k == "" || err != nil || strings.ContainsAny(k, " \t\r\n:") || strings.ContainsAny(dec, "\r\n") {
			return nil, fmt.Errorf("pair %d is not key=value (a header name, a percent-encoded value)", i+1)
		}
		h[k] = dec
	}
	return h, nil
}

// otelSampler reads OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG (parentbased_always_on by
// default).
func otelSampler(getenv func(string) string) (sdktrace.Sampler, error) {
	name, err := envvar.Enum(getenv, "OTEL_TRACES_SAMPLER", "parentbased_always_on", "always_on", "always_off", "traceidratio",
		"parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio")
	if err != nil {
		return nil, fmt.Errorf("platform: %w", err)
	}
	ratio := 1.0
	if strings.HasSuffix(name, "traceidratio") {
		if v := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG")); v != "" {
			if ratio, err = strconv.ParseFloat(v, 64); err != nil || ratio < 0 || ratio > 1 {
				return nil, fmt.Errorf("platform: OTEL_TRACES_SAMPLER_ARG=%q: a ratio from 0 to 1, such as 0.25", v)
			}
		}
	}
	switch name {
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), nil
	}
	return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
}

// otelResource describes this process: OTEL_RESOURCE_ATTRIBUTES, then service.name
// (OTEL_SERVICE_NAME, else the function or service name the platform gives, else svz), the
// version the build stamped, and the platform's cloud and faas attributes.
func otelResource(kind platformKind, getenv func(string) string) (*resource.Resource, error) {
	var attrs []attribute.KeyValue
	add := func(k, v string) {
		if v != "" {
			attrs = append(attrs, attribute.String(k, v))
		}
	}
	name := "svz"
	switch kind {
	case onLambda:
		add("cloud.provider", "aws")
		add("cloud.platform", "aws_lambda")
		add("cloud.region", getenv("AWS_REGION"))
		add("faas.name", getenv("AWS_LAMBDA_FUNCTION_NAME"))
		add("faas.version", getenv("AWS_LAMBDA_FUNCTION_VERSION"))
		name = cmpOr(getenv("AWS_LAMBDA_FUNCTION_NAME"), name)
	case onCloudRun:
		add("cloud.provider", "gcp")
		add("cloud.platform", "gcp_cloud_run")
		add("cloud.account.id", getenv("GOOGLE_CLOUD_PROJECT"))
		add("faas.name", getenv("K_SERVICE"))
		add("faas.version", getenv("K_REVISION"))
		name = cmpOr(getenv("K_SERVICE"), name)
	}
	add("service.name", name)
	add("service.version", buildinfo.Version())
	// The settings win over what the platform says (the last value of a key counts).
	if v := strings.TrimSpace(getenv("OTEL_RESOURCE_ATTRIBUTES")); v != "" {
		for i, pair := range strings.Split(v, ",") {
			k, val, ok := strings.Cut(pair, "=")
			dec, err := url.PathUnescape(strings.TrimSpace(val))
			if !ok || strings.TrimSpace(k) == "" || err != nil {
				return nil, fmt.Errorf("platform: OTEL_RESOURCE_ATTRIBUTES: pair %d is not key=value (values percent-encoded), such as deployment.environment.name=prod", i+1)
			}
			add(strings.TrimSpace(k), dec)
		}
	}
	add("service.name", strings.TrimSpace(getenv("OTEL_SERVICE_NAME")))
	return resource.NewSchemaless(attrs...), nil
}

// baggage is W3C Baggage's propagator.
func baggage() propagation.TextMapPropagator { return propagation.Baggage{} }

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
