// Tests written for mutants of guarded.go (Guarded) that lived in scripts/mutants runs
// (docs/development.md): each fails on its mutant.
package jobs_test

import (
	"context"
	"errors"
	"testing"

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
