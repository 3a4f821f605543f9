package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/store"
)

// halt is why a delivery stops running the work before it returns by itself.
type halt int

const (
	running    halt = iota
	handOn          // time is nearly up, a failed step waits for its retry, a timer or a limit: a later delivery continues
	awaitHalt       // an Await step waits for the operator's answer
	stopHalt        // job.stop
	timedOut        // the job's own timeout passed
	failHalt        // a step failed for good
	cancelHalt      // the work ended the job as cancelled (Cancel)
	lostHalt        // another instance took the task over (this one's lease lapsed)
	storeHalt       // the store failed while recording a step: the queue delivers the task again
)

// Sentinel errors the work's steps return once the delivery halts; the work should return them
// as they are (the delivery ignores what the work returns after a halt).
var (
	errHalted   = errors.New("jobs: this delivery of the task has ended (the task continues in another delivery, waits, or has finished)")
	errLeaseNow = errors.New("jobs: the task's lease was lost")
	errTimedOut = errors.New("jobs: the job's timeout passed")
	errStopped  = errors.New("jobs: the job was stopped (job.stop)")
	// ErrLeaseLost is what CheckLease returns, and the cause of a step's context cancelled
	// because this instance's lease on the task lapsed (the process was paused, the store was
	// unreachable): another instance may run the task now.
	ErrLeaseLost = errors.New("jobs: this instance's lease on the task lapsed: another instance may run it now")
)

// task is one delivery of a task, running its work (or its failure handler).
type task struct {
	svc      *Service
	key      string
	holder   string
	msg      Message
	log      *slog.Logger
	deadline time.Time // the delivery's, from the platform; zero: none
	settings settings

	mu      sync.Mutex
	rec     *record
	version uint64
	halt    halt
	delay   time.Duration // handOn: the next delivery's delay
	wait    *waitRecord   // handOn: why the next delivery waits
	fail    failureRecord // failHalt: the cause and reason
	failErr error         // storeHalt
	cancel  context.CancelCauseFunc
	// leaseUntil is the end of the lease this delivery last wrote: past it, another instance may
	// have taken the task over.
	leaseUntil time.Time

	build    int                    // this delivery's build, as an index in rec.Builds
	steps    map[string]*stepRecord // step records by name, the first of each name
	replay   map[string]bool        // step records written before this delivery, not reached yet
	seq      int                    // the highest step record number known
	seqMu    sync.Mutex             // one step record write at a time: numbers without holes
	done     int                    // steps and items completed in this delivery
	current  map[string]*current    // the steps running now
	failures map[string]*failure    // failed attempts, by step
	items    map[string]*fanout     // the fan-outs of this delivery not recorded yet
	timers   map[string]timer       // the Sleeps this delivery reached, not due yet
	progress map[string]caseRecord  // case id → progress (Progress)
	progVer  int
	held     []heldSlot // the slots of limits this delivery holds
}

// recNow is the task record as this delivery last read or wrote it. Records are never changed
// once they are t.rec (write changes a copy), so the caller reads it without the lock.
func (t *task) recNow() *record {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rec
}

type taskCtxKey struct{}

func taskOf(ctx context.Context) *task {
	t, _ := ctx.Value(taskCtxKey{}).(*task)
	return t
}

// run runs the work (or the failure handler of a failing task), renewing the lease meanwhile,
// then records how the delivery ended.
func (t *task) run(ctx context.Context, w runner) error {
	s := t.svc
	wctx := ctx
	if s.cfg.Bind != nil {
		wctx = s.cfg.Bind(ctx, t.rec.Agent, t.rec.grant())
	}
	deadline, handling := t.rec.Deadline, t.rec.Failure != nil
	if handling {
		deadline = t.rec.Failure.Deadline
	}
	wctx, cancel := context.WithCancelCause(context.WithValue(wctx, taskCtxKey{}, t))
	wctx, cancelDeadline := context.WithDeadlineCause(wctx, deadline, errTimedOut)
	defer cancelDeadline()
	t.cancel = cancel
	s.running.Store(t.key, t)
	defer s.running.CompareAndDelete(t.key, t)

	renewed := make(chan struct{})
	stopRenew := make(chan struct{})
	go func() {
		defer close(renewed)
		t.renew(wctx, stopRenew)
	}()
	var err error
	if handling {
		err = t.handleFailure(wctx)
	} else {
		err = t.exec(wctx, w)
		if err == nil && !t.halted() {
			err = t.checkReplayed() // the work ended: every step earlier deliveries recorded was reached
		}
	}
	close(stopRenew)
	<-renewed
	cause := context.Cause(wctx) // the job's timeout, when it ended the work outside a step
	cancel(nil)
	err = t.finish(ctx, err, cause)
	t.releaseJob(ctx)
	return err
}

