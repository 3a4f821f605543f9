package main

import (
	"os"
	"strings"
	"testing"
)

// TestJobsWalkthrough runs docs/jobs-walkthrough.md as a user pastes it, from the repository's
// root (the port replaced by a free one): a slow leadgen job on a bolt store, its process killed
// with kill -9 during the find step, a new process taking the job over up to the review.
// Afterwards nothing is left running or listening (runScript), and the temporary directory is
// gone.
func TestJobsWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the program, and waits for a lease to lapse (about 90 s)")
	}
	needTools(t, "bash", "curl", "grep", "mktemp", "seq")
	blocks := shBlocks(t, "jobs-walkthrough.md", "# Background jobs")
	if len(blocks) != 1 {
		t.Fatalf("the walkthrough has %d sh blocks, want 1", len(blocks))
	}
	port := freeLoopbackPort(t)
	script := strings.ReplaceAll(blocks[0], "127.0.0.1:8000", "127.0.0.1:"+port)
	tmp := t.TempDir()
	out := runScript(t, tmp, script, []string{port}, "SUPERVAIZER_PORT="+port)
	for _, want := range []string{
		`{"type":"job.started","job_id":"job-1","status":"active"}`,
		`"id":"job-1-find","activity":"operation","status":"active"`,
		`{"id":"job-1-find","activity":"operation","status":"completed"`,
		`{"id":"job-1-report","activity":"operation","status":"completed"`,
		`"id":"job-1-review","activity":"operation","status":"awaiting"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the walkthrough's output lacks %s:\n%s", want, out)
		}
	}
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		if !strings.HasPrefix(e.Name(), ".") { // tmp is also the script's HOME, where go keeps its dot-files
			t.Errorf("the walkthrough left %s in its temporary directory", e.Name())
		}
	}
}
