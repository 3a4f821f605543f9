package workbench_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/config"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
)

// The ops agent runs background work the jobs page shows: report (fetch, a fan-out of five
// items of which item 3 fails while failScore is set, write) and review (waits for an answer).
const opsSlug = "ops-demo"

func opsBuild(failScore *atomic.Bool) func(ctx context.Context, getenv func(string) string, log *slog.Logger) (http.Handler, error) {
	return func(ctx context.Context, getenv func(string) string, log *slog.Logger) (http.Handler, error) {
		reg, err := contract.BuildRegistration(contract.RegistrationSpec{
			AgentSlug: opsSlug, DisplayName: "Ops demo", A2UICatalogVersion: "ops.1",
			Actions:   []contract.ActionSpec{contract.ActionID(contract.JobStartAction), contract.ActionDefinition{ID: contract.JobStopAction, Label: "Stop"}},
			JobPolicy: &contract.JobPolicy{Sync: &contract.JobSyncPolicy{}},
		})
		if err != nil {
			return nil, err
		}
		a, err := core.NewAgent(core.AgentConfig{Name: "Ops demo", Version: "1.0.0", Registration: reg, Description: "Background work for the jobs page."})
		if err != nil {
			return nil, err
		}
		report := jobs.Define(a, "report", func(ctx context.Context, _ struct{}) error {
			if _, err := jobs.Step(ctx, "fetch", func(context.Context) (int, error) { return 5, nil }, jobs.Title("Fetch the rows")); err != nil {
				return err
			}
			if _, err := jobs.Map(ctx, "score", []int{0, 1, 2, 3, 4}, func(_ context.Context, i int) (int, error) {
				if i == 3 && failScore.Load() {
					return 0, errors.New("the scoring model timed out")
				}
				return i * 10, nil
			}, jobs.Concurrency(1), jobs.Title("Score each row")); err != nil {
				return err
			}
			_, err := jobs.Step(ctx, "write", func(context.Context) (string, error) { return "report.md", nil }, jobs.Title("Write the report"))
			return err
		}, jobs.MaxAttempts(1))
		review := jobs.Define(a, "review", func(ctx context.Context, _ struct{}) error {
			_, err := jobs.Await[map[string]any](ctx, "approve", contract.Awaiting{}, jobs.Title("Approve the report"))
			return err
		})
		a.HandleAction(contract.JobStartAction, core.ActionFunc(func(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
			var in struct {
				Work string `json:"work"`
			}
			if err := req.DecodeInput(&in); err != nil {
				return nil, err
			}
			if in.Work == "review" {
				return review.Started(ctx, req, struct{}{})
			}
			return report.Started(ctx, req, struct{}{})
		}))
		return config.NewController(ctx, getenv, log, a)
	}
}

