package memory

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/internal/kit"
)

// The memory store's logs live in this process only: a controller on the memory store serves the
// effects of its own instance, and a restart starts every log afresh (with a new epoch, so
// readers holding old positions are told their events were lost).

var (
	_ store.Log            = (*Store)(nil)
	_ store.UpdateAppender = (*Store)(nil)
)

// logs holds the store's logs; its own mutex keeps appends off the records' lock.
type logs struct {
	mu    sync.Mutex
	m     map[string]*memLog
	heads kit.Heads
}

// memLog is one log: entries numbered first, first+1, ... last, oldest first, holding bytes of
// data.
type memLog struct {
	epoch   string
	first   uint64
	last    uint64
	entries []store.LogEntry
	bytes   int64
}

// AppendLog implements store.Log. Retention is applied whole at every append (an in-process
// trim costs nothing worth bounding).
func (s *Store) AppendLog(ctx context.Context, name string, data []byte, keep store.Retention) (store.LogPosition, error) {
	if err := s.logReady(ctx); err != nil {
		return store.LogPosition{}, fmt.Errorf("memory: append log: %w", err)
	}
	if err := kit.CheckAppend(name, data, s.maxSize, keep); err != nil {
		return store.LogPosition{}, fmt.Errorf("memory: append log: %w", err)
	}
	l := &s.logs
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.appendLocked(name, data, keep, s.now()), nil
}

// appendLocked appends under l.mu.
func (l *logs) appendLocked(name string, data []byte, keep store.Retention, now time.Time) store.LogPosition {
	if l.m == nil {
		l.m = make(map[string]*memLog)
	}
	lg := l.m[name]
	if lg == nil {
		lg = &memLog{epoch: kit.NewEpoch(), first: 1}
		l.m[name] = lg
	}
	lg.last++
	lg.entries = append(lg.entries, store.LogEntry{Seq: lg.last, At: kit.Time(now.UnixMilli()), Data: kit.Clone(data)})
	lg.bytes += int64(len(data))
	lg.trim(keep, kit.Cutoff(keep, now))
	// Under l.mu, so that a watch starting concurrently never sees positions go backwards.
	l.heads.Observe(name, lg.epoch, lg.last)
	return store.LogPosition{Epoch: lg.epoch, Seq: lg.last}
}

// UpdateAppend implements store.UpdateAppender: the record's lock, then the logs' (AppendLog
// takes only the latter, so the two never wait on each other in opposite orders).
func (s *Store) UpdateAppend(ctx context.Context, key string, version uint64, value []byte, expiresAt time.Time,
	name string, data []byte, keep store.Retention) (store.Record, error) {
	if err := s.beginWrite(ctx, key, value, expiresAt); err != nil {
		return store.Record{}, fmt.Errorf("memory: update append: %w", err)
	}
	if err := kit.CheckAppend(name, data, s.maxSize, keep); err != nil {
		return store.Record{}, fmt.Errorf("memory: update append: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.Record{}, fmt.Errorf("memory: update append: %w", store.ErrClosed)
	}
	e, ok := s.live(key)
	switch {
	case !ok:
		return store.Record{}, fmt.Errorf("memory: update append: %w", store.ErrNotFound)
	case e.version != version:
		return store.Record{}, fmt.Errorf("memory: update append: %w", store.ErrConflict)
	}
	e = s.put(key, value, expiresAt)
	s.logs.mu.Lock()
	s.logs.appendLocked(name, data, keep, s.now())
	s.logs.mu.Unlock()
	return e.record(), nil
}

// trim drops the entries keep no longer allows, oldest first (never the newest by its size).
func (lg *memLog) trim(keep store.Retention, cutoff int64) {
	n := 0
	for n < len(lg.entries) && ((keep.MaxCount > 0 && len(lg.entries)-n > keep.MaxCount) || lg.entries[n].At.UnixMilli() < cutoff ||
		(keep.MaxBytes > 0 && lg.bytes > keep.MaxBytes && n < len(lg.entries)-1)) {
		lg.bytes -= int64(len(lg.entries[n].Data))
		n++
	}
	if n == 0 {
		return
	}
	clear(lg.entries[:n]) // release the data
	lg.entries = lg.entries[n:]
	lg.first += uint64(n)
}

// ReadLog implements store.Log.
func (s *Store) ReadLog(ctx context.Context, name string, after uint64, limit int) (store.LogRange, error) {
	if err := s.logReady(ctx); err != nil {
		return store.LogRange{}, fmt.Errorf("memory: read log: %w", err)
	}
	limit, err := kit.CheckRead(name, limit)
	if err != nil {
		return store.LogRange{}, fmt.Errorf("memory: read log: %w", err)
	}
	l := &s.logs
	l.mu.Lock()
	defer l.mu.Unlock()
	lg := l.m[name]
	if lg == nil {
		return store.LogRange{First: 1, Through: after}, nil
	}
	r := store.LogRange{Epoch: lg.epoch, First: lg.first, Last: lg.last, Through: after}
	if limit == 0 {
		return r, nil
	}
	start := 0
	if after >= lg.first {
		start = int(min(after-lg.first+1, uint64(len(lg.entries))))
	}
	end := min(start+limit, len(lg.entries))
	var lastRead uint64
	if end > start {
		r.Entries = make([]store.LogEntry, end-start)
		for i, e := range lg.entries[start:end] {
			r.Entries[i] = store.LogEntry{Seq: e.Seq, At: e.At, Data: kit.Clone(e.Data)}
		}
		lastRead = r.Entries[len(r.Entries)-1].Seq
	}
	r.Through = kit.Through(after, lastRead, lg.first, lg.last)
	return r, nil
}

// WaitLog implements store.Log: appends in this process wake the waiters directly.
func (s *Store) WaitLog(ctx context.Context, name string, after uint64) error {
	if err := s.logReady(ctx); err != nil {
		return fmt.Errorf("memory: wait log: %w", err)
	}
	if err := kit.CheckLogName(name); err != nil {
		return fmt.Errorf("memory: wait log: %w", err)
	}
	l := &s.logs
	err := l.heads.Wait(ctx, name, after, kit.Watch{Start: func(name string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if lg := l.m[name]; lg != nil {
			l.heads.Observe(name, lg.epoch, lg.last)
		} else {
			l.heads.Observe(name, "", 0)
		}
	}})
	if err != nil {
		return fmt.Errorf("memory: wait log: %w", err)
	}
	return nil
}

func (s *Store) logReady(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return store.ErrClosed
	}
	return nil
}
