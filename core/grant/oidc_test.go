package grant

import (
	"context"
	"crypto/rsa"
	"encoding/base64"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core/grant/granttest"
)

const (
	oidcAud   = "https://svz-agent-abc.a.run.app"
	oidcEmail = "svz-agent-tasks@proj.iam.gserviceaccount.com"
)

var (
	oidcOnce   sync.Once
	oidcSigner *granttest.Google
	oidcOther  *granttest.Google
)

// oidcKeys returns two signers made once per test binary (RSA generation is slow under -race).
func oidcKeys() (*granttest.Google, *granttest.Google) {
	oidcOnce.Do(func() {
		oidcSigner, oidcOther = granttest.NewGoogle("g1"), granttest.NewGoogle("g1")
	})
	return oidcSigner, oidcOther
}

// jwksServer serves body with cacheControl and counts the fetches.
func oidcJWKSServer(t *testing.T, body func() []byte, cacheControl string) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if cacheControl != "" {
			w.Header().Set("Cache-Control", cacheControl)
		}
		_, _ = w.Write(body())
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func newOIDC(t *testing.T, url string, now func() time.Time) *OIDCVerifier {
	t.Helper()
	v, err := NewOIDCVerifier(OIDCConfig{Audience: oidcAud, Email: oidcEmail, JWKSURL: url, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestOIDCVerify(t *testing.T) {
	g, other := oidcKeys()
	t0 := time.Unix(1_800_000_000, 0)
	srv, _ := oidcJWKSServer(t, g.JWKS, "public, max-age=3600")
	good := granttest.IDClaims(t0, oidcAud, oidcEmail)
	pub := g.JWKS()
	for _, tc := range []struct {
		name, tok, want string // want "" accepts
	}{
		{"valid", g.Token(good), ""},
		{"valid, legacy issuer", g.Token(good.With("iss", "accounts.google.com")), ""},
		{"valid, audience list", g.Token(good.With("aud", []string{oidcAud})), ""},
		{"valid, within the skew", g.Token(good.With("exp", t0.Add(-20*time.Second).Unix(), "iat", t0.Add(20*time.Second).Unix())), ""},
		{"expired", g.Token(good.With("exp", t0.Add(-time.Minute).Unix())), "oidc: expired"},
		{"issued in the future", g.Token(good.With("iat", t0.Add(time.Minute).Unix())), "oidc: issued in the future"},
		{"nbf in the future", g.Token(good.With("nbf", t0.Add(time.Minute).Unix())), "oidc: not valid yet (nbf)"},
		{"no exp", g.Token(good.With("exp", nil)), "oidc: exp and iat are required numbers"},
		{"exp a string", g.Token(good.With("exp", "1900000000")), "oidc: exp and iat are required numbers"},
		{"foreign audience", g.Token(good.With("aud", "https://other.a.run.app")), "oidc: foreign audience"},
		{"two audiences", g.Token(good.With("aud", []string{oidcAud, "x"})), "oidc: foreign audience"},
		{"foreign issuer", g.Token(good.With("iss", "https://evil.example.com")), "oidc: foreign issuer"},
		{"no issuer", g.Token(good.With("iss", nil)), "oidc: foreign issuer"},
		{"wrong email", g.Token(good.With("email", "someone@proj.iam.gserviceaccount.com")), "oidc: issued for another account"},
		{"email not verified", g.Token(good.With("email_verified", false)), "oidc: email not verified"},
		{"email_verified a string", g.Token(good.With("email_verified", "true")), "oidc: email not verified"},
		{"no email_verified", g.Token(good.With("email_verified", nil)), "oidc: email not verified"}, // absent is not verified
		{"signed by another key", other.Token(good), "oidc: bad signature"},
		{"unknown kid", other.Sign(map[string]any{"alg": "RS256", "kid": "g2"}, good), "oidc: no key matches the token's kid"},
		{"no kid", g.Sign(map[string]any{"alg": "RS256"}, good), "oidc: the token header has no kid"},
		{"alg none", granttest.Unsigned(good), "oidc: the token must be signed with RS256"},
		{"HS256 with the public key", granttest.SignHS256(pub, map[string]any{"alg": "HS256", "kid": "g1"}, good), "oidc: the token must be signed with RS256"},
		{"RS512", g.Sign(map[string]any{"alg": "RS512", "kid": "g1"}, good), "oidc: the token must be signed with RS256"},
		{"tampered claims", tamper(g.Token(good)), "oidc: bad signature"},
		{"not a JWT", "abc", "oidc: malformed token"},
		{"critical extension", g.Sign(map[string]any{"alg": "RS256", "kid": "g1", "crit": []string{"b64"}}, good), "oidc: malformed token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newOIDC(t, srv.URL, func() time.Time { return t0 })
			err := v.VerifyAuthorization(context.Background(), "Bearer "+tc.tok)
			got := ""
			if err != nil {
				got = err.Error()
				var oe *OIDCError
				if !errors.As(err, &oe) {
					t.Fatalf("error %T %v is not an OIDCError", err, err)
				}
			}
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// tamper changes the email in the payload, keeping the signature.
func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	p, _ := base64.RawURLEncoding.DecodeString(parts[1])
	p = []byte(strings.Replace(string(p), "svz-agent-tasks", "svz-agent-taskz", 1))
	return parts[0] + "." + base64.RawURLEncoding.EncodeToString(p) + "." + parts[2]
}

func TestOIDCAuthorizationHeader(t *testing.T) {
	g, _ := oidcKeys()
	t0 := time.Unix(1_800_000_000, 0)
	srv, n := oidcJWKSServer(t, g.JWKS, "")
	v := newOIDC(t, srv.URL, func() time.Time { return t0 })
	tok := g.Token(granttest.IDClaims(t0, oidcAud, oidcEmail))
	for _, h := range []string{"", "Bearer", "Bearer ", tok, "Basic " + tok, "Bearer" + tok} {
		if err := v.VerifyAuthorization(context.Background(), h); err == nil || err.Error() != "oidc: no bearer token" {
			t.Fatalf("header %.20q: %v", h, err)
		}
	}
	if n.Load() != 0 {
		t.Fatalf("%d fetches for headers without a token", n.Load())
	}
	if err := v.VerifyAuthorization(context.Background(), "bearer  "+tok); err != nil {
		t.Fatal(err)
	}
}

// TestOIDCKeyCache: the keys are fetched lazily, kept for max-age, refetched when stale; an
// unknown kid refetches at most once per cooldown; a failing endpoint leaves the last set in use.
func TestOIDCKeyCache(t *testing.T) {
	g, other := oidcKeys()
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	var fail atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fail.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=600")
		_, _ = w.Write(g.JWKS())
	}))
	defer srv.Close()
	var fetches atomic.Int32
	client := &http.Client{Transport: roundTripCounter{&fetches, http.DefaultTransport}}
	v, err := NewOIDCVerifier(OIDCConfig{Audience: oidcAud, Email: oidcEmail, JWKSURL: srv.URL, Now: clock, Client: client})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	verify := func() error {
		return v.Verify(ctx, g.Token(granttest.IDClaims(now, oidcAud, oidcEmail)))
	}
	if fetches.Load() != 0 {
		t.Fatal("fetched before use")
	}
	for range 3 {
		if err := verify(); err != nil {
			t.Fatal(err)
		}
	}
	if fetches.Load() != 1 {
		t.Fatalf("%d fetches, want 1", fetches.Load())
	}
	unknown := other.Sign(map[string]any{"alg": "RS256", "kid": "g2"}, granttest.IDClaims(now, oidcAud, oidcEmail))
	for range 3 {
		if err := v.Verify(ctx, unknown); err == nil || err.Error() != "oidc: no key matches the token's kid" {
			t.Fatal(err)
		}
	}
	if fetches.Load() != 1 { // within the cooldown of the first fetch
		t.Fatalf("%d fetches, want 1", fetches.Load())
	}
	now = now.Add(DefaultJWKSCooldown)
	_ = v.Verify(ctx, unknown)
	if fetches.Load() != 2 {
		t.Fatalf("%d fetches after the cooldown, want 2", fetches.Load())
	}
	now = now.Add(10 * time.Minute) // stale: refetched, and the endpoint fails
	fail.Store(true)
	if err := verify(); err != nil {
		t.Fatalf("the last set must stay in use: %v", err)
	}
	if fetches.Load() != 3 {
		t.Fatalf("%d fetches, want 3", fetches.Load())
	}
	now = now.Add(25 * time.Hour)
	if err := verify(); err == nil || !strings.HasPrefix(err.Error(), "oidc: the keys could not be loaded from http://127.0.0.1") {
		t.Fatalf("a day-old set must not verify: %v", err)
	}
}

type roundTripCounter struct {
	n    *atomic.Int32
	next http.RoundTripper
}

func (r roundTripCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	r.n.Add(1)
	return r.next.RoundTrip(req)
}

func TestOIDCConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  OIDCConfig
		want string
	}{
		{OIDCConfig{Email: oidcEmail}, "oidc: the verifier needs an audience and a service account email"},
		{OIDCConfig{Audience: oidcAud}, "oidc: the verifier needs an audience and a service account email"},
		{OIDCConfig{Audience: oidcAud, Email: oidcEmail, JWKSURL: "http://keys.example.com/certs"}, `oidc: the JWKS URL must use https (plain http is allowed only for loopback addresses such as 127.0.0.1), got host "keys.example.com"`},
	} {
		if _, err := NewOIDCVerifier(tc.cfg); err == nil || err.Error() != tc.want {
			t.Fatalf("%+v: %v", tc.cfg, err)
		}
	}
	v, err := NewOIDCVerifier(OIDCConfig{Audience: oidcAud, Email: oidcEmail})
	if err != nil || v.url != GoogleJWKSURL {
		t.Fatalf("default URL: %v %v", err, v)
	}
}

