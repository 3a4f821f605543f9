package workbench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/supervaize/svz/adapters/internal/testkit"
	"github.com/supervaize/svz/adapters/platform"
	"github.com/supervaize/svz/internal/testenv"
)

var screenshots = flag.String("screenshots", "", "write a screenshot of each workbench page to this directory (make workbench-screenshots)")

// Deadlines are generous: the machine may be a loaded 2-core box. Nothing waits a fixed time;
// every wait polls a DOM condition until it holds or the deadline passes.
const (
	waitDeadline = 90 * time.Second
	testDeadline = 10 * time.Minute
)

// gate sits in front of the controller (a local-mode handler wrapper, outside the workbench like
// any proxy) and records what the page sends; it can also hold the effect stream down.
type gate struct {
	mu       sync.Mutex
	down     bool
	streams  map[*http.Request]context.CancelFunc
	resumes  []string // the Last-Event-ID of each stream request, "" for none
	invokes  []json.RawMessage
	surfaces []json.RawMessage
}

func (g *gate) wrap(next http.Handler, _ platform.LocalInfo) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/a2a/events":
			g.mu.Lock()
			g.resumes = append(g.resumes, r.Header.Get("Last-Event-ID"))
			if g.down {
				g.mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, `{"detail":"held down by the test"}`)
				return
			}
			ctx, cancel := context.WithCancel(r.Context())
			g.streams[r] = cancel
			g.mu.Unlock()
			next.ServeHTTP(w, r.WithContext(ctx))
			g.mu.Lock()
			delete(g.streams, r)
			g.mu.Unlock()
			cancel()
			return
		case r.URL.Path == "/a2a" && r.Method == http.MethodPost:
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var env struct {
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			}
			if json.Unmarshal(body, &env) == nil {
				g.mu.Lock()
				switch env.Method {
				case "supervaizer/action.invoke":
					g.invokes = append(g.invokes, env.Params)
				case "supervaizer/surface.load":
					g.surfaces = append(g.surfaces, env.Params)
				}
				g.mu.Unlock()
			}
		}
		next.ServeHTTP(w, r)
	})
}

// drop ends the open streams and refuses new ones until restore.
func (g *gate) drop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.down = true
	for _, cancel := range g.streams {
		cancel()
	}
}

func (g *gate) restore() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.down = false
}

func (g *gate) invokeCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.invokes)
}

// lastInvoke returns the params of the last action.invoke, decoded.
func (g *gate) lastInvoke(t *testing.T) map[string]any {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.invokes) == 0 {
		t.Fatal("no action.invoke reached the controller")
	}
	var m map[string]any
	if err := json.Unmarshal(g.invokes[len(g.invokes)-1], &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func (g *gate) lastResume() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.resumes[len(g.resumes)-1]
}

var workbenchLine = regexp.MustCompile(`workbench  (http://\S+/manage) `)

// startController runs build in local mode through platform.Run, the path of go run ./cmd/local
// and of SUPERVAIZER_LOCAL_MODE=true for any agent, and returns the workbench's URL from the
// banner.
func startController(t *testing.T, build platform.BuildFunc, env map[string]string, g *gate) string {
	t.Helper()
	var stdout, stderr testkit.LogBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	all := map[string]string{"SUPERVAIZER_LOCAL_MODE": "true", "PORT": "0", "SUPERVAIZER_STORE": "memory"}
	for k, v := range env {
		all[k] = v
	}
	go func() {
		done <- platform.Run(ctx, build, platform.WithEnv(func(k string) string { return all[k] }),
			platform.WithOutput(&stdout, &stderr), platform.WithLocalHandler(g.wrap))
	}()
	ended := false
	t.Cleanup(func() {
		cancel()
		if ended {
			return
		}
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	for deadline := time.Now().Add(waitDeadline); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := workbenchLine.FindStringSubmatch(stdout.String()); m != nil {
			return m[1]
		}
		select {
		case err := <-done:
			ended = true
			t.Fatalf("Run ended: %v\n%s", err, stderr.String())
		default:
		}
	}
	t.Fatalf("no workbench line in the banner:\n%s\n%s", stdout.String(), stderr.String())
	return ""
}

// browser is a headless Chromium tab on the workbench, with the page's uncaught exceptions and
// console errors collected.
type browser struct {
	t    *testing.T
	ctx  context.Context
	url  string
	mu   sync.Mutex
	errs []string
}

func newBrowser(t *testing.T, url string) *browser {
	t.Helper()
	exe := testenv.Need(t, testenv.Chromium)
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	t.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox, // the tests may run as root
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-features", "Translate,OptimizationHints,MediaRouter"),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1360, 1000),
		chromedp.WSURLReadTimeout(waitDeadline),
	)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	b := &browser{t: t, ctx: bctx, url: url}
	if err := chromedp.Listen(bctx, b.collect); err != nil {
		t.Fatalf("start Chromium (%s): %v", exe, err)
	}
	if _, err := chromedp.Call(bctx, log.Enable, struct{}{}); err != nil {
		t.Fatalf("Log.enable: %v", err)
	}
	return b
}

