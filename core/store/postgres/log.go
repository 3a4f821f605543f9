package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/internal/kit"
)

// Logs (store.Log) live in two tables beside the store's, created with it:
//
//	CREATE TABLE svz_store_log_head (
//	    name   text   PRIMARY KEY,
//	    epoch  text   NOT NULL,
//	    seq    bigint NOT NULL,             -- the newest position
//	    nbytes bigint NOT NULL DEFAULT 0    -- bytes of data ever appended
//	);
//	CREATE TABLE svz_store_log (
//	    name   text   NOT NULL,
//	    seq    bigint NOT NULL,
//	    at_ms  bigint NOT NULL,             -- append time, Unix milliseconds
//	    data   bytea  NOT NULL,
//	    start  bigint NOT NULL DEFAULT 0,   -- the head's nbytes before this entry
//	    PRIMARY KEY (name, seq)
//	);
//
// (nbytes and start were added later: setup adds them to older tables, whose entries then count
// from 0 and go once MaxBytes of newer data are appended.)
//
// An append is one statement, hence one round trip: it increments the head row, inserts the
// entry at the new position, deletes up to LogReclaimBatch entries retention no longer allows
// (oldest first, through the primary key; for the byte bound, those whose start is more than
// MaxBytes behind the head's nbytes) and sends a notification. The head row's lock is held
// until commit, so positions are given in commit order: a reader never sees position n+1 before
// n. The notification (pg_notify, delivered at commit) carries "<position> <epoch> <name>" on a
// channel named after the table; each process that waits keeps one connection listening on it.
// A read is one statement too, on one snapshot: the head, the oldest kept position and the
// entries.

var (
	_ store.Log            = (*Store)(nil)
	_ store.UpdateAppender = (*Store)(nil)
)

// LogReclaimBatch bounds the entries one append deletes.
const LogReclaimBatch = 64

// pgLog is the log state of a Store.
type pgLog struct {
	log, head string // quoted table names
	channel   string // notification channel (an identifier, unquoted)

	sqlAppend, sqlRead, sqlHead string

	heads kit.Heads

	mu        sync.Mutex
	watched   int                // logs with waiters
	stop      context.CancelFunc // stops the listener; nil when none runs
	listening bool               // the listener has run LISTEN on its current connection
}

// newLog derives the log's table names from the store's table name (already checked by
// quoteTable): "<table>_log" and "<table>_log_head", shortened with a hash past 63 bytes.
func newLog(table string) *pgLog {
	parts := strings.Split(table, ".")
	base := parts[len(parts)-1]
	name := func(suffix string) string {
		n := base + suffix
		if len(n) > 63 {
			sum := sha256.Sum256([]byte(base))
			n = base[:63-len(suffix)-9] + "_" + hex.EncodeToString(sum[:4]) + suffix
		}
		q := append(append([]string(nil), parts[:len(parts)-1]...), n)
		return pgx.Identifier(q).Sanitize()
	}
	sum := sha256.Sum256([]byte(table))
	l := &pgLog{log: name("_log"), head: name("_log_head"), channel: "svz_log_" + hex.EncodeToString(sum[:8])}
	// $1 name, $2 epoch of a new log, $3 at_ms, $4 data, $5 count bound, $6 cutoff_ms, $7 byte
	// bound, $8 channel. gc reads the head's new position from h, so the head row is locked before
	// any entry is: two appends never wait on each other in opposite orders.
	l.sqlAppend = `WITH ` + l.appendCTEs("VALUES ($1, $2, 1, octet_length($4::bytea))", 1) + `
		SELECT h.epoch, h.seq, (SELECT count(*) FROM gc),
			(SELECT count(*) FROM (SELECT pg_notify($8, h.seq || ' ' || h.epoch || ' ' || $1)) n)
		FROM h, ins`
	// $1 name, $2 after, $3 limit. No row: a log never appended to.
	l.sqlRead = `SELECT h.epoch, h.seq, coalesce((SELECT min(seq) FROM ` + l.log + ` WHERE name = $1), h.seq + 1),
			e.seq, e.at_ms, e.data
		FROM ` + l.head + ` h LEFT JOIN LATERAL (
			SELECT seq, at_ms, data FROM ` + l.log + ` WHERE name = $1 AND seq > $2 ORDER BY seq LIMIT $3
		) e ON true
		WHERE h.name = $1 ORDER BY e.seq`
	l.sqlHead = `SELECT epoch, seq FROM ` + l.head + ` WHERE name = $1`
	return l
}

