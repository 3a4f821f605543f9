package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
)

// studioStandIn decides rule checkpoints by phase, in process (checkpoint.Studio).
type studioStandIn struct {
	mu     sync.Mutex
	decide map[string]string // phase → allow, pause or stop
	seen   []checkpoint.Request
}

func (s *studioStandIn) RuleCheckpoint(_ context.Context, _ string, r checkpoint.Request) (checkpoint.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, r)
	return checkpoint.Response{CheckpointID: "chk-" + r.Phase, Status: s.decide[r.Phase], SnapshotHash: r.SnapshotHash, InputHash: "in-" + r.Phase}, nil
}

// paused reports whether it has paused a before checkpoint.
func (s *studioStandIn) paused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen) > 0 && s.seen[0].Phase == "before" && s.decide["before"] == "pause"
}

func (s *studioStandIn) TokenSecret() []byte { return []byte("a secret of the test, 32 bytes long") }

type guardOwner struct{ reg *checkpoint.Registry }

func (o guardOwner) GuardedSteps() *checkpoint.Registry { return o.reg }

// guardedWorld is a governed job's background work around a guarded import.
type guardedWorld struct {
	in      *instance
	studio  *studioStandIn
	csvc    *checkpoint.Service
	creg    *checkpoint.Registry
	effects int
	fail    bool // the effect fails half way (its outcome unknown)
	w       *jobs.Work[string]
	// beforeWait, when set, runs once, just before the first write of the job's record after
	// Studio paused the before checkpoint: the one that records the step waiting for it.
	beforeWait func()
	// opts are more options of the guarded step; then, when set, runs after it in the work.
	opts []jobs.StepOption
	then func(ctx context.Context) error
}

// waitHook is the world's store: it runs the world's beforeWait at its moment.
type waitHook struct {
	*memory.Store
	g *guardedWorld
}

func (h *waitHook) Update(ctx context.Context, key string, version uint64, value []byte, expiresAt time.Time) (store.Record, error) {
	if f := h.g.beforeWait; f != nil && h.g.studio.paused() && strings.HasPrefix(key, jobs.TaskKeyPrefix) {
		h.g.beforeWait = nil
		f()
	}
	return h.Store.Update(ctx, key, version, value, expiresAt)
}

func newGuardedWorld(t *testing.T, decide map[string]string, recover bool) *guardedWorld {
	g := &guardedWorld{studio: &studioStandIn{decide: decide}}
	s := &waitHook{Store: memory.New(), g: g}
	t.Cleanup(func() { _ = s.Close() })
	creg := checkpoint.NewRegistry(&contract.RuleCheckpoints{Phases: []string{contract.PhaseBefore, contract.PhaseAfter}})
	imp := checkpoint.Define(guardOwner{creg}, "import", checkpoint.Funcs[string, int]{
		Effect: func(context.Context, string) (int, error) {
			g.effects++
			if g.fail {
				return 0, errors.New("the CRM hung up half way")
			}
			return 3, nil
		},
		AfterContext: func(job string, n int) (any, error) { return map[string]any{"job": job, "imported": n}, nil },
	})
	var redo func(context.Context, string) (int, error)
	if recover {
		redo = func(context.Context, string) (int, error) { g.effects++; return 3, nil }
	}
	csvc := checkpoint.NewService(checkpoint.Config{Store: s, Studio: g.studio, Logger: quiet})
	g.csvc, g.creg = csvc, creg
	o := newOwner()
	g.w = jobs.Define(o, "governed", func(ctx context.Context, job string) error {
		n, err := jobs.Guarded(ctx, "import", imp, map[string]any{"job": job}, job, redo, append([]jobs.StepOption{jobs.InCase("report", "deliverable", "Report")}, g.opts...)...)
		if err == nil && n != 3 {
			t.Errorf("Guarded returned %d", n)
		}
		if err == nil && g.then != nil {
			return g.then(ctx)
		}
		return err
	})
	g.serve(t, s, o)
	return g
}

