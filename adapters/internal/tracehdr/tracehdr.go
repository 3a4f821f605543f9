// Package tracehdr reads and writes the trace headers of the platforms svz runs on, as
// OpenTelemetry propagators: AWS X-Ray's X-Amzn-Trace-Id (Lambda's _X_AMZN_TRACE_ID, an SQS
// message's AWSTraceHeader) and Google Cloud's X-Cloud-Trace-Context. Both parsers take untrusted
// input (a caller's header) and accept only the documented shapes: anything else is no parent.
package tracehdr

import (
	"context"
	"encoding/hex"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Header names.
const (
	XRayHeader       = "X-Amzn-Trace-Id"
	CloudTraceHeader = "X-Cloud-Trace-Context"
)

// XRay is the propagator of X-Amzn-Trace-Id:
// Root=1-{8 hex: epoch seconds}-{24 hex};Parent={16 hex};Sampled={0|1}, fields in any order,
// others (Lineage, Self) ignored.
type XRay struct{}

var _ propagation.TextMapPropagator = XRay{}

// Inject writes ctx's span context, when valid.
func (XRay) Inject(ctx context.Context, c propagation.TextMapCarrier) {
	if v := FormatXRay(trace.SpanContextFromContext(ctx)); v != "" {
		c.Set(XRayHeader, v)
	}
}

// Extract returns ctx with the remote parent the header names, or ctx as it is.
func (XRay) Extract(ctx context.Context, c propagation.TextMapCarrier) context.Context {
	if sc, ok := ParseXRay(c.Get(XRayHeader)); ok {
		return trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return ctx
}

// Fields are the headers XRay reads and writes.
func (XRay) Fields() []string { return []string{XRayHeader} }

// FormatXRay is the X-Amzn-Trace-Id value of sc, "" when sc is not valid.
func FormatXRay(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	t := sc.TraceID().String()
	sampled := "0"
	if sc.IsSampled() {
		sampled = "1"
	}
	return "Root=1-" + t[:8] + "-" + t[8:] + ";Parent=" + sc.SpanID().String() + ";Sampled=" + sampled
}

// XRayTraceID is the X-Ray form of a trace id, 1-{8 hex}-{24 hex}, as X-Ray's console and
// CloudWatch show it.
func XRayTraceID(id trace.TraceID) string {
	t := id.String()
	return "1-" + t[:8] + "-" + t[8:]
}

// ParseXRay reads an X-Amzn-Trace-Id value. A Root and a Parent are required; a field given
// twice, a malformed one, or an unknown Sampled value is refused.
func ParseXRay(v string) (trace.SpanContext, bool) {
	if v == "" || len(v) > 256 {
		return trace.SpanContext{}, false
	}
	var cfg trace.SpanContextConfig
	var root, parent, sampled bool
	for field := range strings.SplitSeq(v, ";") {
		k, val, ok := strings.Cut(strings.TrimSpace(field), "=")
		if !ok {
			return trace.SpanContext{}, false
		}
		switch k {
		case "Root":
			ver, rest, ok := strings.Cut(val, "-")
			epoch, rand, ok2 := strings.Cut(rest, "-")
			if root || !ok || !ok2 || ver != "1" || len(epoch) != 8 || len(rand) != 24 || !lowerHex(epoch) || !lowerHex(rand) {
				return trace.SpanContext{}, false
			}
			if _, err := hex.Decode(cfg.TraceID[:], []byte(epoch+rand)); err != nil {
				return trace.SpanContext{}, false
			}
			root = true
		case "Parent":
			if parent || len(val) != 16 || !lowerHex(val) {
				return trace.SpanContext{}, false
			}
			if _, err := hex.Decode(cfg.SpanID[:], []byte(val)); err != nil {
				return trace.SpanContext{}, false
			}
			parent = true
		case "Sampled":
			switch {
			case sampled:
				return trace.SpanContext{}, false
			case val == "1":
				cfg.TraceFlags = trace.FlagsSampled
			case val == "0" || val == "?":
			default:
				return trace.SpanContext{}, false
			}
			sampled = true
		}
	}
	if !root || !parent {
		return trace.SpanContext{}, false
	}
	cfg.Remote = true
	sc := trace.NewSpanContext(cfg)
	return sc, sc.IsValid()
}

// CloudTrace is the propagator of X-Cloud-Trace-Context: {32 hex}/{span id, decimal};o={0|1}.
type CloudTrace struct{}

var _ propagation.TextMapPropagator = CloudTrace{}

// Inject writes ctx's span context, when valid.
func (CloudTrace) Inject(ctx context.Context, c propagation.TextMapCarrier) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return
	}
	id := sc.SpanID()
	var n uint64
	for _, b := range id {
		n = n<<8 | uint64(b)
	}
	o := "0"
	if sc.IsSampled() {
		o = "1"
	}
	c.Set(CloudTraceHeader, sc.TraceID().String()+"/"+strconv.FormatUint(n, 10)+";o="+o)
}

// Extract returns ctx with the remote parent the header names, or ctx as it is.
func (CloudTrace) Extract(ctx context.Context, c propagation.TextMapCarrier) context.Context {
	if sc, ok := ParseCloudTrace(c.Get(CloudTraceHeader)); ok {
		return trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return ctx
}

// Fields are the headers CloudTrace reads and writes.
func (CloudTrace) Fields() []string { return []string{CloudTraceHeader} }

// ParseCloudTrace reads an X-Cloud-Trace-Context value: a 32-hex trace id, a decimal span id
// (1 to 2^64-1) and optionally ;o=0 or ;o=1.
func ParseCloudTrace(v string) (trace.SpanContext, bool) {
	if v == "" || len(v) > 128 {
		return trace.SpanContext{}, false
	}
	var cfg trace.SpanContextConfig
	tid, rest, ok := strings.Cut(v, "/")
	if !ok || len(tid) != 32 || !hexDigits(tid) {
		return trace.SpanContext{}, false
	}
	if _, err := hex.Decode(cfg.TraceID[:], []byte(strings.ToLower(tid))); err != nil {
		return trace.SpanContext{}, false
	}
	sid, opts, hasOpts := strings.Cut(rest, ";")
	if sid == "" || sid[0] == '+' || sid[0] == '-' {
		return trace.SpanContext{}, false
	}
	n, err := strconv.ParseUint(sid, 10, 64)
	if err != nil || n == 0 {
		return trace.SpanContext{}, false
	}
	for i := range 8 {
		cfg.SpanID[7-i] = byte(n >> (8 * i))
	}
	switch {
	case !hasOpts:
	case opts == "o=1":
		cfg.TraceFlags = trace.FlagsSampled
	case opts == "o=0":
	default:
		return trace.SpanContext{}, false
	}
	cfg.Remote = true
	sc := trace.NewSpanContext(cfg)
	return sc, sc.IsValid()
}

func lowerHex(s string) bool {
	for i := range len(s) {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func hexDigits(s string) bool {
	for i := range len(s) {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}
