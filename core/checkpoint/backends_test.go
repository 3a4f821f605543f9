package checkpoint_test

import (
	"testing"

	"github.com/supervaize/svz/core/store/dynamodb/dynamodbtest"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/core/store/storeenv/storeenvtest"
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
	env := storeenvtest.Bolt(t)
	// One process holds a bolt file at a time: the suite closes it before the crash children.
	s := storeenvtest.Open(t, env)
	suite(t, s)
	_ = s.Close()
	t.Run("CrashInjection", func(t *testing.T) { crashAcrossProcesses(t, env) })
}

func TestPostgres(t *testing.T) {
	env := storeenvtest.Postgres(t, "svz_checkpoint_")
	s := storeenvtest.Open(t, env)
	t.Cleanup(func() { _ = s.Close() })
	suite(t, s)
	t.Run("CrashInjection", func(t *testing.T) { crashAcrossProcesses(t, env) })
}

func TestRedis(t *testing.T) {
	env := storeenvtest.Redis(t)
	s := storeenvtest.Open(t, env)
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
