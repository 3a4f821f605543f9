package grant

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supervaize/svz/core/grant/granttest"
)

func TestAuthorizeValidToken(t *testing.T) {
	iss := granttest.NewIssuer("k1")
	clk := newClock()
	v := newPEMVerifier(t, iss, clk)
	claims := granttest.Valid(t0, testIssuer, MethodActionInvoke, "job.start", "resource.contacts.list").
		With("agent_workspace_ref", "01AGENTWORKSPACE")
	got, err := v.Authorize(context.Background(), jobStart(iss.Token(claims)))
	if err != nil {
		t.Fatalf("Authorize: %v", err)
	}
	const want = `{"grant_id":"grant-1","workspace_id":"workspace-1","workspace_slug":"workspace","agent_id":"studio-agent-1",` +
		`"agent_slug":"s","server_id":"SRV","scopes":["supervaizer/action.invoke","job.start","resource.contacts.list"],` +
		`"agent_workspace_ref":"01AGENTWORKSPACE"}`
	if g := mustJSON(t, got); g != want {
		t.Fatalf("context\n got %s\nwant %s", g, want)
	}

	// Optional claims absent → null in the context; the surface method needs its own scopes.
	claims = granttest.Valid(t0, testIssuer, MethodSurfaceLoad, "job.start").With("workspace_slug", nil, "sub", nil, "jti", nil, "iat", nil)
	call := jobStart(iss.Token(claims))
	call.Method = MethodSurfaceLoad
	got, err = v.Authorize(context.Background(), call)
	if err != nil {
		t.Fatalf("Authorize surface: %v", err)
	}
	const want2 = `{"grant_id":"grant-1","workspace_id":"workspace-1","workspace_slug":null,"agent_id":"studio-agent-1",` +
		`"agent_slug":"s","server_id":"SRV","scopes":["supervaizer/surface.load","job.start"],"agent_workspace_ref":null}`
	if g := mustJSON(t, got); g != want2 {
		t.Fatalf("context\n got %s\nwant %s", g, want2)
	}
}

func TestTokenTransport(t *testing.T) {
	iss := granttest.NewIssuer("k1")
	v := newPEMVerifier(t, iss, newClock())
	tok := iss.Token(granttest.Valid(t0, testIssuer, fullScopes...))
	for _, header := range []string{tok, "Bearer " + tok, "bearer " + tok, "BEARER   " + tok + "  ", "\t" + tok + "\n"} {
		call := jobStart("")
		call.Token = header
		if _, err := v.Authorize(context.Background(), call); err != nil {
			t.Errorf("header %.20q...: %v", header, err)
		}
	}
	for _, header := range []string{"", "   ", "\t\n"} {
		call := jobStart("")
		call.Token = header
		_, err := v.Authorize(context.Background(), call)
		wantRefusal(t, err, CodeMissing, MsgMissing)
	}
	// As in the reference, a scheme without a token is not "missing" but a malformed token
	// (the value is trimmed first, so "Bearer " is "Bearer").
	for _, header := range []string{"Bearer", "Bearer ", "bearer \t "} {
		call := jobStart("")
		call.Token = header
		_, err := v.Authorize(context.Background(), call)
		wantRefusal(t, err, CodeMalformed, msgNotCompact)
	}
	call := jobStart("")
	call.Token = "Basic " + tok // another scheme is not stripped: the value is not a JWT
	_, err := v.Authorize(context.Background(), call)
	wantRefusal(t, err, CodeMalformed, msgMalformed)
}

