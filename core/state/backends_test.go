package state_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/bolt"
	"github.com/supervaize/svz/core/store/dynamodb/dynamodbtest"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/core/store/postgres"
	"github.com/supervaize/svz/core/store/redis"
	"github.com/supervaize/svz/internal/awsapi"
	"github.com/supervaize/svz/internal/testenv"
)

// The state conformance suite on every backend, each against its real server (started by
// scripts/with-services; skipped without it, failed under CI=true).

func TestMemory(t *testing.T) {
	conformance(t, func(testing.TB) store.Store { return memory.New() })
}

func TestBolt(t *testing.T) {
	conformance(t, func(t testing.TB) store.Store {
		s, err := bolt.Open(filepath.Join(t.TempDir(), "svz.db"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestPostgres(t *testing.T) {
	url := testenv.Need(t, testenv.PostgresURL)
	table := testenv.UniqueName("svz_state_test_")
	t.Cleanup(func() {
		pool, err := pgxpool.New(context.Background(), url)
		if err == nil {
			_, _ = pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+table)
			pool.Close()
		}
	})
	conformance(t, func(t testing.TB) store.Store {
		pool, err := pgxpool.New(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		s, err := postgres.New(context.Background(), pool, postgres.WithTable(table))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestRedis(t *testing.T) {
	url := testenv.Need(t, testenv.RedisURL)
	conformance(t, func(t testing.TB) store.Store {
		opts, err := goredis.ParseURL(url)
		if err != nil {
			t.Fatal(err)
		}
		s, err := redis.New(context.Background(), goredis.NewClient(opts))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestDynamoDB(t *testing.T) {
	// The goroutines race at the compare-and-swap level; testenv.MotoWrites keeps moto's
	// conditional writes atomic, as DynamoDB's are.
	c, table := dynamodbtest.Table(t, testenv.Need(t, testenv.AWSEndpoint), "svz-state-test-", awsapi.WithHTTPClient(&testenv.MotoWrites{}))
	conformance(t, func(t testing.TB) store.Store { return dynamodbtest.Open(t, c, table) })
}
