package core_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core/jobs/jobstest"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/state"
	"github.com/supervaize/svz/core/store/memory"
)

// BenchmarkJobStartRatio compares a job.start that starts background work (the task written to
// the memory store and handed to the queue) with the same agent's synchronous job.start (its two
// steps run in the call, its job recorded with package state, the same answer), interleaved in one
// loop so that a busy machine slows both alike. x-sync is the ratio of their times (make
// bench-jobs; the goal is at most 1.2). "queue" keeps the reference as SQS or Cloud Tasks would;
// "pool" is the in-process pool, which runs the work on the same two cores meanwhile.
func BenchmarkJobStartRatio(b *testing.B) {
	b.Run("pool", func(b *testing.B) { jobStartRatio(b, jobs.NewPool(jobs.ScanEvery(0))) })
	// The queue only keeps the reference, as SQS or Cloud Tasks would: the call's own cost.
	b.Run("queue", func(b *testing.B) { jobStartRatio(b, &jobstest.Queue{}) })
}

func jobStartRatio(b *testing.B, q jobs.Dispatcher) {
	async := workController(b, q)
	syncAgent, _ := workAgent(b) // the same registration; job.start answers in the call
	reg := syncAgent.Config().Registration
	a, err := core.NewAgent(core.AgentConfig{Name: "W", Version: "1", Registration: reg})
	if err != nil {
		b.Fatal(err)
	}
	// The synchronous job.start does what an agent without background work does: the work
	// inline (the same two steps), the job recorded for job.sync (one state write), the same
	// answer.
	a.HandleAction("job.start", core.ActionFunc(func(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
		var in map[string]string
		if err := req.DecodeInput(&in); err != nil {
			return nil, err
		}
		name := strings.ToUpper(in["name"])
		greeting := "Hello " + name
		type job struct {
			ID, Mission, Status, Greeting string
			Input                         map[string]string
			Created                       time.Time
		}
		if err := state.Of[job](ctx, "jobs").Create(ctx, req.Job(), job{ID: req.Job(), Mission: req.MissionID, Status: contract.StateActive,
			Greeting: greeting, Input: in, Created: time.Now()}); err != nil {
			return nil, err
		}
		snap := &contract.JobState{Job: contract.Job{ID: req.Job(), AgentSlug: "w", MissionID: req.MissionID, Status: contract.StateActive,
			Source: contract.JobSource{Type: contract.SourceFreshStart}},
			Cases: []contract.Case{{ID: req.Job() + "-work", Lane: "work", Title: "greet", Status: contract.StatePending, Metadata: map[string]any{}, Steps: []contract.Step{}}}}
		return contract.OK(contract.Effect{Type: contract.EffectJobStarted, JobID: req.Job(), Status: contract.StateActive}).WithJobState(snap), nil
	}))
	sync, err := core.New(core.Config{APIKey: testKey, ServerID: "SRV-test", Authorizer: grant.LocalBypass{ServerID: "SRV-test"},
		Store: memory.New(), Logger: quietLogger()}, a)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sync.Close() })
	call := func(h http.Handler, i int) time.Duration {
		body := rpcBody(b, i, "supervaizer/action.invoke", actionParams("job.start", fmt.Sprintf("job-%d", i), map[string]any{"name": "ada"}))
		req := httptest.NewRequest(http.MethodPost, "/a2a", bytesReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", testKey)
		rec := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(rec, req)
		d := time.Since(start)
		if rec.Code != http.StatusOK || rec.Body.Len() < 200 {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
		return d
	}
	var s, w time.Duration
	i := 0
	for b.Loop() {
		s += call(sync, i)
		w += call(async, i)
		if rq, ok := q.(*jobstest.Queue); ok && i%1024 == 0 {
			rq.Take()
		}
		i++
	}
	b.ReportMetric(float64(w)/float64(s), "x-sync")
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
