//go:build !svz_nootel

package platform

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/adapters/internal/testkit"
	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/config"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/internal/testenv"
)

const callerSpan = "00f067aa0ba902b7"

// flakyAgent's job.start starts work of two steps whose second fails twice, retried at once:
// the job runs over three deliveries.
func flakyAgent(ctx context.Context, getenv func(string) string, log *slog.Logger) (http.Handler, error) {
	reg, err := contract.BuildRegistration(contract.RegistrationSpec{
		AgentSlug: "flaky", DisplayName: "Flaky", A2UICatalogVersion: "flaky.1",
		Surfaces:  []contract.SurfaceSpec{contract.SurfaceID("job.start")},
		Actions:   []contract.ActionSpec{contract.ActionID("job.start"), contract.ActionID("job.stop")},
		JobPolicy: &contract.JobPolicy{Sync: &contract.JobSyncPolicy{}},
	})
	if err != nil {
		return nil, err
	}
	a, err := core.NewAgent(core.AgentConfig{Name: "Flaky", Version: "1", Registration: reg})
	if err != nil {
		return nil, err
	}
	var fails atomic.Int32
	w := jobs.Define(a, "count", func(ctx context.Context, _ map[string]string) error {
		if _, err := jobs.Step(ctx, "one", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return err
		}
		_, err := jobs.Step(ctx, "two", func(context.Context) (int, error) {
			if fails.Add(1) <= 2 {
				return 0, errors.New("flaky")
			}
			return 2, nil
		})
		return err
	}, jobs.Backoff(0))
	a.HandleAction("job.start", core.ActionFunc(func(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
		return w.Started(ctx, req, map[string]string{})
	}))
	return config.NewController(ctx, getenv, log, a)
}

var urlRE = regexp.MustCompile(`http://127\.0\.0\.1:\d+`)

