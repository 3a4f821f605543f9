package grant

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supervaize/svz/core/grant/granttest"
)

func TestJWKSRotationOnUnknownKID(t *testing.T) {
	old, next := granttest.NewIssuer("studio-2026-05"), granttest.NewIssuer("studio-2026-06")
	srv := newJWKSServer(t, granttest.JWKS(old.JWK()))
	clk := newClock()
	v := newJWKSVerifier(t, srv.URL(), clk)
	ctx := context.Background()
	oldTok := old.Token(granttest.Valid(t0, testIssuer, fullScopes...))
	if _, err := v.Authorize(ctx, jobStart(oldTok)); err != nil {
		t.Fatal(err)
	}
	if n := srv.hits.Load(); n != 1 {
		t.Fatalf("fetches = %d, want 1 (at start)", n)
	}

	// Studio rotates: the new key is published, the old one withdrawn.
	srv.set(granttest.JWKS(next.JWK()), http.StatusOK, "")
	newTok := next.Token(granttest.Valid(t0, testIssuer, fullScopes...))

	// Within the cooldown of the start-up fetch, the new kid is unknown and nothing is fetched.
	clk.Add(10 * time.Second)
	_, err := v.Authorize(ctx, jobStart(newTok))
	wantRefusal(t, err, CodeUnknownKID, msgUnknownKID)
	if n := srv.hits.Load(); n != 1 {
		t.Fatalf("fetches = %d within the cooldown, want 1", n)
	}
	// Once the cooldown has passed, the unknown kid fetches the set again and the new key works.
	clk.Add(DefaultJWKSCooldown)
	if _, err := v.Authorize(ctx, jobStart(newTok)); err != nil {
		t.Fatalf("rotated key: %v", err)
	}
	if n := srv.hits.Load(); n != 2 {
		t.Fatalf("fetches = %d, want 2", n)
	}
	// The withdrawn key stops working at once, even for a token verified (and cached) before.
	_, err = v.Authorize(ctx, jobStart(oldTok))
	wantRefusal(t, err, CodeUnknownKID, msgUnknownKID)
	if n := srv.hits.Load(); n != 2 {
		t.Fatalf("fetches = %d, want 2 (the withdrawn kid is within the cooldown)", n)
	}
}

func TestJWKSKeyReplacedUnderSameKID(t *testing.T) {
	first, second := granttest.NewIssuer("k"), granttest.NewIssuer("k")
	srv := newJWKSServer(t, granttest.JWKS(first.JWK()))
	srv.set(granttest.JWKS(first.JWK()), http.StatusOK, "max-age=60")
	clk := newClock()
	v := newJWKSVerifier(t, srv.URL(), clk)
	ctx := context.Background()
	tok := first.Token(granttest.Valid(t0, testIssuer, fullScopes...))
	if _, err := v.Authorize(ctx, jobStart(tok)); err != nil {
		t.Fatal(err)
	}
	// Studio replaces the key behind kid "k"; once the set expires the cached token is checked
	// against the new key and refused.
	srv.set(granttest.JWKS(second.JWK()), http.StatusOK, "max-age=60")
	clk.Add(61 * time.Second)
	_, err := v.Authorize(ctx, jobStart(tok))
	wantRefusal(t, err, CodeBadSignature, msgBadSignature)
	if _, err := v.Authorize(ctx, jobStart(second.Token(granttest.Valid(clk.Now(), testIssuer, fullScopes...)))); err != nil {
		t.Fatal(err)
	}
}

