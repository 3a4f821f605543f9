//go:build !svz_nostudio

package core

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
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
	b.actions[contract.RuleCheckpointResumeAction] = ActionFunc(func(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
		res, err := checkpoint.Resume(ctx, req)
		if err != nil || b.works.Len() == 0 {
			return res, err
		}
		// Background work that waits for this decision (jobs.Await with the resume action)
		// continues once its guarded step has moved on; a failed wake fails the resume, which
		// Studio delivers again (a resume of a settled occurrence answers its outcome).
		for _, e := range res.Effects {
			if e.Type != contract.EffectRuleCheckpointResumed || e.JobID == "" || e.Status == contract.StateAwaiting || e.Status == checkpoint.StatusPendingDelivery {
				continue
			}
			answer, _ := json.Marshal(map[string]string{"status": e.Status})
			if _, err := jobs.Wake(ctx, e.JobID, contract.RuleCheckpointResumeAction, answer); err != nil {
				return nil, fmt.Errorf("wake job %q after its rule checkpoint: %w", e.JobID, err)
			}
		}
		return res, nil
	})
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