// serve gives the world its instance: a job service on s running o's works, whose deliveries
// run under g's checkpoint service.
func (g *guardedWorld) serve(t *testing.T, s store.Store, o owner) {
	clk := newClock()
	g.in = &instance{q: &queue{}, clock: clk, after: newManualAfter(), o: o}
	g.in.svc = jobs.NewService(jobs.Config{Store: s, Dispatcher: g.in.q, Now: clk.Now, After: g.in.after.After, Logger: quiet,
		Works: func(string) (*jobs.Registry, time.Duration, bool) { return o.reg, 0, true },
		Bind: func(ctx context.Context, agent string, v *contract.VerifiedWorkspaceContext) context.Context {
			return checkpoint.NewContext(ctx, g.csvc, g.creg, agent, v.WorkspaceID)
		}})
	t.Cleanup(g.in.svc.Close)
}

// start starts a governed job: its job.start keeps the gate, then starts the work.
func (g *guardedWorld) start(t *testing.T, job string) {
	input, _ := json.Marshal(map[string]any{"rule_snapshot": map[string]any{"hash": "rules-v1", "checkpoint_url": "https://ignored.example",
		"version": 1, "checkpoint_token": "token-of-" + job}})
	req := startReq(job)
	req.Input = input
	if _, err := checkpoint.FromJobStart(g.bound(), req); err != nil {
		t.Fatal(err)
	}
	if _, err := g.w.Start(g.in.ctx(), req, job); err != nil {
		t.Fatal(err)
	}
}

// allow delivers Studio's allow of job's paused before checkpoint as the controller does:
// rule.checkpoint.resume (which runs the effect and the after checkpoint), then the job's wake,
// which continues the job when it waits (woken), else keeps the answer for its Await.
func (g *guardedWorld) allow(t *testing.T, job string, woken bool) {
	t.Helper()
	caseID, step := jobs.CaseID(job, "report"), jobs.StepID(job, "import")
	input, _ := json.Marshal(map[string]any{"checkpoint_id": "chk-before", "occurrence_id": step + "-1", "phase": "before",
		"status": "allow", "snapshot_hash": "rules-v1", "input_hash": "in-before"})
	res, err := checkpoint.Resume(g.bound(), &contract.ActionRequest{AgentSlug: agentSlug, Action: contract.RuleCheckpointResumeAction,
		JobID: &job, CaseID: &caseID, Input: input})
	if err != nil || res.Status != "ok" || len(res.Effects) != 1 || res.Effects[0].Status != "allow" {
		t.Fatalf("resume: %v %s", err, mustJSON(t, res))
	}
	if woke, err := jobs.Wake(g.in.ctx(), job, contract.RuleCheckpointResumeAction, json.RawMessage(`{"status":"allow"}`)); woke != woken || err != nil {
		t.Fatalf("wake: %v %v, want %v", woke, err, woken)
	}
}

// bound is a handler's context for the test workspace, with the checkpoint scope.
func (g *guardedWorld) bound() context.Context {
	return checkpoint.NewContext(g.in.ctx(), g.csvc, g.creg, agentSlug, wsID)
}

