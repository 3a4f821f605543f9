//go:build svz_nostudio

package core_test

import (
	"strings"
	"testing"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/grant"
)

// TestRuleCheckpointsOmitted: a build without the Studio client serves an agent that declares
// rule checkpoints, and refuses its resumes, saying why.
func TestRuleCheckpointsOmitted(t *testing.T) {
	a, _ := governedAgent(t, true, false)
	c, err := core.New(core.Config{APIKey: testKey, Authorizer: grant.LocalBypass{ServerID: "srv"}}, a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	out := invokeGov(t, c, "rule.checkpoint.resume", `{}`)
	if e, _ := out["error"].(map[string]any); e == nil || e["code"] != -32603.0 {
		t.Errorf("resume: %v", out)
	}
	own, _ := governedAgent(t, true, true)
	if _, err := core.New(core.Config{APIKey: testKey, Authorizer: grant.LocalBypass{ServerID: "srv"}}, own); err == nil ||
		!strings.Contains(err.Error(), "remove its handler") {
		t.Errorf("a handler of its own: %v", err)
	}
}
