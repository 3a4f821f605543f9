// Package store defines the one persistence seam of svz: a small conditional key-value store with
// per-record expiry. Serverless instances keep nothing between requests, so every state that must
// outlive a request (idempotency records, checkpoint state) goes through a Store.
//
// Every implementation promises the same behaviour, checked by the storetest conformance suite:
//
//   - Create writes a record only when no live record holds the key; an expired record is replaced.
//     Among concurrent Creates of one key exactly one succeeds; the others get ErrExists together
//     with the winner's record.
//   - Every write gives the record a new Version, chosen at random by the store, so a version is
//     never reused for a key even across delete and re-create (no ABA on compare-and-swap).
//   - Update and Delete are compare-and-swap on that version.
//   - Expiry is absolute, kept with millisecond precision, and checked by the store itself on every
//     read and conditional write: a record expiring at T is live strictly before T and gone at T.
//     The zero time (Never) means the record does not expire; its Record.ExpiresAt is the zero time.
//     No implementation relies on a backend's TTL sweeper for correctness (DynamoDB TTL lags by
//     hours, emulators never expire); sweepers only reclaim space.
//   - Values are opaque bytes up to MaxValueSize; a larger value fails with ErrTooLarge and nothing
//     is written, so callers fail loudly instead of silently losing protection.
//   - After Close every method fails with ErrClosed.
//
// Time: the caller computes expiries from its clock and each store compares them with the "now" of
// an injectable clock (time.Now by default) in the same process, passed to the server inside the
// conditional write. Server time is deliberately not used: DynamoDB has no server clock in
// conditions, and one rule for every backend keeps behaviour identical and testable at the
// millisecond boundary. Instances that disagree by ε see a record expire up to ε early or late;
// callers that hand out leases add a margin larger than the expected skew (see core/idempotency).
package store

import (
	"context"
	"errors"
	"time"
)

// MaxKeyLen is the longest key, in bytes, every store accepts. Keys are non-empty valid UTF-8
// without NUL bytes (PostgreSQL text and DynamoDB string keys refuse the rest).
const MaxKeyLen = 1024

// Errors returned by every Store, possibly wrapped with context; test them with errors.Is.
var (
	// ErrNotFound: no live record holds the key (absent or expired).
	ErrNotFound = errors.New("store: record not found")
	// ErrExists: Create found a live record under the key.
	ErrExists = errors.New("store: a live record already exists")
	// ErrConflict: a live record holds the key with another version than the one given.
	ErrConflict = errors.New("store: version conflict")
	// ErrTooLarge: the value is longer than MaxValueSize; nothing was written.
	ErrTooLarge = errors.New("store: value too large")
	// ErrInvalid: an empty, too long or malformed key, an expiry that is neither Never nor in the
	// future, a List limit below 1 or a malformed List after.
	ErrInvalid = errors.New("store: invalid argument")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store: closed")
)

// Never is the expiry of a record that does not expire: pass it to Create or Update.
var Never time.Time

// Record is a stored value with its version and absolute expiry.
type Record struct {
	Value     []byte
	Version   uint64    // set by the store on every write; never 0
	ExpiresAt time.Time // UTC, millisecond precision; the zero time (Never) when it does not expire
}

// MaxListLimit is the largest page List returns; a larger limit is lowered to it.
const MaxListLimit = 1000

// Item is a live record with its key, as List returns it.
type Item struct {
	Key string
	Record
}

// Page is one page of a listing. Next is the key to pass as List's after for the following page;
// it is "" on the last page. A page may hold fewer than limit items (even none) and still have a
// Next: backends that filter expired records after reading may stop early.
type Page struct {
	Items []Item
	Next  string
}

// Lister is implemented by stores that list live records by key prefix. Every backend of svz
// implements it; see each package's doc for what a listing costs there.
type Lister interface {
	// List returns, in ascending byte order of key, up to limit live records whose key starts with
	// prefix and sorts strictly after after ("" starts at the first key). The prefix must be a
	// valid key (non-empty); after is "" or a string a key could be; limit must be at least 1 and
	// is capped at MaxListLimit. A page also ends early once its values reach 4 MiB, and a
	// backend may cap its pages lower (see its doc). Records written during a listing may or may
	// not appear in it; no record appears twice and none that was live for the whole listing is
	// skipped.
	List(ctx context.Context, prefix, after string, limit int) (Page, error)
}

// Exclusive is implemented by stores that one process opens at a time (a bolt file, which its
// process locks): whatever another process wrote there, that process has ended, so its leases
// need not be waited out (package jobs takes its tasks over at once).
type Exclusive interface {
	Exclusive() bool
}

// Store is a conditional key-value store with per-record expiry. Implementations are safe for
// concurrent use by multiple goroutines and processes.
type Store interface {
	// Get returns the live record under key, or ErrNotFound.
	Get(ctx context.Context, key string) (Record, error)
	// Create stores value under key until expiresAt unless a live record exists. When one does, it
	// returns that record and an error matching ErrExists, in the same round trip.
	Create(ctx context.Context, key string, value []byte, expiresAt time.Time) (Record, error)
	// Update replaces the live record under key if its version is version. It returns ErrNotFound
	// when no live record exists and ErrConflict when the live record has another version.
	Update(ctx context.Context, key string, version uint64, value []byte, expiresAt time.Time) (Record, error)
	// Delete removes the live record under key if its version is version, and returns ErrConflict
	// when the live record has another version. Deleting an absent or expired record succeeds.
	Delete(ctx context.Context, key string, version uint64) error
	// MaxValueSize is the longest value, in bytes, the store accepts.
	MaxValueSize() int
	// Close releases the store's resources. Later calls to other methods fail with ErrClosed;
	// closing again returns nil.
	Close() error
}
