// Package bolt is the embedded store.Store: one bbolt file, the default of local mode, so a
// restarted process keeps its idempotency records. One process at a time holds the file; a second
// one fails to open it after a short wait instead of blocking forever.
//
// Records live in the bucket "svz.store.v1" as key → 8-byte big-endian version, 8-byte big-endian
// expiry in Unix milliseconds, then the value. Values are limited to MaxValueSize bytes.
//
// Expired records are deleted as the store is written, with no sweeper: every Create or Update
// that writes also examines the next ReclaimBatch records of the bucket, resuming where the
// previous write stopped and wrapping at the end, and deletes the expired ones in the same
// transaction (so at no extra fsync). A full pass takes n/ReclaimBatch writes for n records, so
// expired records are at most about 1/ReclaimBatch of the file.
package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	bbolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/internal/kit"
)

// MaxValueSize is the value limit of the bolt store. bbolt itself allows far more; the limit keeps
// the file small and every backend within the same order of magnitude.
const MaxValueSize = 1 << 20

// ErrLocked is Open's error when another process holds the file.
var ErrLocked = errors.New("locked by another process")

// DefaultTimeout is how long Open waits for another process to release the file.
const DefaultTimeout = time.Second

const headerSize = 16

// ReclaimBatch is how many records each write examines for expiry.
const ReclaimBatch = 32

const bucket = "svz.store.v1"

// Store is a store.Store in a bbolt file.
type Store struct {
	db     *bbolt.DB
	path   string
	now    func() time.Time
	closed atomic.Bool

	// reclaimFrom is the key the next write's scan for expired records starts at (nil: the
	// first). Only write transactions use it, and bbolt runs one at a time.
	reclaimFrom []byte

	logs kit.Heads // waiters of store.Log, in log.go
}

var (
	_ store.Store  = (*Store)(nil)
	_ store.Lister = (*Store)(nil)
)

// Option configures Open.
type Option func(*options)

type options struct {
	now     func() time.Time
	timeout time.Duration
}

// WithClock makes the store read the time from now instead of time.Now.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithTimeout sets how long Open waits for the file lock (default DefaultTimeout).
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// Open opens or creates the bbolt file at path, creating its directory with mode 0700 and the file
// with mode 0600. It fails with an error naming the file when another process holds it.
func Open(path string, opts ...Option) (*Store, error) {
	o := options{now: time.Now, timeout: DefaultTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("bolt: create the directory of %s: %w", path, err)
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: o.timeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("bolt: %s: %w (waited %s)", path, ErrLocked, o.timeout)
	}
	if err != nil {
		return nil, fmt.Errorf("bolt: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists([]byte(bucket))
		return err
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("bolt: prepare %s: %w", path, err)
	}
	return &Store{db: db, path: path, now: o.now}, nil
}

// Path is the file the store uses.
func (s *Store) Path() string { return s.path }

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key string) (store.Record, error) {
	var rec store.Record
	err := s.view(ctx, key, func(b *bbolt.Bucket) error {
		r, ok, err := s.live(b, key)
		if err != nil {
			return err
		}
		if !ok {
			return store.ErrNotFound
		}
		rec = r
		return nil
	})
	if err != nil {
		return store.Record{}, fmt.Errorf("bolt: get: %w", err)
	}
	return rec, nil
}

// Create implements store.Store.
func (s *Store) Create(ctx context.Context, key string, value []byte, expiresAt time.Time) (store.Record, error) {
	var rec store.Record
	err := s.update(ctx, key, value, expiresAt, func(b *bbolt.Bucket) error {
		cur, ok, err := s.live(b, key)
		if err != nil {
			return err
		}
		if ok {
			rec = cur
			return store.ErrExists
		}
		rec, err = put(b, key, value, expiresAt)
		return err
	})
	if err != nil {
		return rec, fmt.Errorf("bolt: create: %w", err)
	}
	return rec, nil
}

// Update implements store.Store.
func (s *Store) Update(ctx context.Context, key string, version uint64, value []byte, expiresAt time.Time) (store.Record, error) {
	var rec store.Record
	err := s.update(ctx, key, value, expiresAt, func(b *bbolt.Bucket) error {
		cur, ok, err := s.live(b, key)
		switch {
		case err != nil:
			return err
		case !ok:
			return store.ErrNotFound
		case cur.Version != version:
			return store.ErrConflict
		}
		rec, err = put(b, key, value, expiresAt)
		return err
	})
	if err != nil {
		return store.Record{}, fmt.Errorf("bolt: update: %w", err)
	}
	return rec, nil
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, key string, version uint64) error {
	if err := s.ready(ctx, key); err != nil {
		return fmt.Errorf("bolt: delete: %w", err)
	}
	err := s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		cur, ok, err := s.live(b, key)
		if err != nil {
			return err
		}
		if ok && cur.Version != version {
			return store.ErrConflict
		}
		return b.Delete([]byte(key))
	})
	if err != nil {
		return fmt.Errorf("bolt: delete: %w", closedErr(err))
	}
	return nil
}

