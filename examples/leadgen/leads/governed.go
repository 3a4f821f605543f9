package leads

import (
	"context"
	"errors"
	"fmt"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/store"
)

// A governed job (its job.start carries Studio's rule_snapshot) imports its leads into contacts
// as a guarded step: Studio's rules decide before the import (the before checkpoint) and before
// the job completes (the after checkpoint), and may pause either until an operator decides. An
// ungoverned job imports directly, as before. See docs/checkpoints.md.

// ImportStep is the guarded import's stable name: every instance defines it under this name, so
// that whichever receives rule.checkpoint.resume continues a paused import.
const ImportStep = "contacts.import"

// RuleCheckpoints is the agent's rule-checkpoint declaration: both phases, and the reviewer's
// email kept out of the contexts Studio sees.
func RuleCheckpoints() *contract.RuleCheckpoints {
	return &contract.RuleCheckpoints{Phases: []string{contract.PhaseBefore, contract.PhaseAfter}, SecretRefs: []string{"context.reviewer_email"}}
}

// ImportInput and ImportResult are the guarded import's input and result, kept in the store
// between a pause and its resume.
type ImportInput struct {
	JobID string `json:"job_id"`
}

type ImportResult struct {
	Imported int `json:"imported"`
}

// governance is the agent's guarded import.
type governance struct {
	imp *checkpoint.Step[ImportInput, ImportResult]
}

func defineImport(a *core.Agent) governance {
	return governance{imp: checkpoint.Define(a, ImportStep, checkpoint.Funcs[ImportInput, ImportResult]{
		// The effect: the contacts are written (upserts, so a recovery could redo them by hand).
		Effect: func(ctx context.Context, in ImportInput) (ImportResult, error) {
			job, err := jobs(ctx).Get(ctx, in.JobID)
			if err != nil {
				return ImportResult{}, err
			}
			if err := importLeads(ctx, job); err != nil {
				return ImportResult{}, err
			}
			return ImportResult{Imported: len(job.Leads)}, nil
		},
		AfterContext: func(in ImportInput, r ImportResult) (any, error) {
			return map[string]any{"operation": "contacts.import", "job_id": in.JobID, "imported": r.Imported}, nil
		},
		// The advance: the job completes once the after checkpoint allows it.
		Advance: func(ctx context.Context, in ImportInput, r ImportResult) error {
			_, err := jobs(ctx).Update(ctx, in.JobID, func(j *Job) error {
				j.Status, j.Imported = contract.StateCompleted, r.Imported
				return nil
			})
			return err
		},
	})}
}

// importOccurrence is the import of job: one attempt, so one occurrence id.
func importOccurrence(jobID string) checkpoint.Occurrence {
	return checkpoint.Occurrence{JobID: jobID, CaseID: jobID + "-report", StepID: jobID + "-import", OccurrenceID: jobID + "-import-1"}
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
	// Anything else (no Studio connection, the store) is the controller's problem: -32603, the
	// reason in the log, and the retry runs again once it is fixed.
	return g, nil, err
}

// importLeadsOf imports an approved job's leads: under the job's gate when it is governed (the
// outcome says where the import stands), directly otherwise (nil outcome).
func (gv governance) importLeadsOf(ctx context.Context, job Job) (*checkpoint.Outcome[ImportResult], error) {
	if !job.Governed {
		return nil, importLeads(ctx, job)
	}
	g, err := checkpoint.JobGate(ctx, job.ID)
	if err != nil {
		return nil, err
	}
	before := map[string]any{"operation": "contacts.import", "job_id": job.ID, "leads": len(job.Leads),
		"industry": job.Setup.Industry, "region": job.Setup.Region, "reviewer_email": job.Setup.ReviewerEmail}
	out, err := checkpoint.RunGuardedStep(ctx, g, gv.imp, importOccurrence(job.ID), before, ImportInput{JobID: job.ID})
	if err != nil {
		return nil, fmt.Errorf("guarded import of job %s: %w", job.ID, err)
	}
	return &out, nil
}

// importState is where a governed, approved job's import stands (nil when it has not started).
func (gv governance) importState(ctx context.Context, job Job) (*checkpoint.Outcome[ImportResult], error) {
	if !job.Governed || job.Review != "approved" {
		return nil, nil
	}
	out, err := checkpoint.StepState(ctx, gv.imp, importOccurrence(job.ID))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil // not started: the snapshot shows no import step
	case err != nil:
		return nil, err
	}
	return &out, nil
}
