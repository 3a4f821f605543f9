package svztest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/idempotency"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/core/svztest"
)

const apiKey = "K-svztest"

// jobs is an agent's own state: the jobs its job.start created.
type jobs struct {
	mu  sync.Mutex
	ids []string
}

func (j *jobs) add(id string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.ids = append(j.ids, id)
	return len(j.ids)
}

func (j *jobs) snapshot() any {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.ids...)
}

// controller serves an agent whose job.start creates a job each time it runs and answers a
// result that does not depend on the run (so only the other checks can catch a second run).
func controller(t *testing.T, gate core.ActionGate, state *jobs, deterministic bool) *core.Controller {
	t.Helper()
	reg, err := contract.BuildRegistration(contract.RegistrationSpec{
		AgentSlug: "s", DisplayName: "S", A2UICatalogVersion: "s.1",
		Surfaces: []contract.SurfaceSpec{contract.SurfaceID("job.start")},
		Actions:  []contract.ActionSpec{contract.ActionID("job.start")},
	})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := core.NewAgent(core.AgentConfig{Name: "S", Version: "1.0", Registration: reg})
	if err != nil {
		t.Fatal(err)
	}
	agent.HandleAction("job.start", core.ActionFunc(func(_ context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
		n := state.add(*req.JobID)
		msg := "Job created"
		if !deterministic {
			msg = fmt.Sprintf("Job created (%d)", n)
		}
		return &contract.ActionResult{Status: contract.StatusOK, Effects: []contract.Effect{{Type: "job.started", JobID: *req.JobID, Message: msg}}}, nil
	}))
	c, err := core.New(core.Config{
		APIKey: apiKey, ServerID: "SRV", Authorizer: grant.LocalBypass{ServerID: "SRV"}, Gate: gate,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, agent)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func request(key string) contract.ActionRequest {
	job := "job-1"
	return contract.ActionRequest{
		RequestID: "request-1", Actor: contract.Actor{UserID: "user-1"}, Workspace: contract.WorkspaceRef{ID: "workspace-1"},
		MissionID: "mission-1", AgentSlug: "s", Surface: "job.start", Action: "job.start",
		Input: json.RawMessage(`{"count":1}`), JobID: &job, IdempotencyKey: &key,
	}
}

func TestPassesOnAnIdempotentController(t *testing.T) {
	var state jobs
	c := controller(t, idempotency.New(memory.New()), &state, false)
	res := svztest.AssertConfirmIdempotent(t, c, apiKey, request("key-1"), svztest.WithState(state.snapshot))
	if res.Status != contract.StatusOK || res.Effects[0].Message != "Job created (1)" {
		t.Errorf("result = %+v", res)
	}
	if got := state.snapshot().([]string); len(got) != 1 {
		t.Errorf("jobs = %v, want one", got)
	}
}

// recorder is a testing.TB that records failures instead of failing the real test.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	msgs   []string
	fatals atomic.Int32
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	r.fatals.Add(1)
	runtime.Goexit()
}

// failures runs the assertion against a recorder and returns what it reported.
func failures(t *testing.T, fn func(testing.TB)) (msgs []string, fatal bool) {
	t.Helper()
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r)
	}()
	<-done
	return r.msgs, r.fatals.Load() > 0
}

func TestFailsWithoutIdempotency(t *testing.T) {
	tests := []struct {
		name          string
		deterministic bool
		withState     bool
		want          []string
	}{
		{"result changes", false, true, []string{
			"the retry answered another result",
			"does not set replay_safety.strictly_idempotent_response = true",
			"the retry ran the handler again: it published supervaizer.effect",
			"the retry changed the agent's state",
		}},
		// Same bytes each run: the effect event still gives the second run away.
		{"same result, no state probe", true, false, []string{
			"does not set replay_safety.strictly_idempotent_response = true",
			"the retry ran the handler again: it published supervaizer.effect",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var state jobs
			c := controller(t, nil, &state, tt.deterministic)
			var opts []svztest.Option
			if tt.withState {
				opts = append(opts, svztest.WithState(state.snapshot))
			}
			msgs, fatal := failures(t, func(tb testing.TB) {
				svztest.AssertConfirmIdempotent(tb, c, apiKey, request("key-1"), opts...)
			})
			if fatal || len(msgs) != len(tt.want) {
				t.Fatalf("fatal = %v, failures = %q; want %d failures", fatal, msgs, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(msgs[i], w) {
					t.Errorf("failure %d = %q, want it to contain %q", i, msgs[i], w)
				}
			}
		})
	}
}

func TestRefusesUnusableCalls(t *testing.T) {
	var state jobs
	c := controller(t, idempotency.New(memory.New()), &state, false)

	noKey := request("")
	noKey.IdempotencyKey = nil
	msgs, fatal := failures(t, func(tb testing.TB) { svztest.AssertConfirmIdempotent(tb, c, apiKey, noKey) })
	if !fatal || len(msgs) != 1 || !strings.Contains(msgs[0], "the request has no idempotency_key") {
		t.Errorf("without a key: fatal = %v, failures = %q", fatal, msgs)
	}

	// A key used before: the first call is already a replay, so the check proves nothing.
	svztest.AssertConfirmIdempotent(t, c, apiKey, request("used"))
	msgs, fatal = failures(t, func(tb testing.TB) { svztest.AssertConfirmIdempotent(tb, c, apiKey, request("used")) })
	if !fatal || len(msgs) != 1 || !strings.Contains(msgs[0], "published no supervaizer.effect event") {
		t.Errorf("with a used key: fatal = %v, failures = %q", fatal, msgs)
	}

	msgs, fatal = failures(t, func(tb testing.TB) { svztest.AssertConfirmIdempotent(tb, c, "wrong-key", request("k2")) })
	if !fatal || len(msgs) != 1 || !strings.Contains(msgs[0], "GET /a2a/events: HTTP 401") {
		t.Errorf("with a wrong API key: fatal = %v, failures = %q", fatal, msgs)
	}
}
