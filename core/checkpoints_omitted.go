//go:build svz_nostudio

package core

import (
	"context"
	"errors"
	"fmt"

	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/core/contract"
)

// errNoCheckpoints answers rule.checkpoint.resume in a build without the Studio client.
var errNoCheckpoints = errors.New("rule.checkpoint.resume: this controller was built without the Studio client (build tag svz_nostudio), which rule checkpoints need; build without svz_nostudio")

// bindCheckpoints of a build without the Studio client (build tag svz_nostudio, the SAM Lambda
// build): rule checkpoints cannot be posted, and the guarded-step machinery is left out of the
// binary. An agent that declares them still serves its ungoverned jobs; governed ones and
// rule.checkpoint.resume are refused, saying why.
func (c *Controller) bindCheckpoints(b *boundAgent) error {
	if err := b.steps.Err(); err != nil {
		return fmt.Errorf("agent %q: %w", b.slug, err)
	}
	if b.cfg.Registration.Capabilities.RuleCheckpoints == nil {
		return nil
	}
	if b.actions[contract.RuleCheckpointResumeAction] != nil {
		return fmt.Errorf("agent %q: svz serves %s for agents that declare rule_checkpoints: remove its handler", b.slug, contract.RuleCheckpointResumeAction)
	}
	b.actions[contract.RuleCheckpointResumeAction] = ActionFunc(func(context.Context, *contract.ActionRequest) (*contract.ActionResult, error) {
		return nil, errNoCheckpoints
	})
	b.ruleCheckpoints = true
	if c.checkpoints == nil {
		c.checkpoints = checkpoint.NewService(checkpoint.Config{Store: c.cfg.Store, Logger: c.log, Now: c.now})
		c.log.Warn("agent declares rule checkpoints, which this build cannot post (built with svz_nostudio): governed jobs are refused", "agent_slug", b.slug)
	}
	return nil
}

// withCheckpoints gives the handlers their rule-checkpoint scope (package checkpoint), whose
// governed steps are refused for want of a Studio connection.
func (c *Controller) withCheckpoints(ctx context.Context, b *boundAgent, workspace string) context.Context {
	if !b.ruleCheckpoints {
		return ctx
	}
	return checkpoint.NewContext(ctx, c.checkpoints, b.steps, b.slug, workspace)
}
