package workbench_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/supervaize/svz/adapters/platform/workbench"
	"github.com/supervaize/svz/core/jobs"
)

// recordingJobs answers the operator controls with err, or with the job it was asked for, and
// keeps what it was asked.
type recordingJobs struct {
	err   error
	calls []string
}

func (r *recordingJobs) call(op string, ref jobs.Ref) (*jobs.Detail, error) {
	r.calls = append(r.calls, fmt.Sprintf("%s %s/%s/%s", op, ref.Agent, ref.Workspace, ref.Job))
	if r.err != nil {
		return nil, r.err
	}
	return &jobs.Detail{Summary: jobs.Summary{Ref: ref, Status: "failed"}, Builds: []string{}, Steps: []jobs.StepDetail{}}, nil
}

func (r *recordingJobs) List(_ context.Context, f jobs.Ref) ([]jobs.Summary, error) {
	r.calls = append(r.calls, fmt.Sprintf("list %s/%s/%s", f.Agent, f.Workspace, f.Job))
	return nil, r.err
}
func (r *recordingJobs) Show(_ context.Context, ref jobs.Ref) (*jobs.Detail, error) {
	return r.call("show", ref)
}
func (r *recordingJobs) Retry(_ context.Context, ref jobs.Ref) (*jobs.Detail, error) {
	return r.call("retry", ref)
}
func (r *recordingJobs) Cancel(_ context.Context, ref jobs.Ref) (*jobs.Detail, error) {
	return r.call("cancel", ref)
}

// TestJobsRoutes: what the jobs routes answer: the key first, then the method, the job named,
// and each control's outcome; a controller without background work has none.
func TestJobsRoutes(t *testing.T) {
	const key = "local-dev"
	for _, c := range []struct {
		name, method, path, key, body string
		err                           error
		status                        int
		want, call                    string
	}{
		{"list", "GET", "/manage/api/jobs", key, "", nil, 200, `{"jobs":[],"workspace":"local"}`, "list /local/"},
		{"list of an agent", "GET", "/manage/api/jobs?agent=a", key, "", nil, 200, `{"jobs":[],"workspace":"local"}`, "list a/local/"},
		{"show", "GET", "/manage/api/jobs/job?agent=a&job=j", key, "", nil, 200,
			`{"agent":"a","workspace":"local","job":"j","work":"","status":"failed","created":"0001-01-01T00:00:00Z","deadline":"0001-01-01T00:00:00Z","deliveries":0,"builds":[],"steps":[],"job_state":null}`, "show a/local/j"},
		{"retry", "POST", "/manage/api/jobs/retry", key, `{"agent":"a","job":"j"}`, nil, 200, `{"agent":"a"…`, "retry a/local/j"},
		{"cancel", "POST", "/manage/api/jobs/cancel", key, `{"agent":"a","job":"j"}`, nil, 200, `{"agent":"a"…`, "cancel a/local/j"},
		{"no key", "GET", "/manage/api/jobs", "", "", nil, 401, `{"detail":"The jobs routes need the controller's API key in X-API-Key"}`, ""},
		{"wrong key", "POST", "/manage/api/jobs/retry", "local-deV", `{"agent":"a","job":"j"}`, nil, 401, `{"detail":"The jobs routes need the controller's API key in X-API-Key"}`, ""},
		{"GET retry", "GET", "/manage/api/jobs/retry", key, "", nil, 405, `{"detail":"Method Not Allowed"}`, ""},
		{"POST list", "POST", "/manage/api/jobs", key, "", nil, 405, `{"detail":"Method Not Allowed"}`, ""},
		{"unknown", "GET", "/manage/api/jobs/nope", key, "", nil, 404, `{"detail":"Not Found"}`, ""},
		{"no job", "GET", "/manage/api/jobs/job?agent=a", key, "", nil, 400, `{"detail":"Name the job's agent and id (agent, job)"}`, ""},
		{"blank agent", "POST", "/manage/api/jobs/cancel", key, `{"agent":" ","job":"j"}`, nil, 400, `{"detail":"Name the job's agent and id (agent, job)"}`, ""},
		{"not JSON", "POST", "/manage/api/jobs/cancel", key, `agent=a&job=j`, nil, 400, `{"detail":"The body must be {\"agent\": \"\u003cslug\u003e\", \"job\": \"\u003cjob id\u003e\"}"}`, ""},
		{"unknown member", "POST", "/manage/api/jobs/cancel", key, `{"agent":"a","job":"j","workspace":"other"}`, nil, 400, `{"detail":"The body must be…`, ""},
		{"two objects", "POST", "/manage/api/jobs/cancel", key, `{"agent":"a","job":"j"}{}`, nil, 400, `{"detail":"The body must be…`, ""},
		{"too long", "POST", "/manage/api/jobs/cancel", key, `{"agent":"a","job":"` + strings.Repeat("j", 5000) + `"}`, nil, 400, `{"detail":"The body must be…`, ""},
		{"unknown job", "GET", "/manage/api/jobs/job?agent=a&job=j", key, "", fmt.Errorf("%w: job j", jobs.ErrNoJob), 404,
			`{"detail":"jobs: no background job with this id in this workspace: job j"}`, "show a/local/j"},
		{"not retryable", "POST", "/manage/api/jobs/retry", key, `{"agent":"a","job":"j"}`, fmt.Errorf("%w: job j has completed", jobs.ErrNotRetryable), 409,
			`{"detail":"jobs: only a failed or stopped job can be retried: job j has completed"}`, "retry a/local/j"},
		{"ended", "POST", "/manage/api/jobs/cancel", key, `{"agent":"a","job":"j"}`, jobs.ErrEnded, 409, `{"detail":"jobs: the job has ended: there is nothing to cancel"}`, "cancel a/local/j"},
		{"records gone", "POST", "/manage/api/jobs/retry", key, `{"agent":"a","job":"j"}`, jobs.ErrRecordsGone, 409, `{"detail":"jobs: records of the job's completed steps…`, "retry a/local/j"},
		{"store down", "GET", "/manage/api/jobs", key, "", errors.New("redis: dial tcp: connection refused (password hunter2)"), 500,
			`{"detail":"Internal Server Error (see the controller's log)"}`, "list /local/"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rj := &recordingJobs{err: c.err}
			h := workbench.New(controllerStub, workbench.Config{APIKey: key, Log: quiet, Jobs: rj, APIKeyCheck: workbench.KeyCheck(key)})
			req := keyed(c.method, c.path, c.key, strings.NewReader(c.body))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			body := strings.TrimSpace(w.Body.String())
			if w.Code != c.status || !matches(body, c.want) {
				t.Errorf("%s %s: %d %s\nwant %d %s", c.method, c.path, w.Code, body, c.status, c.want)
			}
			if got := strings.Join(rj.calls, ","); got != c.call {
				t.Errorf("calls %q, want %q", got, c.call)
			}
			if w.Header().Get("Content-Security-Policy") != workbench.ContentSecurityPolicy {
				t.Error("no Content-Security-Policy")
			}
		})
	}
	// A controller without background work: no jobs, and the page hides the link.
	h := workbench.New(controllerStub, workbench.Config{APIKey: key, Log: quiet, APIKeyCheck: workbench.KeyCheck(key)})
	req := keyed("GET", "/manage/api/jobs", key, nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != 404 || !strings.Contains(w.Body.String(), "No agent of this controller defines background work") {
		t.Errorf("without work: %d %s", w.Code, w.Body)
	}
	if got := serve(h, request{"GET", "/manage/api/config", "", ""}).Body.String(); strings.Contains(got, "jobs") {
		t.Errorf("settings without work: %s", got)
	}
	h = workbench.New(controllerStub, workbench.Config{APIKey: key, Log: quiet, Jobs: &recordingJobs{}, APIKeyCheck: workbench.KeyCheck(key)})
	if got := serve(h, request{"GET", "/manage/api/config", "", ""}).Body.String(); got != `{"api_key":"local-dev","workspace_authorization":"bypassed","jobs":true}` {
		t.Errorf("settings with work: %s", got)
	}
	// A workbench without a key check refuses every call, whatever key it gets.
	h = workbench.New(controllerStub, workbench.Config{APIKey: key, Log: quiet, Jobs: &recordingJobs{}})
	req = keyed("GET", "/manage/api/jobs", key, nil)
	w = httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != 401 {
		t.Errorf("without a key check: %d", w.Code)
	}
	// From another machine: refused before anything else.
	if got := serve(h, request{"GET", "/manage/api/jobs", "192.0.2.7:40000", ""}); got.Code != 403 {
		t.Errorf("from another machine: %d", got.Code)
	}
}