// TestRefusals covers every code the verifier itself produces with a PEM key (JWKS codes are in
// jwks_test.go), each with its exact message.
func TestRefusals(t *testing.T) {
	iss := granttest.NewIssuer("k1")
	other := granttest.NewIssuer("k1")
	clk := newClock()
	v := newPEMVerifier(t, iss, clk)
	valid := granttest.Valid(t0, testIssuer, fullScopes...)
	tok := func(c granttest.Claims) string { return iss.Token(c) }

	cases := []struct {
		name string
		call func() Call
		code Code
		msg  string
	}{
		{"missing", func() Call { return jobStart("") }, CodeMissing, MsgMissing},
		{"not a jwt", func() Call { return jobStart("not-a-jwt") }, CodeMalformed, msgNotCompact},
		{"bad base64", func() Call { return jobStart("a.b*.c") }, CodeMalformed, msgMalformed},
		{"header is a list", func() Call {
			return jobStart(iss.SignRaw([]byte(`["EdDSA"]`), []byte(`{}`)))
		}, CodeMalformed, msgNotObjects},
		{"alg RS256", func() Call {
			return jobStart(iss.Sign(map[string]any{"alg": "RS256", "kid": "k1"}, valid))
		}, CodeUnsupportedAlg, msgUnsupportedAlg},
		{"other key", func() Call { return jobStart(other.Token(valid)) }, CodeBadSignature, msgBadSignature},
		{"claims missing", func() Call { return jobStart(tok(granttest.Claims{})) }, CodeInvalidClaims,
			msgInvalidClaims + "iss: field required; aud: field required; grant_id: field required; workspace_id: field required; " +
				"agent_id: field required; agent_slug: field required; server_id: field required; " +
				"exp: field required"},
		{"claims mistyped", func() Call {
			return jobStart(tok(valid.With("iss", 1, "aud", []any{"x", 2}, "workspace_slug", 3, "scopes", "job.start", "iat", "1", "exp", true)))
		}, CodeInvalidClaims,
			msgInvalidClaims + "iss: must be a string; aud: must be a string or a list of strings; workspace_slug: must be a string; " +
				"scopes: must be a list of strings; iat: must be an integer; exp: must be an integer"},
		{"wrong issuer", func() Call { return jobStart(tok(valid.With("iss", "https://evil.test"))) }, CodeWrongIssuer, msgWrongIssuer},
		{"wrong audience", func() Call { return jobStart(tok(valid.With("aud", "supervaizer-server:other"))) }, CodeWrongAudience, msgWrongAudience},
		{"expired", func() Call { return jobStart(tok(valid.With("exp", 1, "iat", 1))) }, CodeExpired, msgExpired},
		{"issued in the future", func() Call { return jobStart(tok(valid.With("iat", t0.Unix()+31))) }, CodeNotYetValid, msgIssuedInFuture},
		{"nbf in the future", func() Call { return jobStart(tok(valid.With("nbf", t0.Unix()+31))) }, CodeNotYetValid, msgNotBefore},
		{"wrong server", func() Call { return jobStart(tok(valid.With("server_id", "other"))) }, CodeWrongServer, msgWrongServer},
		{"unknown agent", func() Call {
			c := jobStart(tok(valid))
			c.AgentSlug, c.Agent = "other", nil
			return c
		}, CodeUnknownAgent, "Unknown agent_slug for workspace authorization: other"},
		{"wrong agent slug", func() Call { return jobStart(tok(valid.With("agent_slug", "other"))) }, CodeWrongAgent, msgWrongAgentSlug},
		{"agent not registered", func() Call {
			c := jobStart(tok(valid))
			c.Agent.StudioID = ""
			return c
		}, CodeAgentNotRegistered, msgNotRegistered},
		{"wrong agent id", func() Call { return jobStart(tok(valid.With("agent_id", "other"))) }, CodeWrongAgent, msgWrongAgentID},
		{"wrong workspace", func() Call { return jobStart(tok(valid.With("workspace_id", "ws-2"))) }, CodeWrongWorkspace, msgWrongWorkspace},
		{"wrong workspace slug", func() Call { return jobStart(tok(valid.With("workspace_slug", "elsewhere"))) }, CodeWrongWorkspace, msgWrongWSSlug},
		{"missing action scope", func() Call { return jobStart(tok(valid.With("scopes", []string{MethodActionInvoke}))) },
			CodeMissingScope, "Workspace authorization token is missing scope(s): job.start"},
		{"missing both scopes", func() Call { return jobStart(tok(valid.With("scopes", []string{"resource.contacts.list"}))) },
			CodeMissingScope, "Workspace authorization token is missing scope(s): supervaizer/action.invoke, job.start"},
		{"surface scope for an action", func() Call { return jobStart(tok(valid.With("scopes", []string{MethodSurfaceLoad, "job.start"}))) },
			CodeMissingScope, "Workspace authorization token is missing scope(s): supervaizer/action.invoke"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := v.Authorize(context.Background(), tc.call())
			if got != nil {
				t.Fatalf("context returned with a refusal: %+v", got)
			}
			wantRefusal(t, err, tc.code, tc.msg)
		})
	}
}