// TestJWKSCooldownAndSingleFlight: many concurrent calls with unknown kids cause one fetch per
// cooldown, and calls that need a fetch while one is running wait for that one.
func TestJWKSCooldownAndSingleFlight(t *testing.T) {
	studio := granttest.NewIssuer("k1")
	srv := newJWKSServer(t, granttest.JWKS(studio.JWK()))
	clk := newClock()
	v := newJWKSVerifier(t, srv.URL(), clk)
	ctx := context.Background()
	forged := func(i int) string {
		h := studio.Header()
		h["kid"] = "bad-" + strings.Repeat("x", i%7)
		return studio.Sign(h, granttest.Valid(t0, testIssuer, fullScopes...))
	}
	burst := func(n int) []error {
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { _, errs[i] = v.Authorize(ctx, jobStart(forged(i))) })
		}
		wg.Wait()
		return errs
	}

	for round := 1; round <= 3; round++ {
		// Hold the endpoint so the burst piles up on one fetch.
		clk.Add(DefaultJWKSCooldown)
		arrived, release := srv.holdRequests()
		done := make(chan []error)
		go func() { done <- burst(64) }()
		<-arrived // one fetch started; give the other callers time to join it
		time.Sleep(50 * time.Millisecond)
		release()
		for i, err := range <-done {
			if ge, ok := err.(*Error); !ok || ge.Code != CodeUnknownKID {
				t.Fatalf("round %d call %d: %v, want unknown_kid", round, i, err)
			}
		}
		if n, want := srv.hits.Load(), int64(1+round); n != want {
			t.Fatalf("round %d: %d fetches, want %d (one per cooldown)", round, n, want)
		}
		// More bad kids within the same cooldown: no fetch at all.
		clk.Add(DefaultJWKSCooldown - time.Second)
		burst(64)
		if n, want := srv.hits.Load(), int64(1+round); n != want {
			t.Fatalf("round %d: %d fetches within the cooldown, want %d", round, n, want)
		}
		clk.Add(-(DefaultJWKSCooldown - time.Second))
	}
}

func TestJWKSStaleSetWhileEndpointDown(t *testing.T) {
	studio := granttest.NewIssuer("k1")
	srv := newJWKSServer(t, granttest.JWKS(studio.JWK()))
	srv.set(granttest.JWKS(studio.JWK()), http.StatusOK, "max-age=300")
	clk := newClock()
	v := newJWKSVerifier(t, srv.URL(), clk, WithTokenCacheSize(0))
	ctx := context.Background()
	call := func() error {
		_, err := v.Authorize(ctx, jobStart(studio.Token(granttest.Valid(clk.Now(), testIssuer, fullScopes...))))
		return err
	}
	if err := call(); err != nil {
		t.Fatal(err)
	}

	for _, outage := range []struct {
		name   string
		body   []byte
		status int
		code   Code
	}{
		{"HTTP 503", []byte("down"), http.StatusServiceUnavailable, CodeJWKSUnavailable},
		{"not JSON", []byte("<html>"), http.StatusOK, CodeJWKSUnavailable},
		{"no keys list", []byte(`{"keys":"k1"}`), http.StatusOK, CodeInvalidJWKS},
	} {
		t.Run(outage.name, func(t *testing.T) {
			srv.set(outage.body, outage.status, "")
			before := srv.hits.Load()
			clk.Add(time.Hour) // well past max-age: every call wants a fresh set
			if err := call(); err != nil {
				t.Fatalf("stale set not served: %v", err)
			}
			if srv.hits.Load() != before+1 {
				t.Fatalf("expected one refresh attempt, got %d", srv.hits.Load()-before)
			}
			// Within the cooldown nobody waits for the endpoint again; the stale set answers.
			for range 10 {
				if err := call(); err != nil {
					t.Fatal(err)
				}
			}
			if srv.hits.Load() != before+1 {
				t.Fatalf("refresh retried within the cooldown: %d fetches", srv.hits.Load()-before)
			}
			// A kid the stale set does not know cannot be checked: the outage is the answer.
			h := studio.Header()
			h["kid"] = "k2"
			_, err := v.Authorize(ctx, jobStart(studio.Sign(h, granttest.Valid(clk.Now(), testIssuer, fullScopes...))))
			if ge, ok := err.(*Error); !ok || ge.Code != outage.code {
				t.Fatalf("unknown kid during the outage: %v, want %s", err, outage.code)
			}
		})
	}

	// A stale set is not served forever: past 24 h without a successful refresh calls fail.
	srv.set([]byte("down"), http.StatusServiceUnavailable, "")
	clk.Add(jwksMaxStale)
	err := call()
	wantRefusal(t, err, CodeJWKSUnavailable, jwksDownMessage(DefaultJWKSCooldown))

	// Recovery.
	srv.set(granttest.JWKS(studio.JWK()), http.StatusOK, "")
	clk.Add(DefaultJWKSCooldown)
	if err := call(); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
}

