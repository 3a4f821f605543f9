package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/supervaize/svz/core/store"
)

// maxAttempts bounds the re-reads of an occurrence that keeps changing under a claim.
const maxAttempts = 20

// setup checks what every entry point needs: the scope of the call, a step defined on its
// agent and a gate of that agent.
func setup[In, Out any](ctx context.Context, g *Gate, s *Step[In, Out]) (*scope, error) {
	sc, err := scopeOf(ctx)
	if err != nil {
		return nil, err
	}
	switch {
	case s == nil || s.reg != sc.reg || sc.reg.kinds[s.name] != kind(s):
		name := ""
		if s != nil {
			name = s.name
		}
		return nil, fmt.Errorf("checkpoint: guarded step %q is not defined on agent %q (define it with checkpoint.Define on the agent, before core.New)", name, sc.agent)
	case g == nil || g.token == "": // nil, or a Gate not made by FromJobStart or JobGate
		return nil, errors.New("checkpoint: a guarded step needs its job's gate (FromJobStart or JobGate)")
	case g.agent != sc.agent:
		return nil, ErrOtherAgent
	}
	return sc, nil
}

// RunGuardedStep is the reference's run_guarded_step, for serverless: it runs one occurrence of
// step s, of the job and case o names, under gate g:
//
//	before checkpoint (before context) → allow → effect(in) → after checkpoint
//	(AfterContext(in, result)) → allow → Advance(in, result) → completed
//
// Every transition is written to the store (compare-and-swap) before the call that follows it,
// and the occurrence is held by a lease while this instance runs it: a second instance running
// the same occurrence at the same time gets ErrActive ("Rule checkpoint occurrence is active").
//
// A pause does not wait: the step is stored and RunGuardedStep returns an Awaiting outcome; the
// rule.checkpoint.resume action (registered by the controller) continues it on whichever
// instance receives it. A stop returns a Blocked outcome (Outcome.Err is the reference's
// RuleCheckpointBlocked). Outcome.StepStatus is the step's status for job_state.
//
// A retry of the same occurrence (the same OccurrenceID) continues where the first run stopped:
// a checkpoint whose answer was lost is sent again, unchanged; a decision is never asked twice; an
// effect or an advance that started is never called again (ErrEffectStarted and
// ErrAmbiguousAdvance, both *RecoveryError: see RecoverGuardedStep). A paused, blocked or
// completed occurrence answers its outcome. A retry with another before context, snapshot, step
// id, step or input is refused (ErrRetryContext, ErrRetrySnapshot, ErrRetryStep, ErrRetryInput).
func RunGuardedStep[In, Out any](ctx context.Context, g *Gate, s *Step[In, Out], o Occurrence, before any, in In) (Outcome[Out], error) {
	var none Outcome[Out]
	sc, err := setup(ctx, g, s)
	if err != nil {
		return none, err
	}
	if err := o.check(true); err != nil {
		return none, err
	}
	if g.job != o.JobID {
		if g.job != "" {
			return none, fmt.Errorf("checkpoint: the gate belongs to job %q, not %q", g.job, o.JobID)
		}
		if err := sc.bindGate(ctx, g, o.JobID); err != nil {
			return none, err
		}
	}
	hash, sent, err := prepareContext(g, before)
	if err != nil {
		return none, err
	}
	input, err := json.Marshal(in)
	if err != nil {
		return none, fmt.Errorf("checkpoint: encode the input of step %q: %w", s.name, err)
	}
	canon, err := canonicalize(input)
	if err != nil {
		return none, fmt.Errorf("checkpoint: encode the input of step %q: %w", s.name, err)
	}
	if err := noToken(g, input, canon); err != nil {
		return none, err
	}
	fresh := stepRecord{Format: 1, Agent: sc.agent, JobID: o.JobID, CaseID: o.CaseID, StepID: o.StepID, OccurrenceID: o.OccurrenceID,
		Step: s.name, SnapshotHash: g.snapshotHash, InputHash: contextHash(canon), Input: input, State: stBeforeChecking,
		Before: phaseState{ContextHash: hash, Context: sent, Status: checking}}
	r := newRunner(sc, sc.stepKey(o.JobID, o.CaseID, o.OccurrenceID), s, g)
	for range maxAttempts {
		found, err := r.load(ctx)
		if err != nil {
			return none, err
		}
		if !found {
			err = r.create(ctx, fresh)
			if errors.Is(err, errRetry) {
				continue
			}
			if err == nil {
				err = r.driveHeld(ctx)
			}
			return finish[Out](r, err)
		}
		switch rec := &r.rec; {
		case rec.Before.ContextHash != hash:
			return none, ErrRetryContext
		case rec.SnapshotHash != g.snapshotHash:
			return none, ErrRetrySnapshot
		case rec.StepID != o.StepID:
			return none, ErrRetryStep
		case rec.Step != s.name || rec.InputHash != fresh.InputHash:
			return none, ErrRetryInput
		}
		err = r.enter(ctx, false)
		if errors.Is(err, errRetry) {
			continue
		}
		return finish[Out](r, err)
	}
	return none, fmt.Errorf("checkpoint: the occurrence keeps changing under concurrent claims (%d attempts)", maxAttempts)
}

// finish returns the outcome of a run that ended with err.
func finish[Out any](r *runner, err error) (Outcome[Out], error) {
	if err != nil {
		return Outcome[Out]{}, err
	}
	return outcomeOf[Out](r)
}

