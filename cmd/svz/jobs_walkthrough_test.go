package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestJobsWalkthrough runs docs/jobs-walkthrough.md as written from the repository's root, on a
// free port given as SUPERVAIZER_PORT: a slow leadgen job on a bolt store, its process killed with
// kill -9 during the find step, a new process taking the job over up to the review. The
// walkthrough must stop what it started, remove its directory and leave the repository as it was
// (runScript).
func TestJobsWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the program")
	}
	needTools(t, "bash", "curl", "grep", "mktemp", "seq")
	blocks := shBlocks(t, "jobs-walkthrough.md", "# Background jobs")
	if len(blocks) != 1 {
		t.Fatalf("the walkthrough has %d sh blocks, want 1", len(blocks))
	}
	// The port is the reader's to choose (SUPERVAIZER_PORT), never written in: the script runs
	// as is, on a free port.
	if strings.Contains(blocks[0], ":8000/") {
		t.Fatalf("the walkthrough writes port 8000 into a URL: take it from $AGENT_PORT:\n%s", blocks[0])
	}
	port, tmp := freeLoopbackPort(t), t.TempDir()
	out := runScript(t, tmp, blocks[0], []string{port}, "SUPERVAIZER_PORT="+port)
	for _, want := range []string{
		`{"type":"job.started","job_id":"job-1","status":"active"}`,
		`"id":"job-1-score","activity":"operation","status":"active","title":"Score the leads","outputs":[],"items":{"done":`,
		`{"id":"job-1-score","activity":"operation","status":"completed","title":"Score the leads","outputs":[],"items":{"done":100,"total":100}}`,
		`"id":"job-1-review","activity":"operation","status":"awaiting"`,
		`{"type":"step.awaiting.submitted","job_id":"job-1","case_id":"job-1-report","step_id":"job-1-review","status":"active"}`,
		`"waiting":{"reason":"timer","step_id":"job-1-cool-down","until":"`,
		`{"id":"job-1-import","activity":"operation","status":"completed"`,
		`{"type":"job.synced","job_id":"job-1","status":"completed"}`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the walkthrough's output lacks %s:\n%s", want, out)
		}
	}
	// Its mktemp -d directory (the binary, the bolt file, the log) is removed.
	if left, _ := filepath.Glob(filepath.Join(tmp, "tmp.*")); len(left) != 0 {
		t.Errorf("the walkthrough left %v", left)
	}
}
