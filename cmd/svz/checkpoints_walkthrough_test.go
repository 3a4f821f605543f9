package main

import (
	"strings"
	"testing"
)

// TestCheckpointsWalkthrough runs docs/checkpoints.md's walkthrough as written from the
// repository's root (ports replaced by free ones): it builds svz and the lead-generation agent,
// runs `svz dev studio` pausing the before checkpoint and the agent Studio-connected to it; a
// governed job.start pauses its import, the resume allows it, and the job completes. The snapshot
// token is never printed; the walkthrough stops what it started and leaves the repository as it
// was (runScript).
func TestCheckpointsWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the programs")
	}
	needTools(t, "bash", "curl", "grep", "sed", "mktemp", "seq")
	blocks := shBlocks(t, "checkpoints.md", "## Try it")
	if len(blocks) != 1 {
		t.Fatalf("the walkthrough section has %d sh blocks, want 1", len(blocks))
	}
	port, studioPort := freeLoopbackPort(t), freeLoopbackPort(t)
	script := strings.ReplaceAll(blocks[0], "127.0.0.1:8000", "127.0.0.1:"+port)
	script = strings.ReplaceAll(script, "127.0.0.1:8800", "127.0.0.1:"+studioPort)
	out := runScript(t, t.TempDir(), script, []string{port, studioPort}, "SUPERVAIZER_PORT="+port)
	for _, want := range []string{`{"id":"job-1-import.wait.before","activity":"operation","status":"awaiting"`, `"decision": "pause"`,
		`"status":"ok","effects":[{"type":"rule.checkpoint.resumed","job_id":"job-1","status":"allow","summary":{"checkpoint_id":"chk-1"}}]`,
		`{"id":"job-1-import","activity":"operation","status":"completed"`, "registered with Studio"} {
		if !strings.Contains(out, want) {
			t.Errorf("the walkthrough's output lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "tok-dev-1") {
		t.Errorf("the walkthrough's output shows the snapshot token:\n%s", out)
	}
}
