package core_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/jobs/jobstest"
	"github.com/supervaize/svz/core/store/memory"
)

// workShell is the agent "w" with no work yet: job.start declared, job.sync and job.stop
// declared without handlers (the controller serves them for the agent's work).
func workShell(t testing.TB) *core.Agent {
	t.Helper()
	reg, err := contract.BuildRegistration(contract.RegistrationSpec{
		AgentSlug: "w", DisplayName: "W", A2UICatalogVersion: "w.1",
		Surfaces:  []contract.SurfaceSpec{contract.SurfaceID("job.start")},
		Actions:   []contract.ActionSpec{contract.ActionID("job.start"), contract.ActionID("job.stop")},
		JobPolicy: &contract.JobPolicy{Sync: &contract.JobSyncPolicy{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := core.NewAgent(core.AgentConfig{Name: "W", Version: "1", Registration: reg})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// workAgent is workShell whose job.start starts background work of two steps.
func workAgent(t testing.TB) (*core.Agent, *jobs.Work[map[string]string]) {
	t.Helper()
	a := workShell(t)
	w := jobs.Define(a, "greet", func(ctx context.Context, in map[string]string) error {
		name, err := jobs.Step(ctx, "lookup", func(context.Context) (string, error) { return strings.ToUpper(in["name"]), nil })
		if err != nil {
			return err
		}
		_, err = jobs.Step(ctx, "write", func(context.Context) (string, error) { return "Hello " + name, nil }, jobs.Title("Write the greeting"))
		return err
	})
	a.HandleAction("job.start", core.ActionFunc(func(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
		var in map[string]string
		if err := req.DecodeInput(&in); err != nil {
			return nil, err
		}
		return w.Started(ctx, req, in)
	}))
	return a, w
}

func workController(t testing.TB, q jobs.Dispatcher) *core.Controller {
	t.Helper()
	a, _ := workAgent(t)
	return agentController(t, a, q)
}

// agentController serves a on the memory store with queue q.
func agentController(t testing.TB, a *core.Agent, q jobs.Dispatcher) *core.Controller {
	t.Helper()
	c, err := core.New(core.Config{APIKey: testKey, ServerID: "SRV-test", Authorizer: grant.LocalBypass{ServerID: "SRV-test"},
		Store: memory.New(), Jobs: q, Logger: quietLogger()}, a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func actionParams(action, job string, input any) map[string]any {
	p := params(map[string]any{"agent_slug": "w", "action": action, "job_id": job, "input": input})
	return p
}

func TestJobsThroughController(t *testing.T) {
	q := &jobstest.Queue{}
	c := workController(t, q)
	_, body := post(t, c, rpcBody(t, 1, "supervaizer/action.invoke", actionParams("job.start", "job-1", map[string]any{"name": "ada"})), nil)
	jsonEq(t, body, `{"jsonrpc":"2.0","id":1,"result":{"status":"ok","effects":[{"type":"job.started","job_id":"job-1","status":"active"}],`+
		`"job_state":{"job":{"id":"job-1","agent_slug":"w","mission_id":"mission-1","status":"active","source":{"type":"fresh_start"}},`+
		`"cases":[{"id":"job-1-work","lane":"work","title":"greet","status":"pending","metadata":{},"steps":[]}]}}}`)
	msgs := q.Take()
	if len(msgs) != 1 || string(msgs[0].Encode()) != `{"agent":"w","workspace":"workspace-1","job":"job-1","work":"greet","attempt":0}` {
		t.Fatalf("dispatched %+v", msgs)
	}
	if err := c.Jobs().Deliver(context.Background(), msgs[0], jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	// job.sync is served from the task: the two steps completed.
	_, body = post(t, c, rpcBody(t, 2, "supervaizer/action.invoke", actionParams("job.sync", "job-1", map[string]any{})), nil)
	jsonEq(t, body, `{"jsonrpc":"2.0","id":2,"result":{"status":"ok","effects":[{"type":"job.synced","job_id":"job-1","status":"completed"}],`+
		`"job_state":{"job":{"id":"job-1","agent_slug":"w","mission_id":"mission-1","status":"completed","source":{"type":"fresh_start"}},`+
		`"cases":[{"id":"job-1-work","lane":"work","title":"greet","status":"completed","metadata":{},"steps":[`+
		`{"id":"job-1-lookup","activity":"operation","status":"completed","title":"lookup","outputs":[]},`+
		`{"id":"job-1-write","activity":"operation","status":"completed","title":"Write the greeting","outputs":[]}]}]}}}`)
	// An unknown job is a business error; job.stop of a finished job leaves it as it is.
	_, body = post(t, c, rpcBody(t, 3, "supervaizer/action.invoke", actionParams("job.sync", "job-9", map[string]any{})), nil)
	jsonEq(t, body, `{"jsonrpc":"2.0","id":3,"result":{"status":"error","effects":[],"errors":[{"code":"job_not_found","message":"No background job \"job-9\" in this workspace"}]}}`)
	_, body = post(t, c, rpcBody(t, 4, "supervaizer/action.invoke", actionParams("job.stop", "job-1", map[string]any{})), nil)
	jsonEq(t, body, `{"jsonrpc":"2.0","id":4,"result":{"status":"ok","effects":[{"type":"job.stopped","job_id":"job-1","status":"completed"}],`+
		`"job_state":{"job":{"id":"job-1","agent_slug":"w","mission_id":"mission-1","status":"completed","source":{"type":"fresh_start"}},`+
		`"cases":[{"id":"job-1-work","lane":"work","title":"greet","status":"completed","metadata":{},"steps":[`+
		`{"id":"job-1-lookup","activity":"operation","status":"completed","title":"lookup","outputs":[]},`+
		`{"id":"job-1-write","activity":"operation","status":"completed","title":"Write the greeting","outputs":[]}]}]}}}`)
	_, body = post(t, c, rpcBody(t, 5, "supervaizer/action.invoke", actionParams("job.stop", "job-9", map[string]any{})), nil)
	jsonEq(t, body, `{"jsonrpc":"2.0","id":5,"result":{"status":"error","effects":[],"errors":[{"code":"job_not_found","message":"No background job \"job-9\" in this workspace"}]}}`)
	// The work's input never reaches the queue, and the task's record is the workspace's alone.
	if strings.Contains(string(msgs[0].Encode()), "ada") {
		t.Fatal("the message carries the input")
	}
}

func TestJobsPoolRunsWork(t *testing.T) {
	c := workController(t, jobs.NewPool(jobs.ScanEvery(0)))
	_, body := post(t, c, rpcBody(t, 1, "supervaizer/action.invoke", actionParams("job.start", "job-2", map[string]any{"name": "bo"})), nil)
	if !strings.Contains(string(body), `"status":"active"`) {
		t.Fatalf("job.start: %s", body)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, body = post(t, c, rpcBody(t, 2, "supervaizer/action.invoke", actionParams("job.sync", "job-2", map[string]any{})), nil)
		var resp struct {
			Result contract.ActionResult `json:"result"`
		}
		if err := json.Unmarshal(body, &resp); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(body), `"job_state":{"job":{"id":"job-2","agent_slug":"w","mission_id":"mission-1","status":"completed"`) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job did not complete: %s", body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestNewRefusesWorkWithoutQueue(t *testing.T) {
	a, _ := workAgent(t)
	_, err := core.New(core.Config{APIKey: testKey, Authorizer: grant.LocalBypass{}, Store: memory.New(), Logger: quietLogger()}, a)
	if err == nil || !strings.Contains(err.Error(), `agent "w" defines background work ([greet])`) || !strings.Contains(err.Error(), "SUPERVAIZER_JOBS_QUEUE_URL") {
		t.Fatalf("New without a queue: %v", err)
	}
}

func TestNewReportsWorkMistakes(t *testing.T) {
	a, _ := workAgent(t)
	jobs.Define(a, "greet", func(context.Context, struct{}) error { return nil })
	jobs.Define(a, "", func(context.Context, struct{}) error { return nil })
	jobs.Define[struct{}](a, "nil-func", nil)
	jobs.Define(a, "bad-attempts", func(context.Context, struct{}) error { return nil }, jobs.MaxAttempts(0))
	_, err := core.New(core.Config{APIKey: testKey, Authorizer: grant.LocalBypass{}, Store: memory.New(), Jobs: &jobstest.Queue{}, Logger: quietLogger()}, a)
	for _, want := range []string{`background work "greet": defined twice`, `background work "": a work name is 1 to 200 printable characters`,
		`background work "nil-func": the work function is required`, `background work "bad-attempts": jobs.MaxAttempts must be at least 1`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New: %v\nwant it to say %s", err, want)
		}
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestJobAnswerThroughController pins step.awaiting.submit as the controller serves it for
// background work: an answer to a step that does not wait, one that does not fit the step's
// fields, the answer that continues the work, and a second answer.
func TestJobAnswerThroughController(t *testing.T) {
	reg, err := contract.BuildRegistration(contract.RegistrationSpec{
		AgentSlug: "w", DisplayName: "W", A2UICatalogVersion: "w.1",
		Actions: []contract.ActionSpec{contract.ActionID("job.start"), contract.ActionID("step.awaiting.submit")},
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := core.NewAgent(core.AgentConfig{Name: "W", Version: "1", Registration: reg})
	if err != nil {
		t.Fatal(err)
	}
	type review struct {
		Approved bool `json:"approved"`
	}
	w := jobs.Define(a, "reviewed", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Await[review](ctx, "review", contract.Awaiting{Fields: []contract.FieldDefinition{{ID: "approved", Label: "Approve", Type: contract.FieldBoolean, Required: true}}},
			jobs.Title("Review"))
		return err
	})
	a.HandleAction("job.start", core.ActionFunc(func(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
		return w.Started(ctx, req, struct{}{})
	}))
	q := &jobstest.Queue{}
	c, err := core.New(core.Config{APIKey: testKey, ServerID: "SRV-test", Authorizer: grant.LocalBypass{ServerID: "SRV-test"},
		Store: memory.New(), Jobs: q, Logger: quietLogger()}, a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	post(t, c, rpcBody(t, 1, actionInvoke, actionParams("job.start", "job-1", map[string]any{})), nil)
	for _, m := range q.Take() {
		if err := c.Jobs().Deliver(context.Background(), m, jobs.Delivery{}); err != nil {
			t.Fatal(err)
		}
	}
	submit := func(id int, step string, input any) []byte {
		p := actionParams("step.awaiting.submit", "job-1", input)
		p["step_id"] = step
		_, body := post(t, c, rpcBody(t, id, actionInvoke, p), nil)
		return body
	}
	// A step id the job does not have, and a request without a step id, are not "not awaiting".
	jsonEq(t, submit(2, "job-1-other", map[string]any{"approved": true}),
		`{"jsonrpc":"2.0","id":2,"result":{"status":"error","effects":[],"errors":[{"code":"step_not_found","message":"Job \"job-1\" has no step \"job-1-other\"","field":"step_id"}]}}`)
	jsonEq(t, submit(21, "", map[string]any{"approved": true}),
		`{"jsonrpc":"2.0","id":21,"result":{"status":"error","effects":[],"errors":[{"code":"input_required","message":"step.awaiting.submit needs the job_id and step_id of the awaiting step","field":"step_id"}]}}`)
	jsonEq(t, submit(3, "job-1-review", map[string]any{"approved": "maybe"}),
		`{"jsonrpc":"2.0","id":3,"result":{"status":"error","effects":[],"errors":[{"code":"input_type","message":"Input should be a valid boolean","field":"approved"}]}}`)
	jsonEq(t, submit(4, "job-1-review", map[string]any{"approved": true}),
		`{"jsonrpc":"2.0","id":4,"result":{"status":"ok","effects":[{"type":"step.awaiting.submitted","job_id":"job-1","case_id":"job-1-work","step_id":"job-1-review","status":"active"}],`+
			`"job_state":{"job":{"id":"job-1","agent_slug":"w","mission_id":"mission-1","status":"active","source":{"type":"fresh_start"}},`+
			`"cases":[{"id":"job-1-work","lane":"work","title":"reviewed","status":"active","metadata":{},"steps":[`+
			`{"id":"job-1-review","activity":"operation","status":"completed","title":"Review","outputs":[]}]}]}}}`)
	// The same answer again (a retry, before a delivery took it) answers as the first; another
	// answer is refused.
	jsonEq(t, submit(5, "job-1-review", map[string]any{"approved": true}),
		`{"jsonrpc":"2.0","id":5,"result":{"status":"ok","effects":[{"type":"step.awaiting.submitted","job_id":"job-1","case_id":"job-1-work","step_id":"job-1-review","status":"active"}],`+
			`"job_state":{"job":{"id":"job-1","agent_slug":"w","mission_id":"mission-1","status":"active","source":{"type":"fresh_start"}},`+
			`"cases":[{"id":"job-1-work","lane":"work","title":"reviewed","status":"active","metadata":{},"steps":[`+
			`{"id":"job-1-review","activity":"operation","status":"completed","title":"Review","outputs":[]}]}]}}}`)
	jsonEq(t, submit(6, "job-1-review", map[string]any{"approved": false}),
		`{"jsonrpc":"2.0","id":6,"result":{"status":"error","effects":[],"errors":[{"code":"step_not_awaiting","message":"Step \"job-1-review\" is not awaiting an answer (answered already, or not a step that waits)","field":"step_id"}]}}`)
}
