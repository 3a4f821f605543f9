package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/core/contract"
)

// Guarded runs the guarded step s (package checkpoint: an external effect Studio's rules check
// before and after) as the step name of the running work of a governed job (its job.start kept
// the gate: checkpoint.FromJobStart), and returns the effect's result once Studio's rules let it
// complete:
//
//   - A checkpoint that pauses makes the job wait (a step "<name>.wait.<phase>", awaiting
//     rule.checkpoint.resume) until Studio's decision wakes it; the work then runs again to here
//     and the guarded step continues.
//   - An effect interrupted after it started (a crash, a lapsed lease) is never run again by the
//     guarded step: recover, the reference's recover_guarded_step, redoes it in an idempotent way
//     and returns its result, which the after checkpoint then checks. Without recover, the job
//     fails (checkpoint.ErrEffectStarted).
//   - A checkpoint that stops, or an effect that failed, fails the job (permanently: the guarded
//     step never runs its effect twice).
//
// The occurrence is the step's: case CaseID(job, the InCase of opts, else the default case),
// step StepID(job, name), occurrence "<step id>-1". before is the before checkpoint's context.
func Guarded[In, Out any](ctx context.Context, name string, s *checkpoint.Step[In, Out], before any, in In,
	recover func(ctx context.Context, in In) (Out, error), opts ...StepOption) (Out, error) {
	var none Out
	t := taskOf(ctx)
	if t == nil {
		return none, ErrNotInWork
	}
	if err := t.open(name); err != nil {
		return none, err
	}
	if _, ok := t.recorded(name); ok { // completed in an earlier delivery: its recorded result
		return Step(ctx, name, func(context.Context) (Out, error) { return none, nil }, opts...)
	}
	job := t.msg.Job
	g, err := checkpoint.JobGate(ctx, job)
	if err != nil {
		return none, fmt.Errorf("jobs: guarded step %q of job %s: %w", name, job, err)
	}
	o := applyOpts(opts)
	occ := checkpoint.Occurrence{JobID: job, CaseID: CaseID(job, cmpOr(o.caseID, defaultCase)), StepID: StepID(job, name),
		OccurrenceID: StepID(job, name) + "-1"}
	run := func() (checkpoint.Outcome[Out], error) {
		if err := t.acquire(ctx, name, o.limits); err != nil { // the limits bound the effect
			return checkpoint.Outcome[Out]{}, err
		}
		defer t.releaseLimits(ctx, name, o.limits)
		out, err := checkpoint.RunGuardedStep(ctx, g, s, occ, before, in)
		if errors.Is(err, checkpoint.ErrEffectStarted) && recover != nil {
			var res Out
			if res, err = recover(ctx, in); err == nil {
				out, err = checkpoint.RecoverGuardedStep(ctx, g, s, occ, res)
			}
		}
		if err != nil {
			return out, fmt.Errorf("jobs: guarded step %q of job %s: %w", name, job, err)
		}
		return out, nil
	}
	out, err := run()
	if err != nil {
		return none, err
	}
	// The occurrence may have gone past the waits an earlier delivery recorded (a decision it
	// took in, then handed on before the step's record): they count as reached.
	t.mu.Lock()
	for n := range t.replay {
		if strings.HasPrefix(n, name+".wait.") {
			delete(t.replay, n)
		}
	}
	t.mu.Unlock()
	opts = append(opts[:len(opts):len(opts)], func(o *stepOpts) { o.limits = nil }) // taken in run
	for answered := ""; out.Status == checkpoint.Awaiting && out.Phase != answered; {
		// A step per phase: the after checkpoint may pause once the woken before one allowed.
		wait := append(opts[:len(opts):len(opts)], Title("Studio's rules decide ("+out.Phase+" "+name+")"))
		if _, err := Await[any](ctx, name+".wait."+out.Phase, contract.Awaiting{Reason: "rule_checkpoint", Action: contract.RuleCheckpointResumeAction}, wait...); err != nil {
			return none, err
		}
		// Answered in this delivery: the decision came while it was on its way to the wait (the
		// wake was kept for it). The occurrence has gone on since: read where it is. (Still
		// waiting on the phase just answered, it fails below: a wake comes only once Studio's
		// decision is delivered.)
		answered = out.Phase
		if out, err = run(); err != nil {
			return none, err
		}
	}
	return Step(ctx, name, func(context.Context) (Out, error) {
		if out.Status != checkpoint.Completed {
			return none, Permanent(fmt.Errorf("guarded step %q of job %s: %w", name, job, cmp.Or(out.Err(), errors.New(string(out.Status)))))
		}
		return out.Result, nil
	}, opts...)
}