func TestJWKSEndpointDownAtStart(t *testing.T) {
	studio := granttest.NewIssuer("k1")
	srv := newJWKSServer(t, []byte("down"))
	srv.set([]byte("down"), http.StatusBadGateway, "")
	clk := newClock()
	v := newJWKSVerifier(t, srv.URL(), clk) // starts anyway
	if n := srv.hits.Load(); n != 1 {
		t.Fatalf("start-up fetches = %d, want 1", n)
	}
	srv.set(granttest.JWKS(studio.JWK()), http.StatusOK, "")
	// The failed start-up fetch does not hold the first call back.
	if _, err := v.Authorize(context.Background(), jobStart(studio.Token(granttest.Valid(t0, testIssuer, fullScopes...)))); err != nil {
		t.Fatal(err)
	}
}

func TestJWKSMaxAgeAndBackgroundRefresh(t *testing.T) {
	studio := granttest.NewIssuer("k1")
	srv := newJWKSServer(t, nil)
	srv.set(granttest.JWKS(studio.JWK()), http.StatusOK, "public, max-age=120")
	clk := newClock()
	v := newJWKSVerifier(t, srv.URL(), clk, WithTokenCacheSize(0))
	ctx := context.Background()
	call := func() error {
		_, err := v.Authorize(ctx, jobStart(studio.Token(granttest.Valid(clk.Now(), testIssuer, fullScopes...))))
		return err
	}
	clk.Add(89 * time.Second) // < 3/4 of max-age: fresh
	if err := call(); err != nil {
		t.Fatal(err)
	}
	if n := srv.hits.Load(); n != 1 {
		t.Fatalf("fetches = %d, want 1", n)
	}
	// Past 3/4 of max-age a call starts a refresh in the background and does not wait for it.
	arrived, release := srv.holdRequests()
	defer release()
	clk.Add(2 * time.Second)
	start := time.Now()
	if err := call(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-arrived:
	case <-time.After(30 * time.Second): // generous: a loaded machine
		t.Fatal("no background refresh started")
	}
	if waited := time.Since(start); waited > time.Second {
		t.Fatalf("call waited %s for the background refresh", waited)
	}
	release()
	waitFor(t, func() bool { return v.keys.(*jwksSource).set.Load().fetched.Equal(clk.Now()) })
	if n := srv.hits.Load(); n != 2 {
		t.Fatalf("fetches = %d, want 2", n)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 30 s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestJWKSTTL(t *testing.T) {
	cases := []struct {
		cacheControl []string
		age          string
		want         time.Duration
	}{
		{nil, "", 5 * time.Minute},
		{[]string{"max-age=600"}, "", 10 * time.Minute},
		{[]string{"public, max-age=120, must-revalidate"}, "", 2 * time.Minute},
		{[]string{"public", "MAX-AGE=\"300\""}, "", 5 * time.Minute},
		{[]string{"max-age=600"}, "300", 5 * time.Minute},
		{[]string{"max-age=600"}, "900", time.Minute},
		{[]string{"max-age=5"}, "", time.Minute},
		{[]string{"max-age=0"}, "", time.Minute},
		{[]string{"max-age=86400"}, "", time.Hour},
		{[]string{"max-age=9223372036854775807"}, "", time.Hour},
		{[]string{"no-store"}, "", time.Minute},
		{[]string{"max-age=600, no-cache"}, "", time.Minute},
		{[]string{"max-age=-5"}, "", 5 * time.Minute},
		{[]string{"max-age=ten"}, "", 5 * time.Minute},
		{[]string{"s-maxage=600"}, "", 5 * time.Minute},
	}
	for _, tc := range cases {
		h := http.Header{}
		for _, v := range tc.cacheControl {
			h.Add("Cache-Control", v)
		}
		if tc.age != "" {
			h.Set("Age", tc.age)
		}
		if got := jwksTTL(h); got != tc.want {
			t.Errorf("Cache-Control %q Age %q: ttl %s, want %s", tc.cacheControl, tc.age, got, tc.want)
		}
	}
}

// TestJWKSPayloads: what each JWKS body means for a token whose kid is "k1".
func TestJWKSPayloads(t *testing.T) {
	studio := granttest.NewIssuer("k1")
	jwk := studio.JWK()
	x := jwk["x"].(string)
	padded := studio.JWK()
	padded["x"] = x + "="
	other := granttest.NewIssuer("k1")
	cases := []struct {
		name string
		body string
		code Code
		msg  string
	}{
		{"valid", string(granttest.JWKS(jwk)), "", ""},
		{"padded x", string(granttest.JWKS(padded)), "", ""},
		{"first of duplicate kids wins", string(granttest.JWKS(jwk, other.JWK())), "", ""},
		{"entries without kid are skipped", `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"` + x + `"},` + string(mustMarshal(jwk)) + `]}`, "", ""},
		{"alg and use are ignored", `{"keys":[{"kid":"k1","kty":"OKP","crv":"Ed25519","x":"` + x + `","alg":"RS256","use":"enc"}]}`, "", ""},
		{"not JSON", `keys: [k1]`, CodeJWKSUnavailable, jwksDownMessage(DefaultJWKSCooldown)},
		{"JSON with trailing data", string(granttest.JWKS(jwk)) + `{}`, CodeJWKSUnavailable, jwksDownMessage(DefaultJWKSCooldown)},
		{"a list", `[` + string(mustMarshal(jwk)) + `]`, CodeInvalidJWKS, msgJWKSNoKeys},
		{"no keys member", `{"jwks":[]}`, CodeInvalidJWKS, msgJWKSNoKeys},
		{"keys an object", `{"keys":{"k1":{}}}`, CodeInvalidJWKS, msgJWKSNoKeys},
		{"keys null", `{"keys":null}`, CodeInvalidJWKS, msgJWKSNoKeys},
		{"duplicate keys member", `{"keys":[],"keys":[` + string(mustMarshal(jwk)) + `]}`, CodeInvalidJWKS, msgJWKSNoKeys},
		{"a key that is a string", `{"keys":["k1"]}`, CodeInvalidJWKS, msgJWKSNotObjects},
		{"a non-object after the match", `{"keys":[` + string(mustMarshal(jwk)) + `,7]}`, CodeInvalidJWKS, msgJWKSNotObjects},
		{"empty set", `{"keys":[]}`, CodeUnknownKID, msgUnknownKID},
		{"kid differs in case", strings.Replace(string(granttest.JWKS(jwk)), `"kid":"k1"`, `"kid":"K1"`, 1), CodeUnknownKID, msgUnknownKID},
		{"kty EC", strings.Replace(string(granttest.JWKS(jwk)), `"kty":"OKP"`, `"kty":"EC"`, 1), CodeInvalidJWK, msgJWKNotOKP},
		{"crv missing", strings.Replace(string(granttest.JWKS(jwk)), `"crv":"Ed25519",`, ``, 1), CodeInvalidJWK, msgJWKNotOKP},
		{"x empty", strings.Replace(string(granttest.JWKS(jwk)), x, ``, 1), CodeInvalidJWK, msgJWKNoX},
		{"x over-padded", strings.Replace(string(granttest.JWKS(jwk)), x, x+"===", 1), CodeInvalidJWK, msgJWKBadX},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newJWKSServer(t, []byte(tc.body))
			v := newJWKSVerifier(t, srv.URL(), newClock())
			_, err := v.Authorize(context.Background(), jobStart(studio.Token(granttest.Valid(t0, testIssuer, fullScopes...))))
			if tc.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			wantRefusal(t, err, tc.code, tc.msg)
		})
	}
}

