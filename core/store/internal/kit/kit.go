// Package kit holds the rules every store backend shares, so that all of them accept and refuse
// exactly the same inputs and agree on time and versions.
package kit

import (
	"context"
	"errors"
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

// Ready is what every call checks before it does anything: the store is open, ctx is live and
// key is valid. Stores that check closed under their own lock pass false.
func Ready(ctx context.Context, closed bool, key string) error {
	if closed {
		return store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return CheckKey(key)
}

// ReadyWrite is Ready, then CheckWrite with the store's value limit and clock reading now.
func ReadyWrite(ctx context.Context, closed bool, key string, value []byte, limit int, expiresAt, now time.Time) error {
	if err := Ready(ctx, closed, key); err != nil {
		return err
	}
	return CheckWrite(key, value, limit, expiresAt, now)
}

// ReadyList is Ready for a List call: it returns the limit to use (see CheckList).
func ReadyList(ctx context.Context, closed bool, prefix, after string, limit int) (int, error) {
	if closed {
		return 0, store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return CheckList(prefix, after, limit)
}

// DefaultTimeout is the store timeout of the networked backends unless configured otherwise:
// long enough for a loaded server, short enough that an outage fails calls instead of holding
// them.
const DefaultTimeout = 5 * time.Second

// Bound returns ctx bounded by the store timeout d (not bounded when d <= 0). When the bound
// ends a call, TimedOut turns its error into one that says so.
func Bound(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return ctx, func() {}
	}
	deadline := time.Now().Add(d)
	if parent, ok := ctx.Deadline(); ok && !parent.After(deadline) {
		return ctx, func() {} // the caller's own deadline comes first: the bound changes nothing
	}
	ctx, cancel := context.WithDeadlineCause(ctx, deadline, timeoutError{d})
	return context.WithValue(ctx, boundKey{}, timeoutError{d}), cancel
}

// boundKey marks a context bounded by Bound.
type boundKey struct{}

// TimedOut returns err, saying first that the store timeout of ctx (from Bound) ran out when it
// did; the caller's own deadline or cancellation is left as it is. The result matches
// context.DeadlineExceeded. A driver may report the deadline (an i/o timeout on a socket whose
// deadline it set from ctx) an instant before ctx itself is done: the deadline's passing counts.
func TimedOut(ctx context.Context, err error) error {
	te, bounded := ctx.Value(boundKey{}).(timeoutError)
	if err == nil || !bounded || errors.As(err, new(timeoutError)) {
		return err
	}
	if ctx.Err() != nil {
		if !errors.As(context.Cause(ctx), new(timeoutError)) {
			return err // canceled, or the caller's deadline
		}
	} else if deadline, _ := ctx.Deadline(); time.Now().Before(deadline) {
		return err
	}
	return fmt.Errorf("%w: %w", te, err)
}

// timeoutError is the cause of a call ended by the store timeout.
type timeoutError struct{ d time.Duration }

func (e timeoutError) Error() string {
	return fmt.Sprintf("no answer within the store timeout (%s)", e.d)
}

func (e timeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

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
// after must be "" or a string a key could be (valid UTF-8 without NUL), as a Next is.
func CheckList(prefix, after string, limit int) (int, error) {
	if err := CheckKey(prefix); err != nil {
		return 0, fmt.Errorf("prefix: %w", err)
	}
	if after != "" && (!utf8.ValidString(after) || strings.IndexByte(after, 0) >= 0) {
		return 0, fmt.Errorf("%w: list after is not valid UTF-8 without NUL", store.ErrInvalid)
	}
	if limit < 1 {
		return 0, fmt.Errorf("%w: list limit %d is below 1", store.ErrInvalid, limit)
	}
	return min(limit, store.MaxListLimit), nil
}

// Range is the span of keys a List call covers, in byte order: from From (excluded when
// Exclusive) to before To ("" when no key ends it). Empty says no key can be in it.
type Range struct {
	From      string
	Exclusive bool
	To        string
	Empty     bool
}

// ListRange returns the keys that start with prefix and sort after after.
func ListRange(prefix, after string) Range {
	r := Range{From: prefix, To: PrefixEnd(prefix)}
	if after >= prefix {
		r.From, r.Exclusive = after, true
	}
	r.Empty = r.To != "" && r.From >= r.To
	return r
}

// In reports whether key lies in r.
func (r Range) In(key string) bool {
	if r.Empty || key < r.From || (r.Exclusive && key == r.From) {
		return false
	}
	return r.To == "" || key < r.To
}

// PrefixEnd is the smallest valid UTF-8 string that sorts, in byte order, after every string
// starting with prefix (valid UTF-8 itself): prefix with its last rune incremented, dropping
// runes that cannot be. UTF-8 preserves code point order, so keys (valid UTF-8) starting with
// prefix are exactly those in [prefix, PrefixEnd(prefix)). It is "" when no string ends the span
// (prefix made of U+10FFFF only).
func PrefixEnd(prefix string) string {
	runes := []rune(prefix)
	for i := len(runes) - 1; i >= 0; i-- {
		switch r := runes[i]; {
		case r == utf8.MaxRune:
			continue
		case r == 0xD7FF: // the next code point is past the surrogates
			runes[i] = 0xE000
		default:
			runes[i] = r + 1
		}
		return string(runes[:i+1])
	}
	return ""
}

// MaxPageBytes bounds the values of one List page: once they reach it, the page ends early
// (with a Next), so that a page of large records stays small in memory and on the wire.
const MaxPageBytes = 4 << 20

// Page gathers the items of a List page: Add takes items in key order and reports whether the
// page can take more.
type Page struct {
	limit, bytes int
	page         store.Page
}

// NewPage starts a page of at most limit items.
func NewPage(limit int) *Page { return &Page{limit: limit} }

// Add appends an item and reports whether the page has room for another.
func (p *Page) Add(key string, rec store.Record) bool {
	p.page.Items = append(p.page.Items, store.Item{Key: key, Record: rec})
	p.bytes += len(rec.Value)
	return len(p.page.Items) < p.limit && p.bytes < MaxPageBytes
}

// Bytes is the size of the values added so far.
func (p *Page) Bytes() int { return p.bytes }

// Done returns the page; more says whether keys may remain after the last one examined, last.
func (p *Page) Done(last string, more bool) store.Page {
	if more {
		p.page.Next = last
	}
	return p.page
}

// Live reports whether a record expiring at expiresMs is live at now: strictly before expiry.
func Live(expiresMs int64, now time.Time) bool { return Millis(now) < expiresMs }

// Clone copies b so a store never aliases its caller's memory.
func Clone(b []byte) []byte {
	out := make([]byte, len(b))
	copy(out, b)
	return out
}
