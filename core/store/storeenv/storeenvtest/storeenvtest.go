// Package storeenvtest gives the tests of packages built on the store (checkpoints, jobs,
// cross-instance runs) the settings of each backend against its real server, as a controller
// reads them, so that a child process opens the same store from the same settings. Servers come
// from scripts/with-services (internal/testenv): a test without its server is skipped, and fails
// under CI=true.
package storeenvtest

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/storeenv"
	"github.com/supervaize/svz/internal/testenv"
)

// Bolt is the settings of a bolt store in a directory of the test.
func Bolt(t testing.TB) []string {
	return []string{"SUPERVAIZER_STORE=bolt", "SUPERVAIZER_DATA_DIR=" + filepath.Join(t.TempDir(), "data")}
}

// Postgres is the settings of a PostgreSQL store on tables of its own, named from prefix and
// dropped when the test ends.
func Postgres(t testing.TB, prefix string) []string {
	url := testenv.Need(t, testenv.PostgresURL)
	table := testenv.UniqueName(prefix)
	t.Cleanup(func() {
		if pool, err := pgxpool.New(context.Background(), url); err == nil {
			_, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+", "+table+"_log, "+table+"_log_head")
			pool.Close()
		}
	})
	return []string{"SUPERVAIZER_STORE=postgres", "SUPERVAIZER_STORE_URL=" + url, "SUPERVAIZER_STORE_TABLE=" + table}
}

// Redis is the settings of the Redis store.
func Redis(t testing.TB) []string {
	return []string{"SUPERVAIZER_STORE=redis", "SUPERVAIZER_STORE_URL=" + testenv.Need(t, testenv.RedisURL)}
}

// Getenv is getenv over KEY=value pairs.
func Getenv(env []string) func(string) string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return func(k string) string { return m[k] }
}

// Open opens the store env describes, as a controller does; the caller closes it.
func Open(t testing.TB, env []string) store.Store {
	t.Helper()
	s, err := storeenv.Open(context.Background(), Getenv(env))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
