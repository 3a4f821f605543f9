package cloudrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/telemetry"
	"github.com/supervaize/svz/internal/cloudtasks"
	"github.com/supervaize/svz/internal/envvar"
)

// Background work on Cloud Run: a job's task is a Cloud Tasks task whose HTTP target is the
// service's own URL + TaskPath, authenticated by an OIDC token of a dedicated invoker service
// account; the service runs the task when Cloud Tasks delivers it, within a request, so that
// Cloud Run gives it CPU. svz deploy creates the queue, the account and the bindings.

// Settings.
const (
	// EnvJobsQueue is the queue's full name, projects/P/locations/L/queues/Q.
	EnvJobsQueue = "SUPERVAIZER_JOBS_QUEUE"
	// EnvJobsInvoker is the service account whose OIDC token authenticates the deliveries.
	EnvJobsInvoker = "SUPERVAIZER_JOBS_INVOKER"
	// EnvJobsMaxAttempts is the queue's maxAttempts: the delivery that fails at the last one
	// marks the job failed, as Cloud Tasks then drops the task.
	EnvJobsMaxAttempts = "SUPERVAIZER_JOBS_MAX_ATTEMPTS"
	// EnvPublicURL is the service's URL: the tasks' target and the tokens' audience.
	EnvPublicURL = "SUPERVAIZER_PUBLIC_URL"
	// EnvTasksEndpoint replaces the Cloud Tasks API endpoint (tests).
	EnvTasksEndpoint = "SUPERVAIZER_CLOUD_TASKS_ENDPOINT"
	// EnvOIDCJWKSURL replaces Google's OIDC key set URL (tests).
	EnvOIDCJWKSURL = "SUPERVAIZER_JOBS_OIDC_JWKS_URL"
	// EnvMetadataHost is the metadata server's host[:port], as Google's libraries read it.
	EnvMetadataHost = "GCE_METADATA_HOST"
)

// TaskPath is where Cloud Tasks delivers a job's task (POST, with the invoker's OIDC token).
const TaskPath = "/.svz/tasks"

// Task delivery bounds.
const (
	// DefaultMaxAttempts is the queue's maxAttempts as svz deploy creates it.
	DefaultMaxAttempts = 10
	// TaskDeadline is the tasks' dispatchDeadline, Cloud Tasks' longest: the Cloud Run request
	// timeout (CLOUD_RUN_TIMEOUT_SECONDS, 5 minutes by default) usually ends a delivery first,
	// and a job hands itself on to a fresh delivery before either.
	TaskDeadline = 30 * time.Minute
	// maxTaskBody bounds a delivery's body: a message is a reference of a few hundred bytes.
	maxTaskBody = jobs.MaxMessageSize
)

// Jobs is the Cloud Tasks queue of a Cloud Run service: the Dispatcher of its background work,
// and the verifier of the deliveries (Handler).
type Jobs struct {
	queue, invoker, url string
	maxAttempts         int
	client              *cloudtasks.Client
	verifier            *grant.OIDCVerifier // nil without the URL: every delivery is refused
	log                 *slog.Logger
	now                 func() time.Time
	tel                 telemetry.Providers
}

// WithTelemetry sends each task with the trace context of its dispatch in its headers
// (traceparent and tracestate by default, written by p's propagator), read back when Cloud Tasks
// delivers it so that the delivery joins the job's trace; it returns j.
func (j *Jobs) WithTelemetry(p telemetry.Providers) *Jobs {
	j.tel = p
	return j
}

var _ jobs.Dispatcher = (*Jobs)(nil)

