// Package postgres is the PostgreSQL store.Store, on a pgx/v5 pool. Every operation is one SQL
// statement, hence one round trip, and atomic on its own: no transaction spans two calls.
//
// The table (default "svz_store") and its indexes are created if absent:
//
//	CREATE TABLE svz_store (
//	    key        text COLLATE "C" PRIMARY KEY,  -- byte order, for List
//	    value      bytea  NOT NULL,
//	    version    bigint NOT NULL,  -- random, set on every write
//	    expires_ms bigint NOT NULL   -- Unix milliseconds; live while now < expires_ms
//	);
//	CREATE INDEX svz_store_expires_ms ON svz_store (expires_ms);
//
// A table created by an earlier version, whose key follows the database's collation, gets a
// second index on (key COLLATE "C") instead, so List is an index range scan in byte order either
// way.
//
// Expired rows are ignored by every statement and overwritten by Create. They are also deleted,
// with no sweeper and no extra round trip: every ReclaimEvery-th Create of a Store (its first
// one included, so short-lived instances take part) is a variant of the Create statement that
// also deletes up to ReclaimBatch rows expired for more than SweepGrace, found through the index.
// The grace keeps reclamation invisible to instances whose clocks lag; one such Create at a time
// per table reclaims (the others skip it rather than wait), so reclaiming never blocks or fails a
// write. Values are limited to MaxValueSize bytes.
//
// Every call is bounded by the store timeout (WithTimeout), so an unreachable server fails calls
// instead of holding them. A call whose connection breaks before its answer arrives (the answer
// lost, the server restarted) is sent again, up to Attempts times within that timeout: every
// write is conditional and carries a fresh random version, so a retried Create or Update that
// finds its own version knows its first attempt was applied and succeeds, as it did.
package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/internal/kit"
)

// MaxValueSize is the value limit of the PostgreSQL store.
const MaxValueSize = 1 << 20

// DefaultTable is the table used unless WithTable says otherwise.
const DefaultTable = "svz_store"

// Reclamation of expired rows (see the package documentation).
const (
	// ReclaimEvery: one Create in this many also deletes expired rows.
	ReclaimEvery = 16
	// ReclaimBatch bounds the rows one Create deletes: four times what ReclaimEvery Creates can
	// add, so reclamation keeps up with any write rate.
	ReclaimBatch = 64
	// SweepGrace is how long after its expiry a row is kept: longer than any clock skew between
	// instances, so none of them can see a row disappear while it still counts as live there.
	SweepGrace = time.Minute
)

// Attempts is how many times a call is sent when its connection breaks before the answer.
const Attempts = 3

// DefaultTimeout bounds each call unless WithTimeout says otherwise.
const DefaultTimeout = kit.DefaultTimeout

// Store is a store.Store in a PostgreSQL table.
type Store struct {
	pool    *pgxpool.Pool
	now     func() time.Time
	timeout time.Duration
	closed  atomic.Bool
	creates atomic.Uint64 // Creates so far: every ReclaimEvery-th one reclaims
	table   string        // quoted; names the advisory lock of reclamation

	sqlGet, sqlCreate, sqlCreateReclaim, sqlUpdate, sqlDelete, sqlList, sqlListToEnd string
	sqlUpdateAppend                                                                  string // log.go

	log *pgLog // store.Log, in log.go
}

var (
	_ store.Store  = (*Store)(nil)
	_ store.Lister = (*Store)(nil)
)

// Option configures New.
type Option func(*options)

type options struct {
	table   string
	now     func() time.Time
	timeout time.Duration
}

// WithTimeout bounds every call, its retries included (default DefaultTimeout; 0 or less: no
// bound but the caller's context).
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// Configure bounds what a pool does on its own to the store timeout d: connecting (pgx's default
// lets a connection attempt run on for 2 minutes after the call that wanted it gave up, so an
// outage piles up sockets) unless the connection string sets a shorter connect_timeout.
func Configure(cfg *pgxpool.Config, d time.Duration) {
	if d > 0 && (cfg.ConnConfig.ConnectTimeout <= 0 || cfg.ConnConfig.ConnectTimeout > d) {
		cfg.ConnConfig.ConnectTimeout = d
	}
}

// WithTable sets the table, "name" or "schema.name", each part a lower-case SQL identifier (so the
// quoted name the store uses is the one psql users type).
func WithTable(name string) Option { return func(o *options) { o.table = name } }