func TestJWKSFetchLimits(t *testing.T) {
	studio := granttest.NewIssuer("k1")
	tok := studio.Token(granttest.Valid(t0, testIssuer, fullScopes...))

	t.Run("timeout", func(t *testing.T) {
		srv := newJWKSServer(t, granttest.JWKS(studio.JWK()))
		_, release := srv.holdRequests()
		defer release()
		start := time.Now()
		v := newJWKSVerifier(t, srv.URL(), newClock(), WithJWKSFetchTimeout(100*time.Millisecond))
		_, err := v.Authorize(context.Background(), jobStart(tok))
		wantRefusal(t, err, CodeJWKSUnavailable, jwksDownMessage(DefaultJWKSCooldown))
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("start-up and call took %s with a 100 ms fetch timeout", d)
		}
	})
	t.Run("oversized body", func(t *testing.T) {
		big := `{"keys":[` + string(mustMarshal(studio.JWK())) + `],"padding":"` + strings.Repeat("x", MaxJWKSBytes) + `"}`
		srv := newJWKSServer(t, []byte(big))
		v := newJWKSVerifier(t, srv.URL(), newClock())
		_, err := v.Authorize(context.Background(), jobStart(tok))
		wantRefusal(t, err, CodeJWKSUnavailable, jwksDownMessage(DefaultJWKSCooldown))
	})
	t.Run("redirect to plain http elsewhere", func(t *testing.T) {
		target := "http://studio.example/jwks/"
		redirect := httptest.NewServer(http.RedirectHandler(target, http.StatusFound))
		defer redirect.Close()
		v := newJWKSVerifier(t, redirect.URL+"/jwks/", newClock())
		_, err := v.Authorize(context.Background(), jobStart(tok))
		wantRefusal(t, err, CodeJWKSUnavailable, jwksDownMessage(DefaultJWKSCooldown))
	})
	t.Run("redirect on loopback", func(t *testing.T) {
		srv := newJWKSServer(t, granttest.JWKS(studio.JWK()))
		redirect := httptest.NewServer(http.RedirectHandler(srv.URL(), http.StatusMovedPermanently))
		defer redirect.Close()
		v := newJWKSVerifier(t, redirect.URL+"/jwks", newClock())
		if _, err := v.Authorize(context.Background(), jobStart(tok)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("redirect loop", func(t *testing.T) {
		var loop *httptest.Server
		loop = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, loop.URL+r.URL.Path+"x", http.StatusFound)
		}))
		defer loop.Close()
		v := newJWKSVerifier(t, loop.URL+"/jwks", newClock())
		_, err := v.Authorize(context.Background(), jobStart(tok))
		wantRefusal(t, err, CodeJWKSUnavailable, jwksDownMessage(DefaultJWKSCooldown))
	})
	t.Run("caller gives up, fetch goes on for the others", func(t *testing.T) {
		srv := newJWKSServer(t, granttest.JWKS(studio.JWK()))
		srv.set([]byte("down"), http.StatusServiceUnavailable, "")
		v := newJWKSVerifier(t, srv.URL(), newClock())
		srv.set(granttest.JWKS(studio.JWK()), http.StatusOK, "")
		arrived, release := srv.holdRequests()
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { _, err := v.Authorize(ctx, jobStart(tok)); errc <- err }()
		<-arrived
		cancel()
		wantRefusal(t, <-errc, CodeJWKSUnavailable, msgJWKSDown) // the fetch goes on: the next call joins it
		other := make(chan error, 1)
		go func() { _, err := v.Authorize(context.Background(), jobStart(tok)); other <- err }()
		time.Sleep(20 * time.Millisecond)
		release()
		if err := <-other; err != nil {
			t.Fatalf("call joined to the surviving fetch: %v", err)
		}
		if n := srv.hits.Load(); n != 2 {
			t.Fatalf("fetches = %d, want 2 (start-up + the shared one)", n)
		}
	})
}

