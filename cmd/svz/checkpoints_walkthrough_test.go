package main

import (
	"strings"
	"sync"
	"testing"
)

// buildLeadgen builds examples/leadgen once per test run.
var buildLeadgen = sync.OnceValues(func() (string, error) { return goBuild("./examples/leadgen") })

// TestCheckpointsWalkthrough runs docs/checkpoints.md's walkthrough as a user pastes it (go run
// replaced by the same programs, ports by free ones): `svz dev studio` pausing the before
// checkpoint, the lead-generation agent Studio-connected to it; a governed job.start pauses its
// import, the resume allows it, and the job completes. The snapshot token is never printed.
func TestCheckpointsWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the programs")
	}
	needTools(t, "bash", "curl", "grep", "sed")
	blocks := shBlocks(t, "checkpoints.md", "## Try it")
	if len(blocks) != 1 {
		t.Fatalf("the walkthrough section has %d sh blocks, want 1", len(blocks))
	}
	leadgen, err := buildLeadgen()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	port, studioPort := freeLoopbackPort(t), freeLoopbackPort(t)
	script := strings.ReplaceAll(blocks[0], "go run ./cmd/svz", `"$SVZ"`)
	script = strings.ReplaceAll(script, "go run ./examples/leadgen", `"$LEADGEN"`)
	script = strings.ReplaceAll(script, "127.0.0.1:8000", "127.0.0.1:"+port)
	script = strings.ReplaceAll(script, "127.0.0.1:8800", "127.0.0.1:"+studioPort)
	out := runScript(t, dir, script, "SVZ="+svzShim(t, dir), "LEADGEN="+leadgen, "SUPERVAIZER_PORT="+port)
	for _, want := range []string{`{"id":"job-1-import","activity":"operation","status":"awaiting"`, `"decision": "pause"`,
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
