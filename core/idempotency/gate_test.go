package idempotency_test

import (
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/idempotency"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/core/store/storetest"
)

var _ core.ActionGate = (*idempotency.Gate)(nil)

func ptr[T any](v T) *T { return &v }

// request is a verified job.start with an idempotency key; edit it to vary one field.
func request() *contract.ActionRequest {
	return &contract.ActionRequest{
		RequestID: "request-1",
		Actor:     contract.Actor{UserID: "user-1"},
		Workspace: contract.WorkspaceRef{ID: "workspace-1", Slug: ptr("workspace")},
		MissionID: "mission-1",
		AgentSlug: "s",
		Surface:   "job.start",
		Action:    "job.start",
		Input:     json.RawMessage(`{"count":2,"name":"Campaign"}`),
		JobID:     ptr("job-1"),

		IdempotencyKey: ptr("idem_start_campaign_123"),
		WorkspaceAuthorization: &contract.VerifiedWorkspaceContext{
			GrantID: "grant-1", WorkspaceID: "workspace-1", AgentID: "studio-agent-1", AgentSlug: "s",
			ServerID: "SRV", Scopes: []string{"supervaizer/action.invoke", "job.start"},
		},
	}
}

// handler counts its runs and answers a result that names the run.
type handler struct {
	runs   atomic.Int32
	result func(n int32) (*contract.ActionResult, error)
}

func (h *handler) run(context.Context) (*contract.ActionResult, error) {
	n := h.runs.Add(1)
	if h.result != nil {
		return h.result(n)
	}
	return &contract.ActionResult{
		Status:  contract.StatusOK,
		Effects: []contract.Effect{{Type: "job.started", JobID: "job-1", Count: ptr(int(n)), Extra: contract.Extra{"run": json.RawMessage(`"run-` + string(rune('0'+n)) + `"`)}}},
	}, nil
}

type fixture struct {
	clock *storetest.Clock
	store *memory.Store
	gate  *idempotency.Gate
	logs  *bytes.Buffer
}

func newFixture(t *testing.T, opts ...memory.Option) *fixture {
	t.Helper()
	c := storetest.NewClock()
	s := memory.New(append([]memory.Option{memory.WithClock(c.Now)}, opts...)...)
	t.Cleanup(func() { _ = s.Close() })
	logs := &bytes.Buffer{}
	// A lease of an hour is never renewed during a test (renewals run on real timers; see
	// gate_internal_test.go for them): the claim then ends with the run, as a dead holder's does.
	g := idempotency.New(s, idempotency.WithClock(c.Now), idempotency.WithMaxRun(time.Minute), idempotency.WithLease(time.Hour),
		idempotency.WithLogger(slog.New(slog.NewJSONHandler(logs, nil))))
	return &fixture{clock: c, store: s, gate: g, logs: logs}
}

func (f *fixture) do(t *testing.T, req *contract.ActionRequest, h *handler) string {
	t.Helper()
	res, err := f.gate.Do(context.Background(), req, h.run)
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	return encode(t, res)
}

func encode(t *testing.T, res *contract.ActionResult) string {
	t.Helper()
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const firstResult = `{"status":"ok","effects":[{"type":"job.started","job_id":"job-1","count":1,"run":"run-1"}],` +
	`"replay_safety":{"dedupe_keys":[],"stable_external_ids_required":true,"strictly_idempotent_response":true,"convergent":true}}`

const conflictResult = `{"status":"error","effects":[],"errors":[{"code":"idempotency_conflict","message":"This idempotency_key ` +
	`was already used for job.start with a different input or identities (mission_id, job_id). A retry must resend the ` +
	`original request unchanged."}]}`

func TestReplayReturnsTheOriginalResult(t *testing.T) {
	f := newFixture(t)
	var h handler
	if got := f.do(t, request(), &h); got != firstResult {
		t.Fatalf("first result = %s\nwant %s", got, firstResult)
	}
	// A retry is a new transport call: new request id, maybe another user, a new grant token.
	retry := request()
	retry.RequestID = "request-2"
	retry.Actor = contract.Actor{UserID: "user-2", Extra: contract.Extra{"email": json.RawMessage(`"u2@example.com"`)}}
	retry.WorkspaceAuthorization.GrantID = "grant-2"
	retry.Input = json.RawMessage(`{"name":"Campaign","count":2}`) // same members, another order
	f.clock.Advance(idempotency.DefaultRetention - time.Millisecond)
	if got := f.do(t, retry, &h); got != firstResult {
		t.Errorf("replay = %s\nwant %s", got, firstResult)
	}
	if n := h.runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}

	// After the retention the key is free again.
	f.clock.Advance(time.Millisecond)
	f.do(t, retry, &h)
	if n := h.runs.Load(); n != 2 {
		t.Errorf("after the retention the handler ran %d times in all, want 2", n)
	}
}