func TestPEMIgnoresKID(t *testing.T) {
	studio := granttest.NewIssuer("")
	v := newPEMVerifier(t, studio, newClock())
	for _, h := range []map[string]any{{"alg": "EdDSA"}, {"alg": "EdDSA", "kid": "anything"}, {"alg": "EdDSA", "kid": 12}} {
		if _, err := v.Authorize(context.Background(), jobStart(studio.Sign(h, granttest.Valid(t0, testIssuer, fullScopes...)))); err != nil {
			t.Fatalf("header %v: %v", h, err)
		}
	}
	var ge *Error
	if _, err := v.Authorize(context.Background(), jobStart("x.y.z")); !errors.As(err, &ge) {
		t.Fatal("want a refusal")
	}
}

// TestJWKSURLIPLiterals: plain http is allowed to loopback IP addresses only. Every other host
// written as an IP literal (or in a form some resolvers read as one) is refused at start-up.
func TestJWKSURLIPLiterals(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"http://127.0.0.1:8080/jwks/", true},
		{"http://127.9.8.7/jwks/", true},
		{"http://[::1]:8080/jwks/", true},
		{"http://[::ffff:127.0.0.1]/jwks/", true},
		{"https://10.0.0.5/jwks/", true}, // https anywhere
		{"http://10.0.0.5/", false},
		{"http://10.0.0.5:80/jwks/", false},
		{"http://192.168.1.10/jwks/", false},
		{"http://169.254.169.254/latest/meta-data/", false},
		{"http://0.0.0.0/jwks/", false},
		{"http://[::]/jwks/", false},
		{"http://[fe80::1]/jwks/", false},
		{"http://[::ffff:10.0.0.5]/jwks/", false},
		{"http://2130706433/jwks/", false}, // 127.0.0.1 as one decimal number: not an IP literal here
		{"http://0x7f.0.0.1/jwks/", false},
		{"http://127.1/jwks/", false},
		{"http://127.0.0.1.nip.io/jwks/", false},
		{"http://localhost/jwks/", false},
	} {
		t.Run(tc.url, func(t *testing.T) {
			s := jwksSettings(tc.url)
			_, err := NewVerifier(context.Background(), s, "SRV", WithLogger(quietLog()), WithJWKSFetchTimeout(time.Millisecond))
			if tc.ok != (err == nil) {
				t.Fatalf("NewVerifier(%s) error = %v, want allowed=%v", tc.url, err, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "plain http is allowed only for loopback addresses") {
				t.Fatalf("error does not name the rule: %v", err)
			}
		})
	}
}

