package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/internal/buildinfo"
)

// Works is the registry of the agent's background work: define it with jobs.Define(agent, name,
// run) before passing the agent to New.
func (a *Agent) Works() *jobs.Registry { return a.works }

// Jobs is the controller's background-work service (nil when no agent defines work): adapters
// hand it the deliveries of their queue (Jobs().Deliver).
func (c *Controller) Jobs() *jobs.Service { return c.jobs }

// bindJobs gives an agent that defines background work the controller's job service, and serves
// job.sync, job.stop and step.awaiting.submit from it when the agent declares them without a
// handler of its own.
func (c *Controller) bindJobs(b *boundAgent) error {
	if err := b.works.Err(); err != nil {
		return fmt.Errorf("agent %q: %w", b.slug, err)
	}
	if err := b.checkJobSyncHook(); err != nil {
		return err
	}
	if b.works.Len() == 0 {
		return nil
	}
	if c.cfg.Jobs == nil {
		names := b.works.Names()
		slices.Sort(names)
		return fmt.Errorf("agent %q defines background work (%v): %w", b.slug, names, jobs.ErrNoDispatcher)
	}
	for id, h := range map[string]ActionFunc{contract.JobSyncAction: serveJobSync(b.syncHook), contract.JobStopAction: serveJobStop, contract.StepAwaitingSubmitAction: serveJobAnswer} {
		if b.declaresAction(id) && b.actions[id] == nil {
			b.actions[id] = h
		}
	}
	if c.jobs == nil {
		c.jobs = jobs.NewService(jobs.Config{Store: c.cfg.Store, Dispatcher: c.cfg.Jobs, Logger: c.log, Now: c.now, Telemetry: c.cfg.Telemetry,
			Works: func(slug string) (*jobs.Registry, time.Duration, bool) {
				a := c.bySlug[slug]
				if a == nil {
					return nil, 0, false
				}
				var timeout time.Duration
				if s := a.cfg.Registration.JobPolicy.DefaultTimeoutSeconds; s != nil && *s > 0 {
					timeout = time.Duration(*s) * time.Second
				}
				return a.works, timeout, true
			},
			Info: func(slug string) jobs.AgentInfo {
				a := c.bySlug[slug]
				if a == nil {
					return jobs.AgentInfo{}
				}
				info := jobs.AgentInfo{Build: jobs.Build{SVZ: buildinfo.Version(), Revision: buildinfo.Revision(), Agent: a.cfg.Version}}
				for _, l := range a.cfg.Registration.Capabilities.CaseLanes {
					if l.Default {
						info.Lane = l.ID
					}
				}
				return info
			},
			Bind: func(ctx context.Context, slug string, v *contract.VerifiedWorkspaceContext) context.Context {
				return c.handlerContext(ctx, c.bySlug[slug], v)
			},
			Publish: func(ctx context.Context, slug, workspace string, effects []contract.Effect) {
				c.events.appendEffects(ctx, &contract.ActionRequest{AgentSlug: slug, Action: contract.JobSyncAction,
					Workspace: contract.WorkspaceRef{ID: workspace}}, workspace, effects)
			},
		})
	}
	return nil
}

// withJobs gives the handlers of an agent that defines work its background-work scope.
func (c *Controller) withJobs(ctx context.Context, b *boundAgent, v *contract.VerifiedWorkspaceContext) context.Context {
	if c.jobs == nil || b.works.Len() == 0 {
		return ctx
	}
	return jobs.NewContext(ctx, c.jobs, b.works, b.slug, v)
}

// Codes of the refusals of background work (jobRefusal).
const (
	codeJobIDRequired = "job_id_required"
	codeJobConflict   = "job_conflict"
	codeInputTooLarge = "input_too_large"
)

// jobRefusal maps the errors of starting background work that no retry of the request gets past
// (a handler returns them from jobs' Start or Started as they are) to the result that says so,
// of status "error": Studio retries an internal error, never a result. nil for any other error.
func jobRefusal(req *contract.ActionRequest, err error) *contract.ActionResult {
	var large *jobs.InputTooLargeError
	switch {
	case errors.Is(err, jobs.ErrNoJobID):
		return contract.Fail(codeJobIDRequired, fmt.Sprintf("Action %s starts background work and needs the request's job_id, which this request lacks (Studio assigns it to job.start)", req.Action))
	case errors.Is(err, jobs.ErrOtherWork):
		return contract.Fail(codeJobConflict, fmt.Sprintf("Job %q already runs other background work: start this one as a job of its own", req.Job()))
	case errors.Is(err, jobs.ErrOtherInput):
		return contract.Fail(codeJobConflict, fmt.Sprintf("Job %q was started with another input: a job id starts one job, so start a new job for this input", req.Job()))
	case errors.As(err, &large):
		return contract.Refuse(contract.ResultError{Code: codeInputTooLarge, Message: fmt.Sprintf(
			"The input is too large to keep: the job's record would be %d bytes, and the controller's store keeps at most %d; send a smaller input (large data belongs in a data resource or an artifact)", large.Size, large.Limit)})
	}
	return nil
}

func jobFailed(req *contract.ActionRequest, err error) (*contract.ActionResult, error) {
	switch {
	case errors.Is(err, jobs.ErrNoJob):
		return contract.Fail("job_not_found", fmt.Sprintf("No background job %q in this workspace", req.Job())), nil
	case errors.Is(err, jobs.ErrNoStep):
		return failedField("step_not_found", "step_id", fmt.Sprintf("Job %q has no step %q", req.Job(), req.Step())), nil
	case errors.Is(err, jobs.ErrNotAwaiting):
		return failedField("step_not_awaiting", "step_id", fmt.Sprintf("Step %q is not awaiting an answer (answered already, or not a step that waits)", req.Step())), nil
	}
	return contract.Refused(err) // an answer that does not fit the step's fields
}

func serveJobStop(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	snap, err := jobs.Stop(ctx, req.Job())
	if err != nil {
		return jobFailed(req, err)
	}
	return contract.OK(contract.Effect{Type: contract.EffectJobStopped, JobID: snap.Job.ID, Status: snap.Job.Status}).WithJobState(snap), nil
}

func serveJobAnswer(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	for _, id := range []struct{ field, v string }{{"job_id", req.Job()}, {"step_id", req.Step()}} {
		if id.v == "" {
			return contract.Refuse(contract.ResultError{Code: contract.InputRequired, Field: id.field, Message: "step.awaiting.submit needs the job_id and step_id of the awaiting step"}), nil
		}
	}
	snap, err := jobs.Answer(ctx, req)
	if err != nil {
		return jobFailed(req, err)
	}
	return contract.OK(contract.Effect{Type: contract.EffectStepAwaitingSubmitted, JobID: snap.Job.ID, CaseID: caseOfStep(snap, req.Step()),
		StepID: req.Step(), Status: snap.Job.Status}).WithJobState(snap), nil
}

// caseOfStep is the id of the case of step id in s ("" when no case has it).
func caseOfStep(s *contract.JobState, id string) string {
	for _, c := range s.Cases {
		for _, st := range c.Steps {
			if st.ID == id {
				return c.ID
			}
		}
	}
	return ""
}