// JobsFromEnv reads the settings of the Cloud Tasks queue. SUPERVAIZER_JOBS_QUEUE and
// SUPERVAIZER_JOBS_INVOKER are required; without SUPERVAIZER_PUBLIC_URL (the first revision a
// deployment creates, before it knows its URL) the controller starts, logs why, and fails each
// dispatch and refuses each delivery naming the variable until a revision has it.
func JobsFromEnv(getenv func(string) string, log *slog.Logger) (*Jobs, error) {
	if log == nil {
		log = slog.Default()
	}
	j := &Jobs{log: log, now: time.Now}
	var errs []error
	j.queue = strings.TrimSpace(getenv(EnvJobsQueue))
	if j.queue == "" {
		errs = append(errs, fmt.Errorf("%s is not set: background work on Cloud Run needs its Cloud Tasks queue, projects/PROJECT/locations/LOCATION/queues/QUEUE (svz deploy creates it and sets this)", EnvJobsQueue))
	} else if _, _, _, err := cloudtasks.ParseQueue(j.queue); err != nil {
		errs = append(errs, fmt.Errorf("%s=%q: %w", EnvJobsQueue, j.queue, err))
	}
	j.invoker = strings.TrimSpace(getenv(EnvJobsInvoker))
	if !validAccount(j.invoker) {
		errs = append(errs, fmt.Errorf("%s must be the email of the service account whose OIDC token Cloud Tasks sends, such as svz-agent-tasks@PROJECT.iam.gserviceaccount.com (svz deploy creates it and sets this), got %q", EnvJobsInvoker, j.invoker))
	}
	n, err := envvar.Int(getenv, EnvJobsMaxAttempts, DefaultMaxAttempts, -1, 1000)
	if err != nil {
		errs = append(errs, fmt.Errorf("%w (the queue's maxAttempts; -1 is unlimited)", err))
	}
	j.maxAttempts = int(max(n, 0))
	endpoint, err := loopbackOrHTTPS(getenv, EnvTasksEndpoint, cloudtasks.DefaultEndpoint)
	if err != nil {
		errs = append(errs, err)
	}
	jwks, err := loopbackOrHTTPS(getenv, EnvOIDCJWKSURL, grant.GoogleJWKSURL)
	if err != nil {
		errs = append(errs, err)
	}
	metadata := strings.TrimSpace(getenv(EnvMetadataHost))
	if metadata == "" {
		metadata = cloudtasks.MetadataHost
	} else if strings.ContainsAny(metadata, "/?#@ ") {
		errs = append(errs, fmt.Errorf("%s must be a host or host:port, got %q", EnvMetadataHost, metadata))
	}
	if u := strings.TrimRight(strings.TrimSpace(getenv(EnvPublicURL)), "/"); u != "" {
		j.url = u
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	j.client = &cloudtasks.Client{Endpoint: endpoint, HTTP: &http.Client{Timeout: 30 * time.Second},
		Token: cloudtasks.MetadataToken(metadata, nil)}
	if j.url == "" {
		log.Warn(EnvPublicURL + " is not set: background work cannot be dispatched nor delivered until it is (svz deploy sets it once the service has its URL)")
		return j, nil
	}
	if j.verifier, err = grant.NewOIDCVerifier(grant.OIDCConfig{Audience: j.url, Email: j.invoker, JWKSURL: jwks, Log: log}); err != nil {
		return nil, err
	}
	return j, nil
}

// validAccount accepts a service account email: name@domain, no spaces.
func validAccount(s string) bool {
	name, domain, _ := strings.Cut(s, "@") // no @: no domain, no dot
	return name != "" && strings.Contains(domain, ".") && !strings.ContainsAny(s, " \t/\"'<>,;")
}

// loopbackOrHTTPS reads a URL setting: https, or plain http to a loopback address.
func loopbackOrHTTPS(getenv func(string) string, name, def string) (string, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return def, nil
	}
	u, err := url.Parse(v)
	if err == nil && u.User == nil && u.Host != "" {
		if ip := net.ParseIP(u.Hostname()); u.Scheme == "https" || u.Scheme == "http" && ip.IsLoopback() {
			return strings.TrimRight(v, "/"), nil
		}
	}
	return "", fmt.Errorf("%s must be an https URL (plain http only to a loopback address such as 127.0.0.1)", name)
}

// MaxScheduleDelay is the furthest in the future Cloud Tasks schedules a task (30 days).
const MaxScheduleDelay = 30 * 24 * time.Hour

// MaxDelay implements jobs.DelayLimit: core/jobs hands a longer delay on.
func (j *Jobs) MaxDelay() time.Duration { return MaxScheduleDelay }

var _ jobs.DelayLimit = (*Jobs)(nil)

