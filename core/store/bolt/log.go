package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/internal/kit"
)

// Logs (store.Log) live in the same file, beside the records:
//
//	bucket "svz.log.heads.v1": log name → 8-byte big-endian last position, then the epoch
//	bucket "svz.log.v1" / log name: 8-byte big-endian position → 8-byte big-endian append time
//	                                 in Unix milliseconds, then the data
//	bucket "svz.log.bytes.v1": log name → 8-byte big-endian bytes of data the log keeps (for
//	                           the byte bound; a file written before it was kept counts its log
//	                           once, at its next append)
//
// One process holds the file, so the bolt store serves one instance: appends wake the waiters of
// the same process directly. Each append deletes up to LogReclaimBatch entries that retention no
// longer allows, in its own transaction (no extra fsync).

var (
	_ store.Log            = (*Store)(nil)
	_ store.UpdateAppender = (*Store)(nil)
)

const (
	logsBucket  = "svz.log.v1"
	headsBucket = "svz.log.heads.v1"
	bytesBucket = "svz.log.bytes.v1"
)

// LogReclaimBatch bounds the entries one append deletes.
const LogReclaimBatch = 64

// AppendLog implements store.Log.
func (s *Store) AppendLog(ctx context.Context, name string, data []byte, keep store.Retention) (store.LogPosition, error) {
	if err := s.logReady(ctx); err != nil {
		return store.LogPosition{}, fmt.Errorf("bolt: append log: %w", err)
	}
	if err := kit.CheckAppend(name, data, MaxValueSize, keep); err != nil {
		return store.LogPosition{}, fmt.Errorf("bolt: append log: %w", err)
	}
	now := s.now()
	var pos store.LogPosition
	err := s.db.Update(func(tx *bbolt.Tx) (err error) {
		pos, err = appendTx(tx, name, data, keep, now)
		return err
	})
	if err != nil {
		return store.LogPosition{}, fmt.Errorf("bolt: append log: %w", closedErr(err))
	}
	s.logs.Observe(name, pos.Epoch, pos.Seq)
	return pos, nil
}

// UpdateAppend implements store.UpdateAppender: the update and the append in one transaction.
func (s *Store) UpdateAppend(ctx context.Context, key string, version uint64, value []byte, expiresAt time.Time,
	name string, data []byte, keep store.Retention) (store.Record, error) {
	if err := kit.CheckAppend(name, data, MaxValueSize, keep); err != nil {
		return store.Record{}, fmt.Errorf("bolt: update append: %w", err)
	}
	var (
		rec store.Record
		pos store.LogPosition
	)
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
		if rec, err = put(b, key, value, expiresAt); err != nil {
			return err
		}
		pos, err = appendTx(b.Tx(), name, data, keep, s.now())
		return err
	})
	if err != nil {
		return store.Record{}, fmt.Errorf("bolt: update append: %w", err)
	}
	s.logs.Observe(name, pos.Epoch, pos.Seq)
	return rec, nil
}

// appendTx appends within tx.
func appendTx(tx *bbolt.Tx, name string, data []byte, keep store.Retention, now time.Time) (store.LogPosition, error) {
	heads, err := tx.CreateBucketIfNotExists([]byte(headsBucket))
	if err != nil {
		return store.LogPosition{}, err
	}
	root, err := tx.CreateBucketIfNotExists([]byte(logsBucket))
	if err != nil {
		return store.LogPosition{}, err
	}
	b, err := root.CreateBucketIfNotExists([]byte(name))
	if err != nil {
		return store.LogPosition{}, err
	}
	sizes, err := tx.CreateBucketIfNotExists([]byte(bytesBucket))
	if err != nil {
		return store.LogPosition{}, err
	}
	epoch, last, err := decodeHead(heads.Get([]byte(name)))
	if err != nil {
		return store.LogPosition{}, fmt.Errorf("log %q: %w", name, err)
	}
	if epoch == "" {
		epoch = kit.NewEpoch()
	}
	kept, err := keptBytes(sizes, b, name)
	if err != nil {
		return store.LogPosition{}, err
	}
	last++
	entry := make([]byte, 8+len(data))
	binary.BigEndian.PutUint64(entry, uint64(now.UnixMilli()))
	copy(entry[8:], data)
	if err := b.Put(seqKey(last), entry); err != nil {
		return store.LogPosition{}, err
	}
	if err := heads.Put([]byte(name), encodeHead(epoch, last)); err != nil {
		return store.LogPosition{}, err
	}
	kept, err = trimLog(b, last, kept+int64(len(data)), keep, kit.Cutoff(keep, now))
	if err != nil {
		return store.LogPosition{}, err
	}
	return store.LogPosition{Epoch: epoch, Seq: last}, sizes.Put([]byte(name), binary.BigEndian.AppendUint64(nil, uint64(kept)))
}

// keptBytes returns the bytes of data the log name keeps: as recorded, or counted from its
// entries when none is (a file written before they were recorded).
func keptBytes(sizes, b *bbolt.Bucket, name string) (int64, error) {
	if v := sizes.Get([]byte(name)); v != nil {
		if len(v) != 8 {
			return 0, fmt.Errorf("log %q: %w: kept bytes of %d bytes", name, errCorrupt, len(v))
		}
		return int64(binary.BigEndian.Uint64(v)), nil
	}
	var n int64
	err := b.ForEach(func(_, v []byte) error {
		n += int64(max(len(v)-8, 0))
		return nil
	})
	return n, err
}

