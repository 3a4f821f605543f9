package grant

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"math/big"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/supervaize/svz/core/grant/granttest"
)

// Tests of what scripts/mutants found unchecked in oidc.go (statements deleted, conditions
// dropped, errors as nil; issue 30).

// TestRSAJWKSRefusals: each way a key set is malformed is refused with its own reason.
func TestRSAJWKSRefusals(t *testing.T) {
	for body, want := range map[string]string{
		`[]`:                                   "the key set is not a JSON object",
		`{`:                                    "the key set is not a JSON object",
		`{"keys":[],"keys":[]}`:                "the key set has duplicate members",
		`{}`:                                   "the key set has no keys list",
		`{"keys":{}}`:                          "the key set has no keys list",
		`{"keys":[1]}`:                         "a key is not a JSON object",
		`{"keys":[{"kid":"a","kid":"b"}]}`:     "a key has duplicate members",
		`{"keys":[{"kid":"a"},{"x":1,"x":2}]}`: "a key has duplicate members",
	} {
		if keys, err := parseRSAJWKS([]byte(body)); err == nil || err.Error() != want || keys != nil {
			t.Errorf("%s: %v, %v; want %q", body, keys, err, want)
		}
	}
}

// TestRSAJWKSSkips: the entries that can verify nothing here are skipped, the set kept: a key
// without kid, a kid seen before (the first stays), a key of another type with an RSA key's
// members, a modulus or exponent that is not base64url, an even exponent, an exponent of more
// bytes than an int64 holds.
func TestRSAJWKSSkips(t *testing.T) {
	g, other := oidcKeys()
	b64 := base64.RawURLEncoding.EncodeToString
	n, n2 := b64(g.Key.N.Bytes()), b64(other.Key.N.Bytes())
	// 2^64 + 65537: its low 64 bits are a good exponent.
	wide := b64(new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), 64), big.NewInt(65537)).Bytes())
	keys, err := parseRSAJWKS([]byte(`{"keys":[
		{"kty":"RSA","kid":"","n":"` + n + `","e":"AQAB"},
		{"kty":"RSA","n":"` + n + `","e":"AQAB"},
		{"kty":"RSA","kid":"ok","n":"` + n + `","e":"AQAB"},
		{"kty":"RSA","kid":"ok","n":"` + n2 + `","e":"AQAB"},
		{"kty":"EC","kid":"ec","n":"` + n + `","e":"AQAB"},
		{"kty":"RSA","kid":"bad-n","n":"` + n + `AAA","e":"AQAB"},
		{"kty":"RSA","kid":"bad-e","n":"` + n + `","e":"AQABA"},
		{"kty":"RSA","kid":"even","n":"` + n + `","e":"BA"},
		{"kty":"RSA","kid":"wide","n":"` + n + `","e":"` + wide + `"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys["ok"] == nil || keys["ok"].N.Cmp(g.Key.N) != 0 || keys["ok"].E != 65537 {
		t.Fatalf("keys %v, want only the first of kid ok", keys)
	}
	if _, err := decodeSegment(n + "AAA"); err == nil {
		t.Fatal("the modulus with a byte more decodes: the case above tests nothing")
	}
}

// failingBody is a response body whose read fails after its first bytes; it counts its closes.
type failingBody struct {
	r      io.Reader
	closes *atomic.Int32
}

func (b failingBody) Read(p []byte) (int, error) { return b.r.Read(p) }
func (b failingBody) Close() error               { b.closes.Add(1); return nil }

// keysTransport answers the key set's fetch: with err, or with status and body; it records the
// request's Accept header and counts the bodies closed.
type keysTransport struct {
	err    error
	status int
	body   func() io.Reader
	accept atomic.Value
	closes atomic.Int32
}

func (tr *keysTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	tr.accept.Store(r.Header.Get("Accept"))
	if tr.err != nil {
		return nil, tr.err
	}
	return &http.Response{StatusCode: tr.status, Body: failingBody{tr.body(), &tr.closes}, Header: http.Header{}, Request: r}, nil
}

// TestOIDCFetchFailures: a fetch that fails names the endpoint (without its query) and why, in
// the error of the Verify that needed the keys, and asks for JSON; the answer's body is closed.
func TestOIDCFetchFailures(t *testing.T) {
	g, _ := oidcKeys()
	t0 := time.Unix(1_800_000_000, 0)
	down, cut := errors.New("connection refused"), errors.New("connection reset")
	const prefix = "oidc: the keys could not be loaded from https://keys.example.com/certs: "
	for _, tc := range []struct {
		name  string
		tr    *keysTransport
		want  string
		cause error
	}{
		{"round trip", &keysTransport{err: down}, prefix + "connection refused", down},
		{"status", &keysTransport{status: 503, body: func() io.Reader { return strings.NewReader(`{"keys":[]}`) }}, prefix + "status 503", nil},
		{"body", &keysTransport{status: 200, body: func() io.Reader { return io.MultiReader(strings.NewReader(`{"keys":`), iotest.ErrReader(cut)) }}, prefix + "connection reset", cut},
		{"not a key set", &keysTransport{status: 200, body: func() io.Reader { return strings.NewReader(`[]`) }}, prefix + "the key set is not a JSON object", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := NewOIDCVerifier(OIDCConfig{Audience: oidcAud, Email: oidcEmail, JWKSURL: "https://keys.example.com/certs?key=secret",
				Now: func() time.Time { return t0 }, Client: &http.Client{Transport: tc.tr}})
			if err != nil {
				t.Fatal(err)
			}
			err = v.Verify(context.Background(), g.Token(granttest.IDClaims(t0, oidcAud, oidcEmail)))
			if err == nil || err.Error() != tc.want || tc.cause != nil && !errors.Is(err, tc.cause) {
				t.Fatalf("Verify: %v, want %q", err, tc.want)
			}
			if a, _ := tc.tr.accept.Load().(string); a != "application/json" {
				t.Fatalf("Accept %q", a)
			}
			if tc.tr.err == nil && tc.tr.closes.Load() != 1 {
				t.Fatalf("the answer's body closed %d times, want once", tc.tr.closes.Load())
			}
		})
	}
}

// TestOIDCKeysKeptUntilTheyExpire: a known kid is served from the set until its max-age passes,
// even once the cooldown has (the cooldown bounds fetches for unknown kids only).
func TestOIDCKeysKeptUntilTheyExpire(t *testing.T) {
	g, _ := oidcKeys()
	now := time.Unix(1_800_000_000, 0)
	srv, fetches := oidcJWKSServer(t, g.JWKS, "public, max-age=600")
	v, err := NewOIDCVerifier(OIDCConfig{Audience: oidcAud, Email: oidcEmail, JWKSURL: srv.URL, Cooldown: time.Second, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Duration{0, 2 * time.Second, 599 * time.Second, 600 * time.Second} {
		now = time.Unix(1_800_000_000, 0).Add(at)
		if err := v.Verify(context.Background(), g.Token(granttest.IDClaims(now, oidcAud, oidcEmail))); err != nil {
			t.Fatalf("at %s: %v", at, err)
		}
		want := int32(1)
		if at == 600*time.Second {
			want = 2
		}
		if fetches.Load() != want {
			t.Fatalf("at %s: %d fetches, want %d", at, fetches.Load(), want)
		}
	}
}

// TestOIDCDefaults: a JWKS URL that does not parse is refused; without a clock the verifier
// reads the time of day; without iat a token is refused.
func TestOIDCDefaults(t *testing.T) {
	if _, err := NewOIDCVerifier(OIDCConfig{Audience: oidcAud, Email: oidcEmail, JWKSURL: "http://[::1"}); err == nil || err.Error() != "oidc: the JWKS URL is not a valid URL" {
		t.Fatalf("a JWKS URL that does not parse: %v", err)
	}
	g, _ := oidcKeys()
	srv, _ := oidcJWKSServer(t, g.JWKS, "")
	v, err := NewOIDCVerifier(OIDCConfig{Audience: oidcAud, Email: oidcEmail, JWKSURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := v.Verify(context.Background(), g.Token(granttest.IDClaims(now, oidcAud, oidcEmail))); err != nil {
		t.Fatalf("a token issued now, on the time of day: %v", err)
	}
	if err := v.Verify(context.Background(), g.Token(granttest.IDClaims(now, oidcAud, oidcEmail).With("iat", nil))); err == nil || err.Error() != "oidc: exp and iat are required numbers" {
		t.Fatalf("no iat: %v", err)
	}
}
