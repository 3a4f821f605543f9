// Package memory is the in-process store.Store: a map behind a mutex, for tests and for a single
// process that may lose its state on exit. It honours the whole store contract, including expiry
// against an injectable clock.
package memory

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/internal/kit"
)

// DefaultMaxValueSize is the value limit unless WithMaxValueSize says otherwise.
const DefaultMaxValueSize = 1 << 20

// Store keeps records in memory.
type Store struct {
	now     func() time.Time
	maxSize int

	mu      sync.RWMutex
	records map[string]entry
	sweepAt int // sweep expired records when the map grows past this size
	closed  bool

	logs logs // store.Log, in log.go
}

type entry struct {
	value   []byte
	version uint64
	expires int64 // Unix ms
}

var (
	_ store.Store  = (*Store)(nil)
	_ store.Lister = (*Store)(nil)
)

// Option configures a Store.
type Option func(*Store)

// WithClock makes the store read the time from now instead of time.Now.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// WithMaxValueSize sets the value limit in bytes (default DefaultMaxValueSize), so tests can
// exercise a caller's handling of store.ErrTooLarge cheaply.
func WithMaxValueSize(n int) Option { return func(s *Store) { s.maxSize = n } }

// New returns an empty Store.
func New(opts ...Option) *Store {
	s := &Store{now: time.Now, maxSize: DefaultMaxValueSize, records: make(map[string]entry), sweepAt: minSweep}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key string) (store.Record, error) {
	if err := s.begin(ctx, key); err != nil {
		return store.Record{}, fmt.Errorf("memory: get: %w", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return store.Record{}, fmt.Errorf("memory: get: %w", store.ErrClosed)
	}
	e, ok := s.live(key)
	if !ok {
		return store.Record{}, fmt.Errorf("memory: get: %w", store.ErrNotFound)
	}
	return e.record(), nil
}

// Create implements store.Store.
func (s *Store) Create(ctx context.Context, key string, value []byte, expiresAt time.Time) (store.Record, error) {
	if err := s.beginWrite(ctx, key, value, expiresAt); err != nil {
		return store.Record{}, fmt.Errorf("memory: create: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.Record{}, fmt.Errorf("memory: create: %w", store.ErrClosed)
	}
	if e, ok := s.live(key); ok {
		return e.record(), fmt.Errorf("memory: create: %w", store.ErrExists)
	}
	e := s.put(key, value, expiresAt)
	return e.record(), nil
}

// Update implements store.Store.
func (s *Store) Update(ctx context.Context, key string, version uint64, value []byte, expiresAt time.Time) (store.Record, error) {
	if err := s.beginWrite(ctx, key, value, expiresAt); err != nil {
		return store.Record{}, fmt.Errorf("memory: update: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.Record{}, fmt.Errorf("memory: update: %w", store.ErrClosed)
	}
	e, ok := s.live(key)
	switch {
	case !ok:
		return store.Record{}, fmt.Errorf("memory: update: %w", store.ErrNotFound)
	case e.version != version:
		return store.Record{}, fmt.Errorf("memory: update: %w", store.ErrConflict)
	}
	e = s.put(key, value, expiresAt)
	return e.record(), nil
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, key string, version uint64) error {
	if err := s.begin(ctx, key); err != nil {
		return fmt.Errorf("memory: delete: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("memory: delete: %w", store.ErrClosed)
	}
	if e, ok := s.live(key); ok && e.version != version {
		return fmt.Errorf("memory: delete: %w", store.ErrConflict)
	}
	delete(s.records, key)
	return nil
}

// List implements store.Lister. It scans and sorts the matching keys on every page: O(n log n)
// in the records under prefix, fine for tests and small local state.
func (s *Store) List(ctx context.Context, prefix, after string, limit int) (store.Page, error) {
	limit, err := kit.ReadyList(ctx, false, prefix, after, limit)
	if err != nil {
		return store.Page{}, fmt.Errorf("memory: list: %w", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return store.Page{}, fmt.Errorf("memory: list: %w", store.ErrClosed)
	}
	now := s.now()
	span := kit.ListRange(prefix, after)
	var keys []string
	for k, e := range s.records {
		if span.In(k) && kit.Live(e.expires, now) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	page := kit.NewPage(limit)
	for i, k := range keys {
		if !page.Add(k, s.records[k].record()) {
			return page.Done(k, i < len(keys)-1), nil
		}
	}
	return page.Done("", false), nil
}

// MaxValueSize implements store.Store.
func (s *Store) MaxValueSize() int { return s.maxSize }

// Close implements store.Store and drops every record.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.records = nil
	return nil
}

func (s *Store) begin(ctx context.Context, key string) error { return kit.Ready(ctx, false, key) }

func (s *Store) beginWrite(ctx context.Context, key string, value []byte, expiresAt time.Time) error {
	return kit.ReadyWrite(ctx, false, key, value, s.maxSize, expiresAt, s.now())
}

// live returns the record under key if it has not expired. The caller holds s.mu.
func (s *Store) live(key string) (entry, bool) {
	e, ok := s.records[key]
	if !ok || !kit.Live(e.expires, s.now()) {
		return entry{}, false
	}
	return e, true
}

// put writes a new version of key. The caller holds s.mu for writing.
func (s *Store) put(key string, value []byte, expiresAt time.Time) entry {
	e := entry{value: kit.Clone(value), version: kit.NewVersion(), expires: kit.Millis(expiresAt)}
	s.records[key] = e
	if len(s.records) >= s.sweepAt {
		s.sweep()
	}
	return e
}

// minSweep is the map size below which expired records are left in place.
const minSweep = 1024

// sweep drops expired records so a long-lived process does not grow without bound. Doubling the
// threshold keeps the cost amortised O(1) per write. The caller holds s.mu for writing.
func (s *Store) sweep() {
	now := s.now()
	for k, e := range s.records {
		if !kit.Live(e.expires, now) {
			delete(s.records, k)
		}
	}
	s.sweepAt = max(minSweep, 2*len(s.records))
}

func (e entry) record() store.Record {
	return store.Record{Value: kit.Clone(e.value), Version: e.version, ExpiresAt: kit.Time(e.expires)}
}
