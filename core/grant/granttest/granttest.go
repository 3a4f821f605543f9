// Package granttest mints workspace-grant tokens the way Studio does, for tests. It shares no code
// with the verifier in package grant (its own JSON, base64url and crypto/ed25519 calls), so a test
// that mints here and verifies there checks one implementation against another.
package granttest

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"maps"
	"time"
)

// Issuer is a Studio signing key.
type Issuer struct {
	Key ed25519.PrivateKey
	// KID is put in every token header and in the JWK.
	KID string
}

// NewIssuer returns an issuer with a fresh key.
func NewIssuer(kid string) *Issuer {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(fmt.Sprintf("granttest: ed25519 key: %v", err)) // crypto/rand does not fail
	}
	return &Issuer{Key: priv, KID: kid}
}

// PublicKey is the issuer's public key.
func (i *Issuer) PublicKey() ed25519.PublicKey { return i.Key.Public().(ed25519.PublicKey) }

// PublicKeyPEM is the public key as SUPERVAIZER_WORKSPACE_AUTH_PUBLIC_KEY holds it.
func (i *Issuer) PublicKeyPEM() string {
	der, err := x509.MarshalPKIXPublicKey(i.PublicKey())
	if err != nil {
		panic(fmt.Sprintf("granttest: marshal public key: %v", err))
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// JWK is the issuer's public key as Studio publishes it in its JWKS.
func (i *Issuer) JWK() map[string]any {
	return map[string]any{
		"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig", "kid": i.KID,
		"x": base64.RawURLEncoding.EncodeToString(i.PublicKey()),
	}
}

// JWKS is a key set document holding keys.
func JWKS(keys ...map[string]any) []byte {
	if keys == nil {
		keys = []map[string]any{}
	}
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		panic(fmt.Sprintf("granttest: JWKS: %v", err))
	}
	return b
}

// Claims are token claims; Studio's usual set comes from Valid.
type Claims map[string]any

// Valid returns the claims of spec §12.2's token(...): issued now for 5 minutes to agent
// studio-agent-1 (slug s) of server SRV in workspace-1, with scopes.
func Valid(now time.Time, issuer string, scopes ...string) Claims {
	return Claims{
		"iss":            issuer,
		"aud":            "supervaizer-server:SRV",
		"sub":            "workspace-agent-grant:grant-1",
		"grant_id":       "grant-1",
		"workspace_id":   "workspace-1",
		"workspace_slug": "workspace",
		"agent_id":       "studio-agent-1",
		"agent_slug":     "s",
		"server_id":      "SRV",
		"scopes":         scopes,
		"iat":            now.Unix(),
		"exp":            now.Add(5 * time.Minute).Unix(),
		"jti":            "token-1",
	}
}

// With returns a copy of c with the given claims set; a nil value deletes the claim.
func (c Claims) With(kv ...any) Claims {
	out := maps.Clone(c)
	for j := 0; j+1 < len(kv); j += 2 {
		k := kv[j].(string)
		if kv[j+1] == nil {
			delete(out, k)
		} else {
			out[k] = kv[j+1]
		}
	}
	return out
}

// Header is the issuer's usual token header: {"alg":"EdDSA","typ":"JWT","kid":KID}.
func (i *Issuer) Header() map[string]any {
	return map[string]any{"alg": "EdDSA", "typ": "JWT", "kid": i.KID}
}

// Token signs claims under the issuer's usual header.
func (i *Issuer) Token(claims any) string { return i.Sign(i.Header(), claims) }

// Sign signs claims under header, both marshalled to JSON as given.
func (i *Issuer) Sign(header, claims any) string {
	h, err := json.Marshal(header)
	if err != nil {
		panic(fmt.Sprintf("granttest: header: %v", err))
	}
	p, err := json.Marshal(claims)
	if err != nil {
		panic(fmt.Sprintf("granttest: claims: %v", err))
	}
	return i.SignRaw(h, p)
}

// SignRaw signs the exact header and payload bytes (for JSON the marshaller would not produce).
func (i *Issuer) SignRaw(header, payload []byte) string {
	signed := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(payload)
	return signed + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(i.Key, []byte(signed)))
}
