package grant

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core/grant/granttest"
)

// The boundaries of the OIDC verifier, each on both sides: tests that kill the mutants the
// mutation tester left alive in oidc.go (issue 30).

// TestOIDCTimeBoundaries: exp, iat and nbf are checked with the leeway included: a token exactly
// the leeway past its exp, or issued exactly the leeway ahead, is accepted; one second more is not.
// An empty kid is no kid.
func TestOIDCTimeBoundaries(t *testing.T) {
	g, _ := oidcKeys()
	t0 := time.Unix(1_800_000_000, 0)
	srv, _ := oidcJWKSServer(t, g.JWKS, "public, max-age=3600")
	good := granttest.IDClaims(t0, oidcAud, oidcEmail)
	l := DefaultOIDCLeeway
	for _, tc := range []struct {
		name, tok, want string
	}{
		{"exp at the leeway", g.Token(good.With("exp", t0.Add(-l).Unix())), ""},
		{"exp past the leeway", g.Token(good.With("exp", t0.Add(-l-time.Second).Unix())), "oidc: expired"},
		{"iat at the leeway", g.Token(good.With("iat", t0.Add(l).Unix())), ""},
		{"iat past the leeway", g.Token(good.With("iat", t0.Add(l+time.Second).Unix())), "oidc: issued in the future"},
		{"nbf at the leeway", g.Token(good.With("nbf", t0.Add(l).Unix())), ""},
		{"nbf past the leeway", g.Token(good.With("nbf", t0.Add(l+time.Second).Unix())), "oidc: not valid yet (nbf)"},
		{"nbf not a number", g.Token(good.With("nbf", "soon")), "oidc: not valid yet (nbf)"},
		{"empty kid", g.Sign(map[string]any{"alg": "RS256", "kid": ""}, good), "oidc: the token header has no kid"},
	} {
		v := newOIDC(t, srv.URL, func() time.Time { return t0 })
		got := ""
		if err := v.Verify(context.Background(), tc.tok); err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestOIDCRedirects: the key set is fetched through at most maxRedirects - 1 redirects.
func TestOIDCRedirects(t *testing.T) {
	g, _ := oidcKeys()
	t0 := time.Unix(1_800_000_000, 0)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n int
		if _, err := fmt.Sscanf(r.URL.Path, "/hop/%d", &n); err == nil && n > 0 {
			http.Redirect(w, r, fmt.Sprintf("/hop/%d", n-1), http.StatusFound)
			return
		}
		_, _ = w.Write(g.JWKS())
	}))
	t.Cleanup(srv.Close)
	tok := g.Token(granttest.IDClaims(t0, oidcAud, oidcEmail))
	for hops, want := range map[int]string{
		maxRedirects - 1: "",
		maxRedirects:     "stopped after 3 redirects",
	} {
		v := newOIDC(t, fmt.Sprintf("%s/hop/%d", srv.URL, hops), func() time.Time { return t0 })
		err := v.Verify(context.Background(), tok)
		if (want == "") != (err == nil) || want != "" && !strings.Contains(err.Error(), want) {
			t.Errorf("%d redirects: %v, want %q", hops, err, want)
		}
	}
}

// TestOIDCStaleBoundary: while every refresh fails, the last set verifies until exactly
// jwksMaxStale after it was fetched, not at that instant.
func TestOIDCStaleBoundary(t *testing.T) {
	g, _ := oidcKeys()
	fetched := time.Unix(1_800_000_000, 0)
	now := fetched
	var fail atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fail.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=60")
		_, _ = w.Write(g.JWKS())
	}))
	t.Cleanup(srv.Close)
	v := newOIDC(t, srv.URL, func() time.Time { return now })
	verify := func() error {
		return v.Verify(context.Background(), g.Token(granttest.IDClaims(now, oidcAud, oidcEmail)))
	}
	if err := verify(); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	now = fetched.Add(jwksMaxStale - time.Second)
	if err := verify(); err != nil {
		t.Fatalf("a second before the set is too old: %v", err)
	}
	now = fetched.Add(jwksMaxStale)
	if err := verify(); err == nil || !strings.HasPrefix(err.Error(), "oidc: the keys could not be loaded") {
		t.Fatalf("when the set is jwksMaxStale old: %v", err)
	}
}

// TestOIDCKeySetSize: a key set of exactly MaxJWKSBytes is read; one byte more is refused.
func TestOIDCKeySetSize(t *testing.T) {
	g, _ := oidcKeys()
	t0 := time.Unix(1_800_000_000, 0)
	set := g.JWKS()
	for size, want := range map[int]string{
		MaxJWKSBytes:     "",
		MaxJWKSBytes + 1: fmt.Sprintf("the key set is larger than %d bytes", MaxJWKSBytes),
	} {
		body := append(bytes.Repeat([]byte(" "), size-len(set)), set...) // JSON allows leading spaces
		srv, _ := oidcJWKSServer(t, func() []byte { return body }, "")
		v := newOIDC(t, srv.URL, func() time.Time { return t0 })
		err := v.Verify(context.Background(), g.Token(granttest.IDClaims(t0, oidcAud, oidcEmail)))
		if (want == "") != (err == nil) || want != "" && !strings.Contains(err.Error(), want) {
			t.Errorf("a set of %d bytes: %v, want %q", size, err, want)
		}
	}
}

// TestRSAJWKExponents: the public exponent is odd, 3 to 2^31 - 1, in at most 4 bytes.
func TestRSAJWKExponents(t *testing.T) {
	g, _ := oidcKeys()
	n := base64.RawURLEncoding.EncodeToString(g.Key.N.Bytes())
	enc := func(e *big.Int) string { return base64.RawURLEncoding.EncodeToString(e.Bytes()) }
	for _, tc := range []struct {
		e  *big.Int
		ok bool
	}{
		{big.NewInt(3), true},
		{big.NewInt(1), false},
		{big.NewInt(65537), true},
		{big.NewInt(1<<31 - 1), true},
		{big.NewInt(1<<31 + 1), false},
	} {
		e := enc(tc.e)
		keys, err := parseRSAJWKS([]byte(`{"keys":[{"kty":"RSA","kid":"k","n":"` + n + `","e":"` + e + `"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		if got := keys["k"] != nil; got != tc.ok {
			t.Errorf("e = %v: accepted %v, want %v", tc.e, got, tc.ok)
		} else if got && int64(keys["k"].E) != tc.e.Int64() {
			t.Errorf("e = %v: read as %d", tc.e, keys["k"].E)
		}
	}
	// Leading zeros count: an exponent written in five bytes is refused, whatever its value.
	five := base64.RawURLEncoding.EncodeToString([]byte{0, 0, 0, 0, 3})
	if keys, err := parseRSAJWKS([]byte(`{"keys":[{"kty":"RSA","kid":"k","n":"` + n + `","e":"` + five + `"}]}`)); err != nil || keys["k"] != nil {
		t.Errorf("an exponent in five bytes: %v, %v", keys, err)
	}
}
