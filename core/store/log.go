package store

import (
	"context"
	"time"
)

// Log is implemented by stores that keep named append-only logs, the seam behind the effect stream
// (GET /a2a/events): every instance of a controller appends to the same log and any instance
// reads it. Every backend of svz implements it; storetest.RunLog is its conformance suite.
//
// Positions. The entries of a log are numbered 1, 2, 3... with no number skipped or reused: the
// number is claimed when the entry is appended, and a reader never passes a number whose entry is
// still being written by another process, so reading in number order misses nothing even when
// appends from several processes commit out of order. An entry may be dropped from the sequence
// only by the store's own recovery of an append that died half-way (see the DynamoDB backend);
// its number is then skipped by ReadLog's Through, never reused.
//
// Epoch. A log has an epoch, a random string chosen when its first entry is appended: a log that
// is deleted and created again (a flushed Redis, a new table, a restarted memory store) gets
// another epoch, so a reader holding a position of the old log can tell it no longer means
// anything.
//
// Retention. No read returns an entry beyond the Retention of the newest append. Each AppendLog
// also reclaims, in the same call and within a bounded batch, the space of the oldest entries
// beyond it, except where deleting costs as much as appending and an expiry costs nothing: the
// DynamoDB store leaves the entries of an age-bounded log to its TTL sweeper (see its doc). Kept
// entries always form one contiguous range [First, Last].
type Log interface {
	// AppendLog adds data to the log name, creating the log if needed, and returns the entry's
	// position. It then drops the oldest entries that keep no longer allows (at most a bounded
	// batch per call, so a lowered limit is reached over several appends). data is copied.
	AppendLog(ctx context.Context, name string, data []byte, keep Retention) (LogPosition, error)
	// ReadLog returns up to limit entries of the log name numbered after after, oldest first,
	// with the log's bounds. limit 0 returns the bounds only. A log never appended to reads as
	// empty with an empty epoch.
	ReadLog(ctx context.Context, name string, after uint64, limit int) (LogRange, error)
	// WaitLog blocks until the newest position of the log name may differ from after, then
	// returns nil, or returns ctx's error. It may return early; the caller reads to find out.
	// Waiting costs no store call per waiter: each process shares one watch per log (a
	// notification channel, a blocking read or a short poll, depending on the backend).
	WaitLog(ctx context.Context, name string, after uint64) error
}

// Retention bounds a log: entries older than MaxAge, entries beyond the newest MaxCount, and
// entries beyond the newest MaxBytes bytes of data are deleted by later appends. Zero means no
// bound of that kind.
//
// The byte bound counts the data of the entries: an entry is kept while its data and that of
// every newer entry add up to at most MaxBytes. The newest entry is kept whatever its size. A
// store may keep an entry longer, until the newer entries alone hold MaxBytes and an eighth of
// it (the DynamoDB store marks the log's bytes in eighths of the bound, as its ages), never
// shorter.
type Retention struct {
	MaxAge   time.Duration
	MaxCount int
	MaxBytes int64
}

// LogPosition is an appended entry's place in its log.
type LogPosition struct {
	Epoch string
	Seq   uint64
}

// LogEntry is one entry of a log.
type LogEntry struct {
	Seq  uint64
	At   time.Time // when it was appended, by the appender's clock, millisecond precision
	Data []byte
}

// LogRange is the answer of ReadLog.
type LogRange struct {
	// Epoch identifies this incarnation of the log ("" for a log never appended to).
	Epoch string
	// First is the oldest kept position; Last the newest claimed one. An empty log has
	// First = Last + 1. A reader at position p (it has seen every entry up to p) lost entries
	// when p + 1 < First.
	First, Last uint64
	// Entries are the kept entries numbered after the position read from, in order, with no
	// kept entry left out up to Through.
	Entries []LogEntry
	// Through is the position the read reached: the caller's next read starts after it. It is
	// at least the position read from, and less than Last when limit cut the read short or an
	// append still being written holds the next number (read again after WaitLog).
	Through uint64
}

// MaxLogNameLen is the longest log name, in bytes, every store accepts. Names are non-empty valid
// UTF-8 without control characters.
const MaxLogNameLen = 200

// MaxLogRead is the largest limit ReadLog honours; a larger limit is lowered to it.
const MaxLogRead = 1000

// UpdateAppender is implemented by stores that can update a record and append to a log in one
// atomic call, where Update and AppendLog take a round trip each: the idempotency gate completes
// a run's record and appends its effect event with it (one PostgreSQL statement, one Redis
// script, one bbolt transaction). storetest.RunUpdateAppend is its conformance suite.
type UpdateAppender interface {
	// UpdateAppend does what Update(key, version, value, expiresAt) does and, only when that
	// writes, what AppendLog(name, data, keep) does: both or neither, never one alone. It fails
	// as Update does (ErrNotFound, ErrConflict, ErrTooLarge) and as AppendLog does; ErrInvalid
	// for an argument either refuses, before anything is written. When a retry after a lost
	// answer finds its own write applied, it succeeds without appending again.
	UpdateAppend(ctx context.Context, key string, version uint64, value []byte, expiresAt time.Time,
		name string, data []byte, keep Retention) (Record, error)
}
