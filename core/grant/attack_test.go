package grant

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/supervaize/svz/core/grant/granttest"
)

// jwxSign signs payload with jwx (an implementation independent of both the verifier and
// granttest) under alg with key, adding extra protected headers.
func jwxSign(t testing.TB, payload any, alg jwa.SignatureAlgorithm, key any, extra map[string]any) string {
	t.Helper()
	p, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	h := jws.NewHeaders()
	for k, v := range extra {
		if err := h.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	out, err := jws.Sign(p, jws.WithKey(alg, key, jws.WithProtectedHeaders(h)))
	if err != nil {
		t.Fatalf("jws.Sign %s: %v", alg, err)
	}
	return string(out)
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// segments splits a token; replace swaps one segment.
func replaceSegment(tok string, i int, seg string) string {
	parts := strings.Split(tok, ".")
	parts[i] = seg
	return strings.Join(parts, ".")
}

// TestAttacks: every forged or twisted token is refused, with the code of the first check it
// fails, and the token never shows up in the logs.
func TestAttacks(t *testing.T) {
	studio := granttest.NewIssuer("studio-2026-05")
	attacker := granttest.NewIssuer("studio-2026-05") // same kid, other key
	pub := studio.PublicKey()
	pubPEM := studio.PublicKeyPEM()
	valid := granttest.Valid(t0, testIssuer, fullScopes...)
	validJSON, _ := json.Marshal(valid)
	good := studio.Token(valid)
	goodSigBytes, err := base64.RawURLEncoding.DecodeString(strings.Split(good, ".")[2])
	if err != nil {
		t.Fatal(err)
	}
	goodSig := string(goodSigBytes)

	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	clk := newClock()
	pemV := newPEMVerifier(t, studio, clk, WithLogger(log))

	// A JWKS endpoint publishing Studio's key plus keys of every wrong shape.
	okp := studio.JWK()
	wrongKty := map[string]any{"kid": "rsa", "kty": "RSA", "n": "AQAB", "e": "AQAB"}
	x25519 := map[string]any{"kid": "x25519", "kty": "OKP", "crv": "X25519", "x": okp["x"]}
	ed448 := map[string]any{"kid": "ed448", "kty": "OKP", "crv": "Ed448", "x": b64(strings.Repeat("k", 57))}
	shortX := map[string]any{"kid": "short-x", "kty": "OKP", "crv": "Ed25519", "x": b64(string(pub[:31]))}
	longX := map[string]any{"kid": "long-x", "kty": "OKP", "crv": "Ed25519", "x": b64(string(pub) + "!")}
	noX := map[string]any{"kid": "no-x", "kty": "OKP", "crv": "Ed25519"}
	numX := map[string]any{"kid": "num-x", "kty": "OKP", "crv": "Ed25519", "x": 42}
	stdAlphabetX := map[string]any{"kid": "std-x", "kty": "OKP", "crv": "Ed25519", "x": strings.NewReplacer("-", "+", "_", "/").Replace(okp["x"].(string)) + "+/"}
	private := studio.JWK()
	private["kid"], private["d"] = "private", b64(string(studio.Key.Seed()))
	srv := newJWKSServer(t, granttest.JWKS(okp, wrongKty, x25519, ed448, shortX, longX, noX, numX, stdAlphabetX, private))
	jwksV := newJWKSVerifier(t, srv.URL(), clk, WithLogger(log))

	withKID := func(kid any) string {
		h := studio.Header()
		h["kid"] = kid
		return studio.Sign(h, valid)
	}

	// Independent signers for foreign algorithms (jwx).
	rsaKey, ecKey := mustRSA(t), mustECDSA(t)
	embedded, err := jwk.Import(attacker.PublicKey())
	if err != nil {
		t.Fatal(err)
	}

	type attack struct {
		name string
		tok  string
		call func(Call) Call // optional change of the request
		code Code
		msg  string
	}
	// Attacks on the token itself, checked against both key sources.
	tokenAttacks := []attack{
		{name: "alg none, no signature", tok: b64(`{"alg":"none","typ":"JWT"}`) + "." + b64(string(validJSON)) + ".",
			code: CodeUnsupportedAlg, msg: msgUnsupportedAlg},
		{name: "alg none, jwx insecure", tok: func() string {
			out, err := jws.Sign(validJSON, jws.WithInsecureNoSignature())
			if err != nil {
				t.Fatal(err)
			}
			return string(out)
		}(), code: CodeUnsupportedAlg, msg: msgUnsupportedAlg},
		{name: "alg None spelled otherwise", tok: studio.Sign(map[string]any{"alg": "NONE", "kid": studio.KID}, valid), code: CodeUnsupportedAlg, msg: msgUnsupportedAlg},
		{name: "alg eddsa lower case", tok: studio.Sign(map[string]any{"alg": "eddsa", "kid": studio.KID}, valid), code: CodeUnsupportedAlg, msg: msgUnsupportedAlg},
		{name: "alg Ed25519 (RFC 9864 name)", tok: studio.Sign(map[string]any{"alg": "Ed25519", "kid": studio.KID}, valid), code: CodeUnsupportedAlg, msg: msgUnsupportedAlg},
		{name: "alg missing", tok: studio.Sign(map[string]any{"kid": studio.KID}, valid), code: CodeUnsupportedAlg, msg: msgUnsupportedAlg},
		{name: "alg as a list", tok: studio.Sign(map[string]any{"alg": []string{"EdDSA"}, "kid": studio.KID}, valid), code: CodeUnsupportedAlg, msg: msgUnsupportedAlg},
		{name: "HS256 keyed with the raw public key", tok: jwxSign(t, valid, jwa.HS256(), []byte(pub), map[string]any{"kid": studio.KID}),
			code: CodeUnsupportedAlg, msg: msgUnsupportedAlg},
		{name: "HS256 keyed with the public key PEM", tok: jwxSign(t, valid, jwa.HS256(), []byte(pubPEM), map[string]any{"kid": studio.KID}),
			code: CodeUnsupportedAlg, msg: msgUnsupportedAlg},
		{name: "RS256", tok: jwxSign(t, valid, jwa.RS256(), rsaKey, map[string]any{"kid": studio.KID}), code: CodeUnsupportedAlg, msg: msgUnsupportedAlg},
		{name: "ES256", tok: jwxSign(t, valid, jwa.ES256(), ecKey, map[string]any{"kid": studio.KID}), code: CodeUnsupportedAlg, msg: msgUnsupportedAlg},
		{name: "EdDSA by another key", tok: attacker.Token(valid), code: CodeBadSignature, msg: msgBadSignature},
		{name: "EdDSA by another key, jwx", tok: jwxSign(t, valid, jwa.EdDSA(), attacker.Key, map[string]any{"kid": studio.KID}), code: CodeBadSignature, msg: msgBadSignature},
		{name: "attacker key embedded as jwk header", tok: jwxSign(t, valid, jwa.EdDSA(), attacker.Key, map[string]any{"kid": studio.KID, "jwk": embedded}),
			code: CodeBadSignature, msg: msgBadSignature},
		{name: "jku and x5u pointing elsewhere", tok: attacker.Sign(map[string]any{"alg": "EdDSA", "kid": studio.KID,
			"jku": "https://evil.example/jwks.json", "x5u": "https://evil.example/cert.pem"}, valid), code: CodeBadSignature, msg: msgBadSignature},
		{name: "payload swapped under a genuine signature", tok: replaceSegment(good, 1, b64(string(mustMarshal(valid.With("workspace_id", "victim"))))),
			code: CodeBadSignature, msg: msgBadSignature},
		{name: "header swapped under a genuine signature", tok: replaceSegment(good, 0, b64(`{"alg":"EdDSA","kid":"studio-2026-05","typ":"at+jwt"}`)),
			code: CodeBadSignature, msg: msgBadSignature},
		{name: "signature truncated", tok: replaceSegment(good, 2, b64(goodSig[:63])), code: CodeBadSignature, msg: msgBadSignature},
		{name: "signature empty", tok: replaceSegment(good, 2, ""), code: CodeBadSignature, msg: msgBadSignature},
		{name: "signature doubled", tok: replaceSegment(good, 2, b64(goodSig+goodSig)), code: CodeBadSignature, msg: msgBadSignature},
		{name: "signature zero", tok: replaceSegment(good, 2, b64(strings.Repeat("\x00", 64))), code: CodeBadSignature, msg: msgBadSignature},
		{name: "extra dot at the end", tok: good + ".", code: CodeMalformed, msg: msgNotCompact},
		{name: "extra segment", tok: good + "." + b64("x"), code: CodeMalformed, msg: msgNotCompact},
		{name: "leading dot", tok: "." + good, code: CodeMalformed, msg: msgNotCompact},
		{name: "two segments", tok: good[:strings.LastIndex(good, ".")], code: CodeMalformed, msg: msgNotCompact},
		{name: "JWE-like five segments", tok: "a.b.c.d.e", code: CodeMalformed, msg: msgNotCompact},
		{name: "padding where none is due", tok: good + "===", code: CodeMalformed, msg: msgMalformed},
		{name: "padding inside a segment", tok: replaceSegment(good, 1, strings.Split(good, ".")[1][:8]+"=="+strings.Split(good, ".")[1][8:]), code: CodeMalformed, msg: msgMalformed},
		{name: "critical extension", tok: studio.Sign(map[string]any{"alg": "EdDSA", "kid": studio.KID, "crit": []string{"exp"}, "exp": 1}, valid),
			code: CodeMalformed, msg: msgMalformed},
		{name: "critical extension, empty list", tok: studio.Sign(map[string]any{"alg": "EdDSA", "kid": studio.KID, "crit": []string{}}, valid),
			code: CodeMalformed, msg: msgMalformed},
		{name: "critical extension b64 (RFC 7797), jwx", tok: jwxSign(t, valid, jwa.EdDSA(), studio.Key, map[string]any{"kid": studio.KID, "crit": []string{"b64"}, "b64": true}),
			code: CodeMalformed, msg: msgMalformed},
		{name: "standard base64 alphabet", tok: replaceSegment(good, 2, strings.NewReplacer("-", "+", "_", "/").Replace(strings.Split(good, ".")[2])+"+/"), code: CodeMalformed, msg: msgMalformed},
		{name: "newline inside a segment", tok: replaceSegment(good, 1, strings.Split(good, ".")[1][:10]+"\n"+strings.Split(good, ".")[1][10:]), code: CodeMalformed, msg: msgMalformed},
		{name: "non-canonical last base64 character", tok: nonCanonical(good), code: CodeMalformed, msg: msgMalformed},
		{name: "1 MB token", tok: strings.Repeat("A", 1<<20) + "." + b64("{}") + ".AA", code: CodeMalformed, msg: msgMalformed},
		{name: "just over the size bound", tok: good + strings.Repeat("A", MaxTokenBytes), code: CodeMalformed, msg: msgMalformed},
		{name: "header not JSON", tok: b64("alg=EdDSA") + "." + b64(string(validJSON)) + ".AA", code: CodeMalformed, msg: msgMalformed},
		{name: "header with trailing data", tok: studio.SignRaw([]byte(`{"alg":"EdDSA"} {}`), validJSON), code: CodeMalformed, msg: msgMalformed},
		{name: "header a JSON string", tok: studio.SignRaw([]byte(`"EdDSA"`), validJSON), code: CodeMalformed, msg: msgNotObjects},
		{name: "claims a JSON list", tok: studio.SignRaw([]byte(`{"alg":"EdDSA","kid":"studio-2026-05"}`), []byte(`[]`)), code: CodeMalformed, msg: msgNotObjects},
		{name: "duplicate alg in the header", tok: studio.SignRaw([]byte(`{"alg":"none","alg":"EdDSA","kid":"studio-2026-05"}`), validJSON),
			code: CodeMalformed, msg: msgMalformed},
		{name: "duplicate claim (signed by Studio)", tok: studio.SignRaw([]byte(`{"alg":"EdDSA","kid":"studio-2026-05"}`),
			[]byte(strings.Replace(string(validJSON), `{`, `{"workspace_id":"victim",`, 1))), code: CodeMalformed, msg: msgMalformed},
		{name: "escaped duplicate claim", tok: studio.SignRaw([]byte(`{"alg":"EdDSA","kid":"studio-2026-05"}`),
			[]byte(strings.Replace(string(validJSON), `{`, `{"workspace\u005fid":"victim",`, 1))), code: CodeMalformed, msg: msgMalformed},
		{name: "invalid UTF-8 in the claims", tok: studio.SignRaw([]byte(`{"alg":"EdDSA","kid":"studio-2026-05"}`),
			[]byte(strings.Replace(string(validJSON), `"grant-1"`, "\"grant-\xff\"", 1))), code: CodeMalformed, msg: msgMalformed},
		{name: "exp as a string", tok: studio.Token(valid.With("exp", "1779100600")), code: CodeInvalidClaims, msg: msgInvalidClaims + "exp: must be an integer"},
		{name: "exp fractional", tok: studio.Token(valid.With("exp", 1779100600.5)), code: CodeInvalidClaims, msg: msgInvalidClaims + "exp: must be an integer"},
		{name: "exp beyond int64", tok: studio.SignRaw([]byte(`{"alg":"EdDSA","kid":"studio-2026-05"}`),
			[]byte(strings.Replace(string(mustMarshal(valid.With("exp", 7))), `"exp":7`, `"exp":1e400`, 1))), code: CodeInvalidClaims, msg: msgInvalidClaims + "exp: must be an integer"},
		{name: "exp null", tok: studio.Token(valid.With("exp", json.RawMessage("null"))), code: CodeInvalidClaims, msg: msgInvalidClaims + "exp: must be an integer"},
		{name: "aud as a list without us", tok: studio.Token(valid.With("aud", []string{"supervaizer-server:OTHER", "https://studio.test"})), code: CodeWrongAudience, msg: msgWrongAudience},
		{name: "aud as an object", tok: studio.Token(valid.With("aud", map[string]string{"0": "supervaizer-server:SRV"})), code: CodeInvalidClaims,
			msg: msgInvalidClaims + "aud: must be a string or a list of strings"},
		{name: "empty scopes", tok: studio.Token(valid.With("scopes", []string{})), code: CodeInvalidClaims, msg: msgInvalidClaims + "scopes: workspace authorization token must include scopes"},
		// The reference defaults an absent scopes claim to []: the call then lacks its scopes.
		{name: "no scopes claim", tok: studio.Token(valid.With("scopes", nil)), code: CodeMissingScope, msg: msgMissingScopePfx + MethodActionInvoke + ", job.start"},
		{name: "scopes null", tok: studio.Token(valid.With("scopes", json.RawMessage("null"))), code: CodeInvalidClaims, msg: msgInvalidClaims + "scopes: must be a list of strings"},
		{name: "blank scope", tok: studio.Token(valid.With("scopes", []string{MethodActionInvoke, "job.start", " "})), code: CodeInvalidClaims,
			msg: msgInvalidClaims + "scopes: must not contain empty scopes"},
		{name: "scopes as one string", tok: studio.Token(valid.With("scopes", "supervaizer/action.invoke job.start")), code: CodeInvalidClaims,
			msg: msgInvalidClaims + "scopes: must be a list of strings"},
		{name: "empty workspace_id", tok: studio.Token(valid.With("workspace_id", "")), call: func(c Call) Call { c.Workspace.ID = ""; return c },
			code: CodeInvalidClaims, msg: msgInvalidClaims + "workspace_id: must not be empty"},
		{name: "another issuer", tok: studio.Token(valid.With("iss", "https://studio.test.evil.example")), code: CodeWrongIssuer, msg: msgWrongIssuer},
		{name: "forged workspace_slug in the request", tok: good, call: func(c Call) Call { c.Workspace.Slug = ptr("victim"); return c },
			code: CodeWrongWorkspace, msg: msgWrongWSSlug},
		{name: "token for another agent", tok: studio.Token(valid.With("agent_slug", "other-agent", "agent_id", "studio-agent-2")),
			code: CodeWrongAgent, msg: msgWrongAgentSlug},
		{name: "token of this agent replayed against another agent", tok: good, call: func(c Call) Call {
			c.AgentSlug, c.Agent = "other-agent", &Agent{Slug: "other-agent", ID: "x", StudioID: "studio-agent-2"}
			return c
		}, code: CodeWrongAgent, msg: msgWrongAgentSlug},
		{name: "token naming our slug with another agent id", tok: studio.Token(valid.With("agent_id", "studio-agent-2")),
			code: CodeWrongAgent, msg: msgWrongAgentID},
		{name: "another workspace", tok: good, call: func(c Call) Call { c.Workspace = contractWorkspace("workspace-2", "workspace"); return c },
			code: CodeWrongWorkspace, msg: msgWrongWorkspace},
		{name: "another server", tok: studio.Token(valid.With("server_id", "SRV-2", "aud", "supervaizer-server:SRV")), code: CodeWrongServer, msg: msgWrongServer},
		{name: "another server's audience", tok: studio.Token(valid.With("server_id", "SRV-2", "aud", "supervaizer-server:SRV-2")), code: CodeWrongAudience, msg: msgWrongAudience},
		{name: "scope for another action", tok: studio.Token(valid.With("scopes", []string{MethodActionInvoke, "job.stop"})), code: CodeMissingScope,
			msg: msgMissingScopePfx + "job.start"},
		{name: "scope prefix is not a scope", tok: studio.Token(valid.With("scopes", []string{MethodActionInvoke, "job."})), code: CodeMissingScope,
			msg: msgMissingScopePfx + "job.start"},
	}
	// Attacks on the key lookup, JWKS only.
	jwksAttacks := []attack{
		{name: "no kid", tok: studio.Sign(map[string]any{"alg": "EdDSA"}, valid), code: CodeMissingKID, msg: msgMissingKID},
		{name: "empty kid", tok: withKID(""), code: CodeMissingKID, msg: msgMissingKID},
		{name: "kid a number", tok: withKID(7), code: CodeMissingKID, msg: msgMissingKID},
		{name: "kid an object", tok: withKID(map[string]any{"kid": studio.KID}), code: CodeMissingKID, msg: msgMissingKID},
		{name: "kid not in JWKS", tok: withKID("studio-2099-01"), code: CodeUnknownKID, msg: msgUnknownKID},
		{name: "kid path traversal", tok: withKID("../../../../etc/passwd"), code: CodeUnknownKID, msg: msgUnknownKID},
		{name: "kid URL", tok: withKID("https://evil.example/jwks.json#studio-2026-05"), code: CodeUnknownKID, msg: msgUnknownKID},
		{name: "kid JSON injection", tok: withKID(`studio-2026-05","kty":"oct","k":"AAAA`), code: CodeUnknownKID, msg: msgUnknownKID},
		{name: "kid with NUL", tok: withKID("studio-2026-05\x00"), code: CodeUnknownKID, msg: msgUnknownKID},
		{name: "kid with a trailing space", tok: withKID("studio-2026-05 "), code: CodeUnknownKID, msg: msgUnknownKID},
		{name: "kid SQL", tok: withKID("' OR 1=1 --"), code: CodeUnknownKID, msg: msgUnknownKID},
		{name: "kid 4 KiB", tok: withKID(strings.Repeat("k", 4096)), code: CodeUnknownKID, msg: msgUnknownKID},
		{name: "kid of an RSA key", tok: withKID("rsa"), code: CodeInvalidJWK, msg: msgJWKNotOKP},
		{name: "kid of an X25519 key", tok: withKID("x25519"), code: CodeInvalidJWK, msg: msgJWKNotOKP},
		{name: "kid of an Ed448 key", tok: withKID("ed448"), code: CodeInvalidJWK, msg: msgJWKNotOKP},
		{name: "kid of a 31-byte x", tok: withKID("short-x"), code: CodeInvalidJWK, msg: msgJWKBadX},
		{name: "kid of a 33-byte x", tok: withKID("long-x"), code: CodeInvalidJWK, msg: msgJWKBadX},
		{name: "kid of a key without x", tok: withKID("no-x"), code: CodeInvalidJWK, msg: msgJWKNoX},
		{name: "kid of a numeric x", tok: withKID("num-x"), code: CodeInvalidJWK, msg: msgJWKNoX},
		{name: "kid of a standard-alphabet x", tok: withKID("std-x"), code: CodeInvalidJWK, msg: msgJWKBadX},
		{name: "kid of a published private key", tok: withKID("private"), code: CodeInvalidJWK, msg: msgJWKPrivate},
	}

	run := func(t *testing.T, v *verifier, a attack) {
		call := jobStart(a.tok)
		if a.call != nil {
			call = a.call(call)
		}
		got, err := v.Authorize(context.Background(), call)
		if got != nil {
			t.Fatalf("accepted: %+v", got)
		}
		wantRefusal(t, err, a.code, a.msg)
	}
	for _, a := range tokenAttacks {
		t.Run("pem/"+a.name, func(t *testing.T) { run(t, pemV, a) })
		t.Run("jwks/"+a.name, func(t *testing.T) { run(t, jwksV, a) })
	}
	for _, a := range jwksAttacks {
		t.Run("jwks/"+a.name, func(t *testing.T) { run(t, jwksV, a) })
	}

	// Sanity: the genuine token passes both verifiers, so the refusals above are the attacks'.
	for _, v := range []*verifier{pemV, jwksV} {
		if _, err := v.Authorize(context.Background(), jobStart(good)); err != nil {
			t.Fatalf("genuine token refused: %v", err)
		}
	}
	// All the unknown kids above cost one fetch at most (start-up + none: the clock never moved
	// past the cooldown), and nothing was fetched from the jku/x5u/kid URLs.
	if n := srv.hits.Load(); n != 1 {
		t.Errorf("JWKS fetched %d times, want 1 (start-up only)", n)
	}
	for _, a := range append(tokenAttacks, jwksAttacks...) {
		sig := a.tok[strings.LastIndex(a.tok, ".")+1:]
		if len(sig) > 20 && strings.Contains(logs.String(), sig) {
			t.Errorf("%s: token signature found in the logs", a.name)
		}
	}
	if strings.Contains(logs.String(), strings.Split(good, ".")[2]) {
		t.Error("genuine token found in the logs")
	}
}

// nonCanonical changes the last character of the signature to one that decodes to the same bytes
// (its unused low bits set): lenient decoders accept it, making one signature many tokens.
func nonCanonical(tok string) string {
	sig := tok[strings.LastIndex(tok, ".")+1:]
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, sig[len(sig)-1])
	// 64 bytes → 86 characters; the last one carries 2 bits, its 4 low bits must be zero.
	return tok[:len(tok)-1] + string(alphabet[last|0x0f])
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// TestSignatureIsEd25519Only: the key is used with Ed25519 whatever the header says, and an
// Ed25519 signature verified by crypto/ed25519 directly agrees with the verifier.
func TestSignatureIsEd25519Only(t *testing.T) {
	studio := granttest.NewIssuer("k")
	v := newPEMVerifier(t, studio, newClock())
	tok := studio.Token(granttest.Valid(t0, testIssuer, fullScopes...))
	i := strings.LastIndex(tok, ".")
	sig, err := base64.RawURLEncoding.DecodeString(tok[i+1:])
	if err != nil || !ed25519.Verify(studio.PublicKey(), []byte(tok[:i]), sig) {
		t.Fatal("granttest produced a token crypto/ed25519 rejects")
	}
	if _, err := v.Authorize(context.Background(), jobStart(tok)); err != nil {
		t.Fatal(err)
	}
}
