package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Causes of a job's failure (Failure.Cause).
const (
	// CauseStep: a step (or a fan-out item) failed MaxAttempts times, or with a Permanent error.
	CauseStep = "step"
	// CauseWork: the work function returned an error outside a step, or panicked.
	CauseWork = "work"
	// CauseTimeout: the job's timeout passed.
	CauseTimeout = "timeout"
	// CauseDelivery: the queue gave up on the task's message (its last receive failed, or it was
	// dead-lettered): a step kept outlasting its delivery, or the store kept failing.
	CauseDelivery = "delivery"
	// CauseStopped: job.stop (only for a handler that asked for stopped jobs: AlsoWhenStopped).
	CauseStopped = "stopped"
)

// DefaultHandlerTimeout bounds a failure handler's run (HandlerTimeout).
const DefaultHandlerTimeout = 15 * time.Minute

// Failure is why a job failed for good, as its failure handler gets it.
type Failure struct {
	Job    string
	Cause  string // CauseStep, CauseWork, CauseTimeout, CauseDelivery, CauseStopped
	Reason string // the job's failure message, as job.sync shows it
	Step   string // the step that failed, when one did
}

// FailureOption configures a failure handler.
type FailureOption func(*handler)

// AlsoWhenStopped runs the failure handler for a job stopped by job.stop too (Cause
// CauseStopped), not only for failed ones.
func AlsoWhenStopped() FailureOption { return func(h *handler) { h.onStop = true } }

// HandlerTimeout bounds the handler's run (DefaultHandlerTimeout); it has its own time, since
// the job's may have passed.
func HandlerTimeout(d time.Duration) FailureOption { return func(h *handler) { h.timeout = d } }

type handler struct {
	run     func(ctx context.Context, input json.RawMessage, f Failure) error
	onStop  bool
	timeout time.Duration
	err     error
}

// OnFailure runs fn once, durably, when a job of the work fails for good (its retries spent, a
// permanent error, its timeout, its message dead-lettered), with the reason: the place to undo a
// partial effect or notify someone. It runs in a delivery of its own after the failure, with the
// context a step gets (state, parameters), as one recorded unit: retried with the work's backoff
// up to MaxAttempts, within HandlerTimeout; a crash runs it again. job.sync shows the job failed
// from the start; the job.synced effect comes once the handler ran. Not run for a stopped job
// unless AlsoWhenStopped, nor for a job the work cancelled (Cancel).
func OnFailure[In any](fn func(ctx context.Context, in In, f Failure) error, opts ...FailureOption) Option {
	return func(s *settings) {
		h := &handler{timeout: DefaultHandlerTimeout}
		for _, o := range opts {
			o(h)
		}
		switch {
		case fn == nil:
			h.err = errors.New("jobs.OnFailure: the handler function is required")
		case h.timeout <= 0:
			h.err = errors.New("jobs.OnFailure: HandlerTimeout must be positive")
		}
		h.run = func(ctx context.Context, input json.RawMessage, f Failure) error {
			var in In
			if err := json.Unmarshal(input, &in); err != nil {
				return Permanent(fmt.Errorf("decode the input for the failure handler: %w", err))
			}
			return fn(ctx, in, f)
		}
		s.handler = h
	}
}

// onFailureStep is the hidden step record of a failure handler that ran.
const onFailureStep = "on-failure"

// newFailure is the failure record of a job that fails for good with status (failed or stopped).
func (s *Service) newFailure(h *handler, status string, f failureRecord) *failureRecord {
	if status == taskStopped {
		f = failureRecord{Cause: CauseStopped, Reason: "the job was stopped (job.stop)"}
	}
	f.Status = status
	f.Deadline = s.now().Add(h.timeout)
	return &f
}

// handleFailure runs the failure handler of a failing task, once.
func (t *task) handleFailure(ctx context.Context) error {
	h := t.settings.handler
	if h == nil {
		return nil // the new code has no handler any more: the job ends as it failed
	}
	if _, done := t.recorded(onFailureStep); done {
		return nil
	}
	if t.boundary(ctx) {
		return errHalted
	}
	t.mu.Lock()
	fr := *t.rec.Failure
	t.mu.Unlock()
	f := Failure{Job: t.msg.Job, Cause: fr.Cause, Reason: fr.Reason, Step: fr.Step}
	hctx, handlerDone := t.svc.tel.stepStarted(context.WithValue(ctx, unitKey{}, onFailureStep), t.msg.Work, onFailureStep, fr.Tries)
	_, err := runStep(hctx, func(ctx context.Context) (json.RawMessage, error) {
		return nil, h.run(ctx, t.recNow().Input, f)
	})
	handlerDone(err)
	if err == nil {
		_, err := t.record(ctx, &stepRecord{Name: onFailureStep, Status: stepCompleted, Hidden: true})
		return err
	}
	if t.ended(ctx, err) {
		return errHalted
	}
	tries := fr.Tries + 1
	var perm *permanentError
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failures = map[string]*failure{onFailureStep: {name: onFailureStep, tries: tries, msg: err.Error()}}
	if errors.As(err, &perm) || tries >= t.settings.maxAttempts {
		t.halt, t.fail = failHalt, failureRecord{Reason: fmt.Sprintf("the failure handler failed: %v", err)}
		return errHalted
	}
	t.halt, t.delay = handOn, backoff(t.settings.backoff, tries)
	t.log.WarnContext(ctx, "the failure handler failed: retried in a later delivery", "tries", tries, "error", err)
	return errHalted
}

// endFailure is how a failure handler's delivery ends the task: failing still (a retry), or its
// final status with the job's reason (and the handler's own failure, when it failed for good).
func (t *task) endFailure(r *record, h halt, fail failureRecord) (status, msg string) {
	fr := r.Failure
	final := func(note string) (string, string) {
		msg := fr.Reason
		if fr.Status == taskStopped {
			msg = ""
		}
		if note != "" {
			t.log.Error("the failure handler did not complete", "job_id", r.Job, "error", note)
			msg = joinReason(msg, note)
		}
		return fr.Status, msg
	}
	switch h {
	case running:
		return final("")
	case handOn:
		if f := t.failures[onFailureStep]; f != nil {
			fr.Tries, fr.Error = f.tries, f.msg
		}
		return taskFailing, fr.Reason
	case timedOut:
		return final(fmt.Sprintf("the failure handler did not finish within %s", t.settings.handler.timeout))
	}
	return final(fail.Reason)
}

func joinReason(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
