package core

import (
	"errors"

	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/core/contract"
)

// codeSnapshotRefused: a governed job.start whose rule_snapshot cannot be taken for its job.
const codeSnapshotRefused = "rule_snapshot_refused"

// refusal maps the errors a handler returns as they are that no retry of the request gets past
// to the result that says so (Studio retries an internal error, never a result): the refusals of
// starting background work (jobRefusal) and of a governed job.start's rule_snapshot
// (checkpoint.FromJobStart). nil for any other error.
func refusal(req *contract.ActionRequest, err error) *contract.ActionResult {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, checkpoint.ErrInvalidSnapshot):
		return contract.Refuse(contract.InvalidField("rule_snapshot", err.Error()))
	case errors.Is(err, checkpoint.ErrRetrySnapshot), errors.Is(err, checkpoint.ErrOtherAgent):
		return contract.Fail(codeSnapshotRefused, err.Error())
	}
	return jobRefusal(req, err)
}