// exec runs the work function, a panic counting as a failure of the job.
func (t *task) exec(ctx context.Context, w runner) (err error) {
	defer func() {
		if p := recover(); p != nil {
			t.log.ErrorContext(ctx, "background work panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			err = &permanentError{errors.New("the work panicked (see the controller's log)")}
		}
	}()
	return w.exec(ctx, t.recNow().Input)
}

func (r *record) grant() *contract.VerifiedWorkspaceContext {
	v := &contract.VerifiedWorkspaceContext{WorkspaceID: r.Workspace, AgentSlug: r.Agent, Scopes: []string{}}
	if g := r.Grant; g != nil {
		v.GrantID, v.WorkspaceSlug, v.AgentID, v.ServerID, v.AgentWorkspaceRef = g.GrantID, g.WorkspaceSlug, g.AgentID, g.ServerID, g.AgentRef
		if g.Scopes != nil {
			v.Scopes = g.Scopes
		}
	}
	return v
}

// renew extends the lease every third of it until stop closes, and cancels the work when the
// task was stopped or taken over, or when this instance can no longer know that it holds it: a
// tick that finds the lease it wrote already past (the process was paused, or the store
// unreachable, for longer than the lease) cancels the running steps before anything else, since
// another instance may be running them by now.
func (t *task) renew(ctx context.Context, stop <-chan struct{}) {
	s := t.svc
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-s.cfg.After(s.cfg.Lease / 3):
		}
		if t.lapsed() {
			t.setHalt(lostHalt)
			t.cancel(ErrLeaseLost)
			t.log.WarnContext(ctx, "the lease on the task lapsed before it was renewed (a pause, or the store unreachable): the running steps are cancelled")
			return
		}
		err := t.write(ctx, func(r *record) bool {
			t.apply(r) // the running steps (active) and progress, for job.sync meanwhile
			r.LeaseUntil = s.now().Add(s.cfg.Lease)
			return true
		})
		t.mu.Lock()
		stopped := t.rec.Stop && t.rec.Failure == nil
		t.mu.Unlock()
		switch {
		case errors.Is(err, errLeaseNow):
			t.setHalt(lostHalt)
			t.cancel(errLeaseNow)
			return
		case stopped:
			t.setHalt(stopHalt)
			t.cancel(errStopped)
			return
		case err != nil && ctx.Err() == nil:
			t.log.WarnContext(ctx, "lease renewal failed: retrying at the next tick", "error", err)
		default:
			t.renewHeld(ctx)
		}
	}
}

// lapsed reports whether the lease this delivery last wrote has ended.
func (t *task) lapsed() bool {
	t.mu.Lock()
	until := t.leaseUntil
	t.mu.Unlock()
	return !t.svc.now().Before(until)
}

// CheckLease reports whether the running delivery still holds its task: ErrLeaseLost when its
// lease lapsed and another instance may run the task. Call it right before an external effect
// that must not happen twice; it reads the task record (one store read). What remains: a pause
// between the check and the effect; give the effect's API an idempotency key (StepKey) where it
// takes one.
func CheckLease(ctx context.Context) error {
	t := taskOf(ctx)
	if t == nil {
		return ErrNotInWork
	}
	t.mu.Lock()
	lost := t.halt == lostHalt
	t.mu.Unlock()
	if lost || errors.Is(context.Cause(ctx), ErrLeaseLost) || errors.Is(context.Cause(ctx), errLeaseNow) {
		return ErrLeaseLost
	}
	if t.lapsed() {
		return t.confirmLease(ctx)
	}
	r, _, err := t.svc.load(ctx, t.key)
	if err != nil {
		return fmt.Errorf("jobs: check the lease: %w", err)
	}
	if r.Holder != t.holder {
		t.setHalt(lostHalt)
		return ErrLeaseLost
	}
	return nil
}

// confirmLease renews a lapsed lease when nobody took the task over meanwhile; ErrLeaseLost
// otherwise.
func (t *task) confirmLease(ctx context.Context) error {
	s := t.svc
	err := t.write(ctx, func(r *record) bool {
		r.LeaseUntil = s.now().Add(s.cfg.Lease)
		return true
	})
	switch {
	case errors.Is(err, errLeaseNow):
		t.setHalt(lostHalt)
		return ErrLeaseLost
	case err != nil:
		return fmt.Errorf("jobs: renew a lapsed lease: %w", err)
	}
	return nil
}

