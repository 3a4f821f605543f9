package workbench

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/supervaize/svz/core/jobs"
)

// The jobs page's routes: the operator controls of svz jobs (list, show, retry, cancel) over the
// local controller's background jobs, in the workspace the workbench acts in. Unlike the page's
// other routes they need the controller's API key (X-API-Key): they show the jobs' errors and
// change jobs, and a header a page of another origin cannot send (without the controller's
// consent, which CORS never gives) keeps such a page from posting to them.
const (
	jobsPath   = Path + "/api/jobs"
	jobPath    = jobsPath + "/job"
	retryPath  = jobsPath + "/retry"
	cancelPath = jobsPath + "/cancel"
)

// LocalWorkspace is the workspace the workbench's calls name (client.js's baseRequest), whose
// jobs the jobs page shows.
const LocalWorkspace = "local"

// Jobs are the operator controls of the controller's background jobs: its *jobs.Service.
type Jobs interface {
	List(ctx context.Context, f jobs.Ref) ([]jobs.Summary, error)
	Show(ctx context.Context, ref jobs.Ref) (*jobs.Detail, error)
	Retry(ctx context.Context, ref jobs.Ref) (*jobs.Detail, error)
	Cancel(ctx context.Context, ref jobs.Ref) (*jobs.Detail, error)
}

var _ Jobs = (*jobs.Service)(nil)

// maxJobBody bounds the body of a retry or a cancel: an agent's slug and a job id.
const maxJobBody = 4096

// serveJobs answers the jobs routes.
func (h *handler) serveJobs(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	method := http.MethodGet
	if path == retryPath || path == cancelPath {
		method = http.MethodPost
	}
	switch {
	case path != jobsPath && path != jobPath && path != retryPath && path != cancelPath:
		writeDetail(w, http.StatusNotFound, "Not Found")
		return
	case !allow(w, r, method):
		return
	case !h.keyOK(r.Header.Get("X-API-Key")):
		writeDetail(w, http.StatusUnauthorized, "The jobs routes need the controller's API key in X-API-Key")
		return
	case h.cfg.Jobs == nil:
		writeDetail(w, http.StatusNotFound, "No agent of this controller defines background work (jobs.Define): there are no jobs")
		return
	}
	ctx := r.Context()
	if path == jobsPath {
		l, err := h.cfg.Jobs.List(ctx, jobs.Ref{Agent: r.URL.Query().Get("agent"), Workspace: LocalWorkspace})
		if err != nil {
			h.jobsError(w, err)
			return
		}
		if l == nil {
			l = []jobs.Summary{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"workspace": LocalWorkspace, "jobs": l})
		return
	}
	ref, msg := jobRef(r)
	if msg != "" {
		writeDetail(w, http.StatusBadRequest, msg)
		return
	}
	do := map[string]func(context.Context, jobs.Ref) (*jobs.Detail, error){jobPath: h.cfg.Jobs.Show, retryPath: h.cfg.Jobs.Retry, cancelPath: h.cfg.Jobs.Cancel}[path]
	d, err := do(ctx, ref)
	if err != nil {
		h.jobsError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// jobRef reads the job a request names: the query's agent and job (GET), or a JSON body
// {"agent", "job"} (POST); a message saying what is wrong otherwise.
func jobRef(r *http.Request) (jobs.Ref, string) {
	ref := jobs.Ref{Workspace: LocalWorkspace}
	if r.Method == http.MethodPost {
		var in struct {
			Agent string `json:"agent"`
			Job   string `json:"job"`
		}
		dec := json.NewDecoder(io.LimitReader(r.Body, maxJobBody+1))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil || dec.More() {
			return ref, `The body must be {"agent": "<slug>", "job": "<job id>"}`
		}
		ref.Agent, ref.Job = in.Agent, in.Job
	} else {
		ref.Agent, ref.Job = r.URL.Query().Get("agent"), r.URL.Query().Get("job")
	}
	if strings.TrimSpace(ref.Agent) == "" || strings.TrimSpace(ref.Job) == "" {
		return ref, "Name the job's agent and id (agent, job)"
	}
	return ref, ""
}

// jobsError answers an operator control's error: a job that does not exist, or that cannot be
// retried or cancelled now, with its message; anything else as the controller's own failures are.
func (h *handler) jobsError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, jobs.ErrNoJob):
		writeDetail(w, http.StatusNotFound, err.Error())
	case errors.Is(err, jobs.ErrNotRetryable), errors.Is(err, jobs.ErrEnded), errors.Is(err, jobs.ErrRecordsGone):
		writeDetail(w, http.StatusConflict, err.Error())
	default:
		h.cfg.Log.Error("workbench jobs route failed", "error", err)
		writeDetail(w, http.StatusInternalServerError, "Internal Server Error (see the controller's log)")
	}
}

// keyOK compares key with the controller's in constant time.
func (h *handler) keyOK(key string) bool {
	return h.cfg.APIKeyCheck != nil && key != "" && h.cfg.APIKeyCheck(key)
}

// KeyCheck returns a check of the controller's API key, in constant time (Config.APIKeyCheck).
func KeyCheck(apiKey string) func(string) bool {
	return func(k string) bool { return subtle.ConstantTimeCompare([]byte(k), []byte(apiKey)) == 1 }
}