// TestCheckOrder: a token wrong in several ways is refused for the first failing step of §4.3.
func TestCheckOrder(t *testing.T) {
	iss := granttest.NewIssuer("k1")
	other := granttest.NewIssuer("k1")
	v := newPEMVerifier(t, iss, newClock())
	valid := granttest.Valid(t0, testIssuer, fullScopes...)
	everythingWrong := valid.With("iss", "x", "aud", "x", "exp", 1, "server_id", "x", "agent_slug", "x",
		"agent_id", "x", "workspace_id", "x", "scopes", []string{"x"})

	cases := []struct {
		name string
		call Call
		code Code
	}{
		{"malformed before alg", jobStart(strings.Replace(iss.Sign(map[string]any{"alg": "none"}, valid), ".", "..", 1)), CodeMalformed},
		{"alg before signature", jobStart(other.Sign(map[string]any{"alg": "HS256"}, everythingWrong)), CodeUnsupportedAlg},
		{"signature before claims", jobStart(other.Token(granttest.Claims{"exp": "soon"})), CodeBadSignature},
		{"claims before issuer", jobStart(iss.Token(everythingWrong.With("grant_id", nil))), CodeInvalidClaims},
		{"issuer before audience", jobStart(iss.Token(everythingWrong)), CodeWrongIssuer},
		{"audience before expiry", jobStart(iss.Token(everythingWrong.With("iss", testIssuer))), CodeWrongAudience},
		{"expiry before server", jobStart(iss.Token(everythingWrong.With("iss", testIssuer, "aud", "supervaizer-server:SRV"))), CodeExpired},
		{"server before agent", func() Call {
			c := jobStart(iss.Token(valid.With("server_id", "x", "agent_slug", "x")))
			c.Agent, c.AgentSlug = nil, "nope"
			return c
		}(), CodeWrongServer},
		{"unknown agent before everything per call", func() Call {
			c := jobStart(iss.Token(valid.With("agent_slug", "x", "workspace_id", "x", "scopes", []string{"x"})))
			c.Agent, c.AgentSlug = nil, "nope"
			return c
		}(), CodeUnknownAgent},
		{"agent slug before registration", func() Call {
			c := jobStart(iss.Token(valid.With("agent_slug", "x")))
			c.Agent.StudioID = ""
			return c
		}(), CodeWrongAgent},
		{"registration before agent id", func() Call {
			c := jobStart(iss.Token(valid.With("agent_id", "x")))
			c.Agent.StudioID = ""
			return c
		}(), CodeAgentNotRegistered},
		{"agent before workspace", jobStart(iss.Token(valid.With("agent_id", "x", "workspace_id", "x"))), CodeWrongAgent},
		{"workspace before scopes", jobStart(iss.Token(valid.With("workspace_id", "x", "scopes", []string{"x"}))), CodeWrongWorkspace},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.Authorize(context.Background(), tc.call)
			ge, ok := err.(*Error)
			if !ok || ge.Code != tc.code {
				t.Fatalf("err = %v, want code %s", err, tc.code)
			}
		})
	}
}

