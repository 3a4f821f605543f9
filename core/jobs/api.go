package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/store"
)

// Start starts the work for the job of req (a job.start): it writes the task to the controller's
// store, hands it to the queue, and returns the job's state, active at once. A retried or second
// job.start for the job never starts a second run: it returns the job's current state. The work
// runs in the background, on whichever instance the queue delivers it to.
func (w *Work[In]) Start(ctx context.Context, req *contract.ActionRequest, in In) (*contract.JobState, error) {
	sc, err := scopeOf(ctx)
	if err != nil {
		return nil, err
	}
	if sc.reg == nil || sc.reg != w.reg || sc.reg.lookup(w.name) == nil {
		return nil, fmt.Errorf("jobs: work %q is not defined on agent %q (define it with jobs.Define on the agent, before core.New)", w.name, sc.agent)
	}
	input, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("jobs: encode the input of work %q: %w", w.name, err)
	}
	r, err := sc.svc.start(ctx, sc, w.name, req, input, w.set.timeout)
	if err != nil {
		return nil, err
	}
	return sc.svc.project(ctx, sc.reg, r) // a new job has no step records: nothing is read
}

// Started is Start answered as job.start answers: the job.started effect with the job's state.
func (w *Work[In]) Started(ctx context.Context, req *contract.ActionRequest, in In) (*contract.ActionResult, error) {
	snap, err := w.Start(ctx, req, in)
	if err != nil {
		return nil, err
	}
	return contract.OK(contract.Effect{Type: contract.EffectJobStarted, JobID: snap.Job.ID, Status: snap.Job.Status}).WithJobState(snap), nil
}

// View adds to the job state job.sync projects from the task (the job's display, cost, a case's
// metadata...): view gets the projection and the recorded results of the steps. It runs on
// every projection, so it must be fast and deterministic (job.sync is convergent).
func View(view func(s *contract.JobState, r Results)) Option {
	return func(s *settings) { s.view = view }
}

// Results are the recorded results of a task's completed steps (and the answers of its Await
// steps).
type Results struct {
	rec   *record
	steps map[string]*stepRecord
}

// Decode decodes the result of step name into v; false when the step has not completed (or its
// result does not decode into v).
func (r Results) Decode(name string, v any) bool {
	s := r.steps[name]
	if s == nil {
		if o := r.rec.open(name); o != nil && o.Status == stepCompleted {
			s = o
		}
	}
	if s == nil || s.Status != stepCompleted || s.Hidden {
		return false
	}
	return json.Unmarshal(s.Result, v) == nil
}

// Input decodes the work's input into v.
func (r Results) Input(v any) bool { return json.Unmarshal(r.rec.Input, v) == nil }

// Error is the job's failure message, "" unless it failed.
func (r Results) Error() string { return r.rec.Error }

// State is the state of job id of the call's workspace, projected from its task; ErrNoJob when no
// task was started for it.
func State(ctx context.Context, jobID string) (*contract.JobState, error) {
	sc, err := scopeOf(ctx)
	if err != nil {
		return nil, err
	}
	r, _, err := sc.svc.load(ctx, taskKey(sc.agent, sc.grant.WorkspaceID, jobID))
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNoJob
	}
	if err != nil {
		return nil, err
	}
	return sc.svc.project(ctx, sc.reg, r)
}

// project reads the task's step records and projects it as job_state.
func (s *Service) project(ctx context.Context, reg *Registry, r *record) (*contract.JobState, error) {
	steps, err := stepsOf(ctx, s.cfg.Store, taskKey(r.Agent, r.Workspace, r.Job), r)
	if err != nil {
		return nil, err
	}
	return s.snapshot(reg, r, steps), nil
}

