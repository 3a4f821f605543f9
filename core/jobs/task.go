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
	running   halt = iota
	handOn         // time is nearly up, or a failed step waits for its retry: a fresh delivery continues
	awaitHalt      // an Await step waits for the operator's answer
	stopHalt       // job.stop
	timedOut       // the job's own timeout passed
	failHalt       // a step failed for good
	lostHalt       // another instance took the task over (this one's lease lapsed)
	storeHalt      // the store failed while recording a step: the queue delivers the task again
)

// Sentinel errors the work's steps return once the delivery halts; the work should return them
// as they are (the delivery ignores what the work returns after a halt).
var (
	errHalted   = errors.New("jobs: this delivery of the task has ended (the task continues in another delivery, waits, or has finished)")
	errLeaseNow = errors.New("jobs: the task's lease was lost")
)

// task is one delivery of a task, running its work.
type task struct {
	svc      *Service
	key      string
	holder   string
	msg      Message
	log      *slog.Logger
	deadline time.Time // the delivery's, from the platform; zero: none

	mu      sync.Mutex
	rec     *record
	version uint64
	halt    halt
	delay   time.Duration // handOn: the next delivery's delay
	failMsg string        // failHalt
	failErr error         // storeHalt
	cancel  context.CancelCauseFunc

	settings settings
	steps    int               // steps completed in this delivery
	current  *current          // the step running now
	failure  *failure          // the last failed attempt of a step
	progress map[string][2]int // case id → done, total (Progress)
}

type taskCtxKey struct{}

func taskOf(ctx context.Context) *task {
	t, _ := ctx.Value(taskCtxKey{}).(*task)
	return t
}

// run runs the work, renewing the lease meanwhile, then records how the delivery ended.
func (t *task) run(ctx context.Context, w runner) error {
	s := t.svc
	wctx := ctx
	if s.cfg.Bind != nil {
		wctx = s.cfg.Bind(ctx, t.rec.Agent, t.rec.grant())
	}
	wctx, cancel := context.WithCancelCause(context.WithValue(wctx, taskCtxKey{}, t))
	wctx, cancelDeadline := context.WithDeadlineCause(wctx, t.rec.Deadline, errTimedOut)
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
	err := t.exec(wctx, w)
	close(stopRenew)
	<-renewed
	cause := context.Cause(wctx) // the job's timeout, when it ended the work outside a step
	cancel(nil)
	return t.finish(ctx, err, cause)
}

var errTimedOut = errors.New("jobs: the job's timeout passed")

// exec runs the work function, a panic counting as a failure of the job.
func (t *task) exec(ctx context.Context, w runner) (err error) {
	defer func() {
		if p := recover(); p != nil {
			t.log.ErrorContext(ctx, "background work panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			err = &permanentError{errors.New("the work panicked (see the controller's log)")}
		}
	}()
	return w.exec(ctx, t.rec.Input)
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
// task was stopped or taken over.
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
		err := t.write(ctx, func(r *record) bool {
			t.apply(r) // the running step (active) and its progress, for job.sync meanwhile
			r.LeaseUntil = s.now().Add(s.cfg.Lease)
			return true
		})
		t.mu.Lock()
		stopped := t.rec.Stop
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
		}
	}
}

var errStopped = errors.New("jobs: the job was stopped (job.stop)")

func (t *task) setHalt(h halt) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.halt == running {
		t.halt = h
	}
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

// durableWrite is write for the records that must land (a step's result, how the delivery
// ended): a failing store is tried again a few times before the delivery gives up.
func (t *task) durableWrite(ctx context.Context, mutate func(r *record) bool) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	var err error
	for attempt := range 4 {
		if err = t.write(ctx, mutate); err == nil || errors.Is(err, errLeaseNow) {
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
	h, delay, failMsg, storeErr := t.halt, t.delay, t.failMsg, t.failErr
	t.mu.Unlock()
	if h == running {
		switch {
		case errors.Is(cause, errTimedOut) || !s.now().Before(t.rec.Deadline):
			h = timedOut
		case workErr == nil:
		default:
			// The work failed outside a step (or returned a step's error after retries): for good.
			h, failMsg = failHalt, workErr.Error()
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
	case stopHalt:
		status = taskStopped
	case timedOut:
		status, errMsg = taskFailed, timeoutMessage(t.rec)
	case failHalt:
		status, errMsg = taskFailed, failMsg
	}
	err := t.durableWrite(ctx, func(r *record) bool {
		t.apply(r)
		if f := t.failure; f != nil {
			st := ensure(r, f.name, f.opts)
			st.Tries, st.Error = f.tries, f.msg
			st.Status = stepActive // retried later; failed below when the job fails
		}
		if r.Stop && status != taskCompleted {
			status, errMsg = taskStopped, ""
		}
		r.Status, r.Error, r.Holder, r.LeaseUntil = status, errMsg, "", time.Time{}
		if status == taskPending {
			r.NotBefore = s.now().Add(delay)
			if delay == 0 {
				r.NotBefore = time.Time{}
			}
		}
		for _, st := range r.Steps {
			if st.Status == stepActive && status != taskPending {
				st.Status = map[string]string{taskFailed: stepFailed, taskStopped: contract.StateCancelled}[status]
				if st.Status == "" {
					st.Status = stepCompleted
				}
			}
		}
		return true
	})
	if errors.Is(err, errLeaseNow) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("jobs: record the end of a delivery of job %q: %w", t.msg.Job, err)
	}
	if status == taskPending {
		next := t.msg
		next.Attempt++
		if err := s.cfg.Dispatcher.Dispatch(context.WithoutCancel(ctx), next, delay); err != nil {
			// The record says pending and nobody holds it: this message's redelivery continues it.
			return fmt.Errorf("jobs: hand job %q on to a new delivery: %w", t.msg.Job, err)
		}
		return nil
	}
	s.published(ctx, t.rec)
	return nil
}