// enter continues an existing occurrence from its state. quiet (for rule.checkpoint.resume)
// leaves an occurrence that needs recovery as it is instead of failing; one that another
// instance runs is ErrActive, unwrapped, for the resume to wait for or refuse.
func (r *runner) enter(ctx context.Context, quiet bool) error {
	fail := func(err error) error {
		switch {
		case quiet && err == ErrActive:
			return err
		case quiet:
			return nil
		}
		return recovery(err)
	}
	switch r.rec.State {
	case stCompleted, stBlocked:
		return nil
	case stEffectStarted:
		if r.leaseLive() {
			return fail(ErrActive)
		}
		return fail(ErrEffectStarted)
	case stAdvancing:
		if r.leaseLive() {
			return fail(ErrActive)
		}
		return fail(ErrAmbiguousAdvance)
	case stBeforePaused, stAfterPaused:
		if r.leaseLive() {
			return nil // paused: its holder looks for a decision once it lets go
		}
	default:
		if r.leaseLive() {
			return fail(ErrActive)
		}
	}
	if err := r.claim(ctx); err != nil {
		return err
	}
	return r.driveHeld(ctx)
}

// RecoverGuardedStep is the reference's recover_guarded_step: it finishes an occurrence whose
// effect ran but which cannot go on by itself, with the original gate, the effect's result as
// the caller established it, and the step's AfterContext. It never calls the effect.
//
//   - The effect started and its outcome was not recorded (ErrEffectStarted): result is recorded
//     as its outcome, then the after checkpoint is sent and, on allow, the step advances once.
//   - The after checkpoint's answer was lost: AfterContext(in, result) must give the context
//     recorded before it was sent (else ErrRecoveryContext); the same checkpoint is sent again,
//     then the step advances once on allow.
//   - A completed occurrence is answered as is (its advance is not called again); a pause
//     returns Awaiting. An advance that started without completing stays ambiguous
//     (ErrAmbiguousAdvance); an occurrence whose effect never started is not ready (ErrNotReady).
//
// The gate must be the job's (ErrRecoverySnapshot otherwise); o.StepID may be left empty.
func RecoverGuardedStep[In, Out any](ctx context.Context, g *Gate, s *Step[In, Out], o Occurrence, result Out) (Outcome[Out], error) {
	var none Outcome[Out]
	sc, err := setup(ctx, g, s)
	if err != nil {
		return none, err
	}
	if err := o.check(false); err != nil {
		return none, err
	}
	out, err := json.Marshal(result)
	if err != nil {
		return none, fmt.Errorf("checkpoint: encode the result of step %q: %w", s.name, err)
	}
	if err := noToken(g, out); err != nil {
		return none, err
	}
	r := newRunner(sc, sc.stepKey(o.JobID, o.CaseID, o.OccurrenceID), s, g)
	for range maxAttempts {
		found, err := r.load(ctx)
		switch {
		case err != nil:
			return none, err
		case !found:
			return none, recovery(ErrNotReady)
		case r.rec.SnapshotHash != g.snapshotHash:
			return none, ErrRecoverySnapshot
		case o.StepID != "" && o.StepID != r.rec.StepID:
			return none, ErrRetryStep
		case r.rec.Step != s.name:
			return none, ErrRetryInput
		}
		switch r.rec.State {
		case stCompleted:
			return outcomeOf[Out](r)
		case stBeforeChecking, stBeforePaused, stBeforeAllowed, stBlocked:
			return none, recovery(ErrNotReady)
		case stAfterChecking, stAfterAllowed:
			var in In
			if err := json.Unmarshal(r.rec.Input, &in); err != nil {
				return none, fmt.Errorf("checkpoint: decode the stored input of step %q: %w", s.name, err)
			}
			v, err := s.f.AfterContext(in, result)
			if err != nil {
				return none, fmt.Errorf("checkpoint: after context of step %q: %w", s.name, err)
			}
			hash, _, err := prepareContext(g, v)
			if err != nil {
				return none, err
			}
			if hash != r.rec.After.ContextHash {
				return none, ErrRecoveryContext
			}
		}
		var claim error
		if r.rec.State == stEffectStarted && !r.leaseLive() {
			claim = r.put(ctx, func(s *stepRecord) { s.State, s.Result = stEffectDone, out }, true)
			if claim == nil {
				claim = r.driveHeld(ctx)
			}
		} else {
			claim = r.enter(ctx, false)
		}
		if errors.Is(claim, errRetry) {
			continue
		}
		return finish[Out](r, claim)
	}
	return none, fmt.Errorf("checkpoint: the occurrence keeps changing under concurrent claims (%d attempts)", maxAttempts)
}

// StepState reads where occurrence o of step s stands, without changing it: for job.sync and
// job_state (Outcome.StepStatus). An occurrence that never ran is an error matching
// store.ErrNotFound.
func StepState[In, Out any](ctx context.Context, s *Step[In, Out], o Occurrence) (Outcome[Out], error) {
	var none Outcome[Out]
	sc, err := scopeOf(ctx)
	if err != nil {
		return none, err
	}
	if err := o.check(false); err != nil {
		return none, err
	}
	r := newRunner(sc, sc.stepKey(o.JobID, o.CaseID, o.OccurrenceID), s, nil)
	found, err := r.load(ctx)
	if err != nil {
		return none, err
	}
	if !found {
		return none, fmt.Errorf("checkpoint: occurrence %q of job %q, case %q has not run: %w", o.OccurrenceID, o.JobID, o.CaseID, store.ErrNotFound)
	}
	return outcomeOf[Out](r)
}
