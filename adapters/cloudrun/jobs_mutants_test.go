package cloudrun

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/supervaize/svz/adapters/internal/testkit"
	"github.com/supervaize/svz/core/grant/granttest"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/telemetry"
	"github.com/supervaize/svz/internal/cloudtasks"
)

// Tests of what scripts/mutants found unchecked in the adapter (statements deleted, conditions
// dropped; issue 30).

// TestServeDefaultPort: without PORT, Serve listens on DefaultPort (held here, so Serve reports
// it taken, naming it).
func TestServeDefaultPort(t *testing.T) {
	t.Setenv("PORT", "")
	t.Setenv("CLOUD_RUN_TIMEOUT_SECONDS", "")
	if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", DefaultPort)); err == nil {
		defer ln.Close()
	} // else another process holds it: Serve finds it taken the same
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	log, _ := testkit.Logger()
	err := Serve(ctx, http.NotFoundHandler(), WithHost("127.0.0.1"), WithLogger(log))
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:"+DefaultPort) || !strings.Contains(err.Error(), "choose a free port with PORT") {
		t.Fatalf("Serve without a port, %s taken: %v", DefaultPort, err)
	}
}

// TestFrameworkFuncPanics: a handler's panic other than http.ErrAbortHandler reaches the
// framework as it was (the framework answers it); only the abort is swallowed.
func TestFrameworkFuncPanics(t *testing.T) {
	boom := errors.New("boom")
	defer func() {
		if v := recover(); v != boom {
			t.Fatalf("recovered %v, want the handler's own panic", v)
		}
	}()
	frameworkFunc(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(boom) }))(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	t.Fatal("the panic was swallowed")
}

// TestJobsFromEnvDefaults: a nil logger is the default one (the warning of a missing URL is
// logged, not a panic); an invoker that is no account is refused, naming the variable; the
// access token comes from the metadata server's default host.
func TestJobsFromEnvDefaults(t *testing.T) {
	const q = "projects/p-test1/locations/l/queues/q"
	if _, err := JobsFromEnv(envMap(map[string]string{EnvJobsQueue: q, EnvJobsInvoker: "inv@p-test1.iam.gserviceaccount.com"}), nil); err != nil {
		t.Fatalf("no URL, no logger: %v", err)
	}
	_, err := JobsFromEnv(envMap(map[string]string{EnvJobsQueue: q, EnvJobsInvoker: "inv"}), nil)
	if want := `SUPERVAIZER_JOBS_INVOKER must be the email of the service account whose OIDC token Cloud Tasks sends, such as svz-agent-tasks@PROJECT.iam.gserviceaccount.com (svz deploy creates it and sets this), got "inv"`; err == nil || err.Error() != want {
		t.Fatalf("an invoker that is no account:\n got %v\nwant %s", err, want)
	}
	j, err := JobsFromEnv(envMap(map[string]string{EnvJobsQueue: q, EnvJobsInvoker: "inv@p-test1.iam.gserviceaccount.com", EnvPublicURL: "https://svc.a.run.app"}), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	// A context already done: the token's request fails at once, naming its URL.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = j.Dispatch(ctx, jobs.Message{Agent: "a", Workspace: "w", Job: "j", Work: "x"}, 0)
	if want := `"http://` + cloudtasks.MetadataHost + `/computeMetadata/v1/instance/service-accounts/default/token"`; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("dispatch: %v, want the metadata server's token URL %s", err, want)
	}
}

