package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Sleep makes the running job wait for d before its next step, durably: the first time, the
// wake time is recorded and the delivery ends; the queue delivers the task again then (SQS holds
// a message back 15 minutes at most: a longer sleep is handed on every 15 minutes without
// running anything; Cloud Tasks schedules it; the pool keeps a timer, and its store index finds
// the task after a restart). Nothing runs, and nothing is billed on serverless, meanwhile. Once
// the time has come, Sleep returns nil and records the step (one write). job.sync shows the step
// "pending" with its wake time and the job waiting until then. A sleep past the job's timeout
// ends in the timeout. A duration of 0 or less returns at once, with no step.
func Sleep(ctx context.Context, name string, d time.Duration, opts ...StepOption) error {
	t := taskOf(ctx)
	if t == nil {
		return ErrNotInWork
	}
	if d <= 0 {
		return t.open(name) // nothing to wait for: no step (a configured pause set to 0)
	}
	return t.sleep(ctx, name, func(now time.Time) time.Time { return now.Add(d) }, opts)
}

// SleepUntil is Sleep until a time.
func SleepUntil(ctx context.Context, name string, until time.Time, opts ...StepOption) error {
	t := taskOf(ctx)
	if t == nil {
		return ErrNotInWork
	}
	return t.sleep(ctx, name, func(time.Time) time.Time { return until }, opts)
}

// timer is a Sleep waiting in this delivery, written with the task as a sleeping open step.
type timer struct {
	opts  stepOpts
	until time.Time
}

func (t *task) sleep(ctx context.Context, name string, wake func(now time.Time) time.Time, opts []StepOption) error {
	// A Sleep reached after another branch of a group handed the job on still sets its timer:
	// the earliest wake-up wins, and the sleep counts from now, not from the delivery that
	// reaches it next.
	halting := false
	if err := t.open(name); err != nil {
		if !errors.Is(err, errHalted) || !t.handingOn() {
			return err
		}
		halting = true
	}
	if inItem(ctx) {
		return Permanent(fmt.Errorf("jobs: Sleep %q runs inside a fan-out item", name))
	}
	o := applyOpts(opts)
	if prev, ok := t.recorded(name); ok {
		if prev.Until.IsZero() {
			return Permanent(fmt.Errorf("jobs: %q is not a Sleep step: step names are unique within a work", name))
		}
		return nil
	}
	now := t.svc.now()
	t.mu.Lock()
	prev := t.rec.open(name)
	t.mu.Unlock()
	var until time.Time
	switch {
	case prev != nil && prev.Status == stepSleeping:
		until = prev.Until // set by the delivery that first reached it
	case prev != nil:
		return Permanent(fmt.Errorf("jobs: %q is not a Sleep step: step names are unique within a work", name))
	default:
		if err := t.diverged(ctx, name); err != nil {
			return err
		}
		until = wake(now).UTC().Truncate(time.Millisecond)
	}
	if !now.Before(until) {
		if halting {
			return errHalted // the next delivery records it
		}
		st := &stepRecord{Name: name, Status: stepCompleted, Until: until}
		o.place(t.msg.Work, st, t.svc.laneOf(t.msg.Agent))
		_, err := t.record(ctx, st)
		return err
	}
	if !halting && t.boundary(ctx) {
		return errHalted
	}
	t.mu.Lock()
	if t.timers == nil {
		t.timers = map[string]timer{}
	}
	t.timers[name] = timer{opts: o, until: until}
	t.mu.Unlock()
	wakeAt := until
	if dl := t.recNow().Deadline; dl.Before(wakeAt) {
		wakeAt = dl // past the timeout, the next delivery records it
	}
	t.handOn(wakeAt.Sub(now), &waitRecord{Reason: waitTimer, Step: name, Until: until})
	return errHalted
}

// handingOn reports whether the delivery ends to hand the job on (a timer, a retry, the margin).
func (t *task) handingOn() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.halt == handOn
}

// handOn ends the delivery for a later one after delay: the earliest of the delays asked for
// wins (a timer and a retry in two branches of a group).
func (t *task) handOn(delay time.Duration, w *waitRecord) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.halt == running:
		t.halt, t.delay, t.wait = handOn, delay, w
	case t.halt == handOn && delay < t.delay:
		t.delay, t.wait = delay, w
	}
}