// StepKey is a stable identifier of the step (or fan-out item) ctx runs, the same at every run of
// it: "<job>/<step>" or "<job>/<fan-out>/<index>". Give it to an external API that takes an
// idempotency key, so that a step run twice (a crash, a lapsed lease) has its effect once.
func StepKey(ctx context.Context) string {
	t := taskOf(ctx)
	if t == nil {
		return ""
	}
	if u, ok := ctx.Value(unitKey{}).(string); ok {
		return t.msg.Job + "/" + u
	}
	return ""
}

type unitKey struct{}

func (t *task) setHalt(h halt) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.halt == running {
		t.halt = h
	}
}

func (t *task) halted() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.halt != running
}

// write rewrites the task record under the lease: mutate changes a copy, written with
// compare-and-swap; on conflict the record is read again (job.stop may have written it) and, if
// this delivery still holds it, mutate applies again. errLeaseNow when another holds it.
func (t *task) write(ctx context.Context, mutate func(r *record) bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.svc
	for range maxWriteRounds {
		next := t.rec.clone()
		if !mutate(next) {
			return nil
		}
		b, err := s.encode(next)
		if err != nil {
			return err
		}
		nv, err := s.cfg.Store.Update(ctx, t.key, t.version, b, s.expiry(next))
		if err == nil {
			t.rec, t.version = next, nv.Version
			if !next.LeaseUntil.IsZero() {
				t.leaseUntil = next.LeaseUntil
			}
			return nil
		}
		if !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		r, v, lerr := s.load(ctx, t.key)
		switch {
		case errors.Is(lerr, store.ErrNotFound):
			return errLeaseNow
		case lerr != nil:
			return lerr
		case r.Holder != t.holder:
			return errLeaseNow
		}
		t.rec, t.version = r, v
	}
	return errors.New("jobs: the task record keeps changing under concurrent writes")
}

// durableWrite is write for the records that must land (how the delivery ended, a wait): a
// failing store is tried again a few times before the delivery gives up.
func (t *task) durableWrite(ctx context.Context, mutate func(r *record) bool) error {
	return retryWrite(ctx, func(ctx context.Context) error { return t.write(ctx, mutate) })
}

// retryWrite runs write until it succeeds, loses the lease, or fails four times (a failing
// store), within writeTimeout, even when ctx is done.
func retryWrite(ctx context.Context, write func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	var err error
	for attempt := range 4 {
		if err = write(ctx); err == nil || errors.Is(err, errLeaseNow) || errors.Is(err, errPermanentWrite) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(50<<attempt) * time.Millisecond):
		}
	}
	return err
}

// finish records how the delivery ended and hands the task on when it continues.
func (t *task) finish(ctx context.Context, workErr, cause error) error {
	s := t.svc
	t.mu.Lock()
	h, delay, wait, fail, storeErr := t.halt, t.delay, t.wait, t.fail, t.failErr
	t.mu.Unlock()
	handling := t.rec.Failure != nil // this delivery ran the failure handler
	if h == running {
		var c *cancelError
		switch {
		case errors.Is(cause, errTimedOut) || !handling && !s.now().Before(t.rec.Deadline):
			h = timedOut
		case workErr == nil:
		case errors.As(workErr, &c):
			h, fail.Reason = cancelHalt, c.label
		default:
			// The work failed outside a step (or returned a step's error after retries): for good.
			h, fail = failHalt, failureRecord{Cause: CauseWork, Reason: workErr.Error()}
		}
	}
	s.tel.halted(ctx, h)
	var status, errMsg string
	switch h {
	case lostHalt:
		t.log.WarnContext(ctx, "another instance took the task over: this delivery ends")
		return nil
	case storeHalt:
		// Let the next delivery (the queue's, or the pool's scan) take the task at once rather
		// than after the lease; the running step, unrecorded, runs again there.
		_ = t.durableWrite(ctx, func(r *record) bool {
			t.apply(r)
			r.Holder, r.LeaseUntil = "", time.Time{}
			return true
		})
		return fmt.Errorf("jobs: delivery of job %q ended before its step was recorded: %w", t.msg.Job, storeErr)
	case running:
		status = taskCompleted
	case handOn:
		status = taskPending
	case awaitHalt:
		status = taskAwaiting
	case stopHalt, cancelHalt:
		status = taskStopped
	case timedOut:
		status, errMsg = taskFailed, timeoutMessage(t.rec)
		fail = failureRecord{Cause: CauseTimeout, Reason: errMsg}
	case failHalt:
		status, errMsg = taskFailed, fail.Reason
	}
	hd := t.settings.handler
	err := t.durableWrite(ctx, func(r *record) bool {
		t.apply(r)
		for _, f := range t.failures {
			if f.name == onFailureStep {
				continue
			}
			st := t.openStep(r, f.name, f.opts)
			st.Tries, st.Error = f.tries, f.msg
			st.Status = stepActive // retried later; failed below when the job fails
		}
		st, msg := status, errMsg
		switch {
		case r.Failure != nil:
			st, msg = t.endFailure(r, h, fail)
		case r.Stop && st != taskCompleted && h != cancelHalt:
			st, msg = taskStopped, ""
		}
		r.Status, r.Error, r.Holder, r.LeaseUntil, r.Wait, r.NotBefore = st, msg, "", time.Time{}, nil, time.Time{}
		if h == cancelHalt {
			r.Cancel = fail.Reason
		}
		if (st == taskPending || st == taskFailing) && delay > 0 {
			r.NotBefore, r.Wait = s.now().Add(delay), wait
		}
		if r.Failure == nil && hd != nil && (st == taskFailed || st == taskStopped && hd.onStop && h != cancelHalt) {
			// The job failed for good: its failure handler runs first, in a delivery of its own.
			r.Failure = s.newFailure(hd, st, fail)
			r.Status, r.NotBefore, r.Wait = taskFailing, time.Time{}, nil
		}
		endOpen(r)
		return true
	})
	if errors.Is(err, errLeaseNow) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("jobs: record the end of a delivery of job %q: %w", t.msg.Job, err)
	}
	switch t.rec.Status {
	case taskPending, taskFailing:
		next := t.msg
		next.Attempt++
		next.At = 0
		d := time.Duration(0)
		if nb := t.rec.NotBefore; !nb.IsZero() {
			// The message is due when the task says: a delivery tells it from a duplicate so.
			next.At, d = nb.UnixMilli(), nb.Sub(s.now())
		}
		if err := s.dispatch(context.WithoutCancel(ctx), next, d); err != nil {
			// The record says pending and nobody holds it: this message's redelivery continues it.
			return fmt.Errorf("jobs: hand job %q on to a new delivery: %w", t.msg.Job, err)
		}
		return nil
	case taskAwaiting:
		s.deadlineTimer(ctx, t.rec, hd)
	}
	s.published(ctx, t.rec)
	return nil
}

