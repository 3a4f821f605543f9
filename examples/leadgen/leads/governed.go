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

// RuleCheckpoints is the agent's rule-checkpoint declaration: both phases, and the reviewer's
// email kept out of the contexts Studio sees.
func RuleCheckpoints() *contract.RuleCheckpoints {
	return &contract.RuleCheckpoints{Phases: []string{contract.PhaseBefore, contract.PhaseAfter}, SecretRefs: []string{"context.reviewer_email"}}
}

// ImportInput and ImportResult are the guarded import's, kept in the store over a pause.
type ImportInput struct {
	JobID string `json:"job_id"`
}

type ImportResult struct {
	Imported int `json:"imported"`
}

func defineImport(owner *core.Agent) *checkpoint.Step[ImportInput, ImportResult] {
	return checkpoint.Define(owner, ImportStep, checkpoint.Funcs[ImportInput, ImportResult]{
		// The effect: the contacts are written (upserts, so a recovery could redo them by hand).
		Effect: func(ctx context.Context, in ImportInput) (ImportResult, error) {
			job, err := records(ctx).Get(ctx, in.JobID)
			if err != nil {
				return ImportResult{}, err
			}
			return importLeads(ctx, job)
		},
		AfterContext: func(in ImportInput, r ImportResult) (any, error) {
			return map[string]any{"operation": "contacts.import", "job_id": in.JobID, "imported": r.Imported}, nil
		},
	})
}

// gateOf reads job.start's rule_snapshot: a nil gate for an ungoverned job, a refusal for a
// snapshot that is not one.
func gateOf(ctx context.Context, req *contract.ActionRequest) (*checkpoint.Gate, *contract.ActionResult, error) {
	g, err := checkpoint.FromJobStart(ctx, req)
	switch {
	case errors.Is(err, checkpoint.ErrNoSnapshot):
		return nil, nil, nil
	case errors.Is(err, checkpoint.ErrInvalidSnapshot):
		return nil, contract.Refuse(contract.ResultError{Code: contract.InputInvalid, Field: "rule_snapshot", Message: err.Error()}), nil
	case errors.Is(err, checkpoint.ErrRetrySnapshot), errors.Is(err, checkpoint.ErrOtherAgent):
		return nil, contract.Fail("rule_snapshot_refused", err.Error()), nil
	}
	// Anything else (no Studio connection, the store): -32603, the reason in the log; Studio retries.
	return g, nil, err
}

// guardedImport runs the guarded import of a governed job and returns the import step's function:
// the occurrence's result once it completed, a failure once a checkpoint stopped it (or it needs
// a recovery by hand). A paused checkpoint leaves the job awaiting: once Studio's decision moved
// the occurrence on, the controller wakes the job (jobs.Wake) and the work runs again to here.
func (a *leadAgent) guardedImport(ctx context.Context, job Job) (func(context.Context) (ImportResult, error), error) {
	g, err := checkpoint.JobGate(ctx, job.ID)
	if err != nil {
		return nil, err
	}
	before := map[string]any{"operation": "contacts.import", "job_id": job.ID, "leads": len(job.Leads),
		"industry": job.Setup.Industry, "region": job.Setup.Region, "reviewer_email": job.Setup.ReviewerEmail}
	// One attempt of the import, so one occurrence id.
	o := checkpoint.Occurrence{JobID: job.ID, CaseID: job.ID + "-report", StepID: job.ID + "-import", OccurrenceID: job.ID + "-import-1"}
	out, err := checkpoint.RunGuardedStep(ctx, g, a.imp, o, before, ImportInput{JobID: job.ID})
	if err != nil {
		return nil, fmt.Errorf("guarded import of job %s: %w", job.ID, err)
	}
	if out.Status == checkpoint.Awaiting {
		// A step per phase: the after checkpoint may pause once the woken before one was allowed.
		_, err = jobs.Await[any](ctx, "import.wait."+out.Phase, contract.Awaiting{Reason: "rule_checkpoint", Action: contract.RuleCheckpointResumeAction},
			delivery, jobs.Title("Studio's rules decide ("+out.Phase+" the import)"))
	}
	return func(context.Context) (ImportResult, error) {
		if out.Status != checkpoint.Completed {
			return ImportResult{}, jobs.Permanent(fmt.Errorf("guarded import of job %s: %w", job.ID, cmp.Or(out.Err(), errors.New(string(out.Status)))))
		}
		return out.Result, nil
	}, err
}