// keyed is a request from the machine itself, in origin form as a browser sends it (local mode
// refuses a target that names a host), with key in X-API-Key unless it is empty.
func keyed(method, path, key string, body io.Reader) *http.Request {
	req := httptest.NewRequest(method, path, body)
	req.Host, req.RemoteAddr = "127.0.0.1:8000", "127.0.0.1:50000"
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	return req
}

// matches reports whether got is want, or starts with it when want ends with "…".
func matches(got, want string) bool {
	if p, ok := strings.CutSuffix(want, "…"); ok {
		return strings.HasPrefix(got, p)
	}
	return got == want
}

// FuzzJobsBody: whatever body a retry or a cancel gets, the route answers 200 with the control
// run on exactly the job the body names, or 400 with nothing run; it never fails otherwise.
func FuzzJobsBody(f *testing.F) {
	for _, s := range []string{`{"agent":"a","job":"j"}`, `{"agent":"a"}`, `{"agent":"a","job":"j","x":1}`, `[]`, `{"agent":"a","job":"j"} {}`, `{"agent":1,"job":"j"}`, ``, `{"agent":"\u0000","job":"%2F"}`} {
		f.Add([]byte(s))
	}
	const key = "local-dev"
	f.Fuzz(func(t *testing.T, body []byte) {
		rj := &recordingJobs{}
		h := workbench.New(controllerStub, workbench.Config{APIKey: key, Log: quiet, Jobs: rj, APIKeyCheck: workbench.KeyCheck(key)})
		req := keyed("POST", "/manage/api/jobs/cancel", key, strings.NewReader(string(body)))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		switch w.Code {
		case 200:
			var in struct{ Agent, Job string }
			dec := json.NewDecoder(strings.NewReader(string(body)))
			if err := dec.Decode(&in); err != nil || len(rj.calls) != 1 || rj.calls[0] != "cancel "+in.Agent+"/local/"+in.Job {
				t.Fatalf("200 for %q: calls %q (decoded %+v, %v)", body, rj.calls, in, err)
			}
		case 400:
			if len(rj.calls) != 0 {
				t.Fatalf("400 for %q, yet it ran %q", body, rj.calls)
			}
		default:
			t.Fatalf("%d for %q: %s", w.Code, body, w.Body)
		}
	})
}