// TestTraceToJaeger: with OTEL_EXPORTER_OTLP_ENDPOINT set, a job.start that starts work continued
// over three deliveries is one trace in a real OTLP receiver (Jaeger): the call's span, child of
// the caller's traceparent; each delivery the child of the one before; each step's run the child
// of its delivery; and the log lines written meanwhile carry those spans' ids.
func TestTraceToJaeger(t *testing.T) {
	otlp, query := testenv.Need(t, testenv.OTLP), testenv.Need(t, testenv.JaegerQuery)
	service := testenv.UniqueName("svz-test-")
	callerTrace := testenv.UniqueName("4bf92f3577b34da6a3ce") // this run's: other packages' tests share the receiver
	env := map[string]string{"SUPERVAIZER_LOCAL_MODE": "true", "PORT": "0", "SUPERVAIZER_STORE": "memory",
		"OTEL_EXPORTER_OTLP_ENDPOINT": otlp, "OTEL_SERVICE_NAME": service, "OTEL_METRICS_EXPORTER": "none"}
	var stdout, stderr testkit.LogBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, flakyAgent, WithEnv(envOf(env)), WithOutput(&stdout, &stderr)) }()
	var base string
	for deadline := time.Now().Add(60 * time.Second); base == ""; time.Sleep(10 * time.Millisecond) {
		if strings.Contains(stdout.String(), "Follow the effects") {
			base = urlRE.FindString(stdout.String())
		}
		select {
		case err := <-done:
			t.Fatalf("Run ended: %v\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no banner:\n%s\n%s", stdout.String(), stderr.String())
		}
	}
	call := func(action string, traceparent string) string {
		body := `{"jsonrpc":"2.0","id":1,"method":"supervaizer/action.invoke","params":{"request_id":"req-` + action + `",` +
			`"actor":{"user_id":"user-1"},"workspace":{"id":"workspace-1"},"mission_id":"mission-1","agent_slug":"flaky",` +
			`"surface":"job.start","action":"` + action + `","job_id":"job-1","input":{}}}`
		req, _ := http.NewRequest(http.MethodPost, base+"/a2a", strings.NewReader(body))
		req.Header.Set("X-API-Key", "local-dev")
		req.Header.Set("Content-Type", "application/json")
		if traceparent != "" {
			req.Header.Set("traceparent", traceparent)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return b.String()
	}
	if got := call("job.start", "00-"+callerTrace+"-"+callerSpan+"-01"); !strings.Contains(got, `"status":"ok"`) {
		t.Fatalf("job.start: %s", got)
	}
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(call("job.sync", ""), `"job":{"id":"job-1","agent_slug":"flaky","mission_id":"mission-1","status":"completed"`); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the job did not complete:\n%s", stderr.String())
		}
	}
	cancel() // the server's shutdown flushes the exporter
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}

	spans := testenv.JaegerTrace(t, query, callerTrace, 8)
	var callSpan testenv.Span
	var deliveries, steps []testenv.Span
	for _, s := range spans {
		if s.Service != service {
			t.Errorf("span %v of service %q, want %q", s, s.Service, service)
		}
		switch {
		case s.Name == "supervaizer/action.invoke job.start":
			callSpan = s
		case s.Name == "deliver count":
			deliveries = append(deliveries, s)
		case strings.HasPrefix(s.Name, "step "):
			steps = append(steps, s)
		}
	}
	if callSpan.Parent != callerSpan {
		t.Fatalf("job.start's span %v, want the child of %s; trace: %v", callSpan, callerSpan, spans)
	}
	tags(t, callSpan, map[string]string{"span.kind": "server", "rpc.system": "jsonrpc", "svz.action": "job.start", "svz.agent.slug": "flaky",
		"svz.job.id": "job-1", "svz.workspace.id": "workspace-1", "svz.request_id": "req-job.start", "svz.outcome": "ok"})
	if len(deliveries) != 3 || len(steps) != 4 {
		t.Fatalf("%d deliveries and %d step runs, want 3 and 4: %v", len(deliveries), len(steps), spans)
	}
	parent := callSpan.SpanID
	for i, d := range deliveries {
		if d.Parent != parent {
			t.Errorf("delivery %d %v: parent %s, want %s", i, d, d.Parent, parent)
		}
		tags(t, d, map[string]string{"span.kind": "consumer", "svz.job.id": "job-1", "svz.job.work": "count",
			"svz.job.deliveries": fmt.Sprint(i + 1), "svz.job.outcome": []string{"handed_on", "handed_on", "completed"}[i]})
		parent = d.SpanID
	}
	for i, want := range []struct{ name, try, outcome string }{{"one", "1", "completed"}, {"two", "1", "failed"}, {"two", "2", "failed"}, {"two", "3", "completed"}} {
		s := steps[i]
		tags(t, s, map[string]string{"svz.step.name": want.name, "svz.step.try": want.try, "svz.step.outcome": want.outcome})
		if at := []int{0, 0, 1, 2}[i]; s.Parent != deliveries[at].SpanID {
			t.Errorf("step run %d %v: parent %s, want delivery %d", i, s, s.Parent, at)
		}
	}

	t.Logf("the trace in Jaeger (docs/observability.md prints it):\n%s", tree(spans, callerSpan, ""))

	// The log lines written during the call and the deliveries carry their spans' ids.
	logged := map[string]string{} // message → span id
	for line := range strings.SplitSeq(stderr.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["trace_id"] != callerTrace {
			continue // job.sync's calls are traces of their own
		}
		logged[fmt.Sprint(rec["msg"], " ", rec["tries"])] = fmt.Sprint(rec["span_id"])
	}
	if logged["action <nil>"] != callSpan.SpanID {
		t.Errorf("job.start's log line: span %q, want %s (%v)", logged["action <nil>"], callSpan.SpanID, logged)
	}
	for i, tries := range []string{"1", "2"} {
		if got := logged["step failed: retried in a later delivery "+tries]; got != deliveries[i].SpanID {
			t.Errorf("the retry log line of delivery %d: span %q, want %s (%v)", i, got, deliveries[i].SpanID, logged)
		}
	}
}

// tags checks the span's tags named in want.
func tags(t *testing.T, s testenv.Span, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if s.Tags[k] != v {
			t.Errorf("%v: %s = %q, want %q (tags %v)", s, k, s.Tags[k], v, s.Tags)
		}
	}
}

// tree prints the spans under parent, indented, with the tags that tell them apart.
func tree(spans []testenv.Span, parent, indent string) string {
	var b strings.Builder
	for _, s := range spans {
		if s.Parent != parent {
			continue
		}
		fmt.Fprintf(&b, "%s%s  span %s", indent, s.Name, s.SpanID)
		for _, k := range []string{"svz.job.deliveries", "svz.job.outcome", "svz.step.try", "svz.step.outcome", "svz.outcome"} {
			if v, ok := s.Tags[k]; ok {
				fmt.Fprintf(&b, "  %s=%s", k, v)
			}
		}
		b.WriteString("\n" + tree(spans, s.SpanID, indent+"  "))
	}
	return b.String()
}
