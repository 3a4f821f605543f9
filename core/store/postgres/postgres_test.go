package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/postgres"
	"github.com/supervaize/svz/core/store/storetest"
	"github.com/supervaize/svz/internal/testenv"
)

// testTable returns a fresh table name, dropped when the test ends.
func testTable(t testing.TB, url string) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "svz_store_test_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		pool, err := pgxpool.New(context.Background(), url)
		if err != nil {
			t.Errorf("drop %s: %v", name, err)
			return
		}
		defer pool.Close()
		if _, err := pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+name); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	return name
}

// trips counts client→server writes on every connection of a pool: pgx flushes once per round
// trip, so after connection setup this is the number of round trips.
type trips struct{ n atomic.Int64 }

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(b)
}

func (tr *trips) config(t testing.TB, url string) *pgxpool.Config {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	dialer := &net.Dialer{}
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{c, &tr.n}, nil
	}
	return cfg
}

func open(t testing.TB, cfg *pgxpool.Config, opts ...postgres.Option) *postgres.Store {
	t.Helper()
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := postgres.New(context.Background(), pool, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	url := testenv.Need(t, testenv.PostgresURL)
	table := testTable(t, url)
	base, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Run(t, func(t testing.TB, now func() time.Time) store.Store {
		return open(t, base.Copy(), postgres.WithTable(table), postgres.WithClock(now))
	}, storetest.Network(storetest.Remote{Addr: postgres.Address(base),
		Open: func(t testing.TB, now func() time.Time, addr string, timeout time.Duration) store.Store {
			return open(t, via(t, base, addr, timeout), postgres.WithTable(table), postgres.WithClock(now), postgres.WithTimeout(timeout))
		}}))
}

// via returns a copy of cfg that connects to addr, configured for the store timeout as storeenv
// does.
func via(t testing.TB, cfg *pgxpool.Config, addr string, timeout time.Duration) *pgxpool.Config {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Copy()
	c.ConnConfig.Host, c.ConnConfig.Port = host, uint16(n)
	c.ConnConfig.Fallbacks = nil
	postgres.Configure(c, timeout)
	return c
}

// TestOneRoundTripPerCall pins the claim of the package doc: once a connection has prepared the
// statements, each call is one round trip, including a Create that finds a live record and a
// failed compare-and-swap.
func TestOneRoundTripPerCall(t *testing.T) {
	url := testenv.Need(t, testenv.PostgresURL)
	var tr trips
	cfg := tr.config(t, url)
	cfg.MaxConns = 1 // statements are cached per connection
	s := open(t, cfg, postgres.WithTable(testTable(t, url)))
	defer s.Close()
	ctx := context.Background()
	exp := time.Now().Add(time.Hour)
	exists := func(_ store.Record, err error) error {
		if errors.Is(err, store.ErrExists) {
			return nil
		}
		return fmt.Errorf("want ErrExists, got %w", err)
	}
	conflict := func(err error) error {
		if errors.Is(err, store.ErrConflict) {
			return nil
		}
		return fmt.Errorf("want ErrConflict, got %w", err)
	}
	var r store.Record
	var err error
	calls := []struct {
		name string
		call func(k string) error
	}{
		{"Create", func(k string) error { r, err = s.Create(ctx, k, []byte("claim"), exp); return err }},
		{"Create of a live key", func(k string) error { return exists(s.Create(ctx, k, []byte("again"), exp)) }},
		{"Get", func(k string) error { r, err = s.Get(ctx, k); return err }},
		{"Update", func(k string) error { r, err = s.Update(ctx, k, r.Version, []byte("done"), exp); return err }},
		{"Update with a stale version", func(k string) error {
			_, err := s.Update(ctx, k, r.Version+1, []byte("x"), exp)
			return conflict(err)
		}},
		{"Delete with a stale version", func(k string) error { return conflict(s.Delete(ctx, k, r.Version+1)) }},
		{"Delete", func(k string) error { return s.Delete(ctx, k, r.Version) }},
	}
	for _, c := range calls { // prepare every statement
		if err := c.call("warm-up"); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	for _, c := range calls {
		before := tr.n.Load()
		if err := c.call("measured"); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := tr.n.Load() - before; got != 1 {
			t.Errorf("%s took %d round trips, want 1", c.name, got)
		}
	}
	// Four Creates so far; the ReclaimEvery+1-th reclaims, in one round trip too (its statement
	// was prepared by the first Create).
	for i := 5; i <= postgres.ReclaimEvery; i++ {
		if _, err := s.Create(ctx, key(i), []byte("v"), exp); err != nil {
			t.Fatal(err)
		}
	}
	before := tr.n.Load()
	if _, err := s.Create(ctx, "reclaiming", []byte("v"), exp); err != nil {
		t.Fatal(err)
	}
	if got := tr.n.Load() - before; got != 1 {
		t.Errorf("a reclaiming Create took %d round trips, want 1", got)
	}
}

func key(i int) string { return "k" + strconv.Itoa(i) }

func TestConcurrentSetupOfOneTable(t *testing.T) {
	url := testenv.Need(t, testenv.PostgresURL)
	table := testTable(t, url)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			pool, err := pgxpool.New(context.Background(), url)
			if err != nil {
				errs <- err
				return
			}
			s, err := postgres.New(context.Background(), pool, postgres.WithTable(table))
			if err != nil {
				errs <- err
				return
			}
			s.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent New: %v", err)
	}
}

func TestNewErrors(t *testing.T) {
	url := testenv.Need(t, testenv.PostgresURL)
	ctx := context.Background()

	for _, name := range []string{"", "a.b.c", `x"; DROP TABLE users; --`, "1abc", "a-b", "Store", strings.Repeat("a", 64)} {
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		_, err = postgres.New(ctx, pool, postgres.WithTable(name))
		if err == nil || !strings.HasPrefix(err.Error(), "postgres: table name ") {
			t.Errorf("WithTable(%q): error = %v, want a table name error", name, err)
		}
	}

	// A table of the same name but another layout is refused at start, not at the first call.
	wrong := testTable(t, url)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE `+wrong+` (id int)`); err != nil {
		t.Fatal(err)
	}
	_, err = postgres.New(ctx, pool, postgres.WithTable(wrong))
	if err == nil || !strings.Contains(err.Error(), "does not have the store's columns") {
		t.Errorf("table with another layout: error = %v", err)
	}
}

func TestUnreachableServerNamesAddressNotPassword(t *testing.T) {
	const password = "s3cret-Passw0rd"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there any more
	cfg, err := pgxpool.ParseConfig("postgres://svz:" + password + "@" + addr + "/svz?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = postgres.New(context.Background(), pool)
	if err == nil {
		t.Fatal("New succeeded against a closed port")
	}
	if !strings.HasPrefix(err.Error(), "postgres: cannot reach "+addr+": ") {
		t.Errorf("error = %q, want it to start with %q", err, "postgres: cannot reach "+addr+": ")
	}
	if strings.Contains(err.Error(), password) {
		t.Errorf("error leaks the password: %q", err)
	}
}

// countRows returns how many rows of table have a key starting with prefix.
func countRows(t testing.TB, pool *pgxpool.Pool, table, prefix string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM `+table+` WHERE starts_with(key, $1)`, prefix).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// insertExpired inserts n rows under prefix that expired at expiresMs, as another process would
// have left them.
func insertExpired(t testing.TB, pool *pgxpool.Pool, table, prefix string, n int, expiresMs int64) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `INSERT INTO `+table+` (key, value, version, expires_ms)
		SELECT $1 || i, '\x00'::bytea, i, $3 FROM generate_series(1, $2::int) AS i`, prefix, n, expiresMs)
	if err != nil {
		t.Fatal(err)
	}
}

