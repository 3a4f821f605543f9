package granttest

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"
	"time"
)

func TestTokenIsCompactEdDSA(t *testing.T) {
	iss := NewIssuer("k1")
	tok := iss.Token(Valid(time.Unix(1779100000, 0), "I", "a").With("jti", nil))
	parts := strings.Split(tok, ".")
	if len(parts) != 3 || strings.Contains(tok, "=") {
		t.Fatalf("not a compact JWS: %q", tok)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || !ed25519.Verify(iss.PublicKey(), []byte(parts[0]+"."+parts[1]), sig) {
		t.Fatal("signature does not verify")
	}
	h, _ := base64.RawURLEncoding.DecodeString(parts[0])
	if string(h) != `{"alg":"EdDSA","kid":"k1","typ":"JWT"}` {
		t.Fatalf("header %s", h)
	}
	var c map[string]any
	p, _ := base64.RawURLEncoding.DecodeString(parts[1])
	if err := json.Unmarshal(p, &c); err != nil || c["exp"] != float64(1779100300) || c["jti"] != nil || c["aud"] != "supervaizer-server:SRV" {
		t.Fatalf("claims %s", p)
	}

	block, _ := pem.Decode([]byte(iss.PublicKeyPEM()))
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil || !pub.(ed25519.PublicKey).Equal(iss.PublicKey()) {
		t.Fatal("PEM does not hold the key")
	}
	x, _ := base64.RawURLEncoding.DecodeString(iss.JWK()["x"].(string))
	if !iss.PublicKey().Equal(ed25519.PublicKey(x)) {
		t.Fatal("JWK does not hold the key")
	}
	if got := string(JWKS()); got != `{"keys":[]}` {
		t.Fatalf("empty JWKS %s", got)
	}
}