func TestTimeBoundaries(t *testing.T) {
	iss := granttest.NewIssuer("k1")
	now := t0.Unix()
	cases := []struct {
		name     string
		leeway   time.Duration
		exp, iat int64
		wantCode Code // "" = accepted
	}{
		{"exp now", DefaultLeeway, now, now - 60, ""},
		{"exp within leeway", DefaultLeeway, now - 30, now - 60, ""},
		{"exp past leeway", DefaultLeeway, now - 31, now - 60, CodeExpired},
		{"iat at leeway", DefaultLeeway, now + 300, now + 30, ""},
		{"iat past leeway", DefaultLeeway, now + 300, now + 31, CodeNotYetValid},
		{"zero leeway exp now", 0, now, now, ""},
		{"zero leeway exp past", 0, now - 1, now - 60, CodeExpired},
		{"zero leeway iat future", 0, now + 300, now + 1, CodeNotYetValid},
		{"max leeway", MaxLeeway, now - 600, now + 600, ""},
		{"huge exp", DefaultLeeway, 1<<63 - 1, now, ""},
		{"very negative exp", DefaultLeeway, -1 << 63, now, CodeExpired},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := pemSettings(iss)
			s.Leeway = tc.leeway
			a, err := NewVerifier(context.Background(), s, "SRV", WithClock(newClock().Now), WithLogger(quietLog()))
			if err != nil {
				t.Fatal(err)
			}
			_, err = a.Authorize(context.Background(), jobStart(iss.Token(granttest.Valid(t0, testIssuer, fullScopes...).With("exp", tc.exp, "iat", tc.iat))))
			if tc.wantCode == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if ge, ok := err.(*Error); !ok || ge.Code != tc.wantCode {
				t.Fatalf("err = %v, want %s", err, tc.wantCode)
			}
		})
	}
}

func TestAudienceAndServerIdentity(t *testing.T) {
	iss := granttest.NewIssuer("k1")
	cases := []struct {
		name       string
		audience   string // setting
		serverID   string
		aud        any // claim
		serverClm  string
		wantCode   Code
		wantErrSub string // NewVerifier error
	}{
		{"default audience", "", "SRV", "supervaizer-server:SRV", "SRV", "", ""},
		{"aud list containing us", "", "SRV", []string{"other", "supervaizer-server:SRV"}, "SRV", "", ""},
		{"aud list without us", "", "SRV", []string{"other", "supervaizer-server:SRV2"}, "SRV", CodeWrongAudience, ""},
		{"aud empty list", "", "SRV", []string{}, "SRV", CodeWrongAudience, ""},
		{"aud prefix of ours", "", "SRV", "supervaizer-server:SR", "SRV", CodeWrongAudience, ""},
		// After the handshake Studio's audience names Studio's server id, not SUPERVAIZER_SERVER_ID.
		{"handshake audience", "supervaizer-server:01STUDIO", "local-id", "supervaizer-server:01STUDIO", "01STUDIO", "", ""},
		{"handshake audience, local server id in token", "supervaizer-server:01STUDIO", "local-id", "supervaizer-server:01STUDIO", "local-id", CodeWrongServer, ""},
		{"custom audience", "https://agent.example", "SRV", "https://agent.example", "SRV", "", ""},
		{"custom audience wrong server", "https://agent.example", "SRV", "https://agent.example", "01STUDIO", CodeWrongServer, ""},
		{"no server id", "", "", "supervaizer-server:", "", "", "SUPERVAIZER_SERVER_ID"},
		{"empty audience suffix", "supervaizer-server:", "SRV", "supervaizer-server:", "SRV", "", "SUPERVAIZER_SERVER_ID"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := pemSettings(iss)
			s.Audience = tc.audience
			a, err := NewVerifier(context.Background(), s, tc.serverID, WithClock(newClock().Now), WithLogger(quietLog()))
			if tc.wantErrSub != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrSub) {
					t.Fatalf("NewVerifier err = %v, want mention of %s", err, tc.wantErrSub)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_, err = a.Authorize(context.Background(), jobStart(iss.Token(granttest.Valid(t0, testIssuer, fullScopes...).With("aud", tc.aud, "server_id", tc.serverClm))))
			if tc.wantCode == "" && err != nil || tc.wantCode != "" && (err == nil || err.(*Error).Code != tc.wantCode) {
				t.Fatalf("err = %v, want %q", err, tc.wantCode)
			}
		})
	}
}

