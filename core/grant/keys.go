package grant

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
)

// keySource yields the Ed25519 key that must have signed a token (spec §4.3 step 5). Whatever it
// returns is used for Ed25519 and nothing else: no algorithm is ever read from a key or a header.
type keySource interface {
	// key returns the key for the token's kid ("" when the header has none, or not a string).
	key(ctx context.Context, kid string) (ed25519.PublicKey, *Error)
}

// staticKey is SUPERVAIZER_WORKSPACE_AUTH_PUBLIC_KEY: one key, whatever the token's kid says
// (as in the reference, the kid is not required with a PEM key).
type staticKey ed25519.PublicKey

var _ keySource = staticKey(nil)

func (k staticKey) key(context.Context, string) (ed25519.PublicKey, *Error) {
	return ed25519.PublicKey(k), nil
}

// parsePublicKeyPEM loads an Ed25519 SubjectPublicKeyInfo PEM. A value whose line breaks were
// written as the two characters `\n` (a common way to put a PEM in one environment line) is
// accepted; anything else than exactly one PUBLIC KEY block is refused.
func parsePublicKeyPEM(v string) (ed25519.PublicKey, error) {
	v = strings.TrimSpace(v)
	if !strings.Contains(v, "\n") && strings.Contains(v, `\n`) {
		v = strings.ReplaceAll(v, `\n`, "\n")
	}
	block, rest := pem.Decode([]byte(v))
	if block == nil {
		return nil, fmt.Errorf("%s: %s: no PEM block found", msgKeyNotLoaded, EnvPublicKey)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("%s: %s: unexpected data after the PEM block", msgKeyNotLoaded, EnvPublicKey)
	}
	if block.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("%s: %s: PEM block is %q, want \"PUBLIC KEY\" (SubjectPublicKeyInfo)", msgKeyNotLoaded, EnvPublicKey, block.Type)
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", msgKeyNotLoaded, EnvPublicKey, err)
	}
	k, ok := pub.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%s: %s holds a %T", msgKeyNotEd25519, EnvPublicKey, pub)
	}
	if len(k) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%s: %s holds %d bytes, want %d", msgKeyNotEd25519, EnvPublicKey, len(k), ed25519.PublicKeySize)
	}
	return k, nil
}
