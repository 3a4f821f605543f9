package tracehdr_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/supervaize/svz/adapters/internal/tracehdr"
)

const (
	traceHex = "5759e988bd862e3fe1be46a994272793"
	spanHex  = "53995c3f42cd8ad8"
)

func wantSC(t *testing.T, sampled bool) trace.SpanContext {
	t.Helper()
	tid, _ := trace.TraceIDFromHex(traceHex)
	sid, _ := trace.SpanIDFromHex(spanHex)
	cfg := trace.SpanContextConfig{TraceID: tid, SpanID: sid, Remote: true}
	if sampled {
		cfg.TraceFlags = trace.FlagsSampled
	}
	return trace.NewSpanContext(cfg)
}

func TestParseXRay(t *testing.T) {
	for _, tc := range []struct {
		in      string
		ok      bool
		sampled bool
	}{
		{"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1", true, true},
		{"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0", true, false},
		{"Parent=53995c3f42cd8ad8;Root=1-5759e988-bd862e3fe1be46a994272793;Lineage=a87bd80c:1|68fd508a:5", true, false},
		{"Root=1-5759e988-bd862e3fe1be46a994272793; Parent=53995c3f42cd8ad8; Sampled=?", true, false},
		{"Root=1-5759e988-bd862e3fe1be46a994272793", false, false},                         // no parent
		{"Parent=53995c3f42cd8ad8;Sampled=1", false, false},                                // no root
		{"Root=2-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8", false, false}, // version
		{"Root=1-5759e98-8bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8", false, false}, // split
		{"Root=1-5759E988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8", false, false}, // upper case
		{"Root=1-5759e988-bd862e3fe1be46a99427279;Parent=53995c3f42cd8ad8", false, false},  // short
		{"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad", false, false},  // short parent
		{"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=2", false, false},
		{"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1;Sampled=0", false, false},
		{"Root=1-5759e988-bd862e3fe1be46a994272793;Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8", false, false},
		{"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Parent=53995c3f42cd8ad8", false, false},
		{"Root=1-00000000-000000000000000000000000;Parent=53995c3f42cd8ad8", false, false}, // zero trace id
		{"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=0000000000000000", false, false}, // zero span id
		{"Root=1-5759e988-bd862e3fe1be46a994272793;Parent", false, false},
		{"", false, false},
	} {
		sc, ok := tracehdr.ParseXRay(tc.in)
		if ok != tc.ok {
			t.Errorf("ParseXRay(%q) ok = %v, want %v", tc.in, ok, tc.ok)
			continue
		}
		if ok && !sc.Equal(wantSC(t, tc.sampled)) {
			t.Errorf("ParseXRay(%q) = %v, want %v", tc.in, sc, wantSC(t, tc.sampled))
		}
	}
}

func TestParseCloudTrace(t *testing.T) {
	// 53995c3f42cd8ad8 = 6023947403358210776
	for _, tc := range []struct {
		in      string
		ok      bool
		sampled bool
	}{
		{traceHex + "/6023947403358210776;o=1", true, true},
		{traceHex + "/6023947403358210776;o=0", true, false},
		{traceHex + "/6023947403358210776", true, false},
		{"5759E988BD862E3FE1BE46A994272793/6023947403358210776;o=1", true, true},
		{traceHex + "/6023947403358210776;o=2", false, false},
		{traceHex + "/6023947403358210776;", false, false},
		{traceHex + "/0;o=1", false, false},
		{traceHex + "/;o=1", false, false},
		{traceHex + "/+6023947403358210776", false, false},
		{traceHex + "/18446744073709551616", false, false}, // 2^64
		{traceHex[:31] + "/6023947403358210776", false, false},
		{traceHex, false, false},
		{"00000000000000000000000000000000/1", false, false},
		{"", false, false},
	} {
		sc, ok := tracehdr.ParseCloudTrace(tc.in)
		if ok != tc.ok {
			t.Errorf("ParseCloudTrace(%q) ok = %v, want %v", tc.in, ok, tc.ok)
			continue
		}
		if ok && !sc.Equal(wantSC(t, tc.sampled)) {
			t.Errorf("ParseCloudTrace(%q) = %v, want %v", tc.in, sc, wantSC(t, tc.sampled))
		}
	}
}

// TestRoundTrip: what Inject writes, Extract reads back, for both propagators and both flags.
func TestRoundTrip(t *testing.T) {
	for _, p := range []propagation.TextMapPropagator{tracehdr.XRay{}, tracehdr.CloudTrace{}} {
		for _, sampled := range []bool{true, false} {
			sc := wantSC(t, sampled)
			c := propagation.MapCarrier{}
			p.Inject(trace.ContextWithRemoteSpanContext(context.Background(), sc), c)
			if len(c) != 1 {
				t.Fatalf("%T wrote %v", p, c)
			}
			got := trace.SpanContextFromContext(p.Extract(context.Background(), c))
			if !got.Equal(sc) {
				t.Errorf("%T: %v → %v → %v", p, sc, c, got)
			}
		}
		c := propagation.MapCarrier{}
		p.Inject(context.Background(), c)
		if len(c) != 0 {
			t.Errorf("%T wrote %v without a span context", p, c)
		}
	}
	if got := tracehdr.FormatXRay(wantSC(t, true)); got != "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1" {
		t.Errorf("FormatXRay = %q", got)
	}
	if got := tracehdr.XRayTraceID(wantSC(t, true).TraceID()); got != "1-5759e988-bd862e3fe1be46a994272793" {
		t.Errorf("XRayTraceID = %q", got)
	}
}

// FuzzParse: no input panics, and whatever parses formats back to a value that parses the same.
func FuzzParse(f *testing.F) {
	f.Add("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")
	f.Add(traceHex + "/6023947403358210776;o=1")
	f.Fuzz(func(t *testing.T, v string) {
		if sc, ok := tracehdr.ParseXRay(v); ok {
			again, ok := tracehdr.ParseXRay(tracehdr.FormatXRay(sc))
			if !ok || !again.Equal(sc) {
				t.Fatalf("X-Ray %q: %v does not round-trip", v, sc)
			}
		}
		if sc, ok := tracehdr.ParseCloudTrace(v); ok {
			c := propagation.MapCarrier{}
			tracehdr.CloudTrace{}.Inject(trace.ContextWithRemoteSpanContext(context.Background(), sc), c)
			again, ok := tracehdr.ParseCloudTrace(c[tracehdr.CloudTraceHeader])
			if !ok || !again.Equal(sc) {
				t.Fatalf("Cloud Trace %q: %v does not round-trip", v, sc)
			}
		}
	})
}
