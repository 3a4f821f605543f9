// Package postgres is the PostgreSQL store.Store, on a pgx/v5 pool. Every operation is one SQL
// statement, hence one round trip, and atomic on its own: no transaction spans two calls.
//
// The table (default "svz_store") and the index of its expiries are created if absent:
//
//	CREATE TABLE svz_store (
//	    key        text   PRIMARY KEY,
//	    value      bytea  NOT NULL,
//	    version    bigint NOT NULL,  -- random, set on every write
//	    expires_ms bigint NOT NULL   -- Unix milliseconds; live while now < expires_ms
//	);
//	CREATE INDEX svz_store_expires_ms ON svz_store (expires_ms);
//
// Expired rows are ignored by every statement and overwritten by Create. They are also deleted,
// with no sweeper and no extra round trip: every ReclaimEvery-th Create of a Store (its first
// one included, so short-lived instances take part) is a variant of the Create statement that
// also deletes up to ReclaimBatch rows expired for more than SweepGrace, found through the index.
// The grace keeps reclamation invisible to instances whose clocks lag; one such Create at a time
// per table reclaims (the others skip it rather than wait), so reclaiming never blocks or fails a
// write. Values are limited to MaxValueSize bytes.
package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
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

// Store is a store.Store in a PostgreSQL table.
type Store struct {
	pool    *pgxpool.Pool
	now     func() time.Time
	closed  atomic.Bool
	creates atomic.Uint64 // Creates so far: every ReclaimEvery-th one reclaims
	table   string        // quoted; names the advisory lock of reclamation

	sqlGet, sqlCreate, sqlCreateReclaim, sqlUpdate, sqlDelete string

	log *pgLog // store.Log, in log.go
}

var _ store.Store = (*Store)(nil)

// Option configures New.
type Option func(*options)

type options struct {
	table string
	now   func() time.Time
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
	o := options{table: DefaultTable, now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	table, index, err := quoteTable(o.table)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s := &Store{pool: pool, now: o.now, table: table, log: newLog(o.table)}
	s.prepareSQL(table)
	if err := s.setup(ctx, table, index); err != nil {
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

// quoteTable returns the quoted name of the table and the quoted, unqualified name of the index
// of its expiries (PostgreSQL creates an index in its table's schema): the table's name and
// "_expires_ms", or a hash in place of the name's end when that would exceed 63 bytes.
func quoteTable(name string) (table, index string, err error) {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return "", "", fmt.Errorf("postgres: table name %q: want name or schema.name", name)
	}
	for _, p := range parts {
		if !identifier(p) {
			return "", "", fmt.Errorf("postgres: table name %q: each part must be a lower-case identifier ([a-z_][a-z0-9_]*, at most 63 bytes)", name)
		}
	}
	const suffix = "_expires_ms"
	idx := parts[len(parts)-1] + suffix
	if len(idx) > 63 {
		sum := sha256.Sum256([]byte(parts[len(parts)-1]))
		idx = parts[len(parts)-1][:63-len(suffix)-9] + "_" + hex.EncodeToString(sum[:4]) + suffix
	}
	return pgx.Identifier(parts).Sanitize(), pgx.Identifier{idx}.Sanitize(), nil
}

func (s *Store) setup(ctx context.Context, table, index string) error {
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
			key        text   PRIMARY KEY,
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
		// Any index led by expires_ms serves (an administrator may have made one); creating one
		// needs the table's owner, so it is only tried when none exists.
		var indexed bool
		err = tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a
			ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
			WHERE i.indrelid = $1::regclass AND a.attname = 'expires_ms')`, table).Scan(&indexed)
		if err != nil {
			return err
		}
		if !indexed {
			stmt := `CREATE INDEX IF NOT EXISTS ` + index + ` ON ` + table + ` (expires_ms)`
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("the table has no index on expires_ms and it cannot be created (as the table's owner, run %s): %w", stmt, err)
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
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key string) (store.Record, error) {
	if err := s.ready(ctx, key); err != nil {
		return store.Record{}, fmt.Errorf("postgres: get: %w", err)
	}
	var (
		value   []byte
		version int64
		expires int64
	)
	err := s.pool.QueryRow(ctx, s.sqlGet, key, kit.Millis(s.now())).Scan(&value, &version, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Record{}, fmt.Errorf("postgres: get: %w", store.ErrNotFound)
	}
	if err != nil {
		return store.Record{}, fmt.Errorf("postgres: get: %w", err)
	}
	return record(value, version, expires), nil
}

// Create implements store.Store.
func (s *Store) Create(ctx context.Context, key string, value []byte, expiresAt time.Time) (store.Record, error) {
	now := s.now()
	if err := s.readyWrite(ctx, key, value, expiresAt, now); err != nil {
		return store.Record{}, fmt.Errorf("postgres: create: %w", err)
	}
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
		err := s.pool.QueryRow(ctx, sql, args...).Scan(&created, &value0, &curVer, &curExp)
		switch {
		case err != nil:
			return store.Record{}, fmt.Errorf("postgres: create: %w", err)
		case created:
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
	next := int64(kit.NewVersion())
	var (
		updated    bool
		curVersion *int64
		curExpires *int64
	)
	err := s.pool.QueryRow(ctx, s.sqlUpdate, key, int64(version), nonNil(value), next, kit.Millis(expiresAt), kit.Millis(now)).
		Scan(&updated, &curVersion, &curExpires)
	switch {
	case err != nil:
		return store.Record{}, fmt.Errorf("postgres: update: %w", err)
	case updated:
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
	var deleted, existed bool
	err := s.pool.QueryRow(ctx, s.sqlDelete, key, int64(version), kit.Millis(s.now())).Scan(&deleted, &existed)
	switch {
	case err != nil:
		return fmt.Errorf("postgres: delete: %w", err)
	case !deleted && existed:
		// The row was live with another version (an expired row would have been deleted).
		return fmt.Errorf("postgres: delete: %w", store.ErrConflict)
	}
	return nil
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
	if s.closed.Load() {
		return store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return kit.CheckKey(key)
}

func (s *Store) readyWrite(ctx context.Context, key string, value []byte, expiresAt, now time.Time) error {
	if err := s.ready(ctx, key); err != nil {
		return err
	}
	return kit.CheckWrite(key, value, MaxValueSize, expiresAt, now)
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