// appendCTEs are an append's common table expressions h (the head, moved on from the row source
// gives: name, epoch, 1, the data's length), ins (the entry), old and gc (retention), with the
// append's parameters numbered from p: $p name, $p+1 epoch of a new log, $p+2 at_ms, $p+3 data,
// $p+4 count bound, $p+5 cutoff_ms, $p+6 byte bound. gc reads the head's new position from h,
// so the head row is locked before any entry is. The new entry is not among old (the statement's
// snapshot precedes it): the byte bound never deletes it.
func (l *pgLog) appendCTEs(source string, p int) string {
	arg := func(i int) string { return "$" + strconv.Itoa(p+i) }
	return `h AS (
			INSERT INTO ` + l.head + ` AS hd (name, epoch, seq, nbytes) ` + source + `
			ON CONFLICT (name) DO UPDATE SET seq = hd.seq + 1, nbytes = hd.nbytes + EXCLUDED.nbytes
			RETURNING epoch, seq, nbytes
		), ins AS (
			INSERT INTO ` + l.log + ` (name, seq, at_ms, data, start) SELECT ` + arg(0) + `, h.seq, ` + arg(2) + `, ` + arg(3) + `,
				h.nbytes - octet_length(` + arg(3) + `::bytea) FROM h RETURNING seq
		), old AS (
			SELECT seq, at_ms, start FROM ` + l.log + ` WHERE name = ` + arg(0) + ` ORDER BY seq LIMIT ` + strconv.Itoa(LogReclaimBatch) + `
		), gc AS (
			DELETE FROM ` + l.log + ` WHERE name = ` + arg(0) + ` AND seq IN (
				SELECT o.seq FROM old o, h WHERE o.seq <= h.seq - ` + arg(4) + `
					OR o.seq < coalesce((SELECT min(p.seq) FROM old p WHERE p.at_ms >= ` + arg(5) + `), h.seq)
					OR o.start < h.nbytes - ` + arg(6) + `)
			RETURNING 1
		)`
}

// setupLog creates the log tables if they do not exist and checks their columns, inside the
// store's setup transaction.
func (l *pgLog) setupLog(ctx context.Context, tx pgx.Tx) error {
	stmts := []string{
		`CREATE TABLE IF NOT EXISTS ` + l.head + ` (name text PRIMARY KEY, epoch text NOT NULL, seq bigint NOT NULL,
			nbytes bigint NOT NULL DEFAULT 0)`,
		`CREATE TABLE IF NOT EXISTS ` + l.log + ` (name text NOT NULL, seq bigint NOT NULL, at_ms bigint NOT NULL,
			data bytea NOT NULL, start bigint NOT NULL DEFAULT 0, PRIMARY KEY (name, seq))`,
		// Tables created before the byte bound (a constant default: no rewrite of the table).
		`ALTER TABLE ` + l.head + ` ADD COLUMN IF NOT EXISTS nbytes bigint NOT NULL DEFAULT 0`,
		`ALTER TABLE ` + l.log + ` ADD COLUMN IF NOT EXISTS start bigint NOT NULL DEFAULT 0`,
		`SELECT name, epoch, seq, nbytes FROM ` + l.head + ` LIMIT 0`,
		`SELECT name, seq, at_ms, data, start FROM ` + l.log + ` LIMIT 0`,
	}
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			return fmt.Errorf("log tables %s and %s: %w", l.head, l.log, err)
		}
	}
	return nil
}

// AppendLog implements store.Log in one round trip.
func (s *Store) AppendLog(ctx context.Context, name string, data []byte, keep store.Retention) (store.LogPosition, error) {
	if err := s.logReady(ctx); err != nil {
		return store.LogPosition{}, fmt.Errorf("postgres: append log: %w", err)
	}
	if err := kit.CheckAppend(name, data, MaxValueSize, keep); err != nil {
		return store.LogPosition{}, fmt.Errorf("postgres: append log: %w", err)
	}
	now := s.now()
	count, bytes := bounds(keep)
	var (
		p              store.LogPosition
		seq, gone, sig int64
	)
	err := s.pool.QueryRow(ctx, s.log.sqlAppend, name, kit.NewEpoch(), now.UnixMilli(), nonNil(data), count,
		kit.Cutoff(keep, now), bytes, s.log.channel).Scan(&p.Epoch, &seq, &gone, &sig)
	if err != nil {
		return store.LogPosition{}, fmt.Errorf("postgres: append log: %w", err)
	}
	p.Seq = uint64(seq)
	s.log.heads.Observe(name, p.Epoch, p.Seq)
	return p, nil
}

