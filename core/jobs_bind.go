package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
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
	if b.works.Len() == 0 {
		return nil
	}
	if c.cfg.Jobs == nil {
		names := b.works.Names()
		slices.Sort(names)
		return fmt.Errorf("agent %q defines background work (%v): %w", b.slug, names, jobs.ErrNoDispatcher)
	}
	for id, h := range map[string]ActionFunc{contract.JobSyncAction: serveJobSync, contract.JobStopAction: serveJobStop, contract.StepAwaitingSubmitAction: serveJobAnswer} {
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

func jobFailed(req *contract.ActionRequest, err error) (*contract.ActionResult, error) {
	switch {
	case errors.Is(err, jobs.ErrNoJob):
		return contract.Fail("job_not_found", fmt.Sprintf("No background job %q in this workspace", req.Job())), nil
	case errors.Is(err, jobs.ErrNotAwaiting):
		return contract.Refuse(contract.ResultError{Code: contract.InputInvalid, Message: "This step is not awaiting an answer (answered already, or not a step that waits)"}), nil
	}
	return contract.Refused(err) // an answer that does not fit the step's fields
}

func serveJobSync(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	snap, err := jobs.State(ctx, req.Job())
	if err != nil {
		return jobFailed(req, err)
	}
	return contract.OK(contract.Effect{Type: contract.EffectJobSynced, JobID: snap.Job.ID, Status: snap.Job.Status}).WithJobState(snap), nil
}

func serveJobStop(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	snap, err := jobs.Stop(ctx, req.Job())
	if err != nil {
		return jobFailed(req, err)
	}
	return contract.OK(contract.Effect{Type: contract.EffectJobStopped, JobID: snap.Job.ID, Status: snap.Job.Status}).WithJobState(snap), nil
}

func serveJobAnswer(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	snap, err := jobs.Answer(ctx, req)
	if err != nil {
		return jobFailed(req, err)
	}
	return contract.OK(contract.Effect{Type: contract.EffectStepAwaitingSubmitted, JobID: snap.Job.ID, StepID: req.Step(),
		Status: snap.Job.Status}).WithJobState(snap), nil
}
