package leads

import (
	"cmp"
	"context"
	"encoding/json"
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

func (a *leadAgent) defineImport(owner *core.Agent) {
	a.imp = checkpoint.Define(owner, ImportStep, checkpoint.Funcs[ImportInput, ImportResult]{
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
	// Anything else (no Studio connection, the store): -32603, the reason in the log; Studio retries.
	return g, nil, err
}

// governedImport runs the guarded import in the work. A pause leaves the job awaiting Studio's
// decision; once decided, sync hands the job on and this runs again on the stored outcome.
func (a *leadAgent) governedImport(ctx context.Context, job Job) error {
	g, err := checkpoint.JobGate(ctx, job.ID)
	if err != nil {
		return err
	}
	before := map[string]any{"operation": "contacts.import", "job_id": job.ID, "leads": len(job.Leads),
		"industry": job.Setup.Industry, "region": job.Setup.Region, "reviewer_email": job.Setup.ReviewerEmail}
	out, err := checkpoint.RunGuardedStep(ctx, g, a.imp, importOccurrence(job.ID), before, ImportInput{JobID: job.ID})
	switch {
	case err != nil:
		return fmt.Errorf("guarded import of job %s: %w", job.ID, err)
	case out.Status == checkpoint.Awaiting:
		_, err = jobs.Await[ImportResult](ctx, "import", contract.Awaiting{Reason: "rule_checkpoint", Action: contract.RuleCheckpointResumeAction},
			delivery, jobs.Title(importTitle))
		return err
	case out.Status != checkpoint.Completed:
		return jobs.Permanent(fmt.Errorf("guarded import of job %s: %w", job.ID, cmp.Or(out.Err(), errors.New(string(out.Status)))))
	}
	_, err = jobs.Step(ctx, "import", func(context.Context) (ImportResult, error) { return out.Result, nil }, delivery, jobs.Title(importTitle))
	return err
}

// sync is job.sync: the job's state from its task, and a paused import that Studio decided since
// (rule.checkpoint.resume ran or stopped it) handed on to the work. Not from the resume's
// Advance: it runs before the occurrence is recorded completed, so the work would find it busy.
func (a *leadAgent) sync(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	id := deref(req.JobID)
	js, err := jobs.State(ctx, id)
	if err != nil {
		return failed(req.JobID, err)
	}
	if js.Job.Status == contract.StateAwaiting {
		out, err := checkpoint.StepState(ctx, a.imp, importOccurrence(id))
		if err == nil && (out.Status == checkpoint.Completed || out.Status == checkpoint.Blocked || out.Status == checkpoint.RecoveryRequired) {
			next, err := jobs.Answer(ctx, &contract.ActionRequest{JobID: req.JobID, StepID: ptr(id + "-import"), Input: must(json.Marshal(out.Result))})
			if err != nil && !errors.Is(err, jobs.ErrNotAwaiting) {
				return nil, err
			}
			js = cmp.Or(next, js)
		}
	}
	return contract.OK(contract.Effect{Type: contract.EffectJobSynced, JobID: id, Status: js.Job.Status}).WithJobState(js), nil
}
