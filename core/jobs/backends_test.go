package jobs_test

import (
	"testing"

	"github.com/supervaize/svz/core/store/dynamodb/dynamodbtest"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/core/store/storeenv/storeenvtest"
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
	suite2(t, s)
}

func TestBolt(t *testing.T) {
	env := storeenvtest.Bolt(t)
	s := storeenvtest.Open(t, env)
	suite(t, s)
	suite2(t, s)
	_ = s.Close() // one process holds a bolt file at a time
	t.Run("CrashInjection", func(t *testing.T) { crashAcrossProcesses(t, env) })
	t.Run("CrashInsideFanout", func(t *testing.T) { crashInsideFanout(t, env) })
	t.Run("CrashAroundFailure", func(t *testing.T) { crashAroundFailure(t, env) })
	t.Run("PoolTakesOverAtStart", func(t *testing.T) { poolTakesOverAtStart(t, env) })
	t.Run("SleepAcrossRestart", func(t *testing.T) { sleepAcrossRestart(t, env) })
	t.Run("DeployAcrossProcesses", func(t *testing.T) { deployAcrossProcesses(t, env) })
}

func TestPostgres(t *testing.T) {
	env := storeenvtest.Postgres(t, "svz_jobs_")
	s := storeenvtest.Open(t, env)
	t.Cleanup(func() { _ = s.Close() })
	suite(t, s)
	suite2(t, s)
	t.Run("CrashInjection", func(t *testing.T) { crashAcrossProcesses(t, env) })
	t.Run("CrashInsideFanout", func(t *testing.T) { crashInsideFanout(t, env) })
	t.Run("CrashAroundFailure", func(t *testing.T) { crashAroundFailure(t, env) })
	t.Run("IdentityTakesOverAtRestart", func(t *testing.T) { identityTakesOverAtRestart(t, env) })
	t.Run("SleepAcrossRestart", func(t *testing.T) { sleepAcrossRestart(t, env) })
	t.Run("DeployAcrossProcesses", func(t *testing.T) { deployAcrossProcesses(t, env) })
}

func TestRedis(t *testing.T) {
	env := storeenvtest.Redis(t)
	s := storeenvtest.Open(t, env)
	t.Cleanup(func() { _ = s.Close() })
	suite(t, s)
	suite2(t, s)
	t.Run("CrashInjection", func(t *testing.T) { crashAcrossProcesses(t, env) })
	t.Run("CrashInsideFanout", func(t *testing.T) { crashInsideFanout(t, env) })
	t.Run("CrashAroundFailure", func(t *testing.T) { crashAroundFailure(t, env) })
}

func TestDynamoDB(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	c, table := dynamodbtest.Table(t, endpoint, "svz-jobs-", awsapi.WithHTTPClient(&testenv.MotoWrites{}))
	ds := dynamodbtest.Open(t, c, table)
	suite(t, ds)
	suite2(t, ds)
	env := dynamodbtest.Env(endpoint, table)
	t.Run("CrashInjection", func(t *testing.T) { crashAcrossProcesses(t, env) })
	t.Run("CrashInsideFanout", func(t *testing.T) { crashInsideFanout(t, env) })
	t.Run("CrashAroundFailure", func(t *testing.T) { crashAroundFailure(t, env) })
}