func TestWorkspaceSlugRule(t *testing.T) {
	iss := granttest.NewIssuer("k1")
	v := newPEMVerifier(t, iss, newClock())
	cases := []struct {
		name      string
		reqSlug   *string
		claimSlug any
		ok        bool
	}{
		{"equal", ptr("workspace"), "workspace", true},
		{"request without slug", nil, "workspace", true},
		{"request empty slug", ptr(""), "workspace", true},
		{"token without slug", ptr("workspace"), nil, true},
		{"token empty slug", ptr("workspace"), "", true},
		{"different", ptr("workspace"), "other", false},
		{"forged request slug", ptr("victim-workspace"), "workspace", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			call := jobStart(iss.Token(granttest.Valid(t0, testIssuer, fullScopes...).With("workspace_slug", tc.claimSlug)))
			call.Workspace.Slug = tc.reqSlug
			got, err := v.Authorize(context.Background(), call)
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				// The handler's slug is the token's, never the request's.
				if tc.claimSlug == nil && got.WorkspaceSlug != nil || tc.claimSlug != nil && (got.WorkspaceSlug == nil || *got.WorkspaceSlug != tc.claimSlug) {
					t.Fatalf("context slug = %v, want the token's %v", got.WorkspaceSlug, tc.claimSlug)
				}
				return
			}
			wantRefusal(t, err, CodeWrongWorkspace, msgWrongWSSlug)
		})
	}
}

func TestTokenCache(t *testing.T) {
	iss := granttest.NewIssuer("k1")
	clk := newClock()
	v := newPEMVerifier(t, iss, clk)
	tok := iss.Token(granttest.Valid(t0, testIssuer, fullScopes...).With("agent_workspace_ref", "ref-1"))
	ctx := context.Background()

	first, err := v.Authorize(ctx, jobStart(tok))
	if err != nil {
		t.Fatal(err)
	}
	if n := v.cache.len(); n != 1 {
		t.Fatalf("cache holds %d tokens, want 1", n)
	}
	// A handler that scribbles on its context cannot change what the next call gets.
	first.Scopes[0] = "tampered"
	*first.WorkspaceSlug = "tampered"
	*first.AgentWorkspaceRef = "tampered"
	second, err := v.Authorize(ctx, jobStart(tok))
	if err != nil {
		t.Fatal(err)
	}
	if second.Scopes[0] != MethodActionInvoke || *second.WorkspaceSlug != "workspace" || *second.AgentWorkspaceRef != "ref-1" {
		t.Fatalf("cached context altered by a previous handler: %+v", second)
	}

	// Per-request checks still run on a cached token.
	call := jobStart(tok)
	call.Workspace.ID = "workspace-2"
	_, err = v.Authorize(ctx, call)
	wantRefusal(t, err, CodeWrongWorkspace, msgWrongWorkspace)
	call = jobStart(tok)
	call.Target = "job.stop"
	_, err = v.Authorize(ctx, call)
	wantRefusal(t, err, CodeMissingScope, msgMissingScopePfx+"job.stop")
	call = jobStart(tok)
	call.Agent.StudioID = "studio-agent-2"
	_, err = v.Authorize(ctx, call)
	wantRefusal(t, err, CodeWrongAgent, msgWrongAgentID)

	// The cache never outlives exp + leeway.
	clk.Add(5*time.Minute + 30*time.Second)
	if _, err := v.Authorize(ctx, jobStart(tok)); err != nil {
		t.Fatalf("at exp+leeway: %v", err)
	}
	clk.Add(time.Second)
	_, err = v.Authorize(ctx, jobStart(tok))
	wantRefusal(t, err, CodeExpired, msgExpired)

	// A refused token is never cached.
	bad := iss.Token(granttest.Valid(t0, testIssuer, fullScopes...).With("server_id", "other"))
	_, _ = v.Authorize(ctx, jobStart(bad))
	if n := v.cache.len(); n != 1 {
		t.Fatalf("cache holds %d tokens after a refusal, want 1", n)
	}
}

