package hello_test

import (
	"context"
	"crypto/ed25519"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/supervaize/svz/internal/callbench"
)

// BenchmarkCall measures what one /a2a call costs through the controller's http.Handler (normal
// mode, Ed25519 key, memory store) beside the floor: a handler that only decodes the body into a
// map and encodes an answer of the same size. Compare them with `make bench-calls`, which prints
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
