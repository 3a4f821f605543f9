// Package kit holds the rules every store backend shares, so that all of them accept and refuse
// exactly the same inputs and agree on time and versions.
package kit

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/supervaize/svz/core/store"
)

// CheckKey rejects keys no backend can hold.
func CheckKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", store.ErrInvalid)
	case len(key) > store.MaxKeyLen:
		return fmt.Errorf("%w: key is %d bytes, the limit is %d", store.ErrInvalid, len(key), store.MaxKeyLen)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: key is not valid UTF-8", store.ErrInvalid)
	case strings.IndexByte(key, 0) >= 0:
		return fmt.Errorf("%w: key contains a NUL byte", store.ErrInvalid)
	}
	return nil
}

// CheckWrite validates a Create or Update: the key, the value against the store's limit and an
// expiry that must be store.Never or fall after now at millisecond precision.
func CheckWrite(key string, value []byte, limit int, expiresAt, now time.Time) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if len(value) > limit {
		return fmt.Errorf("%w: %d bytes, the limit is %d", store.ErrTooLarge, len(value), limit)
	}
	if !expiresAt.IsZero() && Millis(expiresAt) <= Millis(now) {
		return fmt.Errorf("%w: expiry %s is not after now (%s)", store.ErrInvalid,
			expiresAt.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// NewVersion returns a random version in [1, 2^63): it fits a signed 64-bit column and a
// DynamoDB number exactly, and is never reused for a key in practice (2^-63 per pair).
func NewVersion() uint64 {
	for {
		if v := rand.Uint64() >> 1; v != 0 {
			return v
		}
	}
}

// NeverMillis is the stored expiry of a record that does not expire (store.Never): later than
// any clock, so every comparison with "now" keeps it live.
const NeverMillis = math.MaxInt64

// Millis is t in Unix milliseconds, the precision every backend stores; store.Never (the zero
// time) is NeverMillis.
func Millis(t time.Time) int64 {
	if t.IsZero() {
		return NeverMillis
	}
	return t.UnixMilli()
}

// Time converts Unix milliseconds back to a UTC time; NeverMillis gives store.Never.
func Time(ms int64) time.Time {
	if ms == NeverMillis {
		return store.Never
	}
	return time.UnixMilli(ms).UTC()
}

// CheckList validates a List call and returns the limit to use (capped at store.MaxListLimit).
func CheckList(prefix string, limit int) (int, error) {
	if err := CheckKey(prefix); err != nil {
		return 0, fmt.Errorf("prefix: %w", err)
	}
	if limit < 1 {
		return 0, fmt.Errorf("%w: list limit %d is below 1", store.ErrInvalid, limit)
	}
	return min(limit, store.MaxListLimit), nil
}

// Live reports whether a record expiring at expiresMs is live at now: strictly before expiry.
func Live(expiresMs int64, now time.Time) bool { return Millis(now) < expiresMs }

// Clone copies b so a store never aliases its caller's memory.
func Clone(b []byte) []byte {
	out := make([]byte, len(b))
	copy(out, b)
	return out
}
