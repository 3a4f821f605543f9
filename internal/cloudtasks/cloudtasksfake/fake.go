// Package cloudtasksfake is an in-process stand-in for the Cloud Tasks API v2 REST surface that
// svz calls (tasks.create; queues get, create, patch, delete, getIamPolicy, setIamPolicy), for
// tests: no emulator exists for it. It checks what the real API checks where svz could get it
// wrong (resource names, request members, an existing queue, a POST HTTP target with an OIDC
// token of an existing account, the policy's etag), and that the token names its audience (the
// API would default it; svz always names it), keeps the tasks it is given instead of
// dispatching them, and answers errors in the API's JSON shape.
package cloudtasksfake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supervaize/svz/internal/cloudtasks"
)

// Task is a task as created: its queue and the HTTP request Cloud Tasks would send.
type Task struct {
	Queue            string
	URL              string
	Method           string
	Headers          map[string]string
	Body             []byte
	OIDC             *cloudtasks.OIDCToken
	ScheduleTime     time.Time // zero: at once
	DispatchDeadline string
	// Authorization is the header of the createTask call (the caller's access token).
	Authorization string
}

// Fake is the API's state.
type Fake struct {
	// AccountExists, when set, says whether a service account exists (a task's OIDC account must).
	AccountExists func(email string) bool

	mu       sync.Mutex
	queues   map[string]*cloudtasks.Queue
	policies map[string]*cloudtasks.Policy
	etags    map[string]int
	tasks    []Task
	calls    []string
}

// New returns an empty fake; serve its Handler.
func New() *Fake {
	return &Fake{queues: map[string]*cloudtasks.Queue{}, policies: map[string]*cloudtasks.Policy{}, etags: map[string]int{}}
}

// Start serves a new fake on loopback until the test ends and returns it with its URL.
func Start(t testing.TB) (*Fake, string) {
	f := New()
	srv := httptest.NewServer(f.Handler())
	t.Cleanup(srv.Close)
	return f, srv.URL
}

// Tasks returns the tasks created so far, in order.
func (f *Fake) Tasks() []Task {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.tasks)
}

// Calls returns the API methods called so far ("tasks.create", "queues.get"...), in order.
func (f *Fake) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// Queue returns a copy of a queue, nil when absent.
func (f *Fake) Queue(name string) *cloudtasks.Queue {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.queues[name]
	if q == nil {
		return nil
	}
	return clone(q)
}

// AddQueue adds a queue as someone else would have created it.
func (f *Fake) AddQueue(q cloudtasks.Queue) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q.State = "RUNNING"
	f.queues[q.Name] = &q
}

// Policy returns a copy of a queue's IAM policy (empty when none was set).
func (f *Fake) Policy(name string) cloudtasks.Policy {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.policy(name)
}

func (f *Fake) policy(name string) cloudtasks.Policy {
	p := cloudtasks.Policy{Version: 1, Etag: "BwX" + strconv.Itoa(f.etags[name])}
	if old := f.policies[name]; old != nil {
		for _, b := range old.Bindings {
			p.Bindings = append(p.Bindings, cloudtasks.Binding{Role: b.Role, Members: slices.Clone(b.Members)})
		}
	}
	return p
}

func clone(q *cloudtasks.Queue) *cloudtasks.Queue {
	b, _ := json.Marshal(q)
	var c cloudtasks.Queue
	_ = json.Unmarshal(b, &c)
	return &c
}

var (
	locationRE = regexp.MustCompile(`^projects/[^/]+/locations/[^/]+$`)
	queueRE    = regexp.MustCompile(`^projects/[^/]+/locations/[^/]+/queues/[A-Za-z0-9-]{1,100}$`)
)

