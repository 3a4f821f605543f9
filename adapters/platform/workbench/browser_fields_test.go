package workbench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserFieldSchema renders every type and key of the field schema in a real Chromium:
// its controls, its checks at the field (required, length, pattern, bounds, item counts, list
// rows), the agent's own field error, the values sent (a file inline, list rows), the preview's
// setup plan, the DocumentReview of the awaiting step, the generic view, and the Action page's
// dry-run and help actions.
func TestBrowserFieldSchema(t *testing.T) {
	g := &gate{streams: map[*http.Request]context.CancelFunc{}}
	url := startController(t, buildBoth, nil, g)
	b := newBrowser(t, url)
	b.do("open the workbench", chromedp.Navigate(url+"#/agents"))

	// The registration: flags, setup plan, resources, datasets, rule checkpoints, introduction.
	agent := `[data-agent="` + showcaseSlug + `"]`
	b.wait("the showcase agent", `document.querySelector('`+agent+` .validation')`)
	if got := b.text(agent + " .validation"); got != "registration valid" {
		t.Fatalf("the showcase's registration: %q\n%s", got, b.text(agent))
	}
	card := b.text(agent)
	for _, want := range []string{"Shows every field", "Scope", "5–20 credits (for 50 runs)", "goal.suggest", "Contacts", "runs", "before", "after", "One run"} {
		if !strings.Contains(card, want) {
			t.Errorf("the agent's card lacks %q", want)
		}
	}
	rowFlags := func(action string) []string {
		return eval[[]string](b, fmt.Sprintf(`Array.from(Array.from(document.querySelectorAll('%s .actions tr')).find((tr) => tr.firstChild.textContent === %q).querySelectorAll('.flag.on'), (f) => f.textContent)`, agent, action))
	}
	if got := rowFlags("job.test"); !slices.Equal(got, []string{"mutating", "dry run"}) {
		t.Errorf("job.test flags %v", got)
	}
	if got := rowFlags("goal.suggest"); !slices.Equal(got, []string{"target goal"}) {
		t.Errorf("goal.suggest flags %v (help actions do not mutate)", got)
	}

	// The form: one control per type, with the schema's keys.
	b.open("#/surface?agent=" + showcaseSlug + "&surface=job.start")
	b.wait("the form", `document.querySelector('#a2ui-form [data-field=accent] input')`)
	for sel, want := range map[string]string{
		`[data-field=goal] input`:     `text|What should the agent do?|`,
		`[data-field=brief] textarea`: `textarea|4|`,
		`[data-field=budget] input`:   `number|any|10`,
		`[data-field=runs] input`:     `number|1|5`,
		`[data-field=start_on] input`: `date||`,
		`[data-field=contact] input`:  `text||`,
		`[data-field=report] input`:   `file|.md,text/markdown|`,
		`[data-field=accent] input`:   `text|#336699|`,
	} {
		got := eval[string](b, fmt.Sprintf(`(() => { const e = document.querySelector('#a2ui-form %s');
			return e.tagName === 'TEXTAREA' ? 'textarea|' + e.rows + '|' + e.value
				: e.type + '|' + (e.placeholder || (e.type === 'number' ? e.step : '') || e.accept || '') + '|' + e.value; })()`, sel))
		if got != want {
			t.Errorf("%s: %q, want %q", sel, got, want)
		}
	}
	for expr, want := range map[string]string{
		`document.querySelector('[data-field=notify] input').checked`:                                             "true",
		`document.querySelector('[data-field=mode] select').value`:                                                `""`,
		`document.querySelector('[data-field=mode] select').options[0].textContent`:                               `"Pick a mode"`,
		`document.querySelector('[data-field=mode] select').options[0].disabled`:                                  "true",
		`Array.from(document.querySelectorAll('[data-field=mode] option')).slice(1).map((o) => o.textContent)`:    `["Fast","Custom"]`,
		`Array.from(document.querySelectorAll('[data-field=channels] .choice')).map((o) => o.textContent.trim())`: `["Email","SMS","Chat"]`,
		`document.querySelector('[data-field=depth]').hidden`:                                                     "true",
		`document.querySelector('[data-field=goal] .info').title`:                                                 `"The job's goal, shown to the operator"`,
		`document.querySelector('[data-field=goal] .required') !== null`:                                          "true",
		`document.querySelector('[data-field=contact] .hint').textContent.includes('contacts')`:                   "true",
		`document.querySelector('[data-field=targets] #doc-targets-add') !== null`:                                "true",
		`document.querySelector('[data-field=accent] .type').textContent.trim()`:                                  `"color"`,
	} {
		if got := eval[json.RawMessage](b, expr); string(got) != want {
			t.Errorf("%s = %s, want %s", expr, got, want)
		}
	}

	// Empty, the required fields are refused at the field; nothing is called.
	before := g.invokeCount()
	shownErrors := func() map[string]string {
		return eval[map[string]string](b, `Object.fromEntries(Array.from(document.querySelectorAll('#a2ui-form .field-error:not([hidden])'), (e) => [e.closest('[data-field]').dataset.field, e.textContent]))`)
	}
	b.click("#form-submit")
	b.wait("the field errors", `document.querySelectorAll('#a2ui-form .field-error:not([hidden])').length === 2`)
	if got := shownErrors(); got["goal"] != "Field required" || got["mode"] != "Field required" {
		t.Errorf("errors %v", got)
	}

	// The rules: a length with its message, a bound with its message, another bound, an item
	// count, a required item field of a row; depends_on shows depth for the custom mode.
	b.set("[data-field=goal] input", "ab")
	b.set("[data-field=budget] input", "-1")
	b.set("[data-field=runs] input", "51")
	b.set("[data-field=mode] select", "1") // Custom
	b.wait("depth", `!document.querySelector('[data-field=depth]').hidden`)
	for range 4 {
		b.click("#doc-targets-add")
	}
	b.click("#form-submit")
	b.wait("the rule errors", `document.querySelector('[data-field=targets] > .field-error:not([hidden])')`)
	want := map[string]string{
		"goal":   "Start with a letter, 3 characters at least",
		"budget": "Budget cannot be negative",
		"runs":   "Input should be less than or equal to 50",
		"name":   "Field required", // the rows' own errors carry the item field's id
	}
	got := shownErrors()
	if got["targets"] != "List should have at most 3 items" {
		t.Errorf("targets: %q", got["targets"])
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	if g.invokeCount() != before {
		t.Fatal("the form called its action with invalid fields")
	}
	b.shot("surface", true)

	// Fixed, the agent refuses the goal itself: its error shows at the field, with its code.
	b.set("[data-field=goal] input", "taken")
	b.set("[data-field=brief] textarea", "Hello")
	b.set("[data-field=budget] input", "12.5")
	b.set("[data-field=runs] input", "7")
	b.set("[data-field=notify] input", "false")
	b.set("[data-field=depth] input", "2")
	b.set(`[data-field=channels] input[value="0"]`, "true")
	b.set(`[data-field=channels] input[value="2"]`, "true")
	b.set("[data-field=start_on] input", "2026-12-24")
	b.set("[data-field=contact] input", "c-42")
	b.set("[data-field=accent] input", "#123456")
	for range 3 {
		eval[chromedp.Void](b, `document.querySelector('[data-field=targets] .row:last-child button').click()`)
	}
	b.set("[data-field=targets] .row input[name=name]", "Ada")
	b.set("[data-field=targets] .row input[name=url]", "https://example.com/ada")
	file := filepath.Join(t.TempDir(), "notes.md")
	if err := os.WriteFile(file, []byte("# Notes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b.do("choose the report", chromedp.SetUploadFiles(chromedp.CSS("[data-field=report] input"), []string{file}))
	b.click("#form-submit")
	b.wait("the agent's field error", `document.querySelector('[data-field=goal] .field-error').textContent.includes('input_invalid')`)
	if got := b.text("[data-field=goal] .field-error"); got != "This goal is already used by another job (input_invalid)" {
		t.Errorf("goal: %q", got)
	}
	if got := b.text("#surface-answer #result-errors .error-code"); got != "input_invalid" {
		t.Errorf("result error code %q", got)
	}

	// The preview answers the setup plan.
	b.set("[data-field=goal] input", "Greet the team")
	b.click("#form-preview")
	b.wait("the setup plan", `document.querySelector('#surface-answer .setup-plan')`)
	if got := b.text("#surface-answer .setup-plan"); !strings.Contains(got, "5–20 credits") || !strings.Contains(got, "Scope") {
		t.Errorf("setup plan: %s", got)
	}
	preview := g.lastInvoke(t)

	// Started: the values sent, typed.
	b.click("#form-submit")
	b.wait("the start", `document.querySelector('#surface-answer #job-state')`)
	if got := b.text("#surface-answer #result-status"); got != "ok" {
		t.Fatalf("job.start: %q", got)
	}
	call := g.lastInvoke(t)
	in := call["input"].(map[string]any)
	report, _ := in["report"].(map[string]any)
	delete(in, "report")
	gotIn, _ := json.Marshal(in)
	const wantIn = `{"accent":"#123456","brief":"Hello","budget":12.5,"channels":["email","chat"],"contact":"c-42","depth":2,"goal":"Greet the team",` +
		`"mode":"custom","notify":false,"runs":7,"start_on":"2026-12-24","targets":[{"name":"Ada","url":"https://example.com/ada"}]}`
	if string(gotIn) != wantIn {
		t.Errorf("input\n got %s\nwant %s", gotIn, wantIn)
	}
	if report["storage"] != "inline" || report["filename"] != "notes.md" || report["size"] != 8.0 || report["encoding"] != "base64" || report["content"] != "IyBOb3Rlcwo=" {
		t.Errorf("report %v", report)
	}
	if call["idempotency_key"] == nil || call["idempotency_key"] != preview["idempotency_key"] || call["job_id"] == nil || preview["action"] != "job.start.preview" {
		t.Errorf("the preview and the start share one idempotency key, the start has a job id: %v / %v", preview, call)
	}

	// The awaiting step's DocumentReview: the reviewed text prefills its field.
	b.click("#surface-answer #open-awaiting")
	b.wait("the review", `document.getElementById('document-type') && document.getElementById('document-type').textContent === 'DocumentReview' && document.querySelector('#a2ui-form [name=review_text]')`)
	if got := eval[string](b, `document.querySelector('#a2ui-form [name=review_text]').value`); got != "# Draft\n\nReview this content." {
		t.Errorf("review_text %q", got)
	}
	if got := b.text("#a2ui-form .checks"); !strings.Contains(got, "Ready for approval") {
		t.Errorf("checks %q", got)
	}
	b.set("#a2ui-form [name=approve_review]", "true")
	b.click("#form-submit")
	b.wait("the approval", `document.querySelector('#surface-answer #result-status')`)
	call = g.lastInvoke(t)
	if in, _ := json.Marshal(call["input"]); string(in) != `{"approve_review":true,"review_text":"# Draft\n\nReview this content."}` ||
		call["case_id"] != "case-1" || call["step_id"] != "review" || call["action"] != "step.awaiting.submit" {
		t.Errorf("review request %v", call)
	}
	b.shot("review", false)

	// A document type without a renderer: the generic view.
	b.open("#/surface?agent=" + showcaseSlug + "&surface=mission.overview")
	b.wait("the generic view", `document.querySelector('#a2ui-generic')`)
	if got := b.text("#a2ui-generic"); !strings.Contains(got, "Dashboard") || !strings.Contains(got, "widgets") || !strings.Contains(got, "42") {
		t.Errorf("generic view: %s", got)
	}

	// Action: the dry-run toggle offers the dry-run actions only, and shows their outcome.
	b.open("#/action?agent=" + showcaseSlug + "&action=job.start")
	b.wait("the action form", `document.getElementById('action-id').value === 'job.start'`)
	b.set("#action-dry-run", "true")
	if got := eval[[]string](b, `Array.from(document.querySelectorAll('#action-id option'), (o) => o.value)`); !slices.Equal(got, []string{"job.test"}) {
		t.Errorf("dry-run actions %v", got)
	}
	b.click("#action-invoke")
	b.wait("the dry run", `document.querySelector('#action-answer #dry-run')`)
	if got := b.text("#action-answer #dry-run"); !strings.Contains(got, "deletable yes") || !strings.Contains(got, "1–1 credits") {
		t.Errorf("dry run: %s", got)
	}
	// A help action answers a draft.
	b.set("#action-dry-run", "false")
	b.set("#action-id", "goal.suggest")
	b.set("#action-input", `{"field": "goal", "values": {}}`)
	b.click("#action-invoke")
	b.wait("the draft", `document.querySelector('#action-answer').textContent.includes('proposed value')`)
	if got := b.text("#action-answer"); !strings.Contains(got, `"Greet the team"`) || !strings.Contains(got, "Name who to greet") {
		t.Errorf("draft: %s", got)
	}

	if errs := b.pageErrors(); len(errs) > 0 {
		t.Errorf("the page reported errors: %v", errs)
	}
}

// TestBrowserSecretKey: with a key the user chose, the page asks for it, shows calls refused
// until it has it, never shows it, and its curl commands read it from the environment.
func TestBrowserSecretKey(t *testing.T) {
	const key = "my-secret-key-1234"
	g := &gate{streams: map[*http.Request]context.CancelFunc{}}
	url := startController(t, buildBoth, map[string]string{"SUPERVAIZER_API_KEY": key}, g)
	b := newBrowser(t, url)
	b.do("open the workbench", chromedp.Navigate(url+"#/agents"))
	b.wait("the key form", `!document.getElementById('credentials').hidden`)
	if got := b.text("#key-hint"); !strings.Contains(got, "fingerprint") {
		t.Errorf("key hint %q", got)
	}
	// Discovery is public; the agent info route needs the key.
	b.wait("the refusal", `document.querySelector('#agents .error-box')`)
	if got := b.text("#agents .error-box"); !strings.Contains(got, "401") || !strings.Contains(got, "Invalid or missing API key") {
		t.Errorf("without the key: %s", got)
	}
	b.set("#api-key", key)
	b.click("#credentials-form button")
	b.click("#agents-reload")
	b.wait("the agents", `document.querySelector('[data-agent="`+helloSlug+`"] .validation') && !document.querySelector('#agents .error-box')`)
	b.wait("the stream", `document.getElementById('stream-status').textContent === 'events: open'`)
	b.open("#/calls")
	b.wait("the calls", `document.querySelectorAll('#calls .call').length > 2`)
	curl := b.text("#calls .call .curl-command")
	if !strings.Contains(curl, `-H "X-API-Key: $SUPERVAIZER_API_KEY"`) {
		t.Errorf("curl command:\n%s", curl)
	}
	if html := eval[string](b, `document.documentElement.outerHTML`); strings.Contains(html, key) {
		t.Error("the page shows the key")
	}
	if errs := b.pageErrors("401"); len(errs) > 0 {
		t.Errorf("the page reported errors: %v", errs)
	}
}