func TestConflict(t *testing.T) {
	edits := map[string]func(*contract.ActionRequest){
		"input":           func(r *contract.ActionRequest) { r.Input = json.RawMessage(`{"count":3,"name":"Campaign"}`) },
		"number spelling": func(r *contract.ActionRequest) { r.Input = json.RawMessage(`{"count":2.0,"name":"Campaign"}`) },
		"job_id":          func(r *contract.ActionRequest) { r.JobID = ptr("job-2") },
		"no job_id":       func(r *contract.ActionRequest) { r.JobID = nil },
		"mission_id":      func(r *contract.ActionRequest) { r.MissionID = "mission-2" },
		"surface":         func(r *contract.ActionRequest) { r.Surface = "other" },
		"case_id":         func(r *contract.ActionRequest) { r.CaseID = ptr("case-1") },
		"step_id":         func(r *contract.ActionRequest) { r.StepID = ptr("step-1") },
		"input member":    func(r *contract.ActionRequest) { r.Input = json.RawMessage(`{"count":2,"name":"Campaign","x":null}`) },
		"no input":        func(r *contract.ActionRequest) { r.Input = nil },
	}
	for name, edit := range edits {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			var h handler
			f.do(t, request(), &h)
			other := request()
			edit(other)
			if got := f.do(t, other, &h); got != conflictResult {
				t.Errorf("result = %s\nwant %s", got, conflictResult)
			}
			if n := h.runs.Load(); n != 1 {
				t.Errorf("handler ran %d times, want 1", n)
			}
			// The original request still replays.
			if got := f.do(t, request(), &h); got != firstResult {
				t.Errorf("replay after a conflict = %s", got)
			}
		})
	}
}

// TestRetryWithCurrentContextReplays: Studio resends a job.start with the mission's current name
// and metadata, the workspace's current slug and its own transient context; none of that makes
// it another request (seeds, "Idempotence" and "Contexte de mission").
func TestRetryWithCurrentContextReplays(t *testing.T) {
	edits := map[string]func(*contract.ActionRequest){
		"mission metadata": func(r *contract.ActionRequest) {
			r.Mission = &contract.MissionContext{ID: r.MissionID, Metadata: json.RawMessage(`{"filter":{"contact":"c-2"}}`)}
		},
		"mission name": func(r *contract.ActionRequest) {
			r.Mission = &contract.MissionContext{ID: r.MissionID, Name: ptr("Renamed mission")}
		},
		"mission unknown member": func(r *contract.ActionRequest) {
			r.Mission = &contract.MissionContext{ID: r.MissionID, Extra: contract.Extra{"color": json.RawMessage(`"red"`)}}
		},
		"workspace slug":    func(r *contract.ActionRequest) { r.Workspace.Slug = ptr("renamed-workspace") },
		"no workspace slug": func(r *contract.ActionRequest) { r.Workspace.Slug = nil },
		"workspace member":  func(r *contract.ActionRequest) { r.Workspace.Extra = contract.Extra{"name": json.RawMessage(`"W"`)} },
		"draft_session_id":  func(r *contract.ActionRequest) { r.DraftSessionID = ptr("draft-2") },
		"request_id":        func(r *contract.ActionRequest) { r.RequestID = "request-2" },
		"actor":             func(r *contract.ActionRequest) { r.Actor = contract.Actor{UserID: "user-2"} },
		"grant":             func(r *contract.ActionRequest) { r.WorkspaceAuthorization.GrantID = "grant-2" },
		"unknown member":    func(r *contract.ActionRequest) { r.Extra = contract.Extra{"priority": json.RawMessage(`1`)} },
		"input spacing": func(r *contract.ActionRequest) {
			r.Input = json.RawMessage(" {\"name\" : \"Campaign\", \"count\" : 2} ")
		},
	}
	for name, edit := range edits {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			var h handler
			first := request()
			first.Mission = &contract.MissionContext{ID: first.MissionID, Name: ptr("Mission"), Metadata: json.RawMessage(`{"filter":{"contact":"c-1"}}`)}
			first.DraftSessionID = ptr("draft-1")
			if got := f.do(t, first, &h); got != firstResult {
				t.Fatalf("first result = %s", got)
			}
			retry := request()
			retry.Mission = &contract.MissionContext{ID: retry.MissionID, Name: ptr("Mission"), Metadata: json.RawMessage(`{"filter":{"contact":"c-1"}}`)}
			retry.DraftSessionID = ptr("draft-1")
			edit(retry)
			if got := f.do(t, retry, &h); got != firstResult {
				t.Errorf("retry = %s\nwant the replay %s", got, firstResult)
			}
			if n := h.runs.Load(); n != 1 {
				t.Errorf("handler ran %d times, want 1", n)
			}
		})
	}
}