// collect keeps what the page reports as broken: an uncaught exception, console.error, or a
// browser log error (a Content-Security-Policy violation among them).
func (b *browser) collect(ev any) {
	var msg string
	switch e := ev.(type) {
	case *runtime.EventExceptionThrown:
		msg = "exception: " + e.ExceptionDetails.Text
		if e.ExceptionDetails.Exception != nil {
			msg += " " + e.ExceptionDetails.Exception.Description
		}
	case *runtime.EventConsoleAPICalled:
		if e.Type == runtime.ConsoleAPICalledTypeError {
			msg = "console.error"
		}
	case *log.EventEntryAdded:
		if e.Entry.Level == log.EntryLevelError {
			msg = "log " + string(e.Entry.Source) + ": " + e.Entry.Text
		}
	}
	if msg != "" {
		b.mu.Lock()
		b.errs = append(b.errs, msg)
		b.mu.Unlock()
	}
}

// pageErrors returns what collect kept, ignoring failed requests the test caused on purpose.
func (b *browser) pageErrors(allowed ...string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
next:
	for _, e := range b.errs {
		for _, a := range allowed {
			if strings.Contains(e, a) {
				continue next
			}
		}
		out = append(out, e)
	}
	return out
}

func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression (DevTools evaluation is not subject to the page's
// Content-Security-Policy) and decodes its value.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// wait polls expr until it is true, failing the test after the deadline with the page's text.
func (b *browser) wait(what, expr string) {
	b.t.Helper()
	deadline := time.Now().Add(waitDeadline)
	for {
		ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool]("Boolean("+expr+")"))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			text, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.getElementById('page') ? document.getElementById('page').innerText.slice(0, 3000) : document.body.innerText`))
			b.t.Fatalf("waiting for %s (%s): %v\npage errors: %v\npage text:\n%s", what, expr, err, b.pageErrors(), text)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// open shows a workbench page (#/...) and waits until the router has drawn it.
func (b *browser) open(hash string) {
	b.t.Helper()
	name := strings.SplitN(strings.TrimPrefix(hash, "#/"), "?", 2)[0]
	eval[chromedp.Void](b, fmt.Sprintf(`location.hash = %q`, hash))
	b.wait("page "+name, fmt.Sprintf(`document.getElementById('page').dataset.page === %q`, name))
}

// set changes a form control as a user would: the value, then input and change events.
func (b *browser) set(selector, value string) {
	b.t.Helper()
	ok := eval[bool](b, fmt.Sprintf(`(() => {
		const el = document.querySelector(%q);
		if (!el) return false;
		if (el.type === 'checkbox') el.checked = %q === 'true'; else el.value = %q;
		el.dispatchEvent(new Event('input', {bubbles: true}));
		el.dispatchEvent(new Event('change', {bubbles: true}));
		return true;
	})()`, selector, value, value))
	if !ok {
		b.t.Fatalf("no element %s", selector)
	}
}

// click clicks an element once it is shown, with the mouse as a user would.
func (b *browser) click(selector string) {
	b.t.Helper()
	b.wait(selector+" to show", fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e && e.getClientRects().length > 0 && !e.disabled; })()`, selector))
	ctx, cancel := context.WithTimeout(b.ctx, waitDeadline)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(selector), chromedp.NodeVisible)); err != nil {
		b.t.Fatalf("click %s: %v", selector, err)
	}
}

func (b *browser) text(selector string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`(document.querySelector(%q) || {textContent: '(none)'}).textContent`, selector))
}

