// Tests written for mutants of guarded.go (Guarded) that lived in scripts/mutants runs
// (docs/development.md): each fails on its mutant.
package jobs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
)

// importStep is a guarded step "import" whose effect counts its runs in effects.
func importStep(effects *int) *checkpoint.Step[string, int] {
	creg := checkpoint.NewRegistry(&contract.RuleCheckpoints{Phases: []string{contract.PhaseBefore, contract.PhaseAfter}})
	return checkpoint.Define(guardOwner{creg}, "import", checkpoint.Funcs[string, int]{
		Effect: func(context.Context, string) (int, error) { *effects++; return 3, nil },
	})
}

// TestGuardedRefusals: Guarded outside a work, with a bad step name, or in a context without
// rule checkpoints runs no effect: ErrNotInWork, or the job fails with the first of its errors.
func TestGuardedRefusals(t *testing.T) {
	effects := 0
	imp := importStep(&effects)
	if _, err := jobs.Guarded(context.Background(), "import", imp, nil, "x", nil); !errors.Is(err, jobs.ErrNotInWork) {
		t.Fatalf("Guarded outside a work: %v", err)
	}
	for _, tc := range []struct{ name, step, want string }{
		{"bad name", " ", `"error":{"message":"jobs: a step name is 1 to 200 printable characters, got \" \""}`},
		{"no rule-checkpoint scope", "import", `jobs: guarded step \"import\" of job `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := runOnce(t, 1, func(ctx context.Context, _ struct{}) error {
				// A limit without bounds: checked only once the step may run.
				_, err := jobs.Guarded(ctx, tc.step, imp, nil, "x", nil, jobs.Under(jobs.NewLimit("calls")))
				return err
			})
			wantFailed(t, state, tc.want)
		})
	}
	if effects != 0 {
		t.Fatalf("the effect ran %d times", effects)
	}
}

// TestGuardedStoppedNotRecovered: a guarded step whose before checkpoint stops it fails the job
// without running its effect, nor its recovery (kept for an effect interrupted after it began).
func TestGuardedStoppedNotRecovered(t *testing.T) {
	g := newGuardedWorld(t, map[string]string{"before": "stop"}, true)
	job := jobID(t)
	g.start(t, job)
	g.in.deliverAll(t, 1, nil)
	wantFailed(t, stateOf(t, g.in, job), `guarded step \"import\"`)
	if g.effects != 0 {
		t.Fatalf("the effect (or its recovery) ran %d times", g.effects)
	}
}

// TestGuardedUnderLimits: a guarded step's limits bound its effect, once: under a limit without
// bounds the job fails with the limit's error, the effect not run; under a rate of one an hour,
// the step takes its one token and completes in its delivery.
func TestGuardedUnderLimits(t *testing.T) {
	for _, tc := range []struct {
		name         string
		limit        *jobs.Limit
		effects      int
		status, want string
	}{
		{"no bounds", jobs.NewLimit("calls"), 0, contract.StateFailed,
			`"error":{"message":"jobs: limit \"calls\" needs MaxRunning(n) or Rate(n, per) with n at least 1"}`},
		{"one an hour", jobs.NewLimit("calls", jobs.Rate(1, time.Hour)), 1, contract.StateCompleted, `"steps":[{"id":"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGuardedWorld(t, map[string]string{"before": "allow", "after": "allow"}, false)
			g.opts = []jobs.StepOption{jobs.Under(tc.limit)}
			job := jobID(t)
			g.start(t, job)
			g.in.deliverAll(t, 1, nil)
			wantStatus(t, stateOf(t, g.in, job), tc.status, tc.want)
			if g.effects != tc.effects {
				t.Fatalf("the effect ran %d times, want %d", g.effects, tc.effects)
			}
		})
	}
}

// TestGuardedReplayed: a later delivery of a job whose guarded step completed takes its recorded
// result: neither the effect, a checkpoint, nor a take of its limits happens again (under a rate
// of one an hour, the delivery a minute later goes on at once).
func TestGuardedReplayed(t *testing.T) {
	g := newGuardedWorld(t, map[string]string{"before": "allow", "after": "allow"}, false)
	g.opts = []jobs.StepOption{jobs.Under(jobs.NewLimit("calls", jobs.Rate(1, time.Hour)))}
	g.then = func(ctx context.Context) error { return jobs.Sleep(ctx, "nap", time.Minute) }
	job := jobID(t)
	g.start(t, job)
	g.in.deliverAll(t, 2, nil)
	if st := stateOf(t, g.in, job).Job.Status; st != contract.StateCompleted || g.effects != 1 || len(g.studio.seen) != 2 {
		t.Fatalf("job %s; effects %d, checkpoints %d: want completed, 1, 2", st, g.effects, len(g.studio.seen))
	}
}

// TestGuardedAllowedWhilePausingUnderARate: the decision that comes while the delivery records
// its wait lets the guarded step look at its occurrence again, under its limits: with the rate's
// one token spent by the first look, Guarded returns an error and the job waits for the limit.
// The next delivery finds the occurrence completed: the wait step the first one recorded counts
// as reached (the job is not off its path), and the job completes.
func TestGuardedAllowedWhilePausingUnderARate(t *testing.T) {
	g := newGuardedWorld(t, map[string]string{"before": "pause", "after": "allow"}, false)
	g.opts = []jobs.StepOption{jobs.Under(jobs.NewLimit("calls", jobs.Rate(1, time.Hour)))}
	job := jobID(t)
	g.beforeWait = func() { g.allow(t, job, false) }
	g.start(t, job)
	if err := g.in.svc.Deliver(context.Background(), g.in.q.take()[0].M, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	// The world's work checks that Guarded returned 3 when it returned no error.
	wantStatus(t, stateOf(t, g.in, job), contract.StateActive, `"waiting":{"reason":"limit","step_id":"`+jobs.StepID(job, "import")+`","limit":"calls"`)
	g.in.deliverAll(t, 1, nil)
	if st := stateOf(t, g.in, job).Job.Status; st != contract.StateCompleted || g.effects != 1 {
		t.Fatalf("job %s, effects %d: want completed, 1; state %s", st, g.effects, mustJSON(t, stateOf(t, g.in, job)))
	}
}
