package grant

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/supervaize/svz/core/grant/granttest"
	"github.com/supervaize/svz/core/internal/wirejson"
)

// fuzzIssuer is fixed so that seeds signed with it stay valid across runs.
func fuzzIssuer() *granttest.Issuer {
	seed := make([]byte, 32)
	for i := range seed {
		seed[i] = byte(i)
	}
	return &granttest.Issuer{Key: ed25519.NewKeyFromSeed(seed), KID: "k1"}
}

func tokenSeeds() []string {
	iss := fuzzIssuer()
	valid := granttest.Valid(t0, testIssuer, fullScopes...)
	good := iss.Token(valid)
	return []string{
		good, "Bearer " + good, "", "Bearer", "a.b.c", "..", "...", "a.b", "e30.e30.", "e30.e30.AA==",
		iss.Sign(map[string]any{"alg": "none"}, valid),
		iss.Sign(map[string]any{"alg": "EdDSA", "kid": 1}, valid),
		iss.SignRaw([]byte(`{"alg":"EdDSA","alg":"EdDSA"}`), []byte(`{}`)),
		iss.SignRaw([]byte(`{"alg":"EdDSA"}`), []byte("[\xff]")),
		good + "=", good + "==", strings.Replace(good, ".", "..", 1), good[:len(good)-1] + "B",
		iss.Sign(map[string]any{"alg": "EdDSA", "crit": []string{"b64"}, "b64": false}, valid),
	}
}

// FuzzParseToken: the compact parser never panics, and whatever it accepts is canonical: three
// base64url segments that re-encode to themselves (with or without their "=" padding), JSON
// objects inside, no critical extension.
func FuzzParseToken(f *testing.F) {
	for _, s := range tokenSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		p, err := parseToken(tok)
		if err != nil {
			if err.Code != CodeMalformed {
				t.Fatalf("parseToken refused with %s", err.Code)
			}
			return
		}
		parts := strings.Split(tok, ".")
		if len(parts) != 3 || len(tok) > MaxTokenBytes {
			t.Fatalf("accepted %q", tok)
		}
		if p.signed != parts[0]+"."+parts[1] {
			t.Fatalf("signed part %q, want %q", p.signed, parts[0]+"."+parts[1])
		}
		for i, seg := range parts {
			raw := strings.TrimRight(seg, "=")
			b, derr := base64.RawURLEncoding.Strict().DecodeString(raw)
			canonical := derr == nil && base64.RawURLEncoding.EncodeToString(b) == raw &&
				(seg == raw || base64.URLEncoding.EncodeToString(b) == seg)
			if !canonical || i < 2 && wirejson.Kind(b) != '{' {
				t.Fatalf("segment %q accepted", seg)
			}
			if i == 2 && string(b) != string(p.signature) {
				t.Fatal("signature differs from its segment")
			}
		}
		if p.claims == nil {
			t.Fatal("nil claims")
		}
		if _, crit := p.header.get("crit"); crit {
			t.Fatal("a critical extension was accepted")
		}
	})
}

// FuzzAuthorizeHeader: whatever the header holds, Authorize answers a context or a *Error with a
// known code, never panics, and never accepts a token not signed by Studio's key.
func FuzzAuthorizeHeader(f *testing.F) {
	for _, s := range tokenSeeds() {
		f.Add(s)
	}
	iss := fuzzIssuer()
	clk := newClock()
	v := newPEMVerifier(f, iss, clk)
	f.Fuzz(func(t *testing.T, header string) {
		call := jobStart("")
		call.Token = header
		got, err := v.Authorize(context.Background(), call)
		if err == nil {
			// Only a token Studio's key really signed can pass (checked here with crypto/ed25519).
			tok := extractToken(header)
			i := strings.LastIndex(tok, ".")
			sig, derr := base64.RawURLEncoding.DecodeString(strings.TrimRight(tok[i+1:], "="))
			if derr != nil || !ed25519.Verify(iss.PublicKey(), []byte(tok[:i]), sig) {
				t.Fatalf("accepted a token Studio did not sign: %q", header)
			}
			if got == nil || got.WorkspaceID != "workspace-1" || got.AgentSlug != "s" {
				t.Fatalf("context %+v", got)
			}
			return
		}
		checkRefusal(t, err)
	})
}