// shot writes a screenshot of the window (of the whole page when full) when -screenshots is set.
func (b *browser) shot(name string, full bool) {
	b.t.Helper()
	if *screenshots == "" {
		return
	}
	eval[chromedp.Void](b, `window.scrollTo(0, 0)`)
	capture := chromedp.CaptureScreenshot()
	if full {
		capture = chromedp.FullScreenshot(100) // 100: PNG
	}
	png, err := chromedp.Run(b.ctx, capture)
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.MkdirAll(*screenshots, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(*screenshots, "workbench-"+name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

const helloSlug = "hello-world-ai-agent"

// TestBrowserHelloWorld drives Hello World through the workbench in a real headless Chromium:
// the registration, the job.start form (a field left empty is refused at the field, a filled one
// starts the job), the effect on the events page (and again after the stream was dropped), the
// awaiting step's surface submitted, the Action page's errors and idempotency key, and the curl
// command of a call.
func TestBrowserHelloWorld(t *testing.T) {
	g := &gate{streams: map[*http.Request]context.CancelFunc{}}
	url := startController(t, buildBoth, nil, g)
	b := newBrowser(t, url)
	b.do("open the workbench", chromedp.Navigate(url))

	// Agents: the registration as Studio sees it, checked.
	b.wait("the agents", `document.querySelector('[data-agent="`+helloSlug+`"] .validation')`)
	if got := b.text(`[data-agent="` + helloSlug + `"] .validation`); got != "registration valid" {
		t.Fatalf("Hello World's registration: %q", got)
	}
	for _, id := range []string{"job.start", "job.start.preview", "step.awaiting.submit", "job.sync", "resource.hello_messages.list"} {
		if !eval[bool](b, `Array.from(document.querySelectorAll('[data-agent="`+helloSlug+`"] .actions td:first-child')).some((td) => td.textContent === '`+id+`')`) {
			t.Errorf("action %s is not listed", id)
		}
	}
	b.wait("the stream", `document.getElementById('stream-status').textContent === 'events: open'`)
	b.shot("agents", false)

	// Surface: Hello World's job.start form.
	b.open("#/surface?agent=" + helloSlug + "&surface=job.start")
	b.wait("the job.start form", `document.querySelector('#a2ui-form input[name=count]')`)
	if got := eval[string](b, `document.querySelector('#a2ui-form input[name=count]').value`); got != "3" {
		t.Errorf("count shows %q, want its default 3", got)
	}
	if !strings.Contains(b.text("#surface-json pre"), `"type": "Form"`) {
		t.Errorf("the document's JSON is not shown: %s", b.text("#surface-json pre"))
	}

	// A required field left empty is refused at the field; nothing is called.
	before := g.invokeCount()
	b.set("#a2ui-form input[name=count]", "")
	b.click("#form-submit")
	b.wait("the field error", `document.querySelector('[data-field=count] .field-error:not([hidden])')`)
	if got := b.text("[data-field=count] .field-error"); got != "Field required" {
		t.Errorf("count's error: %q", got)
	}
	if g.invokeCount() != before {
		t.Fatal("the form called its action with a required field empty")
	}

	// Filled, it starts the job.
	b.set("#a2ui-form input[name=count]", "2")
	b.click("#form-submit")
	b.wait("the result", `document.querySelector('#surface-answer #result-status')`)
	if got := b.text("#surface-answer #result-status"); got != "ok" {
		t.Fatalf("job.start status %q: %s", got, b.text("#surface-answer"))
	}
	b.wait("the job state", `document.querySelector('#surface-answer #job-state') && document.querySelector('#surface-answer #job-state').textContent.includes('hello-case-2')`)
	if b.text("[data-field=count] .field-error") != "" {
		t.Error("the field error stays after a good submit")
	}
	call := g.lastInvoke(t)
	in, _ := json.Marshal(call["input"])
	if call["action"] != "job.start" || call["surface"] != "job.start" || string(in) != `{"count":2,"enable_human_review":false}` ||
		call["idempotency_key"] == nil || call["job_id"] == nil || call["agent_slug"] != helloSlug {
		t.Errorf("job.start request: %v", call)
	}
	jobID := call["job_id"].(string)
	b.shot("surface-hello", false)

	// Events: the effect arrived on the stream.
	b.open("#/events")
	effect := `Array.from(document.querySelectorAll('#events .event[data-event="supervaizer.effect"]')).filter((e) => e.textContent.includes('job.started') && e.textContent.includes('` + jobID + `')).length`
	b.wait("the job.started effect", effect+` === 1`)

	// The stream drops; an action runs meanwhile (not from the page); the page reconnects with
	// Last-Event-ID and the controller replays that effect, once.
	lastID := eval[string](b, `document.getElementById('events-last-id').textContent`)
	b.wait("an id to resume from", `document.getElementById('events-last-id').textContent !== 'none'`)
	g.drop()
	b.wait("the stream to notice", `document.getElementById('stream-status').textContent === 'events: reconnecting'`)
	rpc(t, strings.TrimSuffix(url, "/manage"), `{"jsonrpc":"2.0","id":7,"method":"supervaizer/action.invoke","params":{"request_id":"from-curl",`+
		`"actor":{"user_id":"me"},"workspace":{"id":"local"},"mission_id":"m1","agent_slug":"`+helloSlug+`","surface":"job.start",`+
		`"action":"job.start.preview","input":{}}}`)
	g.restore()
	missed := `Array.from(document.querySelectorAll('#events .event')).filter((e) => e.textContent.includes('from-curl')).length`
	b.wait("the missed effect", missed+` === 1`)
	b.wait("the stream", `document.getElementById('stream-status').textContent === 'events: open'`)
	if got := g.lastResume(); got == "" || (lastID != "none" && got != lastID) {
		t.Errorf("reconnected with Last-Event-ID %q, want the last id seen %q", got, lastID)
	}
	if eval[int](b, effect) != 1 || eval[int](b, missed) != 1 {
		t.Error("an effect is shown twice after the reconnection")
	}
	b.shot("events", false)

	// The awaiting step: enable_human_review, then the step's own surface, submitted.
	b.open("#/surface?agent=" + helloSlug + "&surface=job.start")
	b.wait("the job.start form", `document.querySelector('#a2ui-form input[name=enable_human_review]')`)
	b.set("#a2ui-form input[name=enable_human_review]", "true")
	b.click("#form-submit")
	b.wait("the awaiting step", `document.querySelector('#surface-answer #open-awaiting')`)
	// A first start is no replay, though its result is strictly idempotent (a retry would get
	// the same answer): only the controller's Idempotent-Replayed header makes the page say so.
	if eval[bool](b, `Boolean(document.querySelector('#surface-answer #result-replayed')) || document.querySelector('#surface-answer').textContent.includes('replayed')`) {
		t.Errorf("the first start is shown as a replay: %s", b.text("#surface-answer"))
	}
	first := g.lastInvoke(t)
	// Submitted again, as a retry: the same idempotency key and job id, so the controller replays
	// the start instead of starting another job.
	b.click("#form-submit")
	b.wait("the replay", `document.querySelector('#surface-answer #open-awaiting') && document.querySelector('#surface-answer #result-replayed')`)
	if again := g.lastInvoke(t); again["request_id"] == first["request_id"] || again["job_id"] != first["job_id"] || again["idempotency_key"] != first["idempotency_key"] {
		t.Errorf("a retry of the form: %v after %v", again, first)
	}
	b.click("#surface-answer #open-awaiting")
	b.wait("the review form", `document.querySelector('#a2ui-form input[name=approved]') && document.getElementById('surface-id').value === 'case.step.awaiting'`)
	b.set("#a2ui-form input[name=approved]", "true")
	b.set("#a2ui-form input[name=comment]", "Looks good")
	b.click("#form-submit")
	b.wait("the review's result", `document.querySelector('#surface-answer #result-status')`)
	if got := b.text("#surface-answer #result-status"); got != "ok" {
		t.Fatalf("step.awaiting.submit: %q %s", got, b.text("#surface-answer"))
	}
	call = g.lastInvoke(t)
	in, _ = json.Marshal(call["input"])
	if call["action"] != "step.awaiting.submit" || call["surface"] != "case.step.awaiting" || call["case_id"] != "hello-review-1" ||
		call["step_id"] != "human-review" || call["job_id"] == nil || string(in) != `{"approved":true,"comment":"Looks good"}` {
		t.Errorf("step.awaiting.submit request: %v", call)
	}
	b.wait("the submitted effect", `document.querySelector('#surface-answer').textContent.includes('step.awaiting.submitted')`)

	// Action: invalid JSON is refused before any call; an input that is not an object gets the
	// controller's JSON-RPC error, with its code.
	b.open("#/action?agent=" + helloSlug + "&action=job.start")
	b.wait("the action form", `document.getElementById('action-id') && document.getElementById('action-id').value === 'job.start'`)
	if got := eval[string](b, `document.getElementById('action-surface').value`); got != "job.start" {
		t.Errorf("the request's surface for job.start: %q", got)
	}
	before = g.invokeCount()
	b.set("#action-input", "{")
	b.click("#action-invoke")
	b.wait("the JSON error", `!document.getElementById('action-input-error').hidden`)
	if g.invokeCount() != before {
		t.Error("invalid JSON was sent")
	}
	b.set("#action-input", "[1]")
	b.click("#action-invoke")
	b.wait("the JSON-RPC error", `document.querySelector('#action-answer #result-error .error-code')`)
	if got := b.text("#action-answer #result-error .error-code"); got != "-32602" {
		t.Errorf("JSON-RPC error code %q: %s", got, b.text("#action-answer"))
	}

	// Prefilled from the surface's form; the same idempotency key twice is a replay, then with
	// another input a conflict.
	b.click("#action-prefill")
	b.wait("the prefilled input", `document.getElementById('action-input').value.includes('"count": 3')`)
	b.set("#action-idem-on", "true")
	b.set("#action-job_id", "job-idem-1")
	b.click("#action-invoke")
	b.wait("the first start", `document.querySelector('#action-answer #result-status')`)
	if eval[bool](b, `Boolean(document.querySelector('#action-answer #result-replayed')) || document.querySelector('#action-answer').textContent.includes('replayed')`) {
		t.Errorf("the first start with a new key is shown as a replay: %s", b.text("#action-answer"))
	}
	b.click("#action-invoke")
	b.wait("the replay", `document.querySelector('#action-answer #result-replayed')`)
	b.set("#action-input", `{"count": 4}`)
	b.click("#action-invoke")
	b.wait("the conflict", `document.querySelector('#action-answer #result-errors .error-code')`)
	if got := b.text("#action-answer #result-errors .error-code"); got != "idempotency_conflict" {
		t.Errorf("same key, other input: %q", got)
	}
	b.set("#action-input", `{"count": 2}`)
	b.click("#action-idem-new")
	b.click("#action-invoke")
	b.wait("a new start", `document.querySelector('#action-answer #job-state') && document.querySelector('#action-answer').textContent.includes('hello-case-2')`)
	b.shot("action", false)

	// Calls: each call is a curl command that repeats it.
	b.open("#/calls")
	b.wait("the calls", `document.querySelectorAll('#calls .call').length > 5`)
	b.shot("calls", false)
	curl := eval[string](b, `Array.from(document.querySelectorAll('#calls .call')).find((c) => c.querySelector('.rpc-method') && c.querySelector('.rpc-method').textContent === 'supervaizer/surface.load').querySelector('.curl-command').textContent`)
	shown := eval[string](b, `Array.from(document.querySelectorAll('#calls .call')).find((c) => c.querySelector('.rpc-method') && c.querySelector('.rpc-method').textContent === 'supervaizer/surface.load').querySelectorAll('pre.json')[1].textContent`)
	if !strings.Contains(curl, `-H 'X-API-Key: local-dev'`) {
		t.Errorf("curl command without the key:\n%s", curl)
	}
	if _, err := exec.LookPath("curl"); err != nil {
		if testenv.InCI() {
			t.Fatal("curl is not installed")
		}
	} else {
		out, err := exec.Command("sh", "-c", curl).Output()
		if err != nil || !jsonEqual(out, []byte(shown)) {
			t.Errorf("the curl command %v:\n%s\nanswered %s\nthe page showed %s", err, curl, out, shown)
		}
	}

	if errs := b.pageErrors("held down by the test", "503"); len(errs) > 0 {
		t.Errorf("the page reported errors: %v", errs)
	}

	// The policy is enforced: an inline script injected into the page does not run, and the
	// browser reports the violation.
	blocked, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`new Promise((resolve) => {
		document.addEventListener('securitypolicyviolation', (e) => resolve(e.effectiveDirective), {once: true});
		const s = document.createElement('script');
		s.textContent = 'window.__injected = true';
		document.body.append(s);
	})`, chromedp.EvalAwaitPromise))
	if err != nil || blocked != "script-src-elem" {
		t.Errorf("injected inline script: violation %q, %v", blocked, err)
	}
	if eval[bool](b, `window.__injected === true`) {
		t.Error("an inline script ran despite the Content-Security-Policy")
	}
	// The collector of page errors works: it saw that violation, and sees an exception.
	eval[chromedp.Void](b, `setTimeout(() => { throw new Error('probe-exception'); }, 0)`)
	b.waitErrors("Content Security Policy", "probe-exception")
}

// waitErrors waits until the collected page errors mention each of want.
func (b *browser) waitErrors(want ...string) {
	b.t.Helper()
	for deadline := time.Now().Add(waitDeadline); ; time.Sleep(100 * time.Millisecond) {
		all := strings.Join(b.pageErrors(), "\n")
		missing := ""
		for _, w := range want {
			if !strings.Contains(all, w) {
				missing = w
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("the page errors never mention %q: %s", missing, all)
		}
	}
}

// rpc posts a JSON-RPC call with the local key, as curl would.
func rpc(t *testing.T, base, body string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/a2a", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", "local-dev")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"result"`)) {
		t.Fatalf("POST /a2a: %d %s", resp.StatusCode, b)
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
