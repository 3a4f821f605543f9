package core_test

import (
	"context"
	"strings"
	"testing"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/jobs/jobstest"
)

// TestJobStopWhileRunning pins what docs/jobs.md says of job.stop on a running job: the answer is
// job.stopped with status "active" (the job is asked to stop, not stopped yet), the running
// step's context is cancelled, and job.sync then shows the job cancelled.
func TestJobStopWhileRunning(t *testing.T) {
	a := workShell(t)
	running, cancelled := make(chan struct{}), make(chan error, 1)
	w := jobs.Define(a, "wait", func(ctx context.Context, _ map[string]string) error {
		_, err := jobs.Step(ctx, "wait", func(ctx context.Context) (string, error) {
			close(running)
			<-ctx.Done()
			cancelled <- context.Cause(ctx)
			return "", ctx.Err()
		})
		return err
	})
	a.HandleAction("job.start", core.ActionFunc(func(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
		return w.Started(ctx, req, map[string]string{})
	}))
	q := &jobstest.Queue{}
	c := agentController(t, a, q)

	post(t, c, rpcBody(t, 1, "supervaizer/action.invoke", actionParams("job.start", "job-1", map[string]any{})), nil)
	msgs := q.Take()
	if len(msgs) != 1 {
		t.Fatalf("dispatched %d messages", len(msgs))
	}
	delivered := make(chan error, 1)
	go func() { delivered <- c.Jobs().Deliver(context.Background(), msgs[0], jobs.Delivery{}) }()
	<-running

	_, body := post(t, c, rpcBody(t, 2, "supervaizer/action.invoke", actionParams("job.stop", "job-1", map[string]any{})), nil)
	if !strings.Contains(string(body), `"effects":[{"type":"job.stopped","job_id":"job-1","status":"active"}]`) ||
		!strings.Contains(string(body), `"job":{"id":"job-1","agent_slug":"w","mission_id":"mission-1","status":"active"`) {
		t.Fatalf("job.stop of a running job: %s", body)
	}
	if cause := <-cancelled; cause == nil {
		t.Fatal("the running step's context ended without a cause")
	}
	if err := <-delivered; err != nil {
		t.Fatalf("delivery: %v", err)
	}
	_, body = post(t, c, rpcBody(t, 3, "supervaizer/action.invoke", actionParams("job.sync", "job-1", map[string]any{})), nil)
	if !strings.Contains(string(body), `"effects":[{"type":"job.synced","job_id":"job-1","status":"cancelled"}]`) {
		t.Fatalf("job.sync after the stop: %s", body)
	}
}