// bounds returns keep's count and byte bounds as the append's parameters: 2^62 for none.
func bounds(keep store.Retention) (count, bytes int64) {
	count, bytes = 1<<62, 1<<62
	if keep.MaxCount > 0 {
		count = int64(keep.MaxCount)
	}
	if keep.MaxBytes > 0 {
		bytes = keep.MaxBytes
	}
	return count, bytes
}

// updateAppendSQL is Update's statement and the append's in one: the append's head row is
// written only from the row the update returns, so both happen or neither. Row locks are taken
// record, then head, then entries (an append takes head, then entries): no two statements wait
// on each other in opposite orders.
//
// $1 key, $2 version, $3 value, $4 new version, $5 expires_ms, $6 now_ms; $7 name, $8 epoch of
// a new log, $9 at_ms, $10 data, $11 count bound, $12 cutoff_ms, $13 byte bound, $14 channel.
func (l *pgLog) updateAppendSQL(table string) string {
	return `WITH cur AS (SELECT version, expires_ms FROM ` + table + ` WHERE key = $1),
		upd AS (UPDATE ` + table + ` SET value = $3, version = $4, expires_ms = $5
			WHERE key = $1 AND version = $2 AND expires_ms > $6 RETURNING 1),
		` + l.appendCTEs("SELECT $7, $8, 1, octet_length($10::bytea) FROM upd", 7) + `
		SELECT EXISTS (SELECT 1 FROM upd), (SELECT version FROM cur), (SELECT expires_ms FROM cur),
			(SELECT epoch FROM h), (SELECT seq FROM h), (SELECT count(*) FROM gc),
			(SELECT count(*) FROM (SELECT pg_notify($14, h.seq || ' ' || h.epoch || ' ' || $7) FROM h, ins) n)`
}

// UpdateAppend implements store.UpdateAppender in one round trip. Like Update, it is sent again
// when its connection broke before the answer: a retry whose first attempt was applied finds
// its own version, writes nothing (so appends nothing) and succeeds.
func (s *Store) UpdateAppend(ctx context.Context, key string, version uint64, value []byte, expiresAt time.Time,
	name string, data []byte, keep store.Retention) (store.Record, error) {
	now := s.now()
	if err := s.readyWrite(ctx, key, value, expiresAt, now); err != nil {
		return store.Record{}, fmt.Errorf("postgres: update append: %w", err)
	}
	if err := kit.CheckAppend(name, data, MaxValueSize, keep); err != nil {
		return store.Record{}, fmt.Errorf("postgres: update append: %w", err)
	}
	ctx, cancel := kit.Bound(ctx, s.timeout)
	defer cancel()
	next := int64(kit.NewVersion())
	count, bytes := bounds(keep)
	var (
		updated                bool
		curVersion, curExpires *int64
		epoch                  *string
		seq                    *int64
		gone, sig              int64
	)
	err := s.retry(ctx, func() error {
		return s.pool.QueryRow(ctx, s.sqlUpdateAppend, key, int64(version), nonNil(value), next, kit.Millis(expiresAt), kit.Millis(now),
			name, kit.NewEpoch(), now.UnixMilli(), nonNil(data), count, kit.Cutoff(keep, now), bytes, s.log.channel).
			Scan(&updated, &curVersion, &curExpires, &epoch, &seq, &gone, &sig)
	})
	switch {
	case err != nil:
		return store.Record{}, fmt.Errorf("postgres: update append: %w", s.timedOut(ctx, err))
	case updated, curVersion != nil && *curVersion == next: // the latter: a retry after the first attempt was applied
		if epoch != nil && seq != nil {
			s.log.heads.Observe(name, *epoch, uint64(*seq))
		}
		return record(kit.Clone(value), next, kit.Millis(expiresAt)), nil
	case curVersion == nil || !kit.Live(*curExpires, now):
		return store.Record{}, fmt.Errorf("postgres: update append: %w", store.ErrNotFound)
	default:
		return store.Record{}, fmt.Errorf("postgres: update append: %w", store.ErrConflict)
	}
}