// FuzzVerifySigned signs fuzzed header and claims bytes with Studio's key: the claims layer never
// panics and accepts only tokens whose claims match this server, agent, workspace and call.
func FuzzVerifySigned(f *testing.F) {
	iss := fuzzIssuer()
	f.Add([]byte(`{"alg":"EdDSA","kid":"k1"}`), mustMarshal(granttest.Valid(t0, testIssuer, fullScopes...)))
	f.Add([]byte(`{"alg":"EdDSA"}`), mustMarshal(granttest.Valid(t0, testIssuer, fullScopes...).With("aud", []string{"x", "supervaizer-server:SRV"}, "exp", 1.7791e9)))
	f.Add([]byte(`{"alg":"EdDSA"}`), []byte(`{"iss":"https://studio.test","aud":"supervaizer-server:SRV","exp":"1"}`))
	f.Add([]byte(`{"alg":"RS256"}`), []byte(`{}`))
	clk := newClock()
	v := newPEMVerifier(f, iss, clk)
	f.Fuzz(func(t *testing.T, header, payload []byte) {
		got, err := v.Authorize(context.Background(), jobStart(iss.SignRaw(header, payload)))
		if err != nil {
			checkRefusal(t, err)
			return
		}
		if got.WorkspaceID != "workspace-1" || got.AgentSlug != "s" || got.AgentID != "studio-agent-1" || got.ServerID != "SRV" ||
			!slices.Contains(got.Scopes, MethodActionInvoke) || !slices.Contains(got.Scopes, "job.start") ||
			got.WorkspaceSlug != nil && *got.WorkspaceSlug != "workspace" && *got.WorkspaceSlug != "" {
			t.Fatalf("accepted a token for another call: %+v", got)
		}
	})
}

func checkRefusal(t *testing.T, err error) {
	t.Helper()
	var ge *Error
	if !errors.As(err, &ge) {
		t.Fatalf("non-refusal error %T: %v", err, err)
	}
	if !strings.HasPrefix(string(ge.Code), "workspace_authorization_") || ge.Message == "" {
		t.Fatalf("refusal %+v", ge)
	}
}

// FuzzParseJWKS: a JWKS body never panics the parser; every usable key is 32 bytes.
func FuzzParseJWKS(f *testing.F) {
	iss := fuzzIssuer()
	f.Add(granttest.JWKS(iss.JWK()))
	f.Add([]byte(`{"keys":[{"kid":"a","kty":"OKP","crv":"Ed25519","x":"AA=="},7]}`))
	f.Add([]byte(`{"keys":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		keys, err := parseJWKS(body)
		if err != nil {
			if err.Code != CodeJWKSUnavailable && err.Code != CodeInvalidJWKS {
				t.Fatalf("parseJWKS refused with %s", err.Code)
			}
			return
		}
		for kid, e := range keys {
			if kid == "" || (e.err == nil) == (e.key == nil) || e.key != nil && len(e.key) != 32 {
				t.Fatalf("entry %q = %+v", kid, e)
			}
		}
	})
}

// FuzzParseStudioAgentIDs: accepted values are clean and round-trip.
func FuzzParseStudioAgentIDs(f *testing.F) {
	for _, s := range []string{"", "s=1", "s=1,t=2", " s = 1 ", "s=1,", "s=1,s=2", "s=1=2", "a=b,c=b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		ids, err := ParseStudioAgentIDs(v)
		if err != nil {
			if !strings.HasPrefix(err.Error(), EnvStudioAgentIDs+": ") {
				t.Fatalf("error does not name the variable: %v", err)
			}
			return
		}
		var parts []string
		seen := map[string]bool{}
		for slug, id := range ids {
			if slug == "" || id == "" || strings.IndexFunc(slug+id, badIDRune) >= 0 || strings.Contains(slug+id, ",") || seen[id] {
				t.Fatalf("accepted %q → %q=%q", v, slug, id)
			}
			seen[id] = true
			parts = append(parts, slug+"="+id)
		}
		again, err := ParseStudioAgentIDs(strings.Join(parts, ","))
		if err != nil || len(again) != len(ids) {
			t.Fatalf("round trip of %v: %v %v", ids, again, err)
		}
	})
}
