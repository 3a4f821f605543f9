package lambda

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/adapters/adaptertest"
	"github.com/supervaize/svz/core/store/dynamodb/dynamodbtest"
	"github.com/supervaize/svz/internal/testenv"
)

// TestInstancesShareTheStore runs two instances of the real bootstrap, configured as template.yaml
// configures the function (SUPERVAIZER_STORE=dynamodb, SUPERVAIZER_STORE_TABLE), on one DynamoDB
// table in moto_server: a job.start retried on the other instance is replayed, not run again, and
// a conflicting retry is refused. Nothing the protocol promises lives in one instance's memory.
func TestInstancesShareTheStore(t *testing.T) {
	instances := twoInstancesOnOneTable(t)

	call := func(em *emulator, input string) (map[string]any, string) {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"supervaizer/action.invoke","params":{"request_id":"request-1","actor":{"user_id":"user-1"},` +
			`"workspace":{"id":"workspace-1"},"mission_id":"mission-1","agent_slug":"hello-world-ai-agent","surface":"job.start",` +
			`"action":"job.start","job_id":"job-1","idempotency_key":"idem-1","input":` + input + `}}`
		ev := localFunctionURLEvent("POST", "/a2a", "", body)
		ev.Headers["x-api-key"] = adaptertest.APIKey
		status, out := em.invoke(t, payload(t, ev))
		r, _ := decodeReply(t, out)
		if status != http.StatusOK || r.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", status, out)
		}
		var rpc struct{ Result map[string]any }
		if err := json.Unmarshal([]byte(r.Body), &rpc); err != nil || rpc.Result == nil {
			t.Fatalf("body %s", r.Body)
		}
		return rpc.Result, r.Body
	}
	// Hello World answers the same either way: the controller's log tells a run from a replay.
	const ran, replayed = `"replayed":false`, `"replayed":true`

	// The emulator relays the function's log lines asynchronously: wait for the one expected.
	logged := func(em *emulator, s string) bool {
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if strings.Contains(em.logs.String(), s) {
				return true
			}
		}
		return false
	}
	first, firstBody := call(instances[0], `{"count":1}`)
	if first["status"] != "ok" || !logged(instances[0], ran) {
		t.Fatalf("first run: %s", firstBody)
	}
	_, replayBody := call(instances[1], `{"count":1}`)
	if replayBody != firstBody || !logged(instances[1], replayed) || strings.Contains(instances[1].logs.String(), ran) {
		t.Fatalf("the retry on the other instance was not a replay:\n%s\n%s", replayBody, instances[1].logs)
	}
	conflict, _ := call(instances[1], `{"count":2}`)
	errs, _ := conflict["errors"].([]any)
	if conflict["status"] != "error" || len(errs) != 1 || errs[0].(map[string]any)["code"] != "idempotency_conflict" {
		t.Fatalf("conflicting retry: %v", conflict)
	}
}

// twoInstancesOnOneTable starts two instances of the real bootstrap under the emulator,
// configured as template.yaml configures the function (SUPERVAIZER_STORE=dynamodb,
// SUPERVAIZER_STORE_TABLE), on a new DynamoDB table in moto_server.
func twoInstancesOnOneTable(t *testing.T) [2]*emulator {
	t.Helper()
	// Both functions write the table at once: through MotoProxy their conditional writes are
	// atomic, as on DynamoDB (moto_server's are not).
	endpoint := testenv.MotoProxy(t, testenv.Need(t, testenv.AWSEndpoint))
	testenv.Need(t, testenv.RIE)
	_, table := dynamodbtest.Table(t, endpoint, "svz-lambda-test-")
	bootstrap := buildBootstrap(t)
	env := append(adaptertest.Environ(), dynamodbtest.Env(endpoint, table)...)
	return [2]*emulator{startEmulator(t, bootstrap, env...), startEmulator(t, bootstrap, env...)}
}