func TestGuarded(t *testing.T) {
	t.Run("allowed", func(t *testing.T) {
		g := newGuardedWorld(t, map[string]string{"before": "allow", "after": "allow"}, false)
		job := jobID(t)
		g.start(t, job)
		g.in.deliverAll(t, 2, nil)
		snap := stateOf(t, g.in, job)
		if snap.Job.Status != contract.StateCompleted || g.effects != 1 || len(g.studio.seen) != 2 {
			t.Fatalf("effects %d, checkpoints %d; state %s", g.effects, len(g.studio.seen), mustJSON(t, snap))
		}
		if o := g.studio.seen[0]; o.CaseID != jobs.CaseID(job, "report") || o.StepID != jobs.StepID(job, "import") || o.OccurrenceID != jobs.StepID(job, "import")+"-1" {
			t.Fatalf("occurrence %+v", o)
		}
	})
	t.Run("paused", func(t *testing.T) {
		g := newGuardedWorld(t, map[string]string{"before": "pause"}, false)
		job := jobID(t)
		g.start(t, job)
		g.in.deliverAll(t, 2, nil)
		snap := stateOf(t, g.in, job)
		st := snap.Cases[0].Steps[0]
		if snap.Job.Status != contract.StateAwaiting || st.ID != jobs.StepID(job, "import.wait.before") || st.Awaiting == nil ||
			st.Awaiting.Action != contract.RuleCheckpointResumeAction || st.Title != "Studio's rules decide (before import)" || g.effects != 0 {
			t.Fatalf("effects %d; state %s", g.effects, mustJSON(t, snap))
		}
	})
	// Paused, then allowed: rule.checkpoint.resume runs the effect, the wake continues the work,
	// whose guarded step returns the effect's result (the work checks it is 3).
	t.Run("paused then allowed", func(t *testing.T) {
		g := newGuardedWorld(t, map[string]string{"before": "pause", "after": "allow"}, false)
		job := jobID(t)
		g.start(t, job)
		g.in.deliverAll(t, 2, nil)
		g.allow(t, job, true)
		g.in.deliverAll(t, 2, nil)
		snap := stateOf(t, g.in, job)
		if snap.Job.Status != contract.StateCompleted || g.effects != 1 || len(g.studio.seen) != 2 {
			t.Fatalf("effects %d, checkpoints %d; state %s", g.effects, len(g.studio.seen), mustJSON(t, snap))
		}
	})
	// The decision comes while the delivery that met the pause is on its way to record its wait:
	// the wake finds no waiting step yet (it is kept for it), and the guarded step goes on with
	// the decision applied, in the same delivery.
	t.Run("allowed while pausing", func(t *testing.T) {
		g := newGuardedWorld(t, map[string]string{"before": "pause", "after": "allow"}, false)
		job := jobID(t)
		g.beforeWait = func() { g.allow(t, job, false) }
		g.start(t, job)
		g.in.deliverAll(t, 1, nil)
		snap := stateOf(t, g.in, job)
		if snap.Job.Status != contract.StateCompleted || g.effects != 1 || len(g.studio.seen) != 2 {
			t.Fatalf("effects %d, checkpoints %d; state %s", g.effects, len(g.studio.seen), mustJSON(t, snap))
		}
	})
	// A wake with no decision delivered (jobs.Wake called by hand): the checkpoint still waits
	// after its wait was answered; the step fails, once, rather than wait for what never comes.
	t.Run("woken without a decision", func(t *testing.T) {
		g := newGuardedWorld(t, map[string]string{"before": "pause"}, false)
		job := jobID(t)
		g.beforeWait = func() {
			if woke, err := jobs.Wake(g.in.ctx(), job, contract.RuleCheckpointResumeAction, json.RawMessage(`{"status":"allow"}`)); woke || err != nil {
				t.Errorf("wake: %v %v", woke, err)
			}
		}
		g.start(t, job)
		g.in.deliverAll(t, 1, nil)
		got := mustJSON(t, stateOf(t, g.in, job))
		if !strings.Contains(got, `"status":"failed"`) || !strings.Contains(got, `guarded step \"import\" of job `+job+`: awaiting`) || g.effects != 0 || len(g.studio.seen) != 1 {
			t.Fatalf("effects %d, checkpoints %d; state %s", g.effects, len(g.studio.seen), got)
		}
	})
	t.Run("stopped", func(t *testing.T) {
		g := newGuardedWorld(t, map[string]string{"before": "stop"}, false)
		job := jobID(t)
		g.start(t, job)
		g.in.deliverAll(t, 2, nil)
		got := mustJSON(t, stateOf(t, g.in, job))
		if !strings.Contains(got, `"status":"failed"`) || !strings.Contains(got, `Rule checkpoint 'chk-before' returned 'stop'`) || g.effects != 0 {
			t.Fatalf("effects %d; state %s", g.effects, got)
		}
	})
	for _, recover := range []bool{true, false} {
		name := map[bool]string{true: "interrupted and recovered", false: "interrupted without a recovery"}[recover]
		t.Run(name, func(t *testing.T) {
			g := newGuardedWorld(t, map[string]string{"before": "allow", "after": "allow"}, recover)
			g.fail = true
			job := jobID(t)
			g.start(t, job)
			g.in.deliverAll(t, 2, nil)
			got := mustJSON(t, stateOf(t, g.in, job))
			if recover {
				if !strings.Contains(got, `"status":"completed"`) || g.effects != 2 || len(g.studio.seen) != 2 {
					t.Fatalf("effects %d, checkpoints %d; state %s", g.effects, len(g.studio.seen), got)
				}
				return
			}
			if !strings.Contains(got, `"status":"failed"`) || !strings.Contains(got, checkpoint.ErrEffectStarted.Error()) || g.effects != 1 {
				t.Fatalf("effects %d; state %s", g.effects, got)
			}
		})
	}
}
