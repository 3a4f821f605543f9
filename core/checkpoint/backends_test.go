package checkpoint_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/dynamodb/dynamodbtest"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/core/store/storeenv"
	"github.com/supervaize/svz/internal/awsapi"
	"github.com/supervaize/svz/internal/testenv"
)

// The scenario suite and the crash injection on every backend, each against its real server
// (started by scripts/with-services; skipped without it, failed under CI=true).

func TestMemory(t *testing.T) {
	s := memory.New()
	t.Cleanup(func() { _ = s.Close() })
	suite(t, s)
	// A memory store lives in one process: its crashes are simulated in process (the run's
	// goroutine stops dead at the crash point, and the store refuses anything after it).
	t.Run("CrashInjection", func(t *testing.T) { crashInProcess(t, s) })
}

func TestBolt(t *testing.T) {
	env := []string{"SUPERVAIZER_STORE=bolt", "SUPERVAIZER_DATA_DIR=" + filepath.Join(t.TempDir(), "data")}
	// One process holds a bolt file at a time: the suite closes it before the crash children.
	s := openEnv(t, env)
	suite(t, s)
	_ = s.Close()
	t.Run("CrashInjection", func(t *testing.T) { crashAcrossProcesses(t, env) })
}

func TestPostgres(t *testing.T) {
	url := testenv.Need(t, testenv.PostgresURL)
	table := testenv.UniqueName("svz_checkpoint_")
	t.Cleanup(func() {
		if pool, err := pgxpool.New(context.Background(), url); err == nil {
			_, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+", "+table+"_log, "+table+"_log_head")
			pool.Close()
		}
	})
	env := []string{"SUPERVAIZER_STORE=postgres", "SUPERVAIZER_STORE_URL=" + url, "SUPERVAIZER_STORE_TABLE=" + table}
	s := openEnv(t, env)
	t.Cleanup(func() { _ = s.Close() })
	suite(t, s)
	t.Run("CrashInjection", func(t *testing.T) { crashAcrossProcesses(t, env) })
}

func TestRedis(t *testing.T) {
	env := []string{"SUPERVAIZER_STORE=redis", "SUPERVAIZER_STORE_URL=" + testenv.Need(t, testenv.RedisURL)}
	s := openEnv(t, env)
	t.Cleanup(func() { _ = s.Close() })
	suite(t, s)
	t.Run("CrashInjection", func(t *testing.T) { crashAcrossProcesses(t, env) })
}

func TestDynamoDB(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	// The suite races instances on one record: conditional writes go to moto one at a time (see
	// testenv.MotoWrites); the crash children never race.
	c, table := dynamodbtest.Table(t, endpoint, "svz-checkpoint-", awsapi.WithHTTPClient(&testenv.MotoWrites{}))
	suite(t, dynamodbtest.Open(t, c, table))
	t.Run("CrashInjection", func(t *testing.T) { crashAcrossProcesses(t, dynamodbtest.Env(endpoint, table)) })
}

// envFunc is getenv over KEY=value pairs.
func envFunc(env []string) func(string) string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return func(k string) string { return m[k] }
}

// openEnv opens the store env describes, as a controller does.
func openEnv(t testing.TB, env []string) store.Store {
	t.Helper()
	s, err := storeenv.Open(context.Background(), envFunc(env))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
