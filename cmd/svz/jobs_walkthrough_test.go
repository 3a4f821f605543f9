package main

import (
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// TestJobsWalkthrough runs docs/jobs-walkthrough.md as a user pastes it (the go build replaced by
// a copy of the same program, the port by a free one): a slow leadgen job on a bolt store, its
// process killed with kill -9 during the find step, a new process taking the job over up to the
// review. Afterwards nothing listens on the port, and the temporary directory is gone.
func TestJobsWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the program, and waits for a lease to lapse (about 90 s)")
	}
	needTools(t, "bash", "curl", "grep", "mktemp", "seq")
	blocks := shBlocks(t, "jobs-walkthrough.md", "# Background jobs")
	if len(blocks) != 1 {
		t.Fatalf("the walkthrough has %d sh blocks, want 1", len(blocks))
	}
	leadgen, err := buildLeadgen()
	if err != nil {
		t.Fatal(err)
	}
	const build = `go build -o "$DIR/leadgen" ./examples/leadgen`
	if !strings.Contains(blocks[0], build) {
		t.Fatalf("the walkthrough no longer builds with %s", build)
	}
	dir, tmp := t.TempDir(), t.TempDir()
	port := freeLoopbackPort(t)
	script := strings.ReplaceAll(blocks[0], build, `cp "$LEADGEN" "$DIR/leadgen"`)
	script = strings.ReplaceAll(script, "127.0.0.1:8000", "127.0.0.1:"+port)
	// Before the runner's own clean-up stops what is left: the walkthrough must have stopped it.
	script += "\nif curl -s --max-time 5 http://127.0.0.1:" + port + "/.well-known/health >/dev/null; then echo 'LEFT LISTENING'; exit 1; fi\n"
	out := runScript(t, dir, script, "LEADGEN="+leadgen, "TMPDIR="+tmp, "SUPERVAIZER_PORT="+port)
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
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, 2*time.Second); err == nil {
		c.Close()
		t.Errorf("something still listens on 127.0.0.1:%s", port)
	}
	if left, err := os.ReadDir(tmp); err != nil || len(left) != 0 {
		t.Errorf("the walkthrough left %v in its temporary directory (%v)", left, err)
	}
}
