package core_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/grant/granttest"
)

// TestDataRoutesEveryGrantRefusal drives every workspace-authorization refusal of spec §4.5 through
// a DataResource route (scope resource.<name>.<op>) on the real controller: HTTP 403 with the
// verifier's message as detail, and no callback run. Tokens are minted by granttest, independent
// of the verifier. Local mode never bypasses these routes.
func TestDataRoutesEveryGrantRefusal(t *testing.T) {
	studio := granttest.NewIssuer("studio-2026-05")
	forger := granttest.NewIssuer("studio-2026-05")
	valid := granttest.Valid(dataNow, dataIssuer, "resource.notes.list")
	tok := func(c granttest.Claims) string { return "Bearer " + studio.Token(c) }
	withHeader := func(h map[string]any) string { return "Bearer " + studio.Sign(h, valid) }
	kid := func(k string) string {
		h := studio.Header()
		h["kid"] = k
		return withHeader(h)
	}
	settings := func(s grant.Settings) grant.Config {
		s.Issuer, s.Leeway = dataIssuer, grant.DefaultLeeway
		return grant.Config{Settings: s}
	}
	pemCfg := func(*testing.T) grant.Config {
		return settings(grant.Settings{Required: true, PublicKeyPEM: studio.PublicKeyPEM()})
	}
	jwks := func(status int, body []byte) func(t *testing.T) grant.Config {
		return func(t *testing.T) grant.Config {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(status)
				_, _ = w.Write(body)
			}))
			t.Cleanup(srv.Close)
			return settings(grant.Settings{Required: true, JWKSURL: srv.URL + "/jwks/"})
		}
	}
	jwksOK := jwks(http.StatusOK, granttest.JWKS(studio.JWK(),
		map[string]any{"kid": "rsa-1", "kty": "RSA", "n": "AQAB", "e": "AQAB"},
		map[string]any{"kid": "no-x", "kty": "OKP", "crv": "Ed25519"},
		map[string]any{"kid": "short-x", "kty": "OKP", "crv": "Ed25519", "x": "AAAA"}))
	noToken := map[string]string{grantHdr: ""}
	const notConfigured = "Workspace authorization is required but is not configured for this Supervaizer server"

	cases := []struct {
		name      string
		cfg       func(*testing.T) grant.Config
		studioIDs map[string]string
		method    string
		path      string
		hdr       map[string]string // overrides; "" deletes
		msg       string
	}{
		// Spec §12.2 case 19 first: authorization disabled.
		{"not_configured", func(*testing.T) grant.Config { return grant.Config{} }, nil, "", "", map[string]string{grantHdr: tok(valid)}, notConfigured},
		{"not_configured/local mode never bypasses", func(*testing.T) grant.Config { return grant.Config{LocalMode: true} }, nil, "", "", noToken, notConfigured},
		{"not_configured/local mode, on create", func(*testing.T) grant.Config { return grant.Config{LocalMode: true} }, nil, "POST", "", noToken, notConfigured},
		{"not_configured/local mode with a lone issuer", func(*testing.T) grant.Config {
			return grant.Config{LocalMode: true, Settings: grant.Settings{Issuer: dataIssuer}}
		}, nil, "", "", noToken, notConfigured},
		{"missing", pemCfg, nil, "", "", noToken, "Missing X-Supervaize-Workspace-Authorization header"},
		{"missing/blank header", pemCfg, nil, "", "", map[string]string{grantHdr: "   "}, "Missing X-Supervaize-Workspace-Authorization header"},
		{"malformed/not a JWT", pemCfg, nil, "", "", map[string]string{grantHdr: "Bearer not-a-jwt"}, "Workspace authorization token must be a compact JWT"},
		{"malformed/bad base64", pemCfg, nil, "", "", map[string]string{grantHdr: "e30.e30*.AA"}, "Workspace authorization token is malformed"},
		{"malformed/not objects", pemCfg, nil, "", "", map[string]string{grantHdr: "Bearer " + studio.SignRaw([]byte(`["EdDSA"]`), []byte(`{}`))},
			"Workspace authorization token header and claims must be JSON objects"},
		{"unsupported_alg", pemCfg, nil, "", "", map[string]string{grantHdr: withHeader(map[string]any{"alg": "RS256", "kid": studio.KID})},
			"Workspace authorization token must be signed with EdDSA"},
		{"missing_kid", jwksOK, nil, "", "", map[string]string{grantHdr: withHeader(map[string]any{"alg": "EdDSA"})},
			"Workspace authorization token header must include kid for JWKS"},
		{"jwks_unavailable", jwks(http.StatusServiceUnavailable, nil), nil, "", "", nil, "Workspace authorization JWKS could not be loaded; it is fetched again for a call made in 30 s or later: retry then"},
		{"invalid_jwks/no keys list", jwks(http.StatusOK, []byte(`{"keys":{}}`)), nil, "", "", nil, "Workspace authorization JWKS payload has no keys list"},
		{"invalid_jwks/not objects", jwks(http.StatusOK, []byte(`{"keys":["k"]}`)), nil, "", "", nil, "Workspace authorization JWKS keys must be JSON objects"},
		{"unknown_kid", jwksOK, nil, "", "", map[string]string{grantHdr: kid("studio-2099-01")}, "Workspace authorization JWKS has no key matching token kid"},
		{"invalid_jwk/kty", jwksOK, nil, "", "", map[string]string{grantHdr: kid("rsa-1")}, "Workspace authorization EdDSA JWK must be OKP/Ed25519"},
		{"invalid_jwk/no x", jwksOK, nil, "", "", map[string]string{grantHdr: kid("no-x")}, "Workspace authorization Ed25519 JWK must include x"},
		{"invalid_jwk/bad x", jwksOK, nil, "", "", map[string]string{grantHdr: kid("short-x")}, "Workspace authorization Ed25519 JWK x is invalid"},
		{"bad_signature", pemCfg, nil, "", "", map[string]string{grantHdr: "Bearer " + forger.Token(valid)}, "Workspace authorization token signature is invalid"},
		{"bad_signature/jwks", jwksOK, nil, "", "", map[string]string{grantHdr: "Bearer " + forger.Token(valid)}, "Workspace authorization token signature is invalid"},
		{"invalid_claims", pemCfg, nil, "", "", map[string]string{grantHdr: tok(valid.With("exp", "1779100600", "scopes", []string{}))},
			"Workspace authorization token claims are invalid: scopes: workspace authorization token must include scopes; exp: must be an integer"},
		{"wrong_issuer", pemCfg, nil, "", "", map[string]string{grantHdr: tok(valid.With("iss", "https://other.test"))},
			"Workspace authorization token issuer does not match this server configuration"},
		{"wrong_audience", pemCfg, nil, "", "", map[string]string{grantHdr: tok(valid.With("aud", "supervaizer-server:other"))},
			"Workspace authorization token audience does not match this server"},
		{"expired", pemCfg, nil, "", "", map[string]string{grantHdr: tok(valid.With("exp", 1, "iat", 1))}, "Workspace authorization token is expired"},
		{"not_yet_valid", pemCfg, nil, "", "", map[string]string{grantHdr: tok(valid.With("iat", dataNow.Unix()+3600))},
			"Workspace authorization token was issued in the future"},
		{"wrong_server", pemCfg, nil, "", "", map[string]string{grantHdr: tok(valid.With("server_id", "other"))},
			"Workspace authorization token server_id does not match this server"},
		{"wrong_agent/slug", pemCfg, nil, "", "", map[string]string{grantHdr: tok(valid.With("agent_slug", "other"))},
			"Workspace authorization token agent_slug does not match the request"},
		{"wrong_agent/id", pemCfg, nil, "", "", map[string]string{grantHdr: tok(valid.With("agent_id", "other"))},
			"Workspace authorization token agent_id does not match the request"},
		{"agent_not_registered", pemCfg, map[string]string{}, "", "", nil,
			"Workspace authorization requires the Studio agent id from registration, but this agent has not been linked to Studio"},
		{"wrong_workspace/id header", pemCfg, nil, "", "", map[string]string{"X-Supervaize-Workspace-Id": "ws-2"},
			"Workspace authorization token workspace_id does not match the request"},
		{"wrong_workspace/no id header", pemCfg, nil, "", "", map[string]string{"X-Supervaize-Workspace-Id": ""},
			"Workspace authorization token workspace_id does not match the request"},
		{"wrong_workspace/id claim", pemCfg, nil, "", "", map[string]string{grantHdr: tok(valid.With("workspace_id", "ws-2"))},
			"Workspace authorization token workspace_id does not match the request"},
		{"wrong_workspace/slug header", pemCfg, nil, "", "", map[string]string{"X-Supervaize-Workspace-Slug": "victim"},
			"Workspace authorization token workspace_slug does not match the request"},
		{"missing_scope", pemCfg, nil, "", "", map[string]string{grantHdr: tok(valid.With("scopes", []string{grant.MethodActionInvoke, "job.start"}))},
			"Workspace authorization token is missing scope(s): resource.notes.list"},
		{"missing_scope/another operation", pemCfg, nil, "POST", "", nil, "Workspace authorization token is missing scope(s): resource.notes.create"},
		{"missing_scope/another resource", pemCfg, nil, "", dataPath + "logs/", nil, "Workspace authorization token is missing scope(s): resource.logs.list"},
		{"missing_scope/get", pemCfg, nil, "", dataPath + "notes/n1", nil, "Workspace authorization token is missing scope(s): resource.notes.get"},
		{"missing_scope/update", pemCfg, nil, "PUT", dataPath + "notes/n1", nil, "Workspace authorization token is missing scope(s): resource.notes.update"},
		{"missing_scope/delete", pemCfg, nil, "DELETE", dataPath + "notes/n1", nil, "Workspace authorization token is missing scope(s): resource.notes.delete"},
		{"missing_scope/import", pemCfg, nil, "POST", dataPath + "notes/import/", nil, "Workspace authorization token is missing scope(s): resource.notes.import"},
		{"missing_scope/the method scope is not enough", pemCfg, nil, "", "", map[string]string{grantHdr: tok(valid.With("scopes", []string{grant.MethodDataResource}))},
			"Workspace authorization token is missing scope(s): resource.notes.list"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg(t)
			cfg.ServerID = "SRV"
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
			cfg.Options = append(cfg.Options, grant.WithClock(func() time.Time { return dataNow }), grant.WithLogger(quiet))
			authz, err := grant.New(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			ids := tc.studioIDs
			if ids == nil {
				ids = map[string]string{"s": studioAgent}
			}
			rec := &recorder{}
			h := dataControllerWith(t, authz, ids, quiet, rec)
			method, path, body := tc.method, tc.path, ""
			if method == "" {
				method = "GET"
			}
			if path == "" {
				path = dataPath + "notes/"
			}
			if method == "POST" || method == "PUT" {
				body = `{"text":"x"}`
				if path == dataPath+"notes/import/" {
					body = `[]`
				}
			}
			hdr := map[string]string{grantHdr: tok(valid)}
			for k, v := range tc.hdr {
				hdr[k] = v
			}
			resp := dreq{method, path, hdr, body}.do(t, h, "")
			want, _ := json.Marshal(map[string]string{"detail": tc.msg})
			if resp.Code != http.StatusForbidden || resp.Body.String() != string(want) {
				t.Fatalf("%d %s\nwant 403 %s", resp.Code, resp.Body, want)
			}
			if calls, _, _ := rec.snapshot(); len(calls) != 0 {
				t.Fatalf("callbacks ran for a refused call: %q", calls)
			}
		})
	}

	// Spec §12.2 case 19, last step: a valid token with the resource scope is served.
	cfg := pemCfg(t)
	cfg.ServerID = "SRV"
	cfg.Options = []grant.Option{grant.WithClock(func() time.Time { return dataNow }), grant.WithLogger(slog.New(slog.DiscardHandler))}
	authz, err := grant.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	h := dataControllerWith(t, authz, map[string]string{"s": studioAgent}, slog.New(slog.DiscardHandler), rec)
	resp := dreq{"GET", dataPath + "notes/?limit=1", map[string]string{grantHdr: tok(valid)}, ""}.do(t, h, "")
	if resp.Code != 200 || resp.Body.String() != `[{"id":"n1","text":"one"}]` {
		t.Fatalf("valid token: %d %s", resp.Code, resp.Body)
	}
}

// grantHdr keeps the table above short.
const grantHdr = core.GrantHeader