// WithClock makes the store compare expiries with now instead of time.Now.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// identifier reports whether s is what WithTable accepts per part: a lower-case letter or
// underscore, then letters, digits or underscores, 63 bytes at most like PostgreSQL's names.
func identifier(s string) bool {
	if s == "" || len(s) > 63 || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, c := range []byte(s) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// New checks that the server answers, creates the table if it does not exist and checks its
// columns. The Store takes ownership of pool: Close closes it, and so does a failing New.
func New(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	o := options{table: DefaultTable, now: time.Now, timeout: DefaultTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	table, indexes, err := quoteTable(o.table)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s := &Store{pool: pool, now: o.now, table: table, timeout: o.timeout, log: newLog(o.table)}
	s.prepareSQL(table)
	s.sqlUpdateAppend = s.log.updateAppendSQL(table)
	if err := s.setup(ctx, table, indexes); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// Address is the "host:port" of a pool's server, for error messages that must not carry the
// connection string (it may hold a password).
func Address(cfg *pgxpool.Config) string {
	return net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)))
}

// indexNames are the quoted, unqualified names of the table's indexes (PostgreSQL creates an
// index in its table's schema).
type indexNames struct{ expires, keyBytes string }

// quoteTable returns the quoted name of the table and the names of its indexes: the table's
// name and a suffix, with a hash in place of the name's end when that would exceed 63 bytes.
func quoteTable(name string) (table string, indexes indexNames, err error) {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return "", indexNames{}, fmt.Errorf("postgres: table name %q: want name or schema.name", name)
	}
	for _, p := range parts {
		if !identifier(p) {
			return "", indexNames{}, fmt.Errorf("postgres: table name %q: each part must be a lower-case identifier ([a-z_][a-z0-9_]*, at most 63 bytes)", name)
		}
	}
	base := parts[len(parts)-1]
	index := func(suffix string) string {
		idx := base + suffix
		if len(idx) > 63 {
			sum := sha256.Sum256([]byte(base))
			idx = base[:63-len(suffix)-9] + "_" + hex.EncodeToString(sum[:4]) + suffix
		}
		return pgx.Identifier{idx}.Sanitize()
	}
	return pgx.Identifier(parts).Sanitize(), indexNames{index("_expires_ms"), index("_key_bytes")}, nil
}

func (s *Store) setup(ctx context.Context, table string, indexes indexNames) error {
	addr := Address(s.pool.Config())
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres: cannot reach %s: %w", addr, err)
	}
	// Instances starting together would race CREATE TABLE IF NOT EXISTS into a unique violation
	// on the catalog; a transaction-scoped advisory lock on the table name serializes them.
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, table); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (
			key        text COLLATE "C" PRIMARY KEY,
			value      bytea  NOT NULL,
			version    bigint NOT NULL,
			expires_ms bigint NOT NULL
		)`)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT key, value, version, expires_ms FROM `+table+` LIMIT 0`); err != nil {
			return fmt.Errorf("the table does not have the store's columns: %w", err)
		}
		// Any index led by expires_ms serves, and any whole-table index led by key in byte order
		// (an administrator may have made them); creating one needs the table's owner, so it is
		// only tried when none exists.
		var expiresIndexed, keyIndexed bool
		err = tx.QueryRow(ctx, `SELECT
			EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
				WHERE i.indrelid = $1::regclass AND a.attname = 'expires_ms'),
			EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
				JOIN pg_collation c ON c.oid = i.indcollation[0]
				WHERE i.indrelid = $1::regclass AND a.attname = 'key' AND i.indpred IS NULL AND c.collname IN ('C', 'POSIX'))`,
			table).Scan(&expiresIndexed, &keyIndexed)
		if err != nil {
			return err
		}
		for _, ix := range []struct {
			exists      bool
			stmt, about string
		}{
			{expiresIndexed, `CREATE INDEX IF NOT EXISTS ` + indexes.expires + ` ON ` + table + ` (expires_ms)`, "no index on expires_ms"},
			{keyIndexed, `CREATE INDEX IF NOT EXISTS ` + indexes.keyBytes + ` ON ` + table + ` (key COLLATE "C")`, `no index on key in byte order (COLLATE "C")`},
		} {
			if ix.exists {
				continue
			}
			if _, err := tx.Exec(ctx, ix.stmt); err != nil {
				return fmt.Errorf("the table has %s and it cannot be created (as the table's owner, run %s): %w", ix.about, ix.stmt, err)
			}
		}
		return s.log.setupLog(ctx, tx)
	})
	if err != nil {
		return fmt.Errorf("postgres: set up table %s on %s: %w", table, addr, err)
	}
	return nil
}