// TestExpiredRowsAreReclaimed: every ReclaimEvery-th Create, the first one included, deletes up to
// ReclaimBatch rows expired for more than SweepGrace; rows expired more recently and live rows
// stay.
func TestExpiredRowsAreReclaimed(t *testing.T) {
	url := testenv.Need(t, testenv.PostgresURL)
	table := testTable(t, url)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	c := storetest.NewClock()
	s := open(t, cfg, postgres.WithTable(table), postgres.WithClock(c.Now))
	defer s.Close()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx := context.Background()

	const old = 150
	nowMs := c.Now().UnixMilli()
	insertExpired(t, pool, table, "old/", old, nowMs-postgres.SweepGrace.Milliseconds())    // expired exactly one grace ago
	insertExpired(t, pool, table, "recent/", 5, nowMs-postgres.SweepGrace.Milliseconds()+1) // within the grace
	insertExpired(t, pool, table, "live-raw/", 5, nowMs+time.Hour.Milliseconds())           // live
	live, err := s.Create(ctx, "live", []byte("v"), c.Now().Add(time.Hour))                 // Create 1: reclaims
	if err != nil {
		t.Fatal(err)
	}
	counts := []int{countRows(t, pool, table, "old/")}
	for i := range 2*postgres.ReclaimEvery + 1 { // Creates 2 to 34: 17 and 33 reclaim
		if _, err := s.Create(ctx, "new/"+strconv.Itoa(i), []byte("v"), c.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		counts = append(counts, countRows(t, pool, table, "old/"))
	}
	for i, n := range counts {
		create := i + 1
		turns := (create-1)/postgres.ReclaimEvery + 1
		if want := max(0, old-turns*postgres.ReclaimBatch); n != want {
			t.Errorf("after Create %d: %d expired rows left, want %d", create, n, want)
		}
	}
	if n := countRows(t, pool, table, "recent/"); n != 5 {
		t.Errorf("%d rows expired within the grace left, want 5", n)
	}
	if n := countRows(t, pool, table, "live-raw/"); n != 5 {
		t.Errorf("%d live rows left, want 5", n)
	}
	if got, err := s.Get(ctx, "live"); err != nil || got.Version != live.Version {
		t.Errorf("live record: %+v, %v", got, err)
	}
	if n := countRows(t, pool, table, "new/"); n != 2*postgres.ReclaimEvery+1 {
		t.Errorf("%d new rows, want %d", n, 2*postgres.ReclaimEvery+1)
	}

	// A new instance reclaims at its first Create: a serverless instance may serve one request.
	insertExpired(t, pool, table, "old2/", 10, nowMs-time.Hour.Milliseconds())
	other := open(t, cfg, postgres.WithTable(table), postgres.WithClock(c.Now))
	defer other.Close()
	if _, err := other.Create(ctx, "first", []byte("v"), c.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, pool, table, "old2/"); n != 0 {
		t.Errorf("a new instance's first Create left %d expired rows, want 0", n)
	}
}

// TestReclaimNeverFailsConcurrentCreates: instances reclaiming at the same time as others replace
// expired rows (the rows reclamation locks) must neither deadlock nor fail a write.
func TestReclaimNeverFailsConcurrentCreates(t *testing.T) {
	url := testenv.Need(t, testenv.PostgresURL)
	table := testTable(t, url)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	c := storetest.NewClock()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// Many instances, so that many Creates are reclaiming turns (each instance's first one is).
	const instances, perInstance, keys = 8, 3, 400
	stores := make([]*postgres.Store, instances)
	for i := range stores {
		stores[i] = open(t, cfg.Copy(), postgres.WithTable(table), postgres.WithClock(c.Now))
		defer stores[i].Close()
	}
	for round := range 3 {
		insertExpired(t, pool, table, fmt.Sprintf("k%d/", round), keys, c.Now().Add(-time.Hour).UnixMilli())
		var wg sync.WaitGroup
		errs := make(chan error, instances*perInstance)
		for i := range instances * perInstance {
			s := stores[i%instances]
			wg.Go(func() {
				for j := range keys / 4 {
					// Replace expired rows that reclamation is also deleting, in an order that
					// differs per goroutine.
					k := fmt.Sprintf("k%d/%d", round, 1+(j*(2*i+1))%keys)
					_, err := s.Create(context.Background(), k, []byte("v"), c.Now().Add(time.Hour))
					if err != nil && !errors.Is(err, store.ErrExists) {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("round %d: Create failed: %v", round, err)
		}
	}
}

// TestIndexOfExpiries: New creates the index reclamation reads, also on a table created before
// it existed; as a role that does not own the table it cannot, and says what to run.
func TestIndexOfExpiries(t *testing.T) {
	url := testenv.Need(t, testenv.PostgresURL)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	indexes := func(table string) []string {
		t.Helper()
		rows, err := pool.Query(ctx, `SELECT indexname FROM pg_indexes WHERE tablename = $1 AND indexdef LIKE '%(expires_ms%' ORDER BY 1`, table)
		if err != nil {
			t.Fatal(err)
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}

	fresh := testTable(t, url)
	open(t, cfg.Copy(), postgres.WithTable(fresh)).Close()
	open(t, cfg.Copy(), postgres.WithTable(fresh)).Close() // and only once
	if got := indexes(fresh); len(got) != 1 || got[0] != fresh+"_expires_ms" {
		t.Errorf("indexes on expires_ms of a new table: %q, want [%s_expires_ms]", got, fresh)
	}

	long := "svz_" + strings.Repeat("l", 59)
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+long) })
	open(t, cfg.Copy(), postgres.WithTable(long)).Close()
	if got := indexes(long); len(got) != 1 || len(got[0]) > 63 || !strings.HasSuffix(got[0], "_expires_ms") {
		t.Errorf("indexes on expires_ms of a table with a 63-byte name: %q", got)
	}

	// A table made with the earlier layout, owned by the administrator; the application's role
	// may only read and write it.
	older := testTable(t, url)
	if _, err := pool.Exec(ctx, `CREATE TABLE `+older+` (key text PRIMARY KEY, value bytea NOT NULL, version bigint NOT NULL, expires_ms bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	role := older + "_app"
	for _, q := range []string{`CREATE ROLE ` + role + ` LOGIN`, `GRANT USAGE, CREATE ON SCHEMA public TO ` + role,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON ` + older + ` TO ` + role} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		admin, err := pgxpool.New(context.Background(), url)
		if err != nil {
			t.Errorf("drop role %s: %v", role, err)
			return
		}
		defer admin.Close()
		for _, q := range []string{`DROP OWNED BY ` + role, `DROP ROLE ` + role} {
			if _, err := admin.Exec(context.Background(), q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
	})
	app := cfg.Copy()
	app.ConnConfig.User = role
	apool, err := pgxpool.NewWithConfig(ctx, app)
	if err != nil {
		t.Fatal(err)
	}
	_, err = postgres.New(ctx, apool, postgres.WithTable(older))
	want := `postgres: set up table "` + older + `" on ` + postgres.Address(cfg) + `: the table has no index on expires_ms and it cannot be created ` +
		`(as the table's owner, run CREATE INDEX IF NOT EXISTS "` + older + `_expires_ms" ON "` + older + `" (expires_ms)): ERROR: must be owner of table ` + older
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("New as a role that cannot index: error = %v\nwant prefix %s", err, want)
	}
	if _, err := pool.Exec(ctx, `CREATE INDEX `+older+`_by_expiry ON `+older+` (expires_ms, key)`); err != nil {
		t.Fatal(err)
	}
	apool, err = pgxpool.NewWithConfig(ctx, app)
	if err != nil {
		t.Fatal(err)
	}
	_, err = postgres.New(ctx, apool, postgres.WithTable(older))
	want = `postgres: set up table "` + older + `" on ` + postgres.Address(cfg) + `: the table has no index on key in byte order (COLLATE "C") and it cannot be created ` +
		`(as the table's owner, run CREATE INDEX IF NOT EXISTS "` + older + `_key_bytes" ON "` + older + `" (key COLLATE "C")): ERROR: must be owner of table ` + older
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("New as a role that cannot index the keys: error = %v\nwant prefix %s", err, want)
	}
	// Once the administrator has indexed the table, under any names, the role can use it.
	if _, err := pool.Exec(ctx, `CREATE INDEX `+older+`_keys ON `+older+` (key COLLATE "POSIX", expires_ms)`); err != nil {
		t.Fatal(err)
	}
	apool, err = pgxpool.NewWithConfig(ctx, app)
	if err != nil {
		t.Fatal(err)
	}
	s, err := postgres.New(ctx, apool, postgres.WithTable(older))
	if err != nil {
		t.Fatalf("New as the application's role on an indexed table: %v", err)
	}
	defer s.Close()
	if _, err := s.Create(ctx, "k", []byte("v"), time.Now().Add(time.Minute)); err != nil {
		t.Errorf("Create as the application's role: %v", err)
	}
	if got := indexes(older); len(got) != 1 {
		t.Errorf("indexes on expires_ms: %q, want only the administrator's", got)
	}
	var keyIndexes int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE tablename = $1 AND indexdef LIKE '%(key COLLATE%'`, older).Scan(&keyIndexes); err != nil || keyIndexes != 1 {
		t.Errorf("indexes on key: %d (%v), want only the administrator's", keyIndexes, err)
	}
}

func BenchmarkStore(b *testing.B) {
	url := testenv.Need(b, testenv.PostgresURL)
	var tr trips
	s := open(b, tr.config(b, url), postgres.WithTable(testTable(b, url)))
	defer s.Close()
	storetest.Benchmark(b, s, tr.n.Load)
}

// TestCreateRacingAnUncommittedInsert drives the one race Create's statement cannot resolve by
// itself: another writer inserts the key after the statement's snapshot. The insert then waits
// for the other transaction, finds a live row it may not replace, and Create must run again to
// return that row with ErrExists.
func TestCreateRacingAnUncommittedInsert(t *testing.T) {
	url := testenv.Need(t, testenv.PostgresURL)
	table := testTable(t, url)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, cfg, postgres.WithTable(table))
	defer s.Close()
	ctx := context.Background()
	other, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	exp := time.Now().Add(time.Hour)
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `INSERT INTO `+table+` (key, value, version, expires_ms) VALUES ('k', 'theirs', 42, $1)`, exp.UnixMilli()); err != nil {
		t.Fatal(err)
	}

	type outcome struct {
		rec store.Record
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		rec, err := s.Create(ctx, "k", []byte("mine"), exp)
		done <- outcome{rec, err}
	}()
	// Wait until Create's insert is blocked on the uncommitted row.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting bool
		err := other.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'WITH cur AS%')`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Create never waited on the uncommitted insert")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if !errors.Is(o.err, store.ErrExists) || string(o.rec.Value) != "theirs" || o.rec.Version != 42 {
		t.Errorf("Create = %+v, %v; want the other writer's record and ErrExists", o.rec, o.err)
	}
}

