package grant

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"testing"

	"github.com/supervaize/svz/core/grant/granttest"
)

// BenchmarkAuthorize compares a token's first verification (parse, Ed25519, claims) with the
// following ones (SHA-256 of the token, cache lookup, per-call checks).
//
//	go test -run '^$' -bench Authorize -benchmem ./core/grant
func BenchmarkAuthorize(b *testing.B) {
	iss := granttest.NewIssuer("k1")
	clk := newClock()
	ctx := context.Background()
	const distinct = 4096
	tokens := make([]Call, distinct)
	for i := range tokens {
		tokens[i] = jobStart(iss.Token(granttest.Valid(t0, testIssuer, fullScopes...).With("jti", fmt.Sprint("token-", i))))
	}
	srv := newJWKSServer(b, granttest.JWKS(iss.JWK()))
	// offline fails the benchmark if the verifier fetched anything after its start-up fetch.
	offline := func(b *testing.B) func() {
		before := srv.hits.Load()
		return func() {
			if n := srv.hits.Load() - before; n != 0 {
				b.Fatalf("JWKS fetched %d times on the warm path", n)
			}
		}
	}
	run := func(b *testing.B, v *verifier, calls []Call) {
		defer offline(b)()
		for _, c := range calls[:min(len(calls), DefaultTokenCacheSize)] { // warm the cache (b.Loop resets the timer)
			if _, err := v.Authorize(ctx, c); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := v.Authorize(ctx, calls[i%len(calls)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	}

	b.Run("first/pem", func(b *testing.B) {
		// A cache of one entry cycling through 4096 tokens: every call is a first verification,
		// including the hash and the cache insertion.
		run(b, newPEMVerifier(b, iss, clk, WithTokenCacheSize(1)), tokens)
	})
	b.Run("uncached/pem", func(b *testing.B) {
		run(b, newPEMVerifier(b, iss, clk, WithTokenCacheSize(0)), tokens[:1])
	})
	b.Run("cached/pem", func(b *testing.B) {
		run(b, newPEMVerifier(b, iss, clk), tokens[:1])
	})
	b.Run("cached/pem/1024-tokens", func(b *testing.B) {
		run(b, newPEMVerifier(b, iss, clk), tokens[:1024])
	})

	b.Run("first/jwks", func(b *testing.B) {
		run(b, newJWKSVerifier(b, srv.URL(), clk, WithTokenCacheSize(1)), tokens)
	})
	b.Run("cached/jwks", func(b *testing.B) {
		run(b, newJWKSVerifier(b, srv.URL(), clk), tokens[:1])
	})
	b.Run("cached/jwks/parallel", func(b *testing.B) {
		v := newJWKSVerifier(b, srv.URL(), clk)
		defer offline(b)()
		for _, c := range tokens[:64] {
			if _, err := v.Authorize(ctx, c); err != nil {
				b.Fatal(err)
			}
		}
		b.ResetTimer()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if _, err := v.Authorize(ctx, tokens[i%64]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	})
}

// BenchmarkRefusal: what a garbage or forged token costs an attacker's target.
func BenchmarkRefusal(b *testing.B) {
	iss, attacker := granttest.NewIssuer("k1"), granttest.NewIssuer("k1")
	v := newPEMVerifier(b, iss, newClock())
	ctx := context.Background()
	for name, call := range map[string]Call{
		"malformed":     jobStart("not-a-jwt"),
		"bad-signature": jobStart(attacker.Token(granttest.Valid(t0, testIssuer, fullScopes...))),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Authorize(ctx, call); err == nil {
					b.Fatal("accepted")
				}
			}
		})
	}
}

// BenchmarkFirstTokenParts splits a first verification into its parts, beside one Ed25519
// verification in the same run: what a never-seen token costs beyond its signature.
func BenchmarkFirstTokenParts(b *testing.B) {
	iss := granttest.NewIssuer("k1")
	tok := iss.Token(granttest.Valid(t0, testIssuer, fullScopes...))
	b.Run("parse+claims", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			t, err := parseToken(tok)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := parseClaims(t.claims); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sha256", func(b *testing.B) {
		for b.Loop() {
			_ = hashToken(tok)
		}
	})
	b.Run("ed25519-verify", func(b *testing.B) {
		t, _ := parseToken(tok)
		for b.Loop() {
			if !ed25519.Verify(iss.PublicKey(), []byte(t.signed), t.signature) {
				b.Fatal("refused")
			}
		}
	})
}