// Stop stops job id of the call's workspace: a job that waits or is between deliveries stops at
// once; a running one as soon as its instance sees the request (at once on this instance, at
// its next lease renewal on another), its running step's context cancelled and no other step
// started: it answers the job still active then. A finished job stays as it is. A stop whose
// dispatch of the failure handler failed returns the error; called again, it dispatches again.
func Stop(ctx context.Context, jobID string) (*contract.JobState, error) {
	sc, err := scopeOf(ctx)
	if err != nil {
		return nil, err
	}
	key := taskKey(sc.agent, sc.grant.WorkspaceID, jobID)
	s := sc.svc
	var failing bool
	r, err := s.update(ctx, key, func(r *record) (bool, error) {
		failing = false
		switch {
		case r.Status == taskFailing:
			// Its failure handler is to run: when no delivery holds it, this may be the retry of
			// a stop whose dispatch of the handler failed, so it is dispatched again.
			failing = r.Holder == ""
			return false, nil
		case terminal(r.Status):
			return false, nil
		case r.Holder != "" && s.now().Before(r.LeaseUntil.Add(SkewMargin)):
			r.Stop = true
		default:
			r.Status, r.Holder, r.LeaseUntil, r.Stop, r.Wait, r.NotBefore = taskStopped, "", time.Time{}, true, nil, time.Time{}
			for _, st := range r.Open {
				if st.Status == stepActive || st.Status == stepAwaiting || st.Status == stepSleeping {
					st.Status = contract.StateCancelled
				}
			}
			if h := s.handlerOf(r.Agent, r.Work); h != nil && h.onStop {
				r.Status, r.Failure, failing = taskFailing, s.newFailure(h, taskStopped, failureRecord{}), true
			}
		}
		return true, nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNoJob
	}
	if err != nil {
		return nil, err
	}
	if t, ok := s.running.Load(key); ok {
		t.(*task).setHalt(stopHalt)
		t.(*task).cancel(errStopped)
	}
	if failing {
		if err := s.dispatch(ctx, Message{Agent: r.Agent, Workspace: r.Workspace, Job: r.Job, Work: r.Work}, 0); err != nil {
			return nil, fmt.Errorf("jobs: dispatch the failure handler of stopped job %q: %w", jobID, err)
		}
	}
	return s.project(ctx, sc.reg, r)
}

// ErrNoStep: an answer (Answer) for a step id the job does not have.
var ErrNoStep = errors.New("jobs: the job has no step with this id")

// Answer records the operator's answer (req.Input) to the awaiting step req.StepID of job
// req.JobID (a step.awaiting.submit), and hands the task to the queue so the work continues:
// its Await returns the answer. The answer is checked against the step's awaiting fields
// (contract.Submit rules; a mismatch is a contract.InputErrors, returned as is for
// contract.Refused) and recorded coerced, with the actor and the time. ErrNoStep when the job has
// no such step, ErrNotAwaiting when the step does not wait (answered already, not an Await step,
// or one that waits for another action, such as a rule checkpoint's rule.checkpoint.resume: see
// Wake), ErrNoJob when the job has no task. The same answer again, by the same actor, before a
// delivery took it, is a retry: the task is dispatched again (the first call's dispatch may have
// failed), and the job's state returned.
func Answer(ctx context.Context, req *contract.ActionRequest) (*contract.JobState, error) {
	sc, err := scopeOf(ctx)
	if err != nil {
		return nil, err
	}
	if req.JobID == nil || req.StepID == nil {
		return nil, fmt.Errorf("%w: step.awaiting.submit needs job_id and step_id", ErrNotAwaiting)
	}
	s := sc.svc
	if s.cfg.Dispatcher == nil {
		return nil, ErrNoDispatcher
	}
	job, stepID := *req.JobID, *req.StepID
	key := taskKey(sc.agent, sc.grant.WorkspaceID, job)
	var steps []*stepRecord
	r, err := s.update(ctx, key, func(r *record) (bool, error) {
		var st *stepRecord
		for _, x := range r.Open {
			if StepID(r.Job, x.Name) == stepID {
				st = x
			}
		}
		if st == nil {
			// Answered and recorded already, or no such step: the step records tell which.
			if steps == nil {
				var err error
				if steps, err = stepsOf(ctx, s.cfg.Store, key, r); err != nil {
					return false, err
				}
			}
			for _, x := range steps {
				if StepID(r.Job, x.Name) == stepID && !x.Hidden {
					return false, ErrNotAwaiting
				}
			}
			return false, ErrNoStep
		}
		if st.Awaiting == nil || st.Awaiting.Action != contract.StepAwaitingSubmitAction {
			return false, ErrNotAwaiting
		}
		input, err := contract.ValidateInput(st.Awaiting.InputFields(), req.Input, contract.Submit)
		if st.Status == stepCompleted && bytes.Equal(input, st.Result) && st.By == req.Actor.UserID {
			// The same answer again, not yet taken by a delivery: a retry of a call whose
			// dispatch may have failed. It is dispatched again; nothing else changes.
			return false, nil
		}
		if st.Status != stepAwaiting || r.Status != taskAwaiting {
			return false, ErrNotAwaiting
		}
		if err != nil {
			return false, err
		}
		st.Status, st.Result, st.By, st.At = stepCompleted, input, req.Actor.UserID, s.now()
		r.Status = taskPending
		return true, nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNoJob
	}
	if err != nil {
		return nil, err
	}
	if err := s.dispatch(ctx, Message{Agent: r.Agent, Workspace: r.Workspace, Job: r.Job, Work: r.Work}, 0); err != nil {
		// The answer is recorded and the task pending: the pool's scan or a retry of this call
		// dispatches it.
		return nil, fmt.Errorf("jobs: dispatch job %q after its answer: %w", job, err)
	}
	return s.project(ctx, sc.reg, r)
}

// Wake continues job id of the call's workspace when it waits on a step whose awaiting action is
// action (e.g. rule.checkpoint.resume, once the controller delivered Studio's decision): those
// steps are recorded answered with answer and the task is handed to the queue (true). A job that
// runs is not waiting yet: the answer is kept for its next Await on that action, which returns it
// at once (false). A finished job, or none, is left as it is (false). A call whose dispatch
// failed returns the error; called again, it dispatches again (true), the first answer kept.
func Wake(ctx context.Context, jobID, action string, answer json.RawMessage) (bool, error) {
	sc, err := scopeOf(ctx)
	if err != nil {
		return false, err
	}
	s := sc.svc
	woke := false
	r, err := s.update(ctx, taskKey(sc.agent, sc.grant.WorkspaceID, jobID), func(r *record) (bool, error) {
		woke = false
		switch {
		case terminal(r.Status) || r.Status == taskFailing:
			return false, nil
		case r.Status == taskPending && r.Holder == "" && slices.ContainsFunc(r.Open, func(st *stepRecord) bool {
			return st.Status == stepCompleted && st.Awaiting != nil && st.Awaiting.Action == action
		}):
			// Woken already, and no delivery has taken the answer (one that runs drops it from
			// the open steps once recorded): a retry of a call whose dispatch may have failed.
			// It is dispatched again; the first answer stands.
			woke = true
			return false, nil
		case r.Status != taskAwaiting:
			// Its delivery may be about to wait for this: keep the answer for that Await.
			if r.Wakes == nil {
				r.Wakes = map[string]json.RawMessage{}
			}
			r.Wakes[action] = answer
			return true, nil
		}
		for _, st := range r.Open {
			if st.Status == stepAwaiting && st.Awaiting != nil && st.Awaiting.Action == action {
				st.Status, st.Result, st.At, woke = stepCompleted, answer, s.now(), true
			}
		}
		if woke {
			r.Status = taskPending
		}
		return woke, nil
	})
	if errors.Is(err, store.ErrNotFound) || (err == nil && !woke) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if s.cfg.Dispatcher == nil {
		return false, ErrNoDispatcher
	}
	if err := s.dispatch(ctx, Message{Agent: r.Agent, Workspace: r.Workspace, Job: r.Job, Work: r.Work}, 0); err != nil {
		return false, fmt.Errorf("jobs: dispatch job %q after waking it: %w", jobID, err)
	}
	return true, nil
}