// TestScope: the key is scoped by verified workspace, agent and action. job.start.preview shares
// its key with job.start in Studio; gating both would make the confirm conflict with the preview.
func TestScope(t *testing.T) {
	edits := map[string]func(*contract.ActionRequest){
		"verified workspace": func(r *contract.ActionRequest) { r.WorkspaceAuthorization.WorkspaceID = "workspace-2" },
		"agent":              func(r *contract.ActionRequest) { r.AgentSlug = "other-agent" },
		"action":             func(r *contract.ActionRequest) { r.Action = "job.stop" },
		"key":                func(r *contract.ActionRequest) { r.IdempotencyKey = ptr("idem_other") },
		"no verified context": func(r *contract.ActionRequest) {
			r.WorkspaceAuthorization = nil // a bootstrap action: scoped apart from verified calls
		},
	}
	for name, edit := range edits {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			var h handler
			f.do(t, request(), &h)
			other := request()
			edit(other)
			if got := f.do(t, other, &h); !strings.HasPrefix(got, `{"status":"ok"`) || h.runs.Load() != 2 {
				t.Errorf("result = %s after %d runs; want a second, independent run", got, h.runs.Load())
			}
		})
	}

	// The request's workspace is not what scopes a verified call: the verified one is (the grant
	// verifier refuses a request whose workspace is not the token's), so this is the same record.
	f := newFixture(t)
	var h handler
	f.do(t, request(), &h)
	spoofed := request()
	spoofed.Workspace.ID = "workspace-2"
	if got := f.do(t, spoofed, &h); got != firstResult || h.runs.Load() != 1 {
		t.Errorf("same verified workspace, another request workspace: %s after %d runs; want the replay", got, h.runs.Load())
	}
}