func TestRSAJWKS(t *testing.T) {
	g, _ := oidcKeys()
	n := base64.RawURLEncoding.EncodeToString(g.Key.N.Bytes())
	short := base64.RawURLEncoding.EncodeToString(new(big.Int).Lsh(big.NewInt(1), 1023).Bytes())
	keys, err := parseRSAJWKS([]byte(`{"keys":[
		{"kty":"RSA","kid":"ok","n":"` + n + `","e":"AQAB"},
		{"kty":"RSA","kid":"hs","alg":"HS256","n":"` + n + `","e":"AQAB"},
		{"kty":"RSA","kid":"enc","use":"enc","n":"` + n + `","e":"AQAB"},
		{"kty":"RSA","kid":"short","n":"` + short + `","e":"AQAB"},
		{"kty":"RSA","kid":"even","n":"` + n + `","e":"AAI"},
		{"kty":"RSA","kid":"private","n":"` + n + `","e":"AQAB","d":"AQAB"},
		{"kty":"OKP","kid":"okp","crv":"Ed25519","x":"AAAA"},
		{"kty":"RSA","kid":"ok","n":"AQAB","e":"AQAB"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys["ok"] == nil || keys["ok"].N.Cmp(g.Key.N) != 0 || keys["ok"].E != 65537 {
		t.Fatalf("keys %v", keys)
	}
	for _, bad := range []string{`[]`, `{"keys":{}}`, `{"keys":[1]}`, `{"keys":[],"keys":[]}`, `{`} {
		if _, err := parseRSAJWKS([]byte(bad)); err == nil {
			t.Fatalf("%s accepted", bad)
		}
	}
}

// FuzzOIDCVerify: whatever the token, Verify never panics and accepts only a token that is
// RS256-signed by the key, for the audience and the account, unexpired.
func FuzzOIDCVerify(f *testing.F) {
	g, other := oidcKeys()
	t0 := time.Unix(1_800_000_000, 0)
	good := granttest.IDClaims(t0, oidcAud, oidcEmail)
	for _, s := range []string{
		g.Token(good), other.Token(good), granttest.Unsigned(good), g.Token(good.With("aud", "x")),
		granttest.SignHS256(g.JWKS(), map[string]any{"alg": "HS256", "kid": "g1"}, good),
		"", "a.b.c", "e30.e30.", g.Token(good) + "=",
	} {
		f.Add(s)
	}
	pub := &g.Key.PublicKey
	f.Fuzz(func(t *testing.T, tok string) {
		v, err := NewOIDCVerifier(OIDCConfig{Audience: oidcAud, Email: oidcEmail, Now: func() time.Time { return t0 }})
		if err != nil {
			t.Fatal(err)
		}
		v.keys, v.fetched, v.expires, v.tried = map[string]*rsa.PublicKey{"g1": pub}, t0, t0.Add(time.Hour), t0
		err = v.Verify(context.Background(), tok)
		if err != nil {
			var oe *OIDCError
			if !errors.As(err, &oe) {
				t.Fatalf("non-refusal error %v", err)
			}
			return
		}
		// Accepted: it must parse as a token whose claims check out.
		p, perr := parseToken(tok)
		if perr != nil {
			t.Fatalf("accepted a token the parser refuses: %q", tok)
		}
		if alg, _ := p.header.str("alg"); alg != "RS256" {
			t.Fatalf("accepted alg %q", alg)
		}
		if aud, _ := p.claims.str("aud"); aud != oidcAud {
			if raw, _ := p.claims.get("aud"); !strings.Contains(string(raw), oidcAud) {
				t.Fatalf("accepted audience %s", raw)
			}
		}
	})
}
