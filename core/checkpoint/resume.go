package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/store"
)

// StatusPendingDelivery is the resume result's status when the decision was kept for a checkpoint
// that has not reached it yet.
const StatusPendingDelivery = "pending_delivery"

// decision is a rule.checkpoint.resume decision (RuleCheckpointResume), kept in the store until
// its occurrence reaches its checkpoint.
type decision struct {
	Agent        string `json:"agent_slug"`
	JobID        string `json:"job_id"`
	CaseID       string `json:"case_id"`
	CheckpointID string `json:"checkpoint_id"`
	OccurrenceID string `json:"occurrence_id"`
	Phase        string `json:"phase"`
	Status       string `json:"status"`
	SnapshotHash string `json:"snapshot_hash"`
	InputHash    string `json:"input_hash"`
	DecisionID   string `json:"decision_id"`
}

// matches reports whether d decides the checkpoint rec waits on.
func (d *decision) matches(rec *stepRecord) bool {
	p := rec.phase(d.Phase)
	return d.Agent == rec.Agent && d.OccurrenceID == rec.OccurrenceID && d.SnapshotHash == rec.SnapshotHash &&
		d.CheckpointID == p.CheckpointID && d.InputHash == p.InputHash
}

// parseResume reads a rule.checkpoint.resume request: the decision in input, the job and case
// from the envelope (they override any value in input), the agent from agent_slug. A request
// that is not a decision is a contract.InputErrors, every mistake at once: a member missing
// (input_required; the envelope's job_id and case_id under their own names), not a string
// (input_type) or not one of its values (input_option).
func parseResume(req *contract.ActionRequest) (*decision, error) {
	const action = contract.RuleCheckpointResumeAction + ": "
	var in map[string]json.RawMessage
	if len(bytes.TrimSpace(req.Input)) > 0 {
		if err := json.Unmarshal(req.Input, &in); err != nil {
			return nil, contract.InputErrors{{Code: contract.InputType, Message: action + "the input must be a JSON object"}}
		}
	}
	d := &decision{Agent: req.AgentSlug}
	var errs contract.InputErrors
	for _, f := range []struct {
		name     string
		to       *string
		required bool
	}{{"checkpoint_id", &d.CheckpointID, true}, {"occurrence_id", &d.OccurrenceID, true}, {"phase", &d.Phase, true},
		{"status", &d.Status, true}, {"snapshot_hash", &d.SnapshotHash, true}, {"input_hash", &d.InputHash, true},
		{"decision_id", &d.DecisionID, false}} {
		raw, ok := in[f.name]
		switch {
		case !ok || string(raw) == "null":
			if f.required {
				errs = append(errs, contract.ResultError{Code: contract.InputRequired, Field: f.name, Message: action + "input." + f.name + " is required"})
			}
		case json.Unmarshal(raw, f.to) != nil:
			errs = append(errs, contract.ResultError{Code: contract.InputType, Field: f.name, Message: action + "input." + f.name + " must be a string"})
		}
	}
	for _, f := range []struct {
		name string
		v    *string
		to   *string
	}{{"job_id", req.JobID, &d.JobID}, {"case_id", req.CaseID, &d.CaseID}} {
		if f.v == nil || *f.v == "" {
			errs = append(errs, contract.ResultError{Code: contract.InputRequired, Field: f.name, Message: action + "the request's " + f.name + " is required"})
			continue
		}
		*f.to = *f.v
	}
	if d.Phase != "" && d.Phase != PhaseBefore && d.Phase != PhaseAfter {
		errs = append(errs, contract.ResultError{Code: contract.InputOption, Field: "phase", Message: action + "input.phase must be before or after"})
	}
	switch d.Status {
	case "", DecisionAllow, DecisionStop:
	case DecisionPause:
		errs = append(errs, contract.ResultError{Code: contract.InputOption, Field: "status",
			Message: action + "input.status must be allow or stop: a pause is not a decision (the checkpoint keeps waiting)"})
	default:
		errs = append(errs, contract.ResultError{Code: contract.InputOption, Field: "status", Message: action + "input.status must be allow or stop"})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return d, nil
}

// Resume is the rule.checkpoint.resume action, which the controller registers for every agent
// that declares rule checkpoints (spec §6.5). It loads the paused occurrence on whichever
// instance receives it and continues it there: allow runs the effect and the after checkpoint
// (or, after the after checkpoint, the advance), stop blocks the step. A decision for a
// checkpoint the occurrence has not reached yet (it arrived before the checkpoint's answer was
// stored) is kept in the store and applied when the occurrence reaches it.
//
// The result is the reference's: one rule.checkpoint.resumed effect whose status is the decision
// delivered (allow or stop) or pending_delivery, and summary.checkpoint_id. A request that is no
// decision (a member missing or of another type, a pause) is refused as input (contract.Refuse:
// status error, input_* codes naming the members); a decision for another agent or snapshot, or
// one that does not match the stored occurrence, is an error (JSON-RPC -32603, the reference's
// message in the log). Either way the checkpoint keeps waiting. A
// decision recorded already for an occurrence that another instance runs waits for that
// instance's lease (it may have died in the step), within the call's deadline; when it cannot,
// the resume is refused (ErrActive) so that Studio delivers it again, never answered as if the
// step had gone on. What happens after the decision (an effect that fails, a paused after checkpoint) does not change
// the answer: the step's state says it (StepState).
func Resume(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	d, err := parseResume(req)
	if err != nil {
		return contract.Refused(err)
	}
	sc, err := scopeOf(ctx)
	if err != nil {
		return nil, err
	}
	if d.Agent != sc.agent {
		return nil, ErrResumeOtherAgent
	}
	status, err := sc.resume(ctx, d)
	if err != nil {
		return nil, err
	}
	sc.svc.log.InfoContext(ctx, "rule checkpoint resumed", "agent_slug", d.Agent, "job_id", d.JobID, "case_id", d.CaseID,
		"occurrence_id", d.OccurrenceID, "phase", d.Phase, "checkpoint_id", d.CheckpointID, "decision", d.Status, "status", status)
	return contract.OK(contract.Effect{Type: contract.EffectRuleCheckpointResumed, JobID: d.JobID, Status: status,
		Summary: map[string]any{"checkpoint_id": d.CheckpointID}}), nil
}

// resume delivers d and returns the result's status.
func (sc *scope) resume(ctx context.Context, d *decision) (string, error) {
	// The job's gate and the occurrence are stored before any checkpoint is sent: a decision for
	// a job or an occurrence the store does not have is for another one.
	gate, _, err := sc.loadGate(ctx, d.JobID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "", ErrResumeMismatch
	case err != nil:
		return "", err
	case gate.Agent != d.Agent:
		return "", ErrResumeOtherAgent
	case gate.SnapshotHash != d.SnapshotHash:
		return "", ErrResumeSnapshot
	}
	r := newRunner(sc, sc.stepKey(d.JobID, d.CaseID, d.OccurrenceID), nil, nil)
	found, err := r.load(ctx)
	if err != nil {
		return "", err
	}
	if !found {
		return "", ErrResumeMismatch
	}
	rec := &r.rec
	p := rec.phase(d.Phase)
	kept := false
	switch {
	case rec.Agent != d.Agent:
		return "", ErrResumeOtherAgent
	case rec.SnapshotHash != d.SnapshotHash:
		return "", ErrResumeSnapshot
	case p.Status == "":
		return "", ErrResumeMismatch // the occurrence has not reached this phase
	case p.Status == checking:
		// Studio's answer to this checkpoint is not stored yet: keep the decision for it.
		if err := sc.keep(ctx, d); err != nil {
			return "", err
		}
		kept = true
	case p.CheckpointID != d.CheckpointID || p.InputHash != d.InputHash:
		return "", ErrResumeMismatch
	case p.Status == DecisionPause:
		if err := sc.keep(ctx, d); err != nil {
			return "", err
		}
		kept = true
	case p.Status != d.Status:
		return "", ErrResumeMismatch // decided already, otherwise
	}
	// Continue the occurrence here. A kept decision is applied by the instance that holds the
	// occurrence when it lets go (pending_delivery). A decision recorded already whose occurrence
	// another instance runs (this resume delivered again, maybe because that instance died in it)
	// waits for that instance's lease: answering now would tell Studio the step went on when
	// nothing did. What comes after the decision is the step's business, logged.
	start := sc.svc.now()
	for attempts := 0; attempts < maxAttempts; {
		err := r.enter(ctx, true)
		switch {
		case errors.Is(err, errRetry):
			attempts++
		case errors.Is(err, ErrActive) && !kept:
			if err := r.waitLease(ctx, start); err != nil {
				return "", err
			}
		case err != nil && !errors.Is(err, ErrActive):
			sc.svc.log.ErrorContext(ctx, "rule checkpoint: the step did not complete after the decision", "agent_slug", d.Agent,
				"job_id", d.JobID, "case_id", d.CaseID, "occurrence_id", d.OccurrenceID, "error", err)
			attempts = maxAttempts
		default:
			attempts = maxAttempts
		}
		if attempts < maxAttempts {
			if _, err := r.load(ctx); err != nil {
				return "", err
			}
		}
	}
	if _, err := r.load(ctx); err != nil {
		return "", err
	}
	if p := r.rec.phase(d.Phase); p.CheckpointID == d.CheckpointID && p.Status == d.Status {
		return d.Status, nil
	}
	return StatusPendingDelivery, nil
}

// waitLease waits, on the service's clock, for the end of the lease another instance holds on
// the loaded occurrence. It refuses (ErrActive, which Studio answers by delivering the resume
// again) when the lease outlasts the call's deadline, or when the holder keeps renewing it past
// what a dead instance's lease can last from start: that instance is alive and running the step.
func (r *runner) waitLease(ctx context.Context, start time.Time) error {
	until := r.rec.Lease.Until
	left := until.Sub(r.sc.svc.now())
	if until.Sub(start) > r.sc.svc.lease+2*SkewMargin {
		return fmt.Errorf("%w: another instance is running it (its lease keeps being renewed); deliver the resume again", ErrActive)
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= left {
		return fmt.Errorf("%w: another instance holds it for %s more, past this call's deadline; deliver the resume again", ErrActive, left.Round(time.Millisecond))
	}
	select {
	case <-r.sc.svc.after(left):
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: another instance held it until this call ended (%w); deliver the resume again", ErrActive, context.Cause(ctx))
	}
}

// keep stores d for its occurrence (replacing an earlier decision for the same phase) until
// DecisionRetention has passed.
func (sc *scope) keep(ctx context.Context, d *decision) error {
	key := sc.decisionKey(d.JobID, d.CaseID, d.OccurrenceID, d.Phase)
	value, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	expires := sc.svc.now().Add(DecisionRetention)
	for range maxAttempts {
		cur, err := sc.svc.store.Create(ctx, key, value, expires)
		if err == nil {
			return nil
		}
		if !errors.Is(err, store.ErrExists) {
			return fmt.Errorf("checkpoint: keep the decision: %w", err)
		}
		if bytes.Equal(cur.Value, value) {
			return nil
		}
		_, err = sc.svc.store.Update(ctx, key, cur.Version, value, expires)
		if err == nil {
			return nil
		}
		if !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("checkpoint: keep the decision: %w", err)
		}
	}
	return errors.New("checkpoint: keep the decision: it keeps changing under concurrent writes")
}

// loadDecision reads the decision kept for phase of the runner's occurrence.
func (r *runner) loadDecision(ctx context.Context, phase string) (*decision, uint64, bool, error) {
	got, err := r.sc.svc.store.Get(ctx, r.sc.decisionKey(r.rec.JobID, r.rec.CaseID, r.rec.OccurrenceID, phase))
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, fmt.Errorf("checkpoint: read the kept decision: %w", err)
	}
	var d decision
	if err := json.Unmarshal(got.Value, &d); err != nil {
		return nil, 0, false, fmt.Errorf("checkpoint: unreadable kept decision: %w", err)
	}
	return &d, got.Version, true, nil
}

