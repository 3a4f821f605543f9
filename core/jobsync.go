package core

import (
	"context"
	"errors"
	"fmt"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
)

// JobSync is the answer of the job.sync svz serves, as an ExtendJobSync hook sees it.
type JobSync struct {
	// State is the job's state projected from its background task, nil when the job has none: the
	// answer is then job_not_found, unless the hook sets a state (a job the agent ran while
	// offline, adopted under the job id Studio created for it).
	State *contract.JobState
	// Effects follow the job.synced effect in the answer.
	Effects []contract.Effect
}

// JobSyncHook extends the answer of job.sync: see Agent.ExtendJobSync.
type JobSyncHook func(ctx context.Context, req *contract.ActionRequest, s *JobSync) error

// ExtendJobSync makes the job.sync svz serves for the agent's background work (jobs.Define) call
// hook before it answers: hook gets the request and the projected answer, and may change the
// job's state, set one where the job has no task (adopt it), or add effects; svz then answers
// job.synced with that state (its job id and status), then the hook's effects, or job_not_found
// when the state is still nil. A contract.InputErrors from hook refuses the call; any other error
// fails it (-32603). Mistakes (a nil hook, a second one, an agent that defines no work, does not
// declare job.sync or serves it itself) are reported by New.
func (a *Agent) ExtendJobSync(hook JobSyncHook) {
	switch {
	case hook == nil:
		a.errs = append(a.errs, fmt.Errorf("agent %q: ExtendJobSync: nil hook", a.slug))
	case a.syncHook != nil:
		a.errs = append(a.errs, fmt.Errorf("agent %q: ExtendJobSync called twice: one hook per agent", a.slug))
	default:
		a.syncHook = hook
	}
}

// checkJobSyncHook reports an ExtendJobSync hook that the served job.sync would never call.
func (b *boundAgent) checkJobSyncHook() error {
	switch {
	case b.syncHook == nil:
		return nil
	case !b.declaresAction(contract.JobSyncAction):
		return fmt.Errorf("agent %q: ExtendJobSync: the registration declares no job.sync (job_policy.sync)", b.slug)
	case b.actions[contract.JobSyncAction] != nil:
		return fmt.Errorf("agent %q: ExtendJobSync extends the job.sync svz serves, and the agent has its own job.sync handler: extend that handler instead", b.slug)
	case b.works.Len() == 0:
		return fmt.Errorf("agent %q: ExtendJobSync: svz serves job.sync only for an agent that defines background work (jobs.Define)", b.slug)
	}
	return nil
}

// serveJobSync is job.sync answered from the job's task, extended by hook when there is one.
func serveJobSync(hook JobSyncHook) ActionFunc {
	return func(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
		snap, err := jobs.State(ctx, req.Job())
		if err != nil && !errors.Is(err, jobs.ErrNoJob) {
			return nil, err
		}
		s := &JobSync{State: snap}
		if hook != nil {
			if err := hook(ctx, req, s); err != nil {
				return contract.Refused(err)
			}
		}
		if s.State == nil {
			return jobFailed(req, jobs.ErrNoJob)
		}
		synced := contract.Effect{Type: contract.EffectJobSynced, JobID: s.State.Job.ID, Status: s.State.Job.Status}
		return contract.OK(append([]contract.Effect{synced}, s.Effects...)...).WithJobState(s.State), nil
	}
}