// ReadLog implements store.Log in one round trip.
func (s *Store) ReadLog(ctx context.Context, name string, after uint64, limit int) (store.LogRange, error) {
	if err := s.logReady(ctx); err != nil {
		return store.LogRange{}, fmt.Errorf("postgres: read log: %w", err)
	}
	limit, err := kit.CheckRead(name, limit)
	if err != nil {
		return store.LogRange{}, fmt.Errorf("postgres: read log: %w", err)
	}
	r := store.LogRange{First: 1, Through: after}
	if after > 1<<62 {
		after = 1 << 62 // beyond any position; keeps the parameter a bigint
	}
	rows, err := s.pool.Query(ctx, s.log.sqlRead, name, int64(after), limit)
	if err != nil {
		return store.LogRange{}, fmt.Errorf("postgres: read log: %w", err)
	}
	var lastRead uint64
	for rows.Next() {
		var (
			epoch       string
			last, first int64
			seq, at     *int64
			data        []byte
		)
		if err := rows.Scan(&epoch, &last, &first, &seq, &at, &data); err != nil {
			rows.Close()
			return store.LogRange{}, fmt.Errorf("postgres: read log: %w", err)
		}
		r.Epoch, r.Last, r.First = epoch, uint64(last), uint64(first)
		if seq != nil {
			lastRead = uint64(*seq)
			r.Entries = append(r.Entries, store.LogEntry{Seq: lastRead, At: kit.Time(*at), Data: nonNil(data)})
		}
	}
	if err := rows.Err(); err != nil {
		return store.LogRange{}, fmt.Errorf("postgres: read log: %w", err)
	}
	if r.Epoch != "" && limit > 0 {
		r.Through = kit.Through(r.Through, lastRead, r.First, r.Last)
	}
	s.log.heads.Observe(name, r.Epoch, r.Last)
	return r, nil
}

// WaitLog implements store.Log: the first waiter of a process starts a listener (one
// connection outside the pool, LISTEN on the table's channel) that lasts while anyone waits.
func (s *Store) WaitLog(ctx context.Context, name string, after uint64) error {
	if err := s.logReady(ctx); err != nil {
		return fmt.Errorf("postgres: wait log: %w", err)
	}
	if err := kit.CheckLogName(name); err != nil {
		return fmt.Errorf("postgres: wait log: %w", err)
	}
	l := s.log
	err := l.heads.Wait(ctx, name, after, kit.Watch{
		Start: func(name string) {
			l.mu.Lock()
			l.watched++
			if l.stop == nil {
				lctx, stop := context.WithCancel(context.Background())
				l.stop = stop
				go s.listen(lctx)
			}
			listening := l.listening
			l.mu.Unlock()
			if listening { // else the listener reads every watched head once it listens
				s.refreshHead(context.WithoutCancel(ctx), name)
			}
		},
		Stop: func(string) {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.watched--; l.watched == 0 && l.stop != nil {
				l.stop()
				l.stop = nil
			}
		},
	})
	if err != nil {
		return fmt.Errorf("postgres: wait log: %w", err)
	}
	return nil
}

// refreshHead reads the head of name and records it.
func (s *Store) refreshHead(ctx context.Context, name string) {
	for attempt := range 3 {
		var (
			epoch string
			seq   int64
		)
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := s.pool.QueryRow(qctx, s.log.sqlHead, name).Scan(&epoch, &seq)
		cancel()
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			s.log.heads.Observe(name, "", 0)
			return
		case err == nil:
			s.log.heads.Observe(name, epoch, uint64(seq))
			return
		case s.closed.Load():
			return
		}
		time.Sleep(time.Duration(attempt+1) * 100 * time.Millisecond)
	}
}

// listen keeps a connection listening on the log channel until ctx ends, reconnecting with
// backoff. After every (re)connection it reads the heads of the watched logs, so nothing
// appended while it was away goes unnoticed.
func (s *Store) listen(ctx context.Context) {
	l := s.log
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig)
		if err == nil {
			if _, err = conn.Exec(ctx, `LISTEN `+l.channel); err == nil {
				backoff = 100 * time.Millisecond
				l.mu.Lock()
				l.listening = true
				l.mu.Unlock()
				for _, name := range l.heads.Names() {
					s.refreshHead(ctx, name)
				}
				for {
					n, err := conn.WaitForNotification(ctx)
					if err != nil {
						break
					}
					if seq, epoch, name, ok := parseNotification(n.Payload); ok {
						l.heads.Observe(name, epoch, seq)
					}
				}
				l.mu.Lock()
				l.listening = false
				l.mu.Unlock()
			}
			_ = conn.Close(context.Background())
		}
		if ctx.Err() != nil || s.closed.Load() {
			return
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// parseNotification reads "<position> <epoch> <name>".
func parseNotification(p string) (seq uint64, epoch, name string, ok bool) {
	s, rest, ok1 := strings.Cut(p, " ")
	epoch, name, ok2 := strings.Cut(rest, " ")
	n, err := strconv.ParseUint(s, 10, 64)
	if !ok1 || !ok2 || err != nil || epoch == "" || name == "" {
		return 0, "", "", false
	}
	return n, epoch, name, true
}

// closeLog stops the listener.
func (s *Store) closeLog() {
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	if s.log.stop != nil {
		s.log.stop()
		s.log.stop = nil
	}
}

func (s *Store) logReady(ctx context.Context) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return ctx.Err()
}
