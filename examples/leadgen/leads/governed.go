package leads

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
)

// A governed job (its job.start carries Studio's rule_snapshot) imports its leads as a guarded
// step: Studio's rules decide before the import and before the job completes, and may pause
// either until an operator decides (docs/checkpoints.md). An ungoverned job imports as a step.

// ImportStep is the guarded import's stable name: every instance defines it under this name, so
// that whichever receives rule.checkpoint.resume continues a paused import.
const ImportStep = "contacts.import"

// defineImport defines the guarded import: its input is the job's id, its result the number of
// contacts written (upserts, so its recovery redoes them).
func defineImport(owner *core.Agent) *checkpoint.Step[string, int] {
	return checkpoint.Define(owner, ImportStep, checkpoint.Funcs[string, int]{Effect: importLeads,
		AfterContext: func(id string, n int) (any, error) {
			return map[string]any{"operation": "contacts.import", "job_id": id, "imported": n}, nil
		},
	})
}

// guardedImport runs a governed job's guarded import and returns the import step's function (the
// occurrence's result, or why it has none). A pause leaves the job awaiting until Studio's
// decision wakes it (jobs.Wake) and the work runs again to here.
func (a *leadAgent) guardedImport(ctx context.Context, job Job) (func(context.Context) (int, error), error) {
	g, err := checkpoint.JobGate(ctx, job.ID)
	if err != nil {
		return nil, err
	}
	before := map[string]any{"operation": "contacts.import", "job_id": job.ID, "leads": len(job.Leads),
		"industry": job.Setup.Industry, "region": job.Setup.Region, "reviewer_email": job.Setup.ReviewerEmail}
	// One attempt of the import, so one occurrence id.
	o := checkpoint.Occurrence{JobID: job.ID, CaseID: job.ID + "-report", StepID: job.ID + "-import", OccurrenceID: job.ID + "-import-1"}
	out, err := checkpoint.RunGuardedStep(ctx, g, a.imp, o, before, job.ID)
	if n := 0; errors.Is(err, checkpoint.ErrEffectStarted) { // interrupted inside the import: recover_guarded_step
		if n, err = importLeads(ctx, job.ID); err == nil { // upserts: redone, their count is the effect's result
			out, err = checkpoint.RecoverGuardedStep(ctx, g, a.imp, o, n)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("guarded import of job %s: %w", job.ID, err)
	}
	if out.Status == checkpoint.Awaiting {
		// A step per phase: the after checkpoint may pause once the woken before one was allowed.
		_, err = jobs.Await[any](ctx, "import.wait."+out.Phase, contract.Awaiting{Reason: "rule_checkpoint", Action: contract.RuleCheckpointResumeAction},
			delivery, jobs.Title("Studio's rules decide ("+out.Phase+" the import)"))
	}
	return func(context.Context) (int, error) {
		if out.Status != checkpoint.Completed {
			return 0, jobs.Permanent(fmt.Errorf("guarded import of job %s: %w", job.ID, cmp.Or(out.Err(), errors.New(string(out.Status)))))
		}
		return out.Result, nil
	}, err
}
