package jobs_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/dynamodb/dynamodbtest"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/core/store/storeenv"
	"github.com/supervaize/svz/internal/awsapi"
	"github.com/supervaize/svz/internal/testenv"
)

// The scenario suite on every backend against its real server (scripts/with-services starts
// them; skipped without it, failed under CI=true), and the crash injection across processes on
// those that outlive a process.

func TestMemory(t *testing.T) {
	s := memory.New()
	t.Cleanup(func() { _ = s.Close() })
	suite(t, s)
}

func TestBolt(t *testing.T) {
	env := []string{"SUPERVAIZER_STORE=bolt", "SUPERVAIZER_DATA_DIR=" + filepath.Join(t.TempDir(), "data")}
	s := openEnv(t, env)
	suite(t, s)
	_ = s.Close() // one process holds a bolt file at a time
	t.Run("CrashInjection", func(t *testing.T) { crashAcrossProcesses(t, env) })
	t.Run("PoolTakesOverAtStart", func(t *testing.T) { poolTakesOverAtStart(t, env) })
}

func TestPostgres(t *testing.T) {
	url := testenv.Need(t, testenv.PostgresURL)
	table := testenv.UniqueName("svz_jobs_")
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
	c, table := dynamodbtest.Table(t, endpoint, "svz-jobs-", awsapi.WithHTTPClient(&testenv.MotoWrites{}))
	suite(t, dynamodbtest.Open(t, c, table))
	t.Run("CrashInjection", func(t *testing.T) { crashAcrossProcesses(t, dynamodbtest.Env(endpoint, table)) })
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