// BenchmarkStoreWithExpired runs the store benchmarks on a table that already holds many expired
// rows, as a long-running deployment accumulates them: the cost of reclaiming them is in the
// figures.
func BenchmarkStoreWithExpired(b *testing.B) {
	url := testenv.Need(b, testenv.PostgresURL)
	var tr trips
	table := testTable(b, url)
	c := storetest.NewClock()
	s := open(b, tr.config(b, url), postgres.WithTable(table), postgres.WithClock(c.Now))
	defer s.Close()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	_, err = pool.Exec(context.Background(), `INSERT INTO `+table+` (key, value, version, expires_ms)
		SELECT 'expired/' || i, convert_to(repeat('x', $1), 'UTF8'), i, $2 FROM generate_series(1, 20000) AS i`,
		storetest.BenchValueSize, c.Now().Add(time.Second).UnixMilli())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), `VACUUM ANALYZE `+table); err != nil {
		b.Fatal(err)
	}
	c.Advance(2 * time.Minute)
	storetest.Benchmark(b, s, tr.n.Load)
}

// TestOutageBoundsConnections: during an outage, callers far more numerous than the pool fail
// at the store timeout, and the sockets the store holds stay within the pool's size (plus the
// cancel requests pgx sends for the connections it gives up), round after round.
func TestOutageBoundsConnections(t *testing.T) {
	url := testenv.Need(t, testenv.PostgresURL)
	base, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	p := storetest.NewProxy(t, postgres.Address(base))
	const timeout = time.Second
	cfg := via(t, base, p.Addr(), timeout)
	cfg.MaxConns = 4
	s := open(t, cfg, postgres.WithTable(testTable(t, url)), postgres.WithTimeout(timeout))
	t.Cleanup(func() { _ = s.Close() })
	t.Cleanup(p.Close)
	ctx := context.Background()
	if _, err := s.Create(ctx, "outage/k", []byte("v"), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	p.Blackhole(true)
	most := 0
	for round := range 3 {
		const callers = 40
		errs := make(chan error, callers)
		for i := range callers {
			go func() {
				_, err := s.Create(ctx, fmt.Sprintf("outage/%d/%d", round, i), []byte("v"), time.Now().Add(time.Hour))
				errs <- err
			}()
		}
		deadline := time.NewTimer(60 * time.Second)
		for range callers {
			select {
			case err := <-errs:
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("round %d: error = %v, want a store timeout", round, err)
				}
			case <-deadline.C:
				t.Fatalf("round %d: callers still waiting after 60 s with a 1 s store timeout", round)
			}
			most = max(most, p.Open())
		}
		deadline.Stop()
	}
	t.Logf("at most %d connections open, %d accepted in all", most, p.Accepted())
	if most > 2*int(cfg.MaxConns) {
		t.Errorf("%d connections open at once during the outage, want at most %d (the pool and its cancel requests)", most, 2*cfg.MaxConns)
	}
}