// startOpsJob starts a job of work on the ops agent in the workspace local, as Studio would.
func startOpsJob(t *testing.T, base, job, work string) {
	rpc(t, base, fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"supervaizer/action.invoke","params":{"request_id":"r-%s","actor":{"user_id":"me"},`+
		`"workspace":{"id":"local"},"mission_id":"m1","agent_slug":%q,"surface":"job.start","action":"job.start","job_id":%q,"input":{"work":%q}}}`,
		job, opsSlug, job, work))
}

// TestBrowserJobs: the jobs page lists the local workspace's jobs; a failed job shows its failed
// fan-out (items done, the failing item's tries) and its error; Retry runs it again from that
// fan-out (the pool runs it at once) until it completes; a job that waits for an answer is
// cancelled with Cancel. The routes need the API key.
func TestBrowserJobs(t *testing.T) {
	var failScore atomic.Bool
	failScore.Store(true)
	g := &gate{streams: map[*http.Request]context.CancelFunc{}}
	url := startController(t, opsBuild(&failScore), nil, g)
	base := strings.TrimSuffix(url, "/manage")
	startOpsJob(t, base, "job-report", "report")
	startOpsJob(t, base, "job-review", "review")

	b := newBrowser(t, url)
	b.do("open the workbench", chromedp.Navigate(url))
	b.wait("the jobs link", `!document.getElementById('nav-jobs').hidden`)
	b.open("#/jobs")
	b.wait("both jobs settled", `document.querySelector('#jobs-list [data-job="job-report"]') && document.querySelectorAll('#jobs-list tr td [data-status=failed], #jobs-list tr td [data-status=awaiting]').length === 2`)
	if got := b.text("#jobs-list tbody tr:first-child"); !strings.Contains(got, "job-review") || !strings.Contains(got, "awaiting") {
		t.Errorf("the newest job first: %q", got)
	}
	if got := b.text("#jobs-list"); !strings.Contains(got, `item 3 of fan-out "score" failed 1 times; last error: the scoring model timed out`) {
		t.Errorf("the failed job's error is not listed: %q", got)
	}
	b.shot("jobs", false)

	// The failed job: its steps, its error; Cancel is off, Retry on.
	b.click(`#jobs-list a[data-job="job-report"]`)
	b.wait("the job", `document.getElementById('job') && document.getElementById('job').dataset.status === 'failed'`)
	if got := b.text(`#job-steps [data-step=score]`); !strings.Contains(got, "fan-out") || !strings.Contains(got, "3/5 items, item 3 failed 1×") {
		t.Errorf("the failed fan-out: %q", got)
	}
	if got := b.text(`#job-steps [data-step=fetch]`); !strings.Contains(got, "completed") || !strings.HasPrefix(got, "1") {
		t.Errorf("the recorded step: %q", got)
	}
	if !eval[bool](b, `document.getElementById('job-cancel').disabled`) {
		t.Error("Cancel is on for a failed job")
	}
	if got := b.text("#job-state .job .badge"); got != "failed" {
		t.Errorf("its job_state says %q", got)
	}
	b.shot("job-failed", true)

	failScore.Store(false)
	b.click("#job-retry")
	b.wait("the job completed", `document.getElementById('job').dataset.status === 'completed'`)
	if got := b.text("#job-said"); !strings.HasPrefix(got, "Retried: the job is pending") {
		t.Errorf("after Retry: %q", got)
	}
	if got := b.text(`#job-steps [data-step=score]`); !strings.Contains(got, "5/5 items") || !strings.HasPrefix(got, "2") {
		t.Errorf("the fan-out after the retry: %q", got)
	}
	if got := b.text("#job-fields"); !strings.Contains(got, "Retries1, the last at") {
		t.Errorf("the retries: %q", got)
	}

	// The job that waits: cancelled.
	b.open("#/jobs?agent=" + opsSlug + "&job=job-review")
	b.wait("the waiting job", `document.getElementById('job') && document.getElementById('job').dataset.status === 'awaiting'`)
	b.click("#job-cancel")
	b.wait("the job stopped", `document.getElementById('job').dataset.status === 'stopped'`)
	if got := b.text(`#job-steps [data-step=approve]`); !strings.Contains(got, "cancelled") {
		t.Errorf("the awaiting step after Cancel: %q", got)
	}
	if !eval[bool](b, `document.getElementById('job-cancel').disabled`) || eval[bool](b, `document.getElementById('job-retry').disabled`) {
		t.Error("a stopped job: Cancel should be off, Retry on")
	}
	if errs := b.pageErrors(); len(errs) > 0 {
		t.Errorf("page errors: %v", errs)
	}

	// Without the API key, the routes refuse.
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/manage/api/jobs", ""},
		{"POST", "/manage/api/jobs/cancel", `{"agent":"` + opsSlug + `","job":"job-report"}`},
	} {
		req, _ := http.NewRequest(r.method, base+r.path, strings.NewReader(r.body))
		req.Header.Set("X-API-Key", "not-the-key")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]string
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || body["detail"] != "The jobs routes need the controller's API key in X-API-Key" {
			t.Errorf("%s %s with a wrong key: %d %v", r.method, r.path, resp.StatusCode, body)
		}
	}
}
