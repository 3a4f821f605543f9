package core_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"testing"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/jobs/jobstest"
	"github.com/supervaize/svz/core/store/memory"
)

// TestJobRefusals: what no retry of a job.start gets past is answered with a result of status
// "error" naming it, not with the internal error (-32603) Studio retries forever; the handler
// returns Started's error as it is. A job.start without a job_id, a second work for a running
// job, an input too large for the store (its limit and the record's size in the message); the
// queue gets nothing for any of them.
func TestJobRefusals(t *testing.T) {
	reg, err := contract.BuildRegistration(contract.RegistrationSpec{
		AgentSlug: "w", DisplayName: "W", A2UICatalogVersion: "w.1",
		Actions:   []contract.ActionSpec{contract.ActionID("job.start")},
		JobPolicy: &contract.JobPolicy{Sync: &contract.JobSyncPolicy{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := core.NewAgent(core.AgentConfig{Name: "W", Version: "1", Registration: reg})
	if err != nil {
		t.Fatal(err)
	}
	nop := func(context.Context, map[string]string) error { return nil }
	works := map[string]*jobs.Work[map[string]string]{"a": jobs.Define(a, "a", nop), "b": jobs.Define(a, "b", nop)}
	a.HandleAction("job.start", core.ActionFunc(func(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
		var in map[string]string
		if err := req.DecodeInput(&in); err != nil {
			return nil, err
		}
		switch in["snapshot"] { // what checkpoint.FromJobStart returns of a snapshot it cannot take
		case "invalid":
			return nil, fmt.Errorf("%w: input.rule_snapshot.hash must be a non-empty string", checkpoint.ErrInvalidSnapshot)
		case "retried":
			return nil, checkpoint.ErrRetrySnapshot
		case "other agent":
			return nil, checkpoint.ErrOtherAgent
		}
		return works[in["work"]].Started(ctx, req, in)
	}))
	q := &jobstest.Queue{}
	c, err := core.New(core.Config{APIKey: testKey, ServerID: "SRV-test", Authorizer: grant.LocalBypass{ServerID: "SRV-test"},
		Store: memory.New(memory.WithMaxValueSize(2048)), Jobs: q, Logger: quietLogger()}, a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })

	noJob := params(map[string]any{"agent_slug": "w", "action": "job.start", "input": map[string]any{"work": "a"}})
	_, body := post(t, c, rpcBody(t, 1, "supervaizer/action.invoke", noJob), nil)
	jsonEq(t, body, `{"jsonrpc":"2.0","id":1,"result":{"status":"error","effects":[],"errors":[{"code":"job_id_required",`+
		`"message":"Action job.start starts background work and needs the request's job_id, which this request lacks (Studio assigns it to job.start)"}]}}`)

	_, body = post(t, c, rpcBody(t, 2, "supervaizer/action.invoke", actionParams("job.start", "job-1", map[string]any{"work": "a"})), nil)
	if !regexp.MustCompile(`"status":"ok"`).Match(body) || len(q.Take()) != 1 {
		t.Fatalf("first start: %s", body)
	}
	_, body = post(t, c, rpcBody(t, 3, "supervaizer/action.invoke", actionParams("job.start", "job-1", map[string]any{"work": "b"})), nil)
	jsonEq(t, body, `{"jsonrpc":"2.0","id":3,"result":{"status":"error","effects":[],"errors":[{"code":"job_conflict",`+
		`"message":"Job \"job-1\" already runs other background work: start this one as a job of its own"}]}}`)

	_, body = post(t, c, rpcBody(t, 5, "supervaizer/action.invoke", actionParams("job.start", "job-1", map[string]any{"work": "a", "lead": "acme"})), nil)
	jsonEq(t, body, `{"jsonrpc":"2.0","id":5,"result":{"status":"error","effects":[],"errors":[{"code":"job_conflict",`+
		`"message":"Job \"job-1\" was started with another input: a job id starts one job, so start a new job for this input"}]}}`)
	_, body = post(t, c, rpcBody(t, 6, "supervaizer/action.invoke", actionParams("job.start", "job-3", map[string]any{"snapshot": "invalid"})), nil)
	jsonEq(t, body, `{"jsonrpc":"2.0","id":6,"result":{"status":"error","effects":[],"errors":[{"code":"input_invalid",`+
		`"message":"governed job: invalid rule_snapshot: input.rule_snapshot.hash must be a non-empty string","field":"rule_snapshot"}]}}`)
	for id, snapshot := range map[int]string{7: "retried", 8: "other agent"} {
		_, body = post(t, c, rpcBody(t, id, "supervaizer/action.invoke", actionParams("job.start", "job-3", map[string]any{"snapshot": snapshot})), nil)
		want := map[string]string{"retried": checkpoint.ErrRetrySnapshot.Error(), "other agent": checkpoint.ErrOtherAgent.Error()}[snapshot]
		jsonEq(t, body, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"status":"error","effects":[],"errors":[{"code":"rule_snapshot_refused","message":%q}]}}`, id, want))
	}

	// An input that does not compress, larger than the store keeps.
	r := rand.New(rand.NewPCG(1, 2))
	big := make([]byte, 3000)
	for i := range big {
		big[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[r.IntN(36)]
	}
	_, body = post(t, c, rpcBody(t, 4, "supervaizer/action.invoke", actionParams("job.start", "job-2", map[string]any{"work": "a", "blob": string(big)})), nil)
	var resp struct {
		Result struct {
			Status string
			Errors []contract.ResultError
		}
	}
	if err := json.Unmarshal(body, &resp); err != nil || resp.Result.Status != "error" || len(resp.Result.Errors) != 1 || resp.Result.Errors[0].Code != "input_too_large" {
		t.Fatalf("too large: %s", body)
	}
	m := regexp.MustCompile(`^The input is too large to keep: the job's record would be (\d+) bytes, and the controller's store keeps at most 2048; ` +
		`send a smaller input \(large data belongs in a data resource or an artifact\)$`).FindStringSubmatch(resp.Result.Errors[0].Message)
	if m == nil {
		t.Fatalf("too large: %q", resp.Result.Errors[0].Message)
	}
	if n, _ := strconv.Atoi(m[1]); n <= 2048 {
		t.Fatalf("too large: %q", resp.Result.Errors[0].Message)
	}
	if left := q.Take(); len(left) != 0 {
		t.Fatalf("refusals dispatched %+v", left)
	}
}