// endOpen settles the open steps of a task that ended: a step shown active is failed, cancelled
// or completed with the job (a task that goes on keeps them: its next delivery runs them).
func endOpen(r *record) {
	if !terminal(r.Status) && r.Status != taskFailing {
		return
	}
	status := map[string]string{taskFailed: stepFailed, taskFailing: stepFailed, taskStopped: contract.StateCancelled}[r.Status]
	for _, o := range r.Open {
		if o.Status == stepActive {
			o.Status = cmpOr(status, stepCompleted)
		}
	}
}

// openStep returns the open step name of r, added (in o's case) when missing.
func (t *task) openStep(r *record, name string, o stepOpts) *stepRecord {
	st := r.open(name)
	if st == nil {
		st = &stepRecord{Name: name, Status: stepActive, Build: t.build}
		r.Open = append(r.Open, st)
	}
	o.place(r.Work, st, t.svc.laneOf(r.Agent))
	return st
}

// apply adds what the delivery knows and has not written to r: the steps running now (active),
// the fan-outs' counts, the step records written since (no longer open), and progress. The
// caller holds t.mu.
func (t *task) apply(r *record) {
	for name, c := range t.current {
		if _, done := t.steps[name]; !done {
			t.openStep(r, name, c.opts).Status = stepActive
		}
	}
	for name, f := range t.items {
		if _, done := t.steps[name]; done {
			continue
		}
		st := t.openStep(r, name, f.opts)
		st.Status, st.Items, st.Done = stepActive, f.total, f.doneCount()
		f.mu.Lock()
		st.ItemTries = nil
		for i, n := range f.tries {
			if st.ItemTries == nil {
				st.ItemTries = map[int]int{}
			}
			st.ItemTries[i] = n
		}
		f.mu.Unlock()
	}
	for name, tm := range t.timers {
		if _, done := t.steps[name]; !done {
			st := t.openStep(r, name, tm.opts)
			st.Status, st.Until = stepSleeping, tm.until
		}
	}
	for name := range t.steps {
		r.dropOpen(name)
	}
	r.Seq = max(r.Seq, t.seq)
	for id, p := range t.progress {
		cs := r.caseOf(id)
		if cs == nil {
			r.Cases = append(r.Cases, caseRecord{ID: id})
			cs = &r.Cases[len(r.Cases)-1]
		}
		if p.Ver >= cs.Ver {
			cs.Done, cs.Total, cs.Progress, cs.Ver = p.Done, p.Total, true, p.Ver
		}
	}
}
