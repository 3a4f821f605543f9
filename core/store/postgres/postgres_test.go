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
	storetest.Run(t, func(t testing.TB, now func() time.Time) store.Store {
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		return open(t, cfg, postgres.WithTable(table), postgres.WithClock(now))
	})
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

func TestDeleteExpired(t *testing.T) {
	url := testenv.Need(t, testenv.PostgresURL)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	c := storetest.NewClock()
	s := open(t, cfg, postgres.WithTable(testTable(t, url)), postgres.WithClock(c.Now))
	defer s.Close()
	ctx := context.Background()
	for i, ttl := range []time.Duration{time.Second, time.Second, time.Hour} {
		if _, err := s.Create(ctx, key(i), []byte("v"), c.Now().Add(ttl)); err != nil {
			t.Fatal(err)
		}
	}
	c.Advance(time.Second)
	n, err := s.DeleteExpired(ctx)
	if err != nil || n != 2 {
		t.Errorf("DeleteExpired = %d, %v; want 2, nil", n, err)
	}
	if _, err := s.Get(ctx, key(2)); err != nil {
		t.Errorf("live record after DeleteExpired: %v", err)
	}
	s.Close()
	if _, err := s.DeleteExpired(ctx); !errors.Is(err, store.ErrClosed) {
		t.Errorf("DeleteExpired after Close: %v, want ErrClosed", err)
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
	deadline := time.Now().Add(10 * time.Second)
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
