package jobs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/store/memory"
)

// TestGuardedFreesItsLimitSlot: a guarded step under a limit holds its slot while its effect runs
// and frees it when it ends, not at the end of the delivery: the job's next step already sees
// the limit free (else a step of another job under it would wait meanwhile).
func TestGuardedFreesItsLimitSlot(t *testing.T) {
	lim := jobs.NewLimit("provider", jobs.MaxRunning(1), jobs.Shared())
	s := memory.New()
	t.Cleanup(func() { _ = s.Close() })
	g := &guardedWorld{studio: &studioStandIn{decide: map[string]string{"before": "allow", "after": "allow"}}}
	g.creg = checkpoint.NewRegistry(&contract.RuleCheckpoints{Phases: []string{contract.PhaseBefore, contract.PhaseAfter}})
	g.csvc = checkpoint.NewService(checkpoint.Config{Store: s, Studio: g.studio, Logger: quiet})
	var during, next []string // the limit's slot holders while the effect runs, in the next step
	holders := func() []string {
		var hs []string
		for _, sl := range limitOf(t, s, "provider").Slots {
			hs = append(hs, sl.Holder[strings.LastIndex(sl.Holder, "/"):])
		}
		return hs
	}
	imp := checkpoint.Define(guardOwner{g.creg}, "import", checkpoint.Funcs[string, int]{
		Effect:       func(context.Context, string) (int, error) { during = holders(); g.effects++; return 3, nil },
		AfterContext: func(job string, n int) (any, error) { return map[string]any{"job": job, "imported": n}, nil },
	})
	o := newOwner()
	g.w = jobs.Define(o, "governed", func(ctx context.Context, job string) error {
		if _, err := jobs.Guarded(ctx, "import", imp, map[string]any{"job": job}, job, nil, jobs.Under(lim)); err != nil {
			return err
		}
		_, err := jobs.Step(ctx, "report", func(context.Context) (int, error) { next = holders(); return 1, nil })
		return err
	})
	g.serve(t, s, o)
	job := jobID(t)
	g.start(t, job)
	g.in.deliverAll(t, 1, nil)
	snap := stateOf(t, g.in, job)
	if snap.Job.Status != contract.StateCompleted || g.effects != 1 || fmt.Sprint(during) != "[/import]" || len(next) != 0 {
		t.Fatalf("slots held while the effect ran %v, in the next step %v; effects %d; state %s", during, next, g.effects, mustJSON(t, snap))
	}
	if rec := limitOf(t, s, "provider"); len(rec.Slots) != 0 {
		t.Fatalf("slots held after the job %+v", rec.Slots)
	}
}