// trimLog deletes, oldest first, up to LogReclaimBatch entries beyond keep (the newest, last, is
// never deleted for its size), from a log keeping kept bytes of data, and returns what it keeps
// then. Keys are collected first: a bbolt cursor skips a key when Next follows Delete.
func trimLog(b *bbolt.Bucket, last uint64, kept int64, keep store.Retention, cutoff int64) (int64, error) {
	var gone [][]byte
	c := b.Cursor()
	for k, v := c.First(); len(k) == 8 && len(gone) < LogReclaimBatch; k, v = c.Next() {
		seq := binary.BigEndian.Uint64(k)
		overCount := keep.MaxCount > 0 && last-seq >= uint64(keep.MaxCount)
		tooOld := len(v) >= 8 && int64(binary.BigEndian.Uint64(v)) < cutoff
		overBytes := keep.MaxBytes > 0 && kept > keep.MaxBytes && seq < last
		if !overCount && !tooOld && !overBytes {
			break
		}
		gone = append(gone, bytes.Clone(k))
		kept -= int64(max(len(v)-8, 0))
	}
	for _, k := range gone {
		if err := b.Delete(k); err != nil {
			return 0, err
		}
	}
	return kept, nil
}

// ReadLog implements store.Log.
func (s *Store) ReadLog(ctx context.Context, name string, after uint64, limit int) (store.LogRange, error) {
	if err := s.logReady(ctx); err != nil {
		return store.LogRange{}, fmt.Errorf("bolt: read log: %w", err)
	}
	limit, err := kit.CheckRead(name, limit)
	if err != nil {
		return store.LogRange{}, fmt.Errorf("bolt: read log: %w", err)
	}
	r := store.LogRange{First: 1, Through: after}
	err = s.db.View(func(tx *bbolt.Tx) error {
		heads := tx.Bucket([]byte(headsBucket))
		root := tx.Bucket([]byte(logsBucket))
		if heads == nil || root == nil {
			return nil
		}
		epoch, last, err := decodeHead(heads.Get([]byte(name)))
		if err != nil || epoch == "" {
			return err
		}
		b := root.Bucket([]byte(name))
		if b == nil {
			return fmt.Errorf("log %q: %w: a head without entries", name, errCorrupt)
		}
		r.Epoch, r.Last, r.First = epoch, last, last+1
		c := b.Cursor()
		if k, _ := c.First(); len(k) == 8 {
			r.First = binary.BigEndian.Uint64(k)
		}
		if limit == 0 || after >= last {
			return nil
		}
		var lastRead uint64
		for k, v := c.Seek(seqKey(after + 1)); len(k) == 8 && len(r.Entries) < limit; k, v = c.Next() {
			if len(v) < 8 {
				return fmt.Errorf("log %q entry %d: %w: %d bytes", name, binary.BigEndian.Uint64(k), errCorrupt, len(v))
			}
			lastRead = binary.BigEndian.Uint64(k)
			r.Entries = append(r.Entries, store.LogEntry{
				Seq: lastRead, At: kit.Time(int64(binary.BigEndian.Uint64(v))), Data: kit.Clone(v[8:]),
			})
		}
		r.Through = kit.Through(after, lastRead, r.First, r.Last)
		return nil
	})
	if err != nil {
		return store.LogRange{}, fmt.Errorf("bolt: read log: %w", closedErr(err))
	}
	return r, nil
}

// WaitLog implements store.Log: only this process writes the file, so its appends wake the
// waiters directly.
func (s *Store) WaitLog(ctx context.Context, name string, after uint64) error {
	if err := s.logReady(ctx); err != nil {
		return fmt.Errorf("bolt: wait log: %w", err)
	}
	if err := kit.CheckLogName(name); err != nil {
		return fmt.Errorf("bolt: wait log: %w", err)
	}
	err := s.logs.Wait(ctx, name, after, kit.Watch{Start: func(name string) {
		if r, err := s.ReadLog(context.WithoutCancel(ctx), name, 0, 0); err == nil {
			s.logs.Observe(name, r.Epoch, r.Last)
		} else {
			s.logs.Observe(name, "", 0) // the next append will tell
		}
	}})
	if err != nil {
		return fmt.Errorf("bolt: wait log: %w", err)
	}
	return nil
}

func (s *Store) logReady(ctx context.Context) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return ctx.Err()
}

func seqKey(seq uint64) []byte {
	k := make([]byte, 8)
	binary.BigEndian.PutUint64(k, seq)
	return k
}

func encodeHead(epoch string, last uint64) []byte {
	v := make([]byte, 8+len(epoch))
	binary.BigEndian.PutUint64(v, last)
	copy(v[8:], epoch)
	return v
}

// decodeHead parses a head from the file; nil is a log never appended to.
func decodeHead(v []byte) (epoch string, last uint64, err error) {
	if v == nil {
		return "", 0, nil
	}
	if len(v) < 9 {
		return "", 0, fmt.Errorf("%w: log head of %d bytes", errCorrupt, len(v))
	}
	return string(v[8:]), binary.BigEndian.Uint64(v), nil
}