// Handler serves the API.
func (f *Fake) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path, ok := strings.CutPrefix(r.URL.Path, "/v2/")
		if !ok {
			apiError(w, http.StatusNotFound, "NOT_FOUND", "unknown path")
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		body, _ := io.ReadAll(r.Body)
		switch {
		case r.Method == http.MethodPost && strings.HasSuffix(path, "/tasks") && queueRE.MatchString(strings.TrimSuffix(path, "/tasks")):
			f.calls = append(f.calls, "tasks.create")
			f.createTask(w, r, strings.TrimSuffix(path, "/tasks"), body)
		case r.Method == http.MethodPost && strings.HasSuffix(path, ":getIamPolicy"):
			f.calls = append(f.calls, "queues.getIamPolicy")
			name := strings.TrimSuffix(path, ":getIamPolicy")
			if f.queues[name] == nil {
				apiError(w, http.StatusNotFound, "NOT_FOUND", "Requested entity was not found.")
				return
			}
			writeJSON(w, f.policy(name))
		case r.Method == http.MethodPost && strings.HasSuffix(path, ":setIamPolicy"):
			f.calls = append(f.calls, "queues.setIamPolicy")
			f.setPolicy(w, strings.TrimSuffix(path, ":setIamPolicy"), body)
		case r.Method == http.MethodPost && strings.HasSuffix(path, "/queues") && locationRE.MatchString(strings.TrimSuffix(path, "/queues")):
			f.calls = append(f.calls, "queues.create")
			f.createQueue(w, strings.TrimSuffix(path, "/queues"), body)
		case r.Method == http.MethodGet && queueRE.MatchString(path):
			f.calls = append(f.calls, "queues.get")
			if q := f.queues[path]; q != nil {
				writeJSON(w, q)
				return
			}
			apiError(w, http.StatusNotFound, "NOT_FOUND", "Requested entity was not found.")
		case r.Method == http.MethodPatch && queueRE.MatchString(path):
			f.calls = append(f.calls, "queues.patch")
			f.patchQueue(w, r, path, body)
		case r.Method == http.MethodDelete && queueRE.MatchString(path):
			f.calls = append(f.calls, "queues.delete")
			if f.queues[path] == nil {
				apiError(w, http.StatusNotFound, "NOT_FOUND", "Requested entity was not found.")
				return
			}
			delete(f.queues, path)
			delete(f.policies, path)
			f.tasks = slices.DeleteFunc(f.tasks, func(t Task) bool { return t.Queue == path })
			writeJSON(w, struct{}{})
		default:
			apiError(w, http.StatusNotFound, "NOT_FOUND", "unknown method "+r.Method+" "+path)
		}
	})
}

func strict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the object")
	}
	return nil
}

func (f *Fake) createTask(w http.ResponseWriter, r *http.Request, queue string, body []byte) {
	var req struct {
		Task struct {
			Name        string `json:"name"`
			HTTPRequest *struct {
				URL        string                `json:"url"`
				HTTPMethod string                `json:"httpMethod"`
				Headers    map[string]string     `json:"headers"`
				Body       []byte                `json:"body"`
				OIDCToken  *cloudtasks.OIDCToken `json:"oidcToken"`
			} `json:"httpRequest"`
			ScheduleTime     string `json:"scheduleTime"`
			DispatchDeadline string `json:"dispatchDeadline"`
		} `json:"task"`
		ResponseView string `json:"responseView"`
	}
	if err := strict(body, &req); err != nil {
		apiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid JSON payload received. "+err.Error())
		return
	}
	if f.queues[queue] == nil {
		apiError(w, http.StatusNotFound, "NOT_FOUND", "Requested entity was not found.")
		return
	}
	h := req.Task.HTTPRequest
	switch {
	case h == nil:
		apiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Task.http_request is required")
		return
	case !strings.HasPrefix(h.URL, "https://") && !strings.HasPrefix(h.URL, "http://"):
		apiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "HttpRequest.url must start with 'http://' or 'https://'")
		return
	case h.HTTPMethod != "POST":
		apiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "svz sends POST tasks")
		return
	case h.OIDCToken == nil || h.OIDCToken.ServiceAccountEmail == "":
		apiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "svz tasks carry an OIDC token")
		return
	case h.OIDCToken.Audience == "":
		// The API would default it to the URL; svz names it (the service's public URL, which the
		// delivery's verifier expects), so a task without it is svz's bug.
		apiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "svz tasks name their OIDC token's audience")
		return
	case f.AccountExists != nil && !f.AccountExists(h.OIDCToken.ServiceAccountEmail):
		apiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Service account "+h.OIDCToken.ServiceAccountEmail+" does not exist.")
		return
	}
	t := Task{Queue: queue, URL: h.URL, Method: h.HTTPMethod, Headers: h.Headers, Body: h.Body, OIDC: h.OIDCToken,
		DispatchDeadline: req.Task.DispatchDeadline, Authorization: r.Header.Get("Authorization")}
	if req.Task.ScheduleTime != "" {
		st, err := time.Parse(time.RFC3339Nano, req.Task.ScheduleTime)
		if err != nil {
			apiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid value at 'task.schedule_time'")
			return
		}
		t.ScheduleTime = st
	}
	if d := req.Task.DispatchDeadline; d != "" {
		n, err := strconv.Atoi(strings.TrimSuffix(d, "s"))
		if err != nil || !strings.HasSuffix(d, "s") || n < 15 || n > 1800 {
			apiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "dispatch_deadline must be between 15s and 1800s")
			return
		}
	}
	f.tasks = append(f.tasks, t)
	writeJSON(w, map[string]any{"name": fmt.Sprintf("%s/tasks/%d", queue, len(f.tasks))})
}