// Dispatch creates the task of m, for delivery after delay.
func (j *Jobs) Dispatch(ctx context.Context, m jobs.Message, delay time.Duration) error {
	if j.url == "" {
		return fmt.Errorf("cloudrun: %s is not set: the task's target is unknown (svz deploy sets it; or set it to the service's URL)", EnvPublicURL)
	}
	headers := map[string]string{"Content-Type": "application/json"}
	for k, v := range j.tel.Inject(ctx) {
		headers[k] = v
	}
	t := cloudtasks.Task{URL: j.url + TaskPath, Body: m.Encode(), Headers: headers,
		OIDCAccount: j.invoker, Audience: j.url, Deadline: TaskDeadline}
	if delay > 0 {
		t.Schedule = j.now().Add(delay)
	}
	if err := j.client.CreateTask(ctx, j.queue, t); err != nil {
		return fmt.Errorf("cloudrun: create the task of job %q: %w", m.Job, err)
	}
	return nil
}

// UseToken makes the queue's Cloud Tasks calls with the access tokens of token instead of the
// metadata server's: on an operator's machine (svz jobs retry), Application Default Credentials.
func (j *Jobs) UseToken(token func(ctx context.Context) (string, error)) { j.client.Token = token }

// Deliverer runs a task's delivery: the controller's *jobs.Service.
type Deliverer interface {
	Deliver(ctx context.Context, m jobs.Message, d jobs.Delivery) error
}

// Handler serves TaskPath with svc's deliveries, and everything else with next. A delivery is
// served only with a valid OIDC token of the invoker account for the service's URL, in a single
// Authorization header; any other request is answered 401 and never reaches the job service. A
// delivery's answer tells Cloud Tasks what to do: 2xx done (finished, handed on, or a message to
// drop), 503 deliver it again later (with the queue's backoff).
func (j *Jobs) Handler(next http.Handler, svc Deliverer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != TaskPath {
			next.ServeHTTP(w, r)
			return
		}
		ctx := r.Context()
		if j.verifier == nil {
			j.log.ErrorContext(ctx, "task delivery refused: "+EnvPublicURL+" is not set, so its token cannot be checked")
			answer(w, http.StatusServiceUnavailable, "unavailable")
			return
		}
		var auth string
		if vs := r.Header.Values("Authorization"); len(vs) == 1 {
			auth = vs[0] // two headers are ambiguous (which one did a proxy check?): refused as none
		}
		if err := j.verifier.VerifyAuthorization(ctx, auth); err != nil {
			var refused *grant.OIDCError
			if !errors.As(err, &refused) {
				j.log.ErrorContext(ctx, "task delivery not checked: the OIDC keys are unavailable", "error", err)
				answer(w, http.StatusServiceUnavailable, "unavailable")
				return
			}
			j.log.WarnContext(ctx, "task delivery refused", "reason", refused.Reason, "remote_addr", r.RemoteAddr)
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			answer(w, http.StatusUnauthorized, "unauthorized")
			return
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			answer(w, http.StatusMethodNotAllowed, "method not allowed")
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxTaskBody+1))
		if err != nil {
			answer(w, http.StatusServiceUnavailable, "unavailable")
			return
		}
		m, err := jobs.ReadMessage(body)
		if err != nil {
			// Authenticated, so from this service's own queue: a message no delivery can read
			// is dropped (acknowledged), not retried, with one short log line (a body longer than
			// maxTaskBody is read no further).
			j.log.ErrorContext(ctx, "task delivery with an unreadable message: dropped", jobs.Unreadable(body, err)...)
			answer(w, http.StatusOK, "dropped")
			return
		}
		d := jobs.Delivery{Deadline: j.now().Add(TaskDeadline), MaxReceives: j.maxAttempts}
		if dl, ok := ctx.Deadline(); ok && dl.Before(d.Deadline) {
			d.Deadline = dl
		}
		if n, err := strconv.Atoi(r.Header.Get("X-CloudTasks-TaskRetryCount")); err == nil && n >= 0 {
			d.Receive = n + 1
		}
		if err := svc.Deliver(j.tel.Propagation().Extract(ctx, propagation.HeaderCarrier(r.Header)), m, d); err != nil {
			level := slog.LevelWarn
			if errors.Is(err, jobs.ErrBusy) {
				level = slog.LevelInfo
			}
			j.log.Log(ctx, level, "task delivery to be retried", "job_id", m.Job, "receive", d.Receive, "error", err)
			answer(w, http.StatusServiceUnavailable, "retry")
			return
		}
		answer(w, http.StatusOK, "ok")
	})
}

func answer(w http.ResponseWriter, code int, status string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"status": status})
}