func TestTokenCacheBoundAndDisable(t *testing.T) {
	iss := granttest.NewIssuer("k1")
	clk := newClock()
	v := newPEMVerifier(t, iss, clk, WithTokenCacheSize(4))
	ctx := context.Background()
	var toks []string
	for i := range 10 {
		tok := iss.Token(granttest.Valid(t0, testIssuer, fullScopes...).With("jti", fmt.Sprint("token-", i)))
		toks = append(toks, tok)
		if _, err := v.Authorize(ctx, jobStart(tok)); err != nil {
			t.Fatal(err)
		}
		if n := v.cache.len(); n > 4 {
			t.Fatalf("cache holds %d tokens, bound is 4", n)
		}
	}
	now := clk.Now().Unix()
	for i, tok := range toks {
		k := tokenKey(sha256Sum(tok))
		hit := v.cache.get(&k, now) != nil
		if want := i >= 6; hit != want { // first in, first out
			t.Errorf("token %d cached = %v, want %v", i, hit, want)
		}
	}

	off := newPEMVerifier(t, iss, clk, WithTokenCacheSize(0))
	if off.cache != nil {
		t.Fatal("cache size 0 must disable the cache")
	}
	for range 2 {
		if _, err := off.Authorize(ctx, jobStart(toks[0])); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTokenCacheConcurrent(t *testing.T) {
	iss := granttest.NewIssuer("k1")
	v := newPEMVerifier(t, iss, newClock(), WithTokenCacheSize(260))
	var calls []Call
	for i := range 320 {
		calls = append(calls, jobStart(iss.Token(granttest.Valid(t0, testIssuer, fullScopes...).With("jti", fmt.Sprint(i)))))
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 120 {
				call := calls[(g*97+i*13)%len(calls)]
				if g%2 == 0 {
					call.Workspace.ID = "workspace-2"
					if _, err := v.Authorize(context.Background(), call); err == nil {
						t.Error("other workspace accepted")
					}
					continue
				}
				if _, err := v.Authorize(context.Background(), call); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if n := v.cache.len(); n > 260 || n < 100 {
		t.Fatalf("cache holds %d tokens, want at most 260 (and many)", n)
	}
	total := 0
	for i := range v.cache.shards {
		total += len(v.cache.shards[i].m)
	}
	if total != v.cache.len() {
		t.Fatalf("shards hold %d tokens, count says %d", total, v.cache.len())
	}
}

func TestNewVerifierRefusesBadSettings(t *testing.T) {
	iss := granttest.NewIssuer("k1")
	ecPEM := publicPEM(t, &mustECDSA(t).PublicKey)
	rsaPEM := publicPEM(t, &mustRSA(t).PublicKey)
	cases := []struct {
		name string
		edit func(*Settings)
		want string
	}{
		{"no issuer", func(s *Settings) { s.Issuer = "" }, "Workspace authorization is enabled but issuer is not configured (set SUPERVAIZER_WORKSPACE_AUTH_ISSUER)"},
		{"no key source", func(s *Settings) { s.PublicKeyPEM = "" }, "Workspace authorization is enabled but no public_key_pem or jwks_url is configured (set SUPERVAIZER_WORKSPACE_AUTH_PUBLIC_KEY or SUPERVAIZER_WORKSPACE_AUTH_JWKS_URL)"},
		{"negative leeway", func(s *Settings) { s.Leeway = -time.Second }, "SUPERVAIZER_WORKSPACE_AUTH_LEEWAY_SECONDS must be a whole number of seconds between 0 and 600, got -1s"},
		{"absurd leeway", func(s *Settings) { s.Leeway = 24 * time.Hour }, "SUPERVAIZER_WORKSPACE_AUTH_LEEWAY_SECONDS must be a whole number of seconds between 0 and 600, got 24h0m0s"},
		{"not PEM", func(s *Settings) { s.PublicKeyPEM = "ssh-ed25519 AAAA" }, msgKeyNotLoaded + ": SUPERVAIZER_WORKSPACE_AUTH_PUBLIC_KEY: no PEM block found"},
		{"private key PEM", func(s *Settings) {
			s.PublicKeyPEM = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
		}, msgKeyNotLoaded + `: SUPERVAIZER_WORKSPACE_AUTH_PUBLIC_KEY: PEM block is "PRIVATE KEY", want "PUBLIC KEY" (SubjectPublicKeyInfo)`},
		{"EC key", func(s *Settings) { s.PublicKeyPEM = ecPEM }, msgKeyNotEd25519 + ": SUPERVAIZER_WORKSPACE_AUTH_PUBLIC_KEY holds a *ecdsa.PublicKey"},
		{"RSA key", func(s *Settings) { s.PublicKeyPEM = rsaPEM }, msgKeyNotEd25519 + ": SUPERVAIZER_WORKSPACE_AUTH_PUBLIC_KEY holds a *rsa.PublicKey"},
		{"two keys", func(s *Settings) { s.PublicKeyPEM = iss.PublicKeyPEM() + iss.PublicKeyPEM() }, msgKeyNotLoaded + ": SUPERVAIZER_WORKSPACE_AUTH_PUBLIC_KEY: unexpected data after the PEM block"},
		{"http JWKS", func(s *Settings) { s.PublicKeyPEM, s.JWKSURL = "", "http://studio.example/jwks/" },
			`SUPERVAIZER_WORKSPACE_AUTH_JWKS_URL: the JWKS URL must use https (plain http is allowed only for loopback addresses such as 127.0.0.1), got host "studio.example"`},
		{"http localhost name", func(s *Settings) { s.PublicKeyPEM, s.JWKSURL = "", "http://localhost:8080/jwks/" },
			`SUPERVAIZER_WORKSPACE_AUTH_JWKS_URL: the JWKS URL must use https (plain http is allowed only for loopback addresses such as 127.0.0.1), got host "localhost:8080"`},
		{"file JWKS", func(s *Settings) { s.PublicKeyPEM, s.JWKSURL = "", "file:///etc/jwks.json" }, `SUPERVAIZER_WORKSPACE_AUTH_JWKS_URL: the JWKS URL must use https, got scheme "file"`},
		{"JWKS with credentials", func(s *Settings) { s.PublicKeyPEM, s.JWKSURL = "", "https://user:pw@studio.example/jwks/" },
			"SUPERVAIZER_WORKSPACE_AUTH_JWKS_URL: the JWKS URL must not carry credentials"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := pemSettings(iss)
			tc.edit(&s)
			a, err := NewVerifier(context.Background(), s, "SRV", WithLogger(quietLog()))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("NewVerifier = %v, %v\nwant error %q", a, err, tc.want)
			}
			if strings.Contains(err.Error(), "pw") {
				t.Fatal("credentials leaked into the error")
			}
		})
	}

	// A PEM written on one line with literal \n separators is accepted.
	s := pemSettings(iss)
	s.PublicKeyPEM = strings.ReplaceAll(strings.TrimSpace(iss.PublicKeyPEM()), "\n", `\n`)
	if _, err := NewVerifier(context.Background(), s, "SRV", WithLogger(quietLog())); err != nil {
		t.Fatalf("one-line PEM: %v", err)
	}
}