// List implements store.Lister with a cursor: it seeks to the first key of the page and reads
// on in key order, so a page costs O(log n + its records), expired ones included.
func (s *Store) List(ctx context.Context, prefix, after string, limit int) (store.Page, error) {
	limit, err := kit.ReadyList(ctx, s.closed.Load(), prefix, after, limit)
	if err != nil {
		return store.Page{}, fmt.Errorf("bolt: list: %w", err)
	}
	span := kit.ListRange(prefix, after)
	if span.Empty {
		return store.Page{}, nil
	}
	now := s.now()
	var out store.Page
	err = s.db.View(func(tx *bbolt.Tx) error {
		page := kit.NewPage(limit)
		c := tx.Bucket([]byte(bucket)).Cursor()
		k, v := c.Seek([]byte(span.From))
		if span.Exclusive && k != nil && string(k) == span.From {
			k, v = c.Next()
		}
		for ; k != nil && span.In(string(k)); k, v = c.Next() {
			rec, expires, err := decode(v)
			if err != nil {
				return fmt.Errorf("record %q in %s: %w", k, bucket, err)
			}
			if !kit.Live(expires, now) {
				continue
			}
			if !page.Add(string(k), rec) {
				next, _ := c.Next()
				out = page.Done(string(k), next != nil && span.In(string(next)))
				return nil
			}
		}
		out = page.Done("", false)
		return nil
	})
	if err != nil {
		return store.Page{}, fmt.Errorf("bolt: list: %w", closedErr(err))
	}
	return out, nil
}

// MaxValueSize implements store.Store.
func (s *Store) MaxValueSize() int { return MaxValueSize }

// Exclusive reports true: the file is locked by the one process that opened it.
func (s *Store) Exclusive() bool { return true }

var _ store.Exclusive = (*Store)(nil)

// Close implements store.Store and releases the file.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("bolt: close %s: %w", s.path, err)
	}
	return nil
}

func (s *Store) ready(ctx context.Context, key string) error {
	return kit.Ready(ctx, s.closed.Load(), key)
}

func (s *Store) view(ctx context.Context, key string, fn func(*bbolt.Bucket) error) error {
	if err := s.ready(ctx, key); err != nil {
		return err
	}
	return closedErr(s.db.View(func(tx *bbolt.Tx) error { return fn(tx.Bucket([]byte(bucket))) }))
}

func (s *Store) update(ctx context.Context, key string, value []byte, expiresAt time.Time, fn func(*bbolt.Bucket) error) error {
	if err := kit.ReadyWrite(ctx, s.closed.Load(), key, value, MaxValueSize, expiresAt, s.now()); err != nil {
		return err
	}
	return closedErr(s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		if err := fn(b); err != nil {
			return err
		}
		s.reclaim(b)
		return nil
	}))
}

// reclaim deletes the expired records among the next ReclaimBatch of b. It never fails the
// write it rides on: a record it cannot read is left alone (Get reports it), and a failed delete
// ends the pass.
func (s *Store) reclaim(b *bbolt.Bucket) {
	now := s.now()
	c := b.Cursor()
	k, v := c.First()
	if s.reclaimFrom != nil {
		k, v = c.Seek(s.reclaimFrom)
	}
	var expired [][]byte
	for range ReclaimBatch {
		if k == nil {
			break
		}
		if len(v) >= headerSize && !kit.Live(int64(binary.BigEndian.Uint64(v[8:16])), now) {
			expired = append(expired, bytes.Clone(k))
		}
		k, v = c.Next()
	}
	s.reclaimFrom = bytes.Clone(k) // nil at the end: the next pass starts over
	for _, k := range expired {
		if b.Delete(k) != nil {
			return
		}
	}
}

// live decodes the record under key, copying it out of the transaction's memory, and reports
// whether it is live.
func (s *Store) live(b *bbolt.Bucket, key string) (store.Record, bool, error) {
	raw := b.Get([]byte(key))
	if raw == nil {
		return store.Record{}, false, nil
	}
	rec, expires, err := decode(raw)
	if err != nil {
		return store.Record{}, false, fmt.Errorf("record %q in %s: %w", key, bucket, err)
	}
	if !kit.Live(expires, s.now()) {
		return store.Record{}, false, nil
	}
	return rec, true, nil
}

func put(b *bbolt.Bucket, key string, value []byte, expiresAt time.Time) (store.Record, error) {
	rec := store.Record{Value: kit.Clone(value), Version: kit.NewVersion(), ExpiresAt: kit.Time(kit.Millis(expiresAt))}
	if err := b.Put([]byte(key), encode(rec)); err != nil {
		return store.Record{}, err
	}
	return rec, nil
}

func encode(r store.Record) []byte {
	buf := make([]byte, headerSize+len(r.Value))
	binary.BigEndian.PutUint64(buf[0:8], r.Version)
	binary.BigEndian.PutUint64(buf[8:16], uint64(kit.Millis(r.ExpiresAt)))
	copy(buf[headerSize:], r.Value)
	return buf
}

// errCorrupt marks bytes in the file that are not a record this package wrote.
var errCorrupt = errors.New("corrupt record")

// decode parses a stored record; raw comes from the file, so it is checked, never trusted.
func decode(raw []byte) (rec store.Record, expiresMs int64, err error) {
	if len(raw) < headerSize {
		return store.Record{}, 0, fmt.Errorf("%w: %d bytes, shorter than its %d-byte header", errCorrupt, len(raw), headerSize)
	}
	version := binary.BigEndian.Uint64(raw[0:8])
	if version == 0 || version >= 1<<63 {
		return store.Record{}, 0, fmt.Errorf("%w: version %d out of range", errCorrupt, version)
	}
	expiresMs = int64(binary.BigEndian.Uint64(raw[8:16]))
	rec = store.Record{Value: kit.Clone(raw[headerSize:]), Version: version, ExpiresAt: kit.Time(expiresMs)}
	return rec, expiresMs, nil
}

// closedErr maps bbolt's "database not open" to store.ErrClosed: a Close raced the call.
func closedErr(err error) error {
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		return store.ErrClosed
	}
	return err
}