func TestInProgress(t *testing.T) {
	f := newFixture(t)
	release := make(chan struct{})
	started := make(chan struct{})
	h := handler{result: func(int32) (*contract.ActionResult, error) {
		close(started)
		<-release
		return &contract.ActionResult{Status: contract.StatusOK}, nil
	}}
	ctx, cancel := context.WithDeadline(context.Background(), f.clock.Now().Add(30*time.Second))
	defer cancel()
	done := make(chan string)
	go func() {
		res, err := f.gate.Do(ctx, request(), h.run)
		if err != nil {
			t.Errorf("first Do: %v", err)
		}
		done <- encode(t, res)
	}()
	<-started

	leaseEnd := f.clock.Now().Add(30*time.Second + idempotency.SkewMargin).UTC().Format(time.RFC3339Nano)
	want := `{"status":"error","effects":[],"errors":[{"code":"idempotency_in_progress","message":"job.start with this ` +
		`idempotency_key is still running; retry with the same key in 32 s.","lease_expires_at":"` + leaseEnd + `","retry_after_seconds":32}]}`
	if got := f.do(t, request(), &h); got != want {
		t.Errorf("during the run = %s\nwant %s", got, want)
	}
	// The hint is what is left of the lease, never below 1 s.
	f.clock.Advance(10 * time.Second)
	if got := f.do(t, request(), &h); !strings.Contains(got, `"retry_after_seconds":22}`) {
		t.Errorf("10 s later = %s", got)
	}
	f.clock.Advance(20*time.Second + idempotency.SkewMargin - 300*time.Millisecond)
	if got := f.do(t, request(), &h); !strings.Contains(got, `"retry_after_seconds":1}`) {
		t.Errorf("near the lease end = %s", got)
	}
	// A conflicting request is a conflict even while the first runs.
	other := request()
	other.JobID = ptr("job-2")
	if got := f.do(t, other, &h); got != conflictResult {
		t.Errorf("conflicting request during the run = %s", got)
	}
	close(release)
	<-done
	if n := h.runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

func TestConcurrentIdenticalRequestsRunOnce(t *testing.T) {
	f := newFixture(t)
	var h handler
	h.result = func(int32) (*contract.ActionResult, error) {
		time.Sleep(20 * time.Millisecond)
		return &contract.ActionResult{Status: contract.StatusOK}, nil
	}
	var wg sync.WaitGroup
	var ok, inProgress atomic.Int32
	for range 50 {
		wg.Go(func() {
			res, err := f.gate.Do(context.Background(), request(), h.run)
			switch {
			case err != nil:
				t.Errorf("Do: %v", err)
			case res.Status == contract.StatusOK:
				ok.Add(1)
			case res.Errors[0].Code == idempotency.CodeInProgress:
				inProgress.Add(1)
			default:
				t.Errorf("unexpected result %s", encode(t, res))
			}
		})
	}
	wg.Wait()
	if h.runs.Load() != 1 || ok.Load()+inProgress.Load() != 50 || ok.Load() < 1 {
		t.Errorf("runs = %d, ok = %d, in progress = %d; want 1 run and 50 answers", h.runs.Load(), ok.Load(), inProgress.Load())
	}
}

func TestFailedRunReleasesTheKey(t *testing.T) {
	f := newFixture(t)
	h := handler{result: func(n int32) (*contract.ActionResult, error) {
		if n == 1 {
			return nil, errors.New("upstream unavailable")
		}
		return &contract.ActionResult{Status: contract.StatusOK}, nil
	}}
	_, err := f.gate.Do(context.Background(), request(), h.run)
	if err == nil || err.Error() != "upstream unavailable" {
		t.Fatalf("Do error = %v, want the handler's error unchanged", err)
	}
	if got := f.do(t, request(), &h); !strings.HasPrefix(got, `{"status":"ok"`) || h.runs.Load() != 2 {
		t.Errorf("retry after a failed run = %s, runs = %d; want a second run", got, h.runs.Load())
	}

	// A handler that returns nothing is a failed run too.
	g := newFixture(t)
	nilResult := handler{result: func(int32) (*contract.ActionResult, error) { return nil, nil }}
	if _, err := g.gate.Do(context.Background(), request(), nilResult.run); err == nil {
		t.Fatal("Do with a nil result succeeded")
	}
	var ok handler
	g.do(t, request(), &ok)
	if ok.runs.Load() != 1 {
		t.Error("the key stayed claimed after a nil result")
	}
}

// TestErrorResultIsRecorded: status "error" is an answer, not a failure: it is replayed.
func TestErrorResultIsRecorded(t *testing.T) {
	f := newFixture(t)
	h := handler{result: func(int32) (*contract.ActionResult, error) {
		return &contract.ActionResult{Status: contract.StatusError, Errors: []contract.ResultError{{Code: "quota_exceeded", Message: "No credits left"}}}, nil
	}}
	want := `{"status":"error","effects":[],"replay_safety":{"dedupe_keys":[],"stable_external_ids_required":true,` +
		`"strictly_idempotent_response":true,"convergent":true},"errors":[{"code":"quota_exceeded","message":"No credits left"}]}`
	for range 2 {
		if got := f.do(t, request(), &h); got != want {
			t.Errorf("result = %s\nwant %s", got, want)
		}
	}
	if n := h.runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

// TestRefusalReleasesTheKey: a refusal that changed nothing (only input_* errors, no effect) is
// not recorded, so the corrected request runs with the same key; a refusal that reports an
// effect, or any other error, is recorded like every answer.
func TestRefusalReleasesTheKey(t *testing.T) {
	f := newFixture(t)
	h := handler{result: func(n int32) (*contract.ActionResult, error) {
		if n == 1 {
			return contract.Refuse(contract.InvalidField("count", "Count must be even")), nil
		}
		return &contract.ActionResult{Status: contract.StatusOK}, nil
	}}
	want := `{"status":"error","effects":[],"errors":[{"code":"input_invalid","message":"Count must be even","field":"count"}]}`
	if got := f.do(t, request(), &h); got != want {
		t.Errorf("refusal = %s\nwant %s", got, want)
	}
	fixed := request()
	fixed.Input = json.RawMessage(`{"count":4,"name":"Campaign"}`)
	if got := f.do(t, fixed, &h); !strings.HasPrefix(got, `{"status":"ok"`) || h.runs.Load() != 2 {
		t.Errorf("the corrected request with the same key = %s after %d runs; want a run, not %s", got, h.runs.Load(), idempotency.CodeConflict)
	}
	if got := f.do(t, fixed, &h); !strings.Contains(got, `"strictly_idempotent_response":true`) || h.runs.Load() != 2 {
		t.Errorf("its retry = %s after %d runs; want the replay", got, h.runs.Load())
	}

	for name, res := range map[string]*contract.ActionResult{
		"with an effect": {Status: contract.StatusError, Effects: []contract.Effect{{Type: "job.started"}},
			Errors: []contract.ResultError{contract.InvalidField("count", "odd")}},
		"a business error": {Status: contract.StatusError, Errors: []contract.ResultError{{Code: "quota_exceeded"}}},
		"mixed":            {Status: contract.StatusError, Errors: []contract.ResultError{contract.InvalidField("count", "odd"), {Code: "quota_exceeded"}}},
	} {
		g := newFixture(t)
		rec := handler{result: func(int32) (*contract.ActionResult, error) { return res, nil }}
		g.do(t, request(), &rec)
		other := request()
		other.Input = json.RawMessage(`{"count":4}`)
		if got := g.do(t, other, &rec); got != conflictResult || rec.runs.Load() != 1 {
			t.Errorf("%s: another input with the same key = %s after %d runs; want the conflict (the first answer is recorded)", name, got, rec.runs.Load())
		}
	}
}

// TestReplayIsByteIdentical: free-form members (a setup plan given as a Go struct, maps, extra
// members, non-ASCII text) replay exactly as first answered.
func TestReplayIsByteIdentical(t *testing.T) {
	f := newFixture(t)
	dedupe := &contract.ReplaySafety{DedupeKeys: []string{"job-1"}, Convergent: ptr(false)}
	h := handler{result: func(int32) (*contract.ActionResult, error) {
		return &contract.ActionResult{
			Status:       contract.StatusOK,
			ReplaySafety: dedupe,
			SetupPlan:    struct{ Zeta, Alpha string }{"z", "a"},
			Effects: []contract.Effect{{Type: "job.started", Message: "Démarré ✓ <ok>", Item: map[string]any{"b": 1, "a": []any{1.5, "x"}},
				Extra: contract.Extra{"external_ref": json.RawMessage(`{"y":1,"x":2}`)}}},
			JobState: &contract.JobState{Job: contract.Job{ID: "job-1", AgentSlug: "s", MissionID: "mission-1", Status: "running",
				Source: contract.JobSource{Type: "fresh_start"}}},
			Extra: contract.Extra{"external_version": json.RawMessage(`"v7"`)},
		}, nil
	}}
	first := f.do(t, request(), &h)
	replay := f.do(t, request(), &h)
	if first != replay {
		t.Errorf("first = %s\nreplay = %s", first, replay)
	}
	if !strings.Contains(first, `"dedupe_keys":["job-1"],"stable_external_ids_required":true,"strictly_idempotent_response":true,"convergent":false`) {
		t.Errorf("the handler's replay_safety was not kept: %s", first)
	}
	if dedupe.StrictlyIdempotentResponse != nil {
		t.Error("the gate modified the handler's replay_safety value")
	}
}

func TestLease(t *testing.T) {
	f := newFixture(t)
	deadline := f.clock.Now().Add(7 * time.Second)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	var runDeadline time.Time
	h := handler{result: func(int32) (*contract.ActionResult, error) {
		return &contract.ActionResult{Status: contract.StatusOK}, nil
	}}
	_, err := f.gate.Do(ctx, request(), func(ctx context.Context) (*contract.ActionResult, error) {
		runDeadline, _ = ctx.Deadline()
		// The claim lives until the request deadline plus the skew margin.
		f.clock.Advance(7*time.Second + idempotency.SkewMargin - time.Millisecond)
		return h.run(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !runDeadline.Equal(deadline) {
		t.Errorf("handler deadline = %v, want the request's %v", runDeadline, deadline)
	}
	if n := h.runs.Load(); n != 1 {
		t.Fatalf("runs = %d", n)
	}
	// Recorded just before the claim ran out: a replay, not a second run.
	if got := f.do(t, request(), &h); !strings.Contains(got, `"strictly_idempotent_response":true`) || h.runs.Load() != 1 {
		t.Errorf("after recording at the lease end: %s, runs %d", got, h.runs.Load())
	}

	// Without a deadline the default lease bounds the handler.
	g := newFixture(t)
	var got time.Time
	start := g.clock.Now()
	_, err = g.gate.Do(context.Background(), request(), func(ctx context.Context) (*contract.ActionResult, error) {
		got, _ = ctx.Deadline()
		return &contract.ActionResult{Status: contract.StatusOK}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := start.Add(time.Minute); !got.Equal(want) {
		t.Errorf("handler deadline without a request deadline = %v, want %v", got, want)
	}

	// A request whose deadline has passed does not claim anything.
	past, cancel2 := context.WithDeadline(context.Background(), g.clock.Now().Add(-time.Second))
	defer cancel2()
	other := request()
	other.IdempotencyKey = ptr("late")
	if _, err := g.gate.Do(past, other, h.run); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Do after the deadline: error = %v, want DeadlineExceeded", err)
	}
}

// TestLeaseExpiryThenRetry: a run that outlives its lease (a crashed or stuck instance) no longer
// blocks the key; the retry runs, and the stuck run cannot overwrite the retry's record.
func TestLeaseExpiryThenRetry(t *testing.T) {
	f := newFixture(t)
	release := make(chan struct{})
	started := make(chan struct{})
	var h handler
	h.result = func(n int32) (*contract.ActionResult, error) {
		if n == 1 {
			close(started)
			<-release // ignores its context, like a stuck instance
		}
		return &contract.ActionResult{Status: contract.StatusOK, Effects: []contract.Effect{{Type: "job.started", Count: ptr(int(n))}}}, nil
	}
	stuck := make(chan string)
	go func() {
		res, err := f.gate.Do(context.Background(), request(), h.run)
		if err != nil {
			t.Errorf("stuck Do: %v", err)
		}
		stuck <- encode(t, res)
	}()
	<-started
	f.clock.Advance(time.Minute + idempotency.SkewMargin)
	retry := f.do(t, request(), &h)
	if !strings.Contains(retry, `"count":2`) || !strings.Contains(retry, `"strictly_idempotent_response":true`) {
		t.Errorf("retry after the lease = %s; want the second run's result", retry)
	}
	close(release)
	late := <-stuck
	if !strings.Contains(late, `"count":1`) || !strings.Contains(late, `"strictly_idempotent_response":false`) {
		t.Errorf("stuck run answered %s; want its own result flagged as not replayable", late)
	}
	if !strings.Contains(f.logs.String(), "cannot record the result") {
		t.Errorf("the lost lease was not logged: %s", f.logs)
	}
	if got := f.do(t, request(), &h); got != retry {
		t.Errorf("replay = %s\nwant the retry's result %s", got, retry)
	}
	if n := h.runs.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2", n)
	}
}

func TestResultTooLargeIsNeverRunAgain(t *testing.T) {
	f := newFixture(t, memory.WithMaxValueSize(1024))
	// Incompressible: a packed record of it is still larger than the store accepts.
	big := hex.EncodeToString(sha512Chain(1000))
	h := handler{result: func(int32) (*contract.ActionResult, error) {
		return &contract.ActionResult{Status: contract.StatusOK, Effects: []contract.Effect{{Type: "job.started", Message: big}}}, nil
	}}
	first := f.do(t, request(), &h)
	if !strings.Contains(first, big) || !strings.Contains(first, `"strictly_idempotent_response":false`) {
		t.Errorf("first answer = %.200s...; want the real result flagged as not replayable", first)
	}
	if len(first)-len("false")+len("true") != 2188 { // the size of the result as it would have been recorded
		t.Errorf("first answer is %d bytes", len(first))
	}
	logs := f.logs.String()
	if !strings.Contains(logs, `"level":"ERROR"`) || !strings.Contains(logs, "result too large to record") ||
		!strings.Contains(logs, `"store_limit":1024`) || strings.Contains(logs, "idem_start_campaign_123") {
		t.Errorf("logs = %s; want an error with the sizes and no raw key", logs)
	}
	want := `{"status":"error","effects":[],"errors":[{"code":"idempotency_result_unrecordable","message":"job.start with this ` +
		`idempotency_key already ran, but its result (2188 bytes) was larger than the store accepts (1024 bytes) and could not ` +
		`be recorded. It will not run again: read the job's state with job.sync."}]}`
	for range 2 {
		if got := f.do(t, request(), &h); got != want {
			t.Errorf("retry = %s\nwant %s", got, want)
		}
	}
	if n := h.runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

func TestStoreFailureRunsNothing(t *testing.T) {
	f := newFixture(t)
	f.store.Close()
	var h handler
	_, err := f.gate.Do(context.Background(), request(), h.run)
	if !errors.Is(err, store.ErrClosed) || !strings.HasPrefix(err.Error(), "idempotency: claim job.start: ") {
		t.Errorf("Do on a closed store: error = %v", err)
	}
	if h.runs.Load() != 0 {
		t.Error("the handler ran without a claim")
	}
}

func TestNoKeyRunsDirectly(t *testing.T) {
	f := newFixture(t)
	var h handler
	req := request()
	req.IdempotencyKey = nil
	for range 2 {
		f.do(t, req, &h)
	}
	if n := h.runs.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2", n)
	}
}

// BenchmarkGate measures the gate's own cost on the in-memory store: a fresh keyed run (claim,
// run, record) and a replay.
func BenchmarkGate(b *testing.B) {
	result := &contract.ActionResult{Status: contract.StatusOK, Effects: []contract.Effect{{Type: "job.started", JobID: "job-1", Message: "Completed 2 cases"}}}
	run := func(context.Context) (*contract.ActionResult, error) { return result, nil }
	g := idempotency.New(memory.New())
	b.Run("ClaimRunRecord", func(b *testing.B) {
		req := request()
		for i := range b.N {
			req.IdempotencyKey = ptr("bench-" + strconv.Itoa(i))
			if _, err := g.Do(context.Background(), req, run); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Replay", func(b *testing.B) {
		req := request()
		if _, err := g.Do(context.Background(), req, run); err != nil {
			b.Fatal(err)
		}
		for range b.N {
			if _, err := g.Do(context.Background(), req, run); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// sha512Chain returns n bytes that deflate does not shrink.
func sha512Chain(n int) []byte {
	var out []byte
	sum := sha512.Sum512(nil)
	for len(out) < n {
		out = append(out, sum[:]...)
		sum = sha512.Sum512(sum[:])
	}
	return out[:n]
}
