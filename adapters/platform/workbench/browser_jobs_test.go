package workbench_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/supervaize/svz/examples/leadgen/leads"
)

// TestBrowserBackgroundJob starts a slow leadgen job (LEADGEN_FIND_DELAY) from its job.start
// form: the answer shows the job active, and the page follows it (job.sync) while its steps
// advance: the find step active with the research case's progress (written at the lease renewal,
// 10 s into the 30 s search), then find, score and report completed and the review awaiting.
func TestBrowserBackgroundJob(t *testing.T) {
	g := &gate{streams: map[*http.Request]context.CancelFunc{}}
	url := startController(t, leads.Build, map[string]string{leads.FindDelay: "2s"}, g)
	b := newBrowser(t, url)
	b.do("open the workbench", chromedp.Navigate(url))
	b.open("#/surface?agent=" + leads.Slug + "&surface=job.start")
	b.wait("the job.start form", `document.querySelector('#a2ui-form select[name=industry]')`)
	b.set("#a2ui-form select[name=industry]", "0") // SaaS: options are chosen by index
	b.set("#a2ui-form input[name=region]", "Nordics")
	b.set("#a2ui-form input[name=leads]", "150") // 15 batches of ten, 2 s each
	b.click("#form-submit")
	b.wait("the answer", `document.querySelector('#surface-answer #result-status')`)
	if got := b.text("#surface-answer #job-state .job .badge"); got != "active" {
		t.Fatalf("job.start answered the job %q, want active at once: %s", got, b.text("#surface-answer"))
	}
	job := b.text("#surface-answer #job-state .job code")

	b.wait("the find step running", `document.querySelector('#job-follow [data-step="`+job+`-find"][data-status=active]')`)
	if got := b.text(`#job-follow [data-case="` + job + `-research"] details`); !strings.Contains(got, "progress") {
		t.Errorf("the research case shows no progress while find runs: %q", got)
	}
	b.shot("job-running", true)
	b.wait("the review awaiting", `document.querySelector('#job-follow [data-step="`+job+`-review"][data-status=awaiting]')`)
	for _, step := range []string{"find", "score", "report"} {
		if got := eval[string](b, `document.querySelector('#job-follow [data-step="`+job+`-`+step+`"]').dataset.status`); got != "completed" {
			t.Errorf("step %s is %q once the review awaits", step, got)
		}
	}
	if got := b.text("#job-follow-status"); got != "Job "+job+" is awaiting." {
		t.Errorf("follow status %q", got)
	}
	// What the page showed, one entry per change: running first, the review awaiting last.
	history := strings.Fields(eval[string](b, `document.getElementById('job-follow').dataset.history`))
	if len(history) < 2 || !strings.HasPrefix(history[0], "active:") || !strings.HasPrefix(history[len(history)-1], "awaiting:") {
		t.Errorf("the page's history of the job: %q", history)
	}
	b.shot("job-awaiting", true)
	if errs := b.pageErrors(); len(errs) > 0 {
		t.Errorf("page errors: %v", errs)
	}
}
