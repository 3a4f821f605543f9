package hello_test

import (
	"context"
	"crypto/ed25519"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/supervaize/svz/core/telemetry"
	"github.com/supervaize/svz/internal/callbench"
)

// BenchmarkCall measures what one /a2a call costs through the controller's http.Handler (normal
// mode, Ed25519 key, memory store) beside the floor: a handler that only decodes the body into a
// map and encodes an answer of the same size. Compare them with `make bench-controller`, which prints
// each call's time as a multiple of the floor's, measured in the same run (see docs/performance.md).
//
// "seen-token" calls carry a token the controller verified before; "first-token" calls carry one
// it has never seen (one signature check, a parse). "ed25519-verify" is one bare signature check,
// the unit the first-token overhead is compared with.
func BenchmarkCall(b *testing.B) {
	cb, err := callbench.New(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cb.Controller.Close() })

	serve := func(b *testing.B, h http.Handler, body []byte, token func(int) string) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, cb.Request(body, token(i)))
			if rec.Code != http.StatusOK || rec.Body.Len() < 200 {
				b.Fatalf("%d %s", rec.Code, rec.Body)
			}
			i++
		}
	}
	seen := func(int) string { return cb.Token }
	// fresh hands out tokens minted ahead in batches, with the timer stopped.
	fresh := func(b *testing.B) func(int) string {
		pool := make([]string, 512)
		return func(i int) string {
			if i%len(pool) == 0 {
				b.StopTimer()
				for n := range pool {
					pool[n] = cb.NewToken(i + n + 1)
				}
				b.StartTimer()
			}
			return pool[i%len(pool)]
		}
	}

	b.Run("floor", func(b *testing.B) { serve(b, cb.Floor, cb.SurfaceLoadBody, seen) })
	b.Run("surface.load/seen-token", func(b *testing.B) { serve(b, cb.Controller, cb.SurfaceLoadBody, seen) })
	b.Run("job.start/seen-token", func(b *testing.B) { serve(b, cb.Controller, cb.JobStartBody, seen) })
	b.Run("surface.load/first-token", func(b *testing.B) { serve(b, cb.Controller, cb.SurfaceLoadBody, fresh(b)) })
	b.Run("ed25519-verify", func(b *testing.B) {
		pub, priv, _ := ed25519.GenerateKey(nil)
		msg := []byte(cb.Token)
		sig := ed25519.Sign(priv, msg)
		b.ReportAllocs()
		for b.Loop() {
			if !ed25519.Verify(pub, msg, sig) {
				b.Fatal("signature refused")
			}
		}
	})
}

// BenchmarkCallRatio measures the same calls as BenchmarkCall, each interleaved with the floor
// (or, for a first-seen token, with a seen one and a bare signature check) in the same loop, so
// that a busy machine slows both sides alike. It reports the ratios, which is what
// docs/performance.md quotes (make bench-controller):
//
//	x-floor          time of the call / time of the floor call
//	first-token-us   what a never-seen token adds to surface.load, in µs
//	x-verify         that addition / one Ed25519 verification
func BenchmarkCallRatio(b *testing.B) {
	cb, err := callbench.New(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cb.Controller.Close() })
	call := func(b *testing.B, h http.Handler, body []byte, token string) time.Duration {
		rec := httptest.NewRecorder()
		req := cb.Request(body, token)
		start := time.Now()
		h.ServeHTTP(rec, req)
		d := time.Since(start)
		if rec.Code != http.StatusOK || rec.Body.Len() < 200 {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
		return d
	}
	for _, tc := range []struct {
		name string
		body []byte
	}{{"surface.load", cb.SurfaceLoadBody}, {"job.start", cb.JobStartBody}} {
		b.Run(tc.name, func(b *testing.B) {
			var floor, ctl time.Duration
			for b.Loop() {
				floor += call(b, cb.Floor, cb.SurfaceLoadBody, cb.Token)
				ctl += call(b, cb.Controller, tc.body, cb.Token)
			}
			b.ReportMetric(float64(ctl)/float64(floor), "x-floor")
		})
	}
	b.Run("first-token", func(b *testing.B) {
		pub, priv, _ := ed25519.GenerateKey(nil)
		msg := []byte(cb.Token)
		sig := ed25519.Sign(priv, msg)
		tokens := make([]string, 256)
		var seen, first, verify time.Duration
		i := 0
		for b.Loop() {
			if i%len(tokens) == 0 {
				b.StopTimer()
				for n := range tokens {
					tokens[n] = cb.NewToken(i + n + 1)
				}
				b.StartTimer()
			}
			seen += call(b, cb.Controller, cb.SurfaceLoadBody, cb.Token)
			first += call(b, cb.Controller, cb.SurfaceLoadBody, tokens[i%len(tokens)])
			start := time.Now()
			if !ed25519.Verify(pub, msg, sig) {
				b.Fatal("signature refused")
			}
			verify += time.Since(start)
			i++
		}
		b.ReportMetric(float64(first-seen)/float64(i)/1e3, "first-token-us")
		b.ReportMetric(float64(first-seen)/float64(verify), "x-verify")
	})
}

// BenchmarkCallRatioExporting measures what telemetry export adds to a call: the same calls to a
// controller whose traces and metrics are exported (the SDK's batch span processor and periodic
// reader, OTLP/HTTP to a receiver on loopback that accepts everything), interleaved with calls to
// one that exports nothing, as make bench-controller reports:
//
//	x-untraced   time of the exporting controller's call / time of the other's
func BenchmarkCallRatioExporting(b *testing.B) {
	ctx := context.Background()
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(receiver.Close)
	texp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(receiver.URL+"/v1/traces"))
	if err != nil {
		b.Fatal(err)
	}
	mexp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(receiver.URL+"/v1/metrics"))
	if err != nil {
		b.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(texp))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(mexp, sdkmetric.WithInterval(time.Second))))
	b.Cleanup(func() { _ = tp.Shutdown(ctx); _ = mp.Shutdown(ctx) })
	plain, err := callbench.New(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = plain.Controller.Close() })
	traced, err := callbench.New(telemetry.WithProviders(ctx, telemetry.Providers{Tracers: tp, Meters: mp}))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = traced.Controller.Close() })
	call := func(b *testing.B, cb *callbench.Bench, body []byte) time.Duration {
		rec := httptest.NewRecorder()
		req := cb.Request(body, cb.Token)
		start := time.Now()
		cb.Controller.ServeHTTP(rec, req)
		d := time.Since(start)
		if rec.Code != http.StatusOK || rec.Body.Len() < 200 {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
		return d
	}
	for _, name := range []string{"surface.load", "job.start"} {
		b.Run(name, func(b *testing.B) {
			var off, on time.Duration
			for b.Loop() {
				if name == "job.start" {
					off += call(b, plain, plain.JobStartBody)
					on += call(b, traced, traced.JobStartBody)
				} else {
					off += call(b, plain, plain.SurfaceLoadBody)
					on += call(b, traced, traced.SurfaceLoadBody)
				}
			}
			b.ReportMetric(float64(on)/float64(off), "x-untraced")
		})
	}
}