// dropDecision deletes a kept decision (applied, or for another checkpoint); a failure only
// leaves it to expire.
func (r *runner) dropDecision(ctx context.Context, phase string, version uint64) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	if err := r.sc.svc.store.Delete(wctx, r.sc.decisionKey(r.rec.JobID, r.rec.CaseID, r.rec.OccurrenceID, phase), version); err != nil &&
		!errors.Is(err, store.ErrConflict) {
		r.sc.svc.log.WarnContext(ctx, "checkpoint: cannot delete a kept decision; it expires by itself", "error", err,
			"expires_in", DecisionRetention.Round(time.Hour).String())
	}
}

// applyDecision applies the decision kept for the checkpoint the held occurrence waits on;
// applied is false when there is none (a kept decision for another checkpoint is discarded).
func (r *runner) applyDecision(ctx context.Context) (applied bool, err error) {
	phase := r.pausedPhase()
	d, version, ok, err := r.loadDecision(ctx, phase)
	if err != nil || !ok {
		return false, err
	}
	if !d.matches(&r.rec) {
		r.sc.svc.log.WarnContext(ctx, "rule checkpoint: discarding a kept decision for another checkpoint",
			slog.String("occurrence_id", r.rec.OccurrenceID), slog.String("phase", phase), slog.String("checkpoint_id", d.CheckpointID))
		r.dropDecision(ctx, phase, version)
		return false, nil
	}
	if err := r.put(ctx, func(s *stepRecord) {
		p := s.phase(phase)
		p.Status, p.DecisionID, p.Resumed = d.Status, d.DecisionID, true
		s.State = decided(phase, d.Status)
	}, true); err != nil {
		return false, err
	}
	r.dropDecision(ctx, phase, version)
	return true, nil
}
