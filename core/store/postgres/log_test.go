package postgres_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/postgres"
	"github.com/supervaize/svz/core/store/storetest"
	"github.com/supervaize/svz/internal/testenv"
)

// tableEnv passes the test's table to appender processes.
const tableEnv = "SVZ_STORETEST_TABLE"

func TestMain(m *testing.M) {
	storetest.LogProcessMain(func(ctx context.Context) (store.Store, error) {
		pool, err := pgxpool.New(ctx, os.Getenv(testenv.PostgresURL))
		if err != nil {
			return nil, err
		}
		return postgres.New(ctx, pool, postgres.WithTable(os.Getenv(tableEnv)))
	})
	os.Exit(m.Run())
}

// logTable is a fresh store table whose log tables are dropped with it when the test ends.
func logTable(t testing.TB, url string) string {
	t.Helper()
	name := testTable(t, url)
	t.Cleanup(func() {
		pool, err := pgxpool.New(context.Background(), url)
		if err != nil {
			return
		}
		defer pool.Close()
		_, _ = pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+name+`_log, `+name+`_log_head`)
	})
	return name
}

func TestLogConformance(t *testing.T) {
	url := testenv.Need(t, testenv.PostgresURL)
	table := logTable(t, url)
	storetest.RunLog(t, func(t testing.TB, now func() time.Time) store.Store {
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		return open(t, cfg, postgres.WithTable(table), postgres.WithClock(now))
	})
}

func TestLogProcesses(t *testing.T) {
	url := testenv.Need(t, testenv.PostgresURL)
	table := logTable(t, url)
	storetest.RunLogProcesses(t, func(t testing.TB, now func() time.Time) store.Store {
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		return open(t, cfg, postgres.WithTable(table), postgres.WithClock(now))
	}, []string{tableEnv + "=" + table})
}

// TestLogOneRoundTrip pins the package doc: an append and a read are one round trip each.
func TestLogOneRoundTrip(t *testing.T) {
	url := testenv.Need(t, testenv.PostgresURL)
	var tr trips
	cfg := tr.config(t, url)
	cfg.MaxConns = 1 // statements are cached per connection
	s := open(t, cfg, postgres.WithTable(logTable(t, url)))
	defer s.Close()
	ctx := context.Background()
	keep := store.Retention{MaxAge: time.Hour, MaxCount: 2}
	for i := range 3 { // prepares the statements; the third append also trims
		if _, err := s.AppendLog(ctx, "rt", []byte("e"), keep); err != nil {
			t.Fatal(i, err)
		}
		if _, err := s.ReadLog(ctx, "rt", 0, 10); err != nil {
			t.Fatal(err)
		}
	}
	before := tr.n.Load()
	if _, err := s.AppendLog(ctx, "rt", []byte("e"), keep); err != nil {
		t.Fatal(err)
	}
	if got := tr.n.Load() - before; got != 1 {
		t.Errorf("AppendLog took %d round trips, want 1", got)
	}
	before = tr.n.Load()
	if r, err := s.ReadLog(ctx, "rt", 0, 10); err != nil || len(r.Entries) != 2 {
		t.Fatalf("ReadLog: %+v, %v", r, err)
	}
	if got := tr.n.Load() - before; got != 1 {
		t.Errorf("ReadLog took %d round trips, want 1", got)
	}
}

func BenchmarkLog(b *testing.B) {
	url := testenv.Need(b, testenv.PostgresURL)
	table := logTable(b, url)
	var tr trips
	storetest.BenchmarkLog(b, func(b *testing.B) (store.Log, store.Log) {
		w := open(b, tr.config(b, url), postgres.WithTable(table))
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			b.Fatal(err)
		}
		r := open(b, cfg, postgres.WithTable(table))
		b.Cleanup(func() { _ = w.Close(); _ = r.Close() })
		return w, r
	}, tr.n.Load)
}

func TestUpdateAppendConformance(t *testing.T) {
	url := testenv.Need(t, testenv.PostgresURL)
	table := logTable(t, url)
	base, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	storetest.RunUpdateAppend(t, func(t testing.TB, now func() time.Time) store.Store {
		return open(t, base.Copy(), postgres.WithTable(table), postgres.WithClock(now))
	}, storetest.Network(storetest.Remote{Addr: postgres.Address(base),
		Open: func(t testing.TB, now func() time.Time, addr string, timeout time.Duration) store.Store {
			return open(t, via(t, base, addr, timeout), postgres.WithTable(table), postgres.WithClock(now), postgres.WithTimeout(timeout))
		}}))
}

// TestUpdateAppendOneRoundTrip pins UpdateAppend's promise: the update and the append in one.
func TestUpdateAppendOneRoundTrip(t *testing.T) {
	url := testenv.Need(t, testenv.PostgresURL)
	var tr trips
	cfg := tr.config(t, url)
	cfg.MaxConns = 1 // statements are cached per connection
	s := open(t, cfg, postgres.WithTable(logTable(t, url)))
	defer s.Close()
	ctx := context.Background()
	exp := time.Now().Add(time.Hour)
	keep := store.Retention{MaxAge: time.Hour, MaxCount: 2}
	for i := range 4 { // prepares the statements; the third also trims
		r, err := s.Create(ctx, "ua/"+strconv.Itoa(i), []byte("claim"), exp)
		if err != nil {
			t.Fatal(err)
		}
		before := tr.n.Load()
		if _, err := s.UpdateAppend(ctx, "ua/"+strconv.Itoa(i), r.Version, []byte("done"), exp, "rt", []byte("e"), keep); err != nil {
			t.Fatal(i, err)
		}
		if got := tr.n.Load() - before; i == 3 && got != 1 {
			t.Errorf("UpdateAppend took %d round trips, want 1", got)
		}
	}
}

// TestLogTablesOfAnOlderVersion: log tables created before the byte bound (no nbytes, no start)
// get the columns at setup; their entries count from 0, and go once the bound's worth of newer
// data is appended. New entries are bounded exactly.
func TestLogTablesOfAnOlderVersion(t *testing.T) {
	url := testenv.Need(t, testenv.PostgresURL)
	table := logTable(t, url)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for _, stmt := range []string{
		`CREATE TABLE ` + table + `_log_head (name text PRIMARY KEY, epoch text NOT NULL, seq bigint NOT NULL)`,
		`CREATE TABLE ` + table + `_log (name text NOT NULL, seq bigint NOT NULL, at_ms bigint NOT NULL, data bytea NOT NULL, PRIMARY KEY (name, seq))`,
		`INSERT INTO ` + table + `_log_head VALUES ('effects/x', 'oldepoch', 2)`,
		`INSERT INTO ` + table + `_log VALUES ('effects/x', 1, 0, '\x6f6c64'), ('effects/x', 2, 0, '\x6f6c64')`,
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, cfg, postgres.WithTable(table))
	defer s.Close()
	// 5 bytes counted, then 10: the old entries (from 0) still fit; at 15 they go, with entry 3.
	storetest.AppendsRead(t, s, "effects/x", "12345", store.Retention{MaxBytes: 10}, "1-3: old old 12345", "1-4: old old 12345 12345", "4-5: 12345 12345")
	if r, err := s.ReadLog(ctx, "effects/x", 0, 0); err != nil || r.Epoch != "oldepoch" {
		t.Errorf("the log's epoch after the upgrade: %q, %v", r.Epoch, err)
	}
}