// routeTransport answers requests in-process by host, recording each host asked.
type routeTransport struct {
	mu     sync.Mutex
	asked  []string
	routes map[string]http.HandlerFunc
}

func (rt *routeTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rt.mu.Lock()
	rt.asked = append(rt.asked, r.URL.Scheme+"://"+r.URL.Host)
	h := rt.routes[r.URL.Scheme+"://"+r.URL.Host]
	rt.mu.Unlock()
	if h == nil {
		return nil, errors.New("no route")
	}
	rec := httptest.NewRecorder()
	h(rec, r)
	return rec.Result(), nil
}

// TestJWKSRedirectToPlainHTTPIP: a JWKS endpoint that redirects to plain http on a private IP
// is not followed, even when that address would answer with a key set. Here it would: the
// transport serves an attacker's key set there, and the attacker's token would pass if the
// redirect were followed.
func TestJWKSRedirectToPlainHTTPIP(t *testing.T) {
	studio, attacker := granttest.NewIssuer("k1"), granttest.NewIssuer("k1")
	rt := &routeTransport{routes: map[string]http.HandlerFunc{
		"https://studio.example": func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://10.0.0.5/jwks/", http.StatusFound)
		},
		"http://10.0.0.5": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(granttest.JWKS(attacker.JWK()))
		},
		"https://good.example": func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write(granttest.JWKS(studio.JWK()))
		},
	}}
	client := &http.Client{Transport: rt}
	v := newJWKSVerifier(t, "https://studio.example/jwks/", newClock(), WithHTTPClient(client))
	_, err := v.Authorize(context.Background(), jobStart(attacker.Token(granttest.Valid(t0, testIssuer, fullScopes...))))
	wantRefusal(t, err, CodeJWKSUnavailable, jwksDownMessage(DefaultJWKSCooldown))
	rt.mu.Lock()
	asked := slices.Clone(rt.asked)
	rt.mu.Unlock()
	if slices.Contains(asked, "http://10.0.0.5") {
		t.Fatalf("the redirect to plain http on 10.0.0.5 was followed (hosts asked: %v)", asked)
	}
	// The same transport serves a genuine https endpoint: the refusal is the redirect's.
	good := newJWKSVerifier(t, "https://good.example/jwks/", newClock(), WithHTTPClient(client))
	if _, err := good.Authorize(context.Background(), jobStart(studio.Token(granttest.Valid(t0, testIssuer, fullScopes...)))); err != nil {
		t.Fatalf("https endpoint through the same transport: %v", err)
	}
}

