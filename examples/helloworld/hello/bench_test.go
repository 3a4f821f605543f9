package hello_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
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

// BenchmarkCallRatioExporting measures what telemetry export adds to a call's CPU cost: blocks of
// the same calls to a controller whose traces and metrics are exported (the SDK's batch span
// processor and periodic reader, OTLP/HTTP to a receiver in a child process, which accepts
// everything) alternate with blocks of calls to one that exports nothing. Each block's CPU time is
// the process's (getrusage: every goroutine, the exporter's and the garbage collector's included);
// an exporting block ends by flushing its spans, so their export is counted in it. As make
// bench-controller reports:
//
//	x-cpu-untraced   CPU of the exporting controller's calls / CPU of the other's
//	x-cpu-bare-span  the same for a controller that exports nothing but makes one bare span per
//	                 call (no attribute, no metric) through the same SDK and exporter: the floor
//	                 any span per call costs with OpenTelemetry's Go SDK
func BenchmarkCallRatioExporting(b *testing.B) {
	ctx := context.Background()
	receiver := startOTLPReceiver(b)
	texp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(receiver+"/v1/traces"))
	if err != nil {
		b.Fatal(err)
	}
	mexp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(receiver+"/v1/metrics"))
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
	bare := tp.Tracer("bare")
	call := func(b *testing.B, cb *callbench.Bench, body []byte) {
		rec := httptest.NewRecorder()
		cb.Controller.ServeHTTP(rec, cb.Request(body, cb.Token))
		if rec.Code != http.StatusOK || rec.Body.Len() < 200 {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
	const block = 256 // calls per block: about one batch of spans
	for _, name := range []string{"surface.load", "job.start"} {
		b.Run(name, func(b *testing.B) {
			body := func(cb *callbench.Bench) []byte {
				if name == "job.start" {
					return cb.JobStartBody
				}
				return cb.SurfaceLoadBody
			}
			var off, on, spanned time.Duration
			for b.Loop() {
				t0 := processCPU(b)
				for range block {
					call(b, plain, body(plain))
				}
				t1 := processCPU(b)
				for range block {
					call(b, traced, body(traced))
				}
				if err := tp.ForceFlush(ctx); err != nil {
					b.Fatal(err)
				}
				t2 := processCPU(b)
				for range block {
					_, span := bare.Start(ctx, "call")
					call(b, plain, body(plain))
					span.End()
				}
				if err := tp.ForceFlush(ctx); err != nil {
					b.Fatal(err)
				}
				t3 := processCPU(b)
				off, on, spanned = off+t1-t0, on+t2-t1, spanned+t3-t2
			}
			b.ReportMetric(float64(on)/float64(off), "x-cpu-untraced")
			b.ReportMetric(float64(spanned)/float64(off), "x-cpu-bare-span")
		})
	}
}

// processCPU is the CPU time the process has used, user and system, all threads.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startOTLPReceiver starts this test binary again as an OTLP/HTTP receiver that accepts
// everything (TestMain), so that what it spends is not the benchmark's CPU, and returns its URL.
func startOTLPReceiver(b *testing.B) string {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), otlpReceiverEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("the receiver did not start: %v", err)
	}
	return strings.TrimSpace(line)
}

// otlpReceiverEnv makes the test binary an OTLP receiver (startOTLPReceiver).
const otlpReceiverEnv = "SVZ_BENCH_OTLP_RECEIVER"

func TestMain(m *testing.M) {
	if os.Getenv(otlpReceiverEnv) == "1" {
		serveOTLPReceiver()
		return
	}
	os.Exit(m.Run())
}

// serveOTLPReceiver accepts every OTLP/HTTP export on a loopback port it prints, until its
// standard input closes.
func serveOTLPReceiver() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("http://%s\n", l.Addr())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
}
