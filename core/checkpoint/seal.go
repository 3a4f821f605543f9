package checkpoint

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
)

// sealInfo separates the token key from any other use of the secret.
const sealInfo = "svz rule-checkpoint token v1"

// ErrTokenUnreadable: a stored checkpoint token cannot be opened with this instance's secret.
var ErrTokenUnreadable = errors.New("the stored checkpoint token of this job cannot be opened: it was sealed with another SUPERVAIZE_API_KEY (rotated, or instances configured differently); every instance must use the same key, and a job governed before a rotation must be started again")

// aead is AES-256-GCM under a key derived from secret with HKDF-SHA256.
func aead(secret []byte) (cipher.AEAD, error) {
	if len(secret) == 0 {
		return nil, errors.New("checkpoint: no secret to seal checkpoint tokens with (SUPERVAIZE_API_KEY)")
	}
	key, err := hkdf.Key(sha256.New, secret, nil, sealInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: derive the token key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return cipher.NewGCM(block)
}

// seal encrypts token, bound to where it is stored (aad: the record's key), so that a sealed
// token copied to another record does not open there.
func seal(secret []byte, token, aad string) ([]byte, error) {
	a, err := aead(secret)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, a.NonceSize(), a.NonceSize()+len(token)+a.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return a.Seal(nonce, nonce, []byte(token), []byte(aad)), nil
}

// open decrypts a sealed token.
func open(secret, sealed []byte, aad string) (string, error) {
	a, err := aead(secret)
	if err != nil {
		return "", err
	}
	if len(sealed) < a.NonceSize()+a.Overhead() {
		return "", ErrTokenUnreadable
	}
	plain, err := a.Open(nil, sealed[:a.NonceSize()], sealed[a.NonceSize():], []byte(aad))
	if err != nil {
		return "", ErrTokenUnreadable
	}
	return string(plain), nil
}
