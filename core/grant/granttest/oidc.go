package granttest

import (
	"crypto"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"time"
)

// Google is a stand-in for Google's ID-token signer (the OIDC tokens Cloud Tasks sends): an RSA
// key published in a JWKS, RS256 tokens.
type Google struct {
	Key *rsa.PrivateKey
	KID string
}

// NewGoogle returns a signer with a fresh 2048-bit key.
func NewGoogle(kid string) *Google {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(fmt.Sprintf("granttest: rsa key: %v", err))
	}
	return &Google{Key: k, KID: kid}
}

// JWKS is the signer's key set, as https://www.googleapis.com/oauth2/v3/certs publishes it.
func (g *Google) JWKS() []byte {
	b, _ := json.Marshal(map[string]any{"keys": []map[string]any{{
		"kty": "RSA", "alg": "RS256", "use": "sig", "kid": g.KID,
		"n": base64.RawURLEncoding.EncodeToString(g.Key.N.Bytes()),
		"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(g.Key.E)).Bytes()),
	}}})
	return b
}

// IDClaims are the claims of a Google ID token for a service account: issued at now, valid for
// an hour.
func IDClaims(now time.Time, audience, email string) Claims {
	return Claims{
		"iss": "https://accounts.google.com", "aud": audience, "azp": "1234567890",
		"sub": "1234567890", "email": email, "email_verified": true,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}
}

// Token signs claims RS256 under {"alg":"RS256","kid":KID,"typ":"JWT"}.
func (g *Google) Token(claims any) string {
	return g.Sign(map[string]any{"alg": "RS256", "kid": g.KID, "typ": "JWT"}, claims)
}

// Sign signs claims RS256 under header, both marshalled as given.
func (g *Google) Sign(header, claims any) string {
	signed := segments(header, claims)
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, g.Key, crypto.SHA256, sum[:])
	if err != nil {
		panic(fmt.Sprintf("granttest: rsa sign: %v", err))
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// SignHS256 signs with HMAC-SHA256 under secret (an attacker using the public key as the secret).
func SignHS256(secret []byte, header, claims any) string {
	signed := segments(header, claims)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(signed))
	return signed + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Unsigned is a token with alg none and an empty signature.
func Unsigned(claims any) string {
	return segments(map[string]any{"alg": "none", "typ": "JWT"}, claims) + "."
}

func segments(header, claims any) string {
	h, err := json.Marshal(header)
	if err != nil {
		panic(fmt.Sprintf("granttest: header: %v", err))
	}
	p, err := json.Marshal(claims)
	if err != nil {
		panic(fmt.Sprintf("granttest: claims: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(p)
}