// TestListInByteOrderWhateverTheCollation: a table made by an earlier version, whose key follows
// a language's collation (ICU English here: "a" < "B", punctuation ignored), lists in byte order
// through the index New adds, and so does a new table through its primary key: the plan is an
// index scan even with sequential scans disabled.
func TestListInByteOrderWhateverTheCollation(t *testing.T) {
	url := testenv.Need(t, testenv.PostgresURL)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	older := testTable(t, url)
	_, err = pool.Exec(ctx, `CREATE TABLE `+older+` (key text COLLATE "en-x-icu" PRIMARY KEY, value bytea NOT NULL, version bigint NOT NULL, expires_ms bigint NOT NULL)`)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{older, testTable(t, url)} {
		t.Run(table, func(t *testing.T) {
			s := open(t, cfg.Copy(), postgres.WithTable(table))
			defer s.Close()
			keys := []string{"l/a", "l/B", "l/_x", "l/a-b", "l/ab", "l/é", "l/Z"}
			for _, k := range keys {
				if _, err := s.Create(ctx, k, []byte("v"), time.Now().Add(time.Hour)); err != nil {
					t.Fatal(err)
				}
			}
			page, err := s.List(ctx, "l/", "", 100)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, it := range page.Items {
				got = append(got, it.Key)
			}
			if want := "l/B l/Z l/_x l/a l/a-b l/ab l/é"; strings.Join(got, " ") != want {
				t.Errorf("List = %q, want %q", strings.Join(got, " "), want)
			}
			var plan string
			err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off`); err != nil {
					return err
				}
				rows, err := tx.Query(ctx, `EXPLAIN `+s.ListSQL(), "l/", "l0", int64(0), 10, 1<<20)
				if err != nil {
					return err
				}
				lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
				plan = strings.Join(lines, "\n")
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(plan, "Index Scan") || strings.Contains(plan, "Seq Scan") || strings.Contains(plan, "Sort") {
				t.Errorf("List is not an index range scan in key order:\n%s", plan)
			}
		})
	}
}