// TestJWKSChunkedBodyOverLimit: a body sent without Content-Length (chunked) is cut at
// MaxJWKSBytes like any other, and one that never ends does not hold the fetch until its timeout.
func TestJWKSChunkedBodyOverLimit(t *testing.T) {
	studio := granttest.NewIssuer("k1")
	tok := studio.Token(granttest.Valid(t0, testIssuer, fullScopes...))
	for _, endless := range []bool{false, true} {
		t.Run(fmt.Sprintf("endless=%v", endless), func(t *testing.T) {
			chunked := make(chan bool, 16)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"keys":[`+string(mustMarshal(studio.JWK()))+`],"padding":"`)
				w.(http.Flusher).Flush() // headers out without a Content-Length: chunked from here
				chunk := strings.Repeat("x", 4096)
				for written := 0; endless || written <= MaxJWKSBytes; written += len(chunk) {
					if _, err := io.WriteString(w, chunk); err != nil {
						return // the client hung up
					}
					w.(http.Flusher).Flush()
				}
				_, _ = io.WriteString(w, `"}`)
			}))
			defer srv.Close()
			client := &http.Client{Transport: &http.Transport{}}
			client.Transport = observeChunked(client.Transport, chunked)
			done := make(chan error, 1)
			go func() {
				v := newJWKSVerifier(t, srv.URL+"/jwks/", newClock(), WithHTTPClient(client), WithJWKSFetchTimeout(10*time.Minute))
				_, err := v.Authorize(context.Background(), jobStart(tok))
				done <- err
			}()
			select {
			case err := <-done:
				wantRefusal(t, err, CodeJWKSUnavailable, jwksDownMessage(DefaultJWKSCooldown))
			case <-time.After(2 * time.Minute):
				t.Fatal("the fetch did not stop at the size limit")
			}
			if !<-chunked {
				t.Fatal("the response was not chunked: the test does not test what it says")
			}
		})
	}
}

// observeChunked reports, for each response, whether it came without a Content-Length.
func observeChunked(next http.RoundTripper, chunked chan<- bool) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(r)
		if err == nil {
			chunked <- resp.ContentLength == -1 && len(resp.TransferEncoding) > 0 && resp.TransferEncoding[0] == "chunked"
		}
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestJWKSRefusalSaysWhenToRetry: the JWKS server not up yet (as when the docs' recipe starts it
// and calls at once): the refusal says when a call can cause the next fetch, counting down over
// the cooldown, and a call made then gets the keys.
func TestJWKSRefusalSaysWhenToRetry(t *testing.T) {
	studio := granttest.NewIssuer("k1")
	srv := newJWKSServer(t, nil)
	srv.set([]byte("starting"), http.StatusServiceUnavailable, "")
	clk := newClock()
	v := newJWKSVerifier(t, srv.URL(), clk, WithTokenCacheSize(0))
	call := func() error {
		_, err := v.Authorize(context.Background(), jobStart(studio.Token(granttest.Valid(clk.Now(), testIssuer, fullScopes...))))
		return err
	}
	const prefix = "Workspace authorization JWKS could not be loaded; it is fetched again for a call made in "
	wantRefusal(t, call(), CodeJWKSUnavailable, prefix+"30 s or later: retry then") // this call's own fetch failed
	srv.set(granttest.JWKS(studio.JWK()), http.StatusOK, "")                        // the server is up now
	for _, step := range []struct {
		advance time.Duration
		want    string
	}{
		{12500 * time.Millisecond, "18 s"},              // 17.5 s left: rounded up
		{17 * time.Second, "1 s"},                       // 0.5 s left
		{500*time.Millisecond - time.Nanosecond, "1 s"}, // 1 ns left: never "0 s"
	} {
		clk.Add(step.advance)
		wantRefusal(t, call(), CodeJWKSUnavailable, prefix+step.want+" or later: retry then")
	}
	if n := srv.hits.Load(); n != 2 { // the start-up fetch and the first call's
		t.Fatalf("fetches during the cooldown: %d, want 2", n)
	}
	clk.Add(time.Nanosecond) // the cooldown is over: the next call fetches, and gets in
	if err := call(); err != nil {
		t.Fatalf("a call made when the refusal said: %v", err)
	}
}