// TestTaskRouteAnswers: a method other than POST is told the one allowed; a body that cannot be
// read is retried (503); a request deadline later than the task's leaves the task's; a retry
// count below zero is ignored; a busy job is logged at INFO, another failure at WARN; every
// answer is JSON, never cached.
func TestTaskRouteAnswers(t *testing.T) {
	google := granttest.NewGoogle("k1")
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(google.JWKS()) }))
	defer jwks.Close()
	const url, inv = "https://svc.a.run.app", "inv@p-test1.iam.gserviceaccount.com"
	log, logs := testkit.Logger()
	j, err := JobsFromEnv(envMap(map[string]string{EnvJobsQueue: "projects/p-test1/locations/l/queues/q", EnvJobsInvoker: inv,
		EnvPublicURL: url, EnvOIDCJWKSURL: jwks.URL}), log)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	j.now = func() time.Time { return now }
	rec := &recordDeliveries{}
	h := j.Handler(http.NotFoundHandler(), rec)
	tok := "Bearer " + google.Token(granttest.IDClaims(now, url, inv))
	const body = `{"agent":"a","workspace":"w","job":"j","work":"x","attempt":1}`
	serve := func(req *http.Request) *httptest.ResponseRecorder {
		req.Header.Set("Authorization", tok)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Header().Get("Content-Type") != "application/json" || w.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("answer headers %v", w.Header())
		}
		return w
	}
	if w := serve(httptest.NewRequest(http.MethodPut, TaskPath, strings.NewReader(body))); w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != http.MethodPost {
		t.Fatalf("PUT: %d, Allow %q", w.Code, w.Header().Get("Allow"))
	}
	broken := httptest.NewRequest(http.MethodPost, TaskPath, iotest.ErrReader(errors.New("connection reset")))
	if w := serve(broken); w.Code != http.StatusServiceUnavailable || strings.TrimSpace(w.Body.String()) != `{"status":"unavailable"}` || len(rec.got) != 0 {
		t.Fatalf("a body that cannot be read: %d %s, %d deliveries", w.Code, w.Body, len(rec.got))
	}
	late := httptest.NewRequest(http.MethodPost, TaskPath, strings.NewReader(body))
	ctx, cancel := context.WithDeadline(late.Context(), now.Add(TaskDeadline+time.Hour))
	defer cancel()
	late = late.WithContext(ctx)
	late.Header.Set("X-CloudTasks-TaskRetryCount", "-2")
	if w := serve(late); w.Code != http.StatusOK || len(rec.got) != 1 || rec.got[0] != (jobs.Delivery{Deadline: now.Add(TaskDeadline), MaxReceives: DefaultMaxAttempts}) {
		t.Fatalf("a later request deadline, retry count -2: %d, %+v", w.Code, rec.got)
	}
	for _, c := range []struct {
		err   error
		level string
	}{{jobs.ErrBusy, "INFO"}, {errors.New("store down"), "WARN"}} {
		rec.err = c.err
		if w := serve(httptest.NewRequest(http.MethodPost, TaskPath, strings.NewReader(body))); w.Code != http.StatusServiceUnavailable {
			t.Fatalf("%v: %d", c.err, w.Code)
		}
		if s := logs.String(); !strings.Contains(s, `"level":"`+c.level+`","msg":"task delivery to be retried"`) {
			t.Fatalf("%v: logs %s, want it at %s", c.err, s, c.level)
		}
	}
}

// TestTaskPropagator: WithTelemetry's propagator writes the task's headers (here W3C baggage
// beside the trace context), not the default trace context alone.
func TestTaskPropagator(t *testing.T) {
	j, fake := fakeQueueJobs(t)
	j.WithTelemetry(telemetry.Providers{Propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})})
	member, _ := baggage.NewMember("tenant", "w1")
	bag, _ := baggage.New(member)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	ctx := baggage.ContextWithBaggage(trace.ContextWithSpanContext(context.Background(), sc), bag)
	if err := j.Dispatch(ctx, jobs.Message{Agent: "a", Workspace: "w", Job: "j", Work: "x"}, 0); err != nil {
		t.Fatal(err)
	}
	if tasks := fake.Tasks(); len(tasks) != 1 || tasks[0].Headers["baggage"] != "tenant=w1" || tasks[0].Headers["traceparent"] == "" {
		t.Fatalf("tasks' headers %+v", tasks)
	}
}
