//go:build !svz_nootel

package cloudrun

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/supervaize/svz/core/grant/granttest"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/telemetry"
	"github.com/supervaize/svz/internal/cloudtasks"
	"github.com/supervaize/svz/internal/cloudtasks/cloudtasksfake"
)

// parentOf is a Deliverer that keeps the trace context of the delivery's context.
type parentOf struct{ sc trace.SpanContext }

func (p *parentOf) Deliver(ctx context.Context, _ jobs.Message, _ jobs.Delivery) error {
	p.sc = trace.SpanContextFromContext(ctx)
	return nil
}

// TestTaskTraceContext: a task is created with the trace context of its dispatch in its headers
// (traceparent), and its delivery on the task route runs with that context as its parent, as
// Cloud Tasks sends the headers back; without telemetry the task has no such header.
func TestTaskTraceContext(t *testing.T) {
	fake, endpoint := cloudtasksfake.Start(t)
	const q, url, inv = "projects/p-test1/locations/l/queues/q", "https://svc.a.run.app", "inv@p-test1.iam.gserviceaccount.com"
	fake.AddQueue(cloudtasks.Queue{Name: q})
	meta := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"access_token":"tok","expires_in":3600}`)
	}))
	defer meta.Close()
	google := granttest.NewGoogle("k1")
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(google.JWKS()) }))
	defer jwks.Close()
	env := map[string]string{EnvJobsQueue: q, EnvJobsInvoker: inv, EnvPublicURL: url, EnvTasksEndpoint: endpoint,
		EnvMetadataHost: strings.TrimPrefix(meta.URL, "http://"), EnvOIDCJWKSURL: jwks.URL}
	j, err := JobsFromEnv(envMap(env), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	m := jobs.Message{Agent: "a", Workspace: "w", Job: "j", Work: "x"}
	if err := j.Dispatch(context.Background(), m, 0); err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	j.WithTelemetry(telemetry.Providers{Tracers: tp, Propagator: propagation.TraceContext{}})
	ctx, span := tp.Tracer("test").Start(context.Background(), "job.start")
	if err := j.Dispatch(ctx, m, 0); err != nil {
		t.Fatal(err)
	}
	span.End()
	tasks := fake.Tasks()
	if len(tasks) != 2 || len(tasks[0].Headers) != 1 || len(tasks[1].Headers) != 2 {
		t.Fatalf("tasks' headers: %+v", tasks)
	}
	want := "00-" + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"
	if got := tasks[1].Headers["traceparent"]; got != want {
		t.Fatalf("traceparent %q, want %q", got, want)
	}
	got := &parentOf{}
	h := j.Handler(http.NotFoundHandler(), got)
	// Delivered as Cloud Tasks would: to the task's URL, with a token for the task's own OIDC
	// audience and account, which the route accepts only if they are the ones it checks.
	oidc := tasks[1].OIDC
	if tasks[1].URL != url+TaskPath || oidc == nil {
		t.Fatalf("task URL %q, OIDC %+v", tasks[1].URL, oidc)
	}
	req := httptest.NewRequest(http.MethodPost, tasks[1].URL, strings.NewReader(string(tasks[1].Body)))
	for k, v := range tasks[1].Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Authorization", "Bearer "+google.Token(granttest.IDClaims(time.Now(), oidc.Audience, oidc.ServiceAccountEmail)))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusOK || !got.sc.IsRemote() || got.sc.TraceID() != span.SpanContext().TraceID() || got.sc.SpanID() != span.SpanContext().SpanID() {
		t.Fatalf("delivery %d: parent %v, want the dispatch's %v", w.Code, got.sc, span.SpanContext())
	}
}