func (s *Store) prepareSQL(table string) {
	s.sqlGet = `SELECT value, version, expires_ms FROM ` + table + ` WHERE key = $1 AND expires_ms > $2`
	// One statement: it returns the live row (a read-only query, so a replay costs no commit), or
	// inserts, replacing an expired row. When a concurrent Create commits between this
	// statement's snapshot and its insert, neither happens and Create runs it again.
	create := `WITH cur AS (
			SELECT value, version, expires_ms FROM ` + table + ` WHERE key = $1 AND expires_ms > $5
		), ins AS (
			INSERT INTO ` + table + ` AS r (key, value, version, expires_ms)
			SELECT $1, $2::bytea, $3::bigint, $4::bigint WHERE NOT EXISTS (SELECT 1 FROM cur)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value, version = excluded.version, expires_ms = excluded.expires_ms
				WHERE r.expires_ms <= $5
			RETURNING 1
		)%s
		SELECT EXISTS (SELECT 1 FROM ins), cur.value, cur.version, cur.expires_ms FROM (SELECT) AS one LEFT JOIN cur ON true`
	s.sqlCreate = fmt.Sprintf(create, "")
	// The reclaiming Create is a statement of its own, so the plain one keeps its plan and cost.
	// gc deletes up to ReclaimBatch rows expired before $6, oldest first through the expires_ms
	// index (a constant LIMIT, so that every plan picks the index). Its row locks must not form a
	// deadlock with another statement's insert (PostgreSQL does not promise in which order a
	// statement's CTEs run, so ins may wait on a conflicting row while gc holds its rows): gc
	// skips rows others lock, leaves this statement's own key to ins, and runs only in the
	// statement that wins a non-blocking advisory lock of the table ($7), so no two statements
	// hold gc locks at once.
	s.sqlCreateReclaim = fmt.Sprintf(create, `, gc AS (
			DELETE FROM `+table+` WHERE ctid = ANY (ARRAY (
				SELECT ctid FROM `+table+` WHERE expires_ms <= $6 AND key <> $1
					AND EXISTS (SELECT WHERE pg_try_advisory_xact_lock(hashtext($7), 0))
				ORDER BY expires_ms LIMIT `+strconv.Itoa(ReclaimBatch)+` FOR UPDATE SKIP LOCKED))
		)`)
	// The CTE reads the row as it was, so a failed compare-and-swap says why in the same trip.
	s.sqlUpdate = `WITH cur AS (SELECT version, expires_ms FROM ` + table + ` WHERE key = $1),
		upd AS (UPDATE ` + table + ` SET value = $3, version = $4, expires_ms = $5
			WHERE key = $1 AND version = $2 AND expires_ms > $6 RETURNING 1)
		SELECT EXISTS (SELECT 1 FROM upd), (SELECT version FROM cur), (SELECT expires_ms FROM cur)`
	s.sqlDelete = `WITH cur AS (SELECT 1 FROM ` + table + ` WHERE key = $1),
		del AS (DELETE FROM ` + table + ` WHERE key = $1 AND (version = $2 OR expires_ms <= $3) RETURNING 1)
		SELECT EXISTS (SELECT 1 FROM del), EXISTS (SELECT 1 FROM cur)`
	// A range scan of the byte-order index: keys in [$1, $2), live at $3, at most $4 rows, cut
	// where the values before a row reach $5 bytes (so a page of large values stays small; a
	// value is only read when its row is sent). The sum of sizes reads no value: octet_length
	// of a stored bytea comes from its header.
	list := `SELECT key, value, version, expires_ms FROM (
			SELECT key, value, version, expires_ms,
				sum(octet_length(value)) OVER (ORDER BY key COLLATE "C") - octet_length(value) AS before
			FROM (SELECT key, value, version, expires_ms FROM ` + table + `
				WHERE key COLLATE "C" >= $1 %s AND expires_ms > $3
				ORDER BY key COLLATE "C" LIMIT $4) AS page
		) AS sized WHERE before < $5 ORDER BY key COLLATE "C"`
	s.sqlList = fmt.Sprintf(list, `AND key COLLATE "C" < $2`)
	s.sqlListToEnd = fmt.Sprintf(list, `AND $2::text IS NULL`)
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key string) (store.Record, error) {
	if err := s.ready(ctx, key); err != nil {
		return store.Record{}, fmt.Errorf("postgres: get: %w", err)
	}
	ctx, cancel := kit.Bound(ctx, s.timeout)
	defer cancel()
	var (
		value   []byte
		version int64
		expires int64
	)
	err := s.retry(ctx, func() error {
		return s.pool.QueryRow(ctx, s.sqlGet, key, kit.Millis(s.now())).Scan(&value, &version, &expires)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Record{}, fmt.Errorf("postgres: get: %w", store.ErrNotFound)
	}
	if err != nil {
		return store.Record{}, fmt.Errorf("postgres: get: %w", s.timedOut(ctx, err))
	}
	return record(value, version, expires), nil
}

// Create implements store.Store.
func (s *Store) Create(ctx context.Context, key string, value []byte, expiresAt time.Time) (store.Record, error) {
	now := s.now()
	if err := s.readyWrite(ctx, key, value, expiresAt, now); err != nil {
		return store.Record{}, fmt.Errorf("postgres: create: %w", err)
	}
	ctx, cancel := kit.Bound(ctx, s.timeout)
	defer cancel()
	version := int64(kit.NewVersion())
	sql, args := s.sqlCreate, []any{key, nonNil(value), version, kit.Millis(expiresAt), kit.Millis(now)}
	if s.creates.Add(1)%ReclaimEvery == 1 {
		sql, args = s.sqlCreateReclaim, append(args, kit.Millis(now.Add(-SweepGrace)), s.table)
	}
	for range createAttempts {
		var (
			created bool
			value0  []byte
			curVer  *int64
			curExp  *int64
		)
		err := s.retry(ctx, func() error {
			return s.pool.QueryRow(ctx, sql, args...).Scan(&created, &value0, &curVer, &curExp)
		})
		switch {
		case err != nil:
			return store.Record{}, fmt.Errorf("postgres: create: %w", s.timedOut(ctx, err))
		case created, curVer != nil && *curVer == version: // the latter: a retry after the first attempt was applied
			return record(kit.Clone(value), version, kit.Millis(expiresAt)), nil
		case curVer != nil:
			return record(value0, *curVer, *curExp), fmt.Errorf("postgres: create: %w", store.ErrExists)
		}
	}
	return store.Record{}, fmt.Errorf("postgres: create %q: concurrent writers won %d times in a row", key, createAttempts)
}

// createAttempts bounds how often Create runs again after losing a race it could not observe.
const createAttempts = 5

// Update implements store.Store.
func (s *Store) Update(ctx context.Context, key string, version uint64, value []byte, expiresAt time.Time) (store.Record, error) {
	now := s.now()
	if err := s.readyWrite(ctx, key, value, expiresAt, now); err != nil {
		return store.Record{}, fmt.Errorf("postgres: update: %w", err)
	}
	ctx, cancel := kit.Bound(ctx, s.timeout)
	defer cancel()
	next := int64(kit.NewVersion())
	var (
		updated    bool
		curVersion *int64
		curExpires *int64
	)
	err := s.retry(ctx, func() error {
		return s.pool.QueryRow(ctx, s.sqlUpdate, key, int64(version), nonNil(value), next, kit.Millis(expiresAt), kit.Millis(now)).
			Scan(&updated, &curVersion, &curExpires)
	})
	switch {
	case err != nil:
		return store.Record{}, fmt.Errorf("postgres: update: %w", s.timedOut(ctx, err))
	case updated, curVersion != nil && *curVersion == next: // the latter: a retry after the first attempt was applied
		return record(kit.Clone(value), next, kit.Millis(expiresAt)), nil
	case curVersion == nil || !kit.Live(*curExpires, now):
		return store.Record{}, fmt.Errorf("postgres: update: %w", store.ErrNotFound)
	default:
		return store.Record{}, fmt.Errorf("postgres: update: %w", store.ErrConflict)
	}
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, key string, version uint64) error {
	if err := s.ready(ctx, key); err != nil {
		return fmt.Errorf("postgres: delete: %w", err)
	}
	ctx, cancel := kit.Bound(ctx, s.timeout)
	defer cancel()
	var deleted, existed bool
	err := s.retry(ctx, func() error {
		return s.pool.QueryRow(ctx, s.sqlDelete, key, int64(version), kit.Millis(s.now())).Scan(&deleted, &existed)
	})
	switch {
	case err != nil:
		return fmt.Errorf("postgres: delete: %w", s.timedOut(ctx, err))
	case !deleted && existed:
		// The row was live with another version (an expired row would have been deleted).
		return fmt.Errorf("postgres: delete: %w", store.ErrConflict)
	}
	return nil
}

// List implements store.Lister: one range scan of the byte-order index on key, in one round
// trip, reading only the page's rows (and the expired rows among them).
func (s *Store) List(ctx context.Context, prefix, after string, limit int) (store.Page, error) {
	limit, err := kit.ReadyList(ctx, s.closed.Load(), prefix, after, limit)
	if err != nil {
		return store.Page{}, fmt.Errorf("postgres: list: %w", err)
	}
	span := kit.ListRange(prefix, after)
	if span.Empty {
		return store.Page{}, nil
	}
	ctx, cancel := kit.Bound(ctx, s.timeout)
	defer cancel()
	sql, to := s.sqlList, &span.To
	if span.To == "" {
		sql, to = s.sqlListToEnd, nil
	}
	var out store.Page
	err = s.retry(ctx, func() error {
		// One more row than the page says whether keys remain; an excluded first key takes one.
		rows, err := s.pool.Query(ctx, sql, span.From, to, kit.Millis(s.now()), limit+2, kit.MaxPageBytes)
		if err != nil {
			return err
		}
		defer rows.Close()
		page, full, last := kit.NewPage(limit), false, ""
		out = store.Page{}
		for rows.Next() {
			var (
				key              string
				value            []byte
				version, expires int64
			)
			if err := rows.Scan(&key, &value, &version, &expires); err != nil {
				return err
			}
			if !span.In(key) {
				continue
			}
			if full {
				out = page.Done(last, true)
				return nil
			}
			full, last = !page.Add(key, record(value, version, expires)), key
		}
		if err := rows.Err(); err != nil {
			return err
		}
		// The statement drops the rows past the size budget: a page that reached it may have more.
		out = page.Done(last, full && page.Bytes() >= kit.MaxPageBytes)
		return nil
	})
	if err != nil {
		return store.Page{}, fmt.Errorf("postgres: list: %w", s.timedOut(ctx, err))
	}
	return out, nil
}

// timedOut is kit.TimedOut, and when the store timeout ended the call it also closes the pool's
// connections: after an outage the idle ones are as dead as the one that timed out, and each
// would cost a later call the whole timeout before the pool let it go.
func (s *Store) timedOut(ctx context.Context, err error) error {
	out := kit.TimedOut(ctx, err)
	if out != err {
		s.pool.Reset()
	}
	return out
}

// retry runs call, again when its connection broke before the answer (see the package doc), at
// most Attempts times and while ctx lasts.
func (s *Store) retry(ctx context.Context, call func() error) error {
	for attempt := 1; ; attempt++ {
		err := call()
		if err == nil || attempt >= Attempts || !connectionLost(err) || s.closed.Load() {
			return err
		}
		// 10-20 ms, then 40-80 ms: a restarted server or a new connection, not a hammering.
		d := 10 * time.Millisecond << (2 * (attempt - 1))
		t := time.NewTimer(d + rand.N(d))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// connectionLost reports whether err says the connection failed rather than the server
// answering: the call may or may not have been applied.
func connectionLost(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.SafeToRetry(err) || errors.Is(err, net.ErrClosed)
}

// MaxValueSize implements store.Store.
func (s *Store) MaxValueSize() int { return MaxValueSize }

// Close implements store.Store and closes the pool.
func (s *Store) Close() error {
	if !s.closed.Swap(true) {
		s.closeLog()
		s.pool.Close()
	}
	return nil
}

func (s *Store) ready(ctx context.Context, key string) error {
	return kit.Ready(ctx, s.closed.Load(), key)
}

func (s *Store) readyWrite(ctx context.Context, key string, value []byte, expiresAt, now time.Time) error {
	return kit.ReadyWrite(ctx, s.closed.Load(), key, value, MaxValueSize, expiresAt, now)
}

func record(value []byte, version, expiresMs int64) store.Record {
	return store.Record{Value: value, Version: uint64(version), ExpiresAt: kit.Time(expiresMs)}
}

// nonNil turns a nil value into an empty one: the column is NOT NULL and pgx sends nil as NULL.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