func (f *Fake) createQueue(w http.ResponseWriter, parent string, body []byte) {
	var q cloudtasks.Queue
	if err := strict(body, &q); err != nil {
		apiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid JSON payload received. "+err.Error())
		return
	}
	if !queueRE.MatchString(q.Name) || !strings.HasPrefix(q.Name, parent+"/queues/") {
		apiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Queue name must be "+parent+"/queues/QUEUE_ID")
		return
	}
	if f.queues[q.Name] != nil {
		apiError(w, http.StatusConflict, "ALREADY_EXISTS", "Queue already exists")
		return
	}
	if err := checkRetry(q.RetryConfig); err != nil {
		apiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", err.Error())
		return
	}
	q.State = "RUNNING"
	f.queues[q.Name] = &q
	writeJSON(w, q)
}

func (f *Fake) patchQueue(w http.ResponseWriter, r *http.Request, name string, body []byte) {
	old := f.queues[name]
	if old == nil {
		apiError(w, http.StatusNotFound, "NOT_FOUND", "Requested entity was not found.")
		return
	}
	var q cloudtasks.Queue
	if err := strict(body, &q); err != nil || q.Name != name {
		apiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid queue")
		return
	}
	if err := checkRetry(q.RetryConfig); err != nil {
		apiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", err.Error())
		return
	}
	for _, field := range strings.Split(r.URL.Query().Get("updateMask"), ",") {
		switch field {
		case "retryConfig":
			old.RetryConfig = q.RetryConfig
		case "httpTarget":
			old.HTTPTarget = q.HTTPTarget
		default:
			apiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "svz updates retryConfig and httpTarget only, not "+strconv.Quote(field))
			return
		}
	}
	writeJSON(w, old)
}

func checkRetry(rc *cloudtasks.RetryConfig) error {
	if rc == nil {
		return nil
	}
	for _, d := range []string{rc.MinBackoff, rc.MaxBackoff} {
		if d != "" {
			if _, err := time.ParseDuration(d); err != nil || !strings.HasSuffix(d, "s") {
				return fmt.Errorf("invalid duration %q", d)
			}
		}
	}
	if rc.MaxAttempts < -1 || rc.MaxDoublings < 0 {
		return errors.New("invalid retry config")
	}
	return nil
}

func (f *Fake) setPolicy(w http.ResponseWriter, name string, body []byte) {
	if f.queues[name] == nil {
		apiError(w, http.StatusNotFound, "NOT_FOUND", "Requested entity was not found.")
		return
	}
	var req struct {
		Policy cloudtasks.Policy `json:"policy"`
	}
	if err := strict(body, &req); err != nil {
		apiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid JSON payload received. "+err.Error())
		return
	}
	if req.Policy.Etag != "" && req.Policy.Etag != "BwX"+strconv.Itoa(f.etags[name]) {
		apiError(w, http.StatusConflict, "ABORTED", "There were concurrent policy changes.")
		return
	}
	for _, b := range req.Policy.Bindings {
		for _, m := range b.Members {
			email, ok := strings.CutPrefix(m, "serviceAccount:")
			if ok && f.AccountExists != nil && !f.AccountExists(email) {
				apiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Service account "+email+" does not exist.")
				return
			}
		}
	}
	p := req.Policy
	f.policies[name] = &p
	f.etags[name]++
	writeJSON(w, f.policy(name))
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func apiError(w http.ResponseWriter, code int, status, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}})
}
