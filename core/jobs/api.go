package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	return sc.svc.snapshot(sc.reg, r), nil
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
type Results struct{ rec *record }

// Decode decodes the result of step name into v; false when the step has not completed (or its
// result does not decode into v).
func (r Results) Decode(name string, v any) bool {
	s := r.rec.step(name)
	if s == nil || s.Status != stepCompleted {
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
	return sc.svc.snapshot(sc.reg, r), nil
}

// Stop stops job id of the call's workspace: a job that waits or is between deliveries stops at
// once; a running one stops as soon as its instance sees the request (at once on this instance,
// at its next lease renewal on another), its running step's context cancelled and no other step
// started. A finished job stays as it is.
func Stop(ctx context.Context, jobID string) (*contract.JobState, error) {
	sc, err := scopeOf(ctx)
	if err != nil {
		return nil, err
	}
	key := taskKey(sc.agent, sc.grant.WorkspaceID, jobID)
	s := sc.svc
	r, err := s.update(ctx, key, func(r *record) (bool, error) {
		switch {
		case terminal(r.Status):
			return false, nil
		case r.Holder != "" && s.now().Before(r.LeaseUntil.Add(SkewMargin)):
			r.Stop = true
		default:
			r.Status, r.Holder, r.LeaseUntil, r.Stop = taskStopped, "", time.Time{}, true
			for _, st := range r.Steps {
				if st.Status == stepActive || st.Status == stepAwaiting {
					st.Status = contract.StateCancelled
				}
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
	return s.snapshot(sc.reg, r), nil
}

// ErrNoStep: an answer (Answer) for a step id the job does not have.
var ErrNoStep = errors.New("jobs: the job has no step with this id")

// Answer records the operator's answer (req.Input) to the awaiting step req.StepID of job
// req.JobID (a step.awaiting.submit), and hands the task to the queue so the work continues:
// its Await returns the answer. The answer is checked against the step's awaiting fields
// (contract.Submit rules; a mismatch is a contract.InputErrors, returned as is for
// contract.Refused) and recorded coerced. ErrNotAwaiting when the step does not wait (answered
// already, not an Await step, or one that waits for another action, such as a rule checkpoint's
// rule.checkpoint.resume: see Wake), ErrNoStep when the job has no step req.StepID, ErrNoJob
// when the job has no task.
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
	r, err := s.update(ctx, key, func(r *record) (bool, error) {
		var st *stepRecord
		for _, x := range r.Steps {
			if stepIDOf(r.Job, x.Name) == stepID {
				st = x
			}
		}
		if st == nil {
			return false, ErrNoStep
		}
		if st.Status != stepAwaiting || r.Status != taskAwaiting || st.Awaiting == nil ||
			st.Awaiting.Action != contract.StepAwaitingSubmitAction {
			return false, ErrNotAwaiting
		}
		input, err := contract.ValidateInput(st.Awaiting.InputFields(), req.Input, contract.Submit)
		if err != nil {
			return false, err
		}
		st.Status, st.Result = stepCompleted, input
		r.Status = taskPending
		return true, nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNoJob
	}
	if err != nil {
		return nil, err
	}
	if err := s.cfg.Dispatcher.Dispatch(ctx, Message{Agent: r.Agent, Workspace: r.Workspace, Job: r.Job, Work: r.Work}, 0); err != nil {
		// The answer is recorded and the task pending: the pool's scan or a retry of this call
		// dispatches it.
		return nil, fmt.Errorf("jobs: dispatch job %q after its answer: %w", job, err)
	}
	return s.snapshot(sc.reg, r), nil
}

func stepIDOf(job, name string) string { return job + "-" + name }
func caseIDOf(job, id string) string   { return job + "-" + id }

// jobStatus is the job's status in job_state.
func jobStatus(r *record) string {
	switch r.Status {
	case taskAwaiting:
		return contract.StateAwaiting
	case taskCompleted:
		return contract.StateCompleted
	case taskFailed:
		return contract.StateFailed
	case taskStopped:
		return contract.StateCancelled
	}
	return contract.StateActive
}

// snapshot projects the task's record as job_state.
func (s *Service) snapshot(reg *Registry, r *record) *contract.JobState {
	if !terminal(r.Status) && !s.now().Before(r.Deadline) {
		// Past its timeout, a job nobody delivers (it waits for an answer, or its queue lost it)
		// is failed: its next delivery records it so.
		r = r.clone()
		r.Status, r.Error = taskFailed, timeoutMessage(r)
	}
	status := jobStatus(r)
	snap := &contract.JobState{
		Job: contract.Job{ID: r.Job, AgentSlug: r.Agent, MissionID: r.Mission, Status: status,
			Source: contract.JobSource{Type: contract.SourceFreshStart}},
		Cases: []contract.Case{},
	}
	if r.Error != "" {
		b, _ := json.Marshal(map[string]string{"message": r.Error})
		snap.Job.Extra = contract.Extra{"error": b}
	}
	cases := r.Cases
	if len(cases) == 0 {
		cases = []caseRecord{{ID: defaultCase, Lane: contract.DefaultLane, Title: r.Work}}
	}
	for _, c := range cases {
		cs := contract.Case{ID: caseIDOf(r.Job, c.ID), Lane: cmpOr(c.Lane, contract.DefaultLane), Title: c.Title, Metadata: map[string]any{}, Steps: []contract.Step{}}
		if c.Progress {
			cs.Metadata["progress"] = map[string]int{"done": c.Done, "total": c.Total}
		}
		for _, st := range r.Steps {
			if st.Case != c.ID {
				continue
			}
			step := contract.Step{ID: stepIDOf(r.Job, st.Name), Activity: contract.ActivityOperation, Status: st.Status,
				Title: cmpOr(st.Title, st.Name), Outputs: []contract.ArtifactRef{}}
			if st.Status == stepAwaiting {
				step.Awaiting = st.Awaiting
			}
			if st.Status == stepCompleted {
				for _, a := range st.Outputs {
					step.Outputs = append(step.Outputs, contract.ArtifactRef{ID: a.ID, Type: a.Type, Title: a.Title, MediaType: a.MediaType})
				}
			}
			cs.Steps = append(cs.Steps, step)
		}
		cs.Status = caseStatus(status, cs.Steps, movedPast(r, c.ID))
		snap.Cases = append(snap.Cases, cs)
	}
	if w := reg.lookup(r.Work); w != nil {
		if view := w.options().view; view != nil {
			view(snap, Results{rec: r})
		}
	}
	return snap
}

// movedPast reports whether the work recorded a step of another case after the last step of case
// id: the work left the case, which then gets no more steps.
func movedPast(r *record, id string) bool {
	return len(r.Steps) > 0 && r.Steps[len(r.Steps)-1].Case != id
}

// caseStatus derives a case's status from its steps: failed, awaiting or active when a step is;
// completed when all are and the job is done, or when the job moved past them (movedPast); else
// active, as the work goes on and may add steps to it.
func caseStatus(job string, steps []contract.Step, movedPast bool) string {
	if len(steps) == 0 {
		if job == contract.StateCompleted || job == contract.StateCancelled || job == contract.StateFailed {
			return job
		}
		return contract.StatePending
	}
	seen := map[string]bool{}
	for _, s := range steps {
		seen[s.Status] = true
	}
	for _, st := range []string{contract.StateFailed, contract.StateAwaiting, contract.StateActive, contract.StateCancelled} {
		if seen[st] {
			return st
		}
	}
	if movedPast || job == contract.StateCompleted || job == contract.StateCancelled || job == contract.StateFailed {
		return contract.StateCompleted
	}
	return contract.StateActive
}

// Wake continues job id of the call's workspace when it waits on a step whose awaiting action is
// action (e.g. rule.checkpoint.resume, once the controller delivered Studio's decision): those
// steps are recorded answered with answer and the task is handed to the queue (true). A job that
// runs is not waiting yet: the answer is kept for its next Await on that action, which returns it
// at once (false). A finished job, or none, is left as it is (false).
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
		case terminal(r.Status):
			return false, nil
		case r.Status != taskAwaiting:
			// Its delivery may be about to wait for this: keep the answer for that Await.
			if r.Wakes == nil {
				r.Wakes = map[string]json.RawMessage{}
			}
			r.Wakes[action] = answer
			return true, nil
		}
		for _, st := range r.Steps {
			if st.Status == stepAwaiting && st.Awaiting != nil && st.Awaiting.Action == action {
				st.Status, st.Result, woke = stepCompleted, answer, true
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
	if err := s.cfg.Dispatcher.Dispatch(ctx, Message{Agent: r.Agent, Workspace: r.Workspace, Job: r.Job, Work: r.Work}, 0); err != nil {
		return false, fmt.Errorf("jobs: dispatch job %q after waking it: %w", jobID, err)
	}
	return true, nil
}
