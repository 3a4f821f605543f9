// Package fingerprint names a secret without revealing it: the first 12 hex characters of its
// SHA-256, the only form in which keys and tokens may appear in logs, errors and output.
package fingerprint

import (
	"crypto/sha256"
	"encoding/hex"
)

// Of returns the fingerprint of secret.
func Of(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:6])
}
