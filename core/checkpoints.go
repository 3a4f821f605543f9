//go:build !svz_nostudio

package core

import (
	"context"
	"fmt"

	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/core/contract"
)

// bindCheckpoints serves rule.checkpoint.resume for an agent that declares rule checkpoints (the
// reference registers it for such agents; package checkpoint continues the paused step on
// whichever instance receives it), and reports the agent's guarded-step mistakes.
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
	b.actions[contract.RuleCheckpointResumeAction] = ActionFunc(checkpoint.Resume)
	c.startCheckpoints(b, "governed jobs (a job.start with input.rule_snapshot) are refused until SUPERVAIZE_API_KEY, SUPERVAIZE_WORKSPACE_ID and SUPERVAIZE_API_URL are set")
	return nil
}

// startCheckpoints gives the controller its checkpoint service, once, and says when governed
// steps cannot run (why).
func (c *Controller) startCheckpoints(b *boundAgent, why string) {
	b.ruleCheckpoints = true
	if c.checkpoints != nil {
		return
	}
	c.checkpoints = checkpoint.NewService(checkpoint.Config{Store: c.cfg.Store, Studio: c.cfg.RuleCheckpoints, Logger: c.log, Now: c.now})
	if c.cfg.RuleCheckpoints == nil {
		c.log.Warn("agent declares rule checkpoints but the controller has no Studio connection: "+why, "agent_slug", b.slug)
	}
}

// withCheckpoints gives the handlers of an agent that declares rule checkpoints its
// rule-checkpoint scope (package checkpoint), for the verified workspace of the call.
func (c *Controller) withCheckpoints(ctx context.Context, b *boundAgent, workspace string) context.Context {
	if !b.ruleCheckpoints {
		return ctx
	}
	return checkpoint.NewContext(ctx, c.checkpoints, b.steps, b.slug, workspace)
}
