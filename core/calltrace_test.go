//go:build !svz_nootel

package core_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/core/telemetry"
)

const (
	callerTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan   = "00f067aa0ba902b7"
	callerParent = "00-" + callerTrace + "-" + callerSpan + "-01"
)

// recorded are the SDK's real span recorder and manual metric reader behind a Providers.
type recorded struct {
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	p      telemetry.Providers
}

func newRecorded() *recorded {
	r := &recorded{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	r.p = telemetry.Providers{Tracers: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans)),
		Meters: sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))}
	return r
}

// attrs is a span's or a data point's attributes as strings.
func attrs(kvs []attribute.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

func sameMap(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %v, want %v", what, got, want)
		return
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s = %q, want %q (all: %v)", what, k, got[k], v, got)
		}
	}
}

// points are a metric's data points (histogram counts or sums), by their attributes.
func (r *recorded) points(t *testing.T, name string) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	key := func(s attribute.Set) string {
		var parts []string
		for _, kv := range s.ToSlice() {
			parts = append(parts, string(kv.Key)+"="+kv.Value.String())
		}
		sort.Strings(parts)
		return strings.Join(parts, ",")
	}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != telemetry.ScopeName {
			t.Errorf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[key(p.Attributes)] += int64(p.Count)
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[key(p.Attributes)] += p.Value
				}
			}
		}
	}
	return out
}

// TestCallSpans: every /a2a call is one server span, child of the caller's traceparent, named for
// a registered action or surface, with the call's identities, outcome and codes; its latency is
// recorded by action and outcome, an unregistered target counted as _OTHER.
func TestCallSpans(t *testing.T) {
	rec := newRecorded()
	var seen trace.SpanContext
	c := newController(t, core.Config{Telemetry: rec.p}, handlers{actions: map[string]core.ActionFunc{
		"job.start": func(ctx context.Context, _ *contract.ActionRequest) (*contract.ActionResult, error) {
			seen = trace.SpanContextFromContext(ctx)
			return contract.OK(contract.Effect{Type: "job.started", JobID: "job-7"}), nil
		},
		"job.stop": okAction(contract.Fail("job_not_found", "no such job")),
	}})
	hdr := map[string]string{"Traceparent": callerParent}
	post(t, c, rpcBody(t, "r-1", "supervaizer/action.invoke", params(map[string]any{"job_id": "job-7"})), hdr)
	post(t, c, rpcBody(t, 2, "supervaizer/action.invoke", params(map[string]any{"action": "job.stop"})), nil)
	post(t, c, rpcBody(t, 3, "supervaizer/action.invoke", params(map[string]any{"action": "nope"})), nil)
	post(t, c, []byte(`{"jsonrpc":`), nil)

	spans := rec.spans.Ended()
	if len(spans) != 4 {
		t.Fatalf("%d spans, want 4", len(spans))
	}
	common := func(m map[string]string) map[string]string {
		for k, v := range map[string]string{"http.request.method": "POST", "http.route": "/a2a", "http.response.status_code": "200"} {
			m[k] = v
		}
		return m
	}
	rpc := func(id string, m map[string]string) map[string]string {
		for k, v := range map[string]string{"rpc.system": "jsonrpc", "rpc.method": "supervaizer/action.invoke", "rpc.jsonrpc.version": "2.0",
			"rpc.jsonrpc.request_id": id, "svz.agent.slug": "s", "svz.request_id": "request-1", "svz.workspace.id": "workspace-1"} {
			m[k] = v
		}
		return common(m)
	}
	want := []struct {
		name  string
		attrs map[string]string
	}{
		{"supervaizer/action.invoke job.start", rpc(`"r-1"`, map[string]string{"svz.action": "job.start", "svz.job.id": "job-7",
			"svz.outcome": "ok", "svz.replayed": "false"})},
		{"supervaizer/action.invoke job.stop", rpc("2", map[string]string{"svz.action": "job.stop", "svz.outcome": "error",
			"svz.result.error_code": "job_not_found", "svz.replayed": "false"})},
		{"supervaizer/action.invoke", rpc("3", map[string]string{"svz.action": "nope", "rpc.jsonrpc.error_code": "-32010",
			"rpc.jsonrpc.error_message": "Action handler not registered: nope", "svz.outcome": "rpc_error"})},
		{"POST /a2a", common(map[string]string{"rpc.jsonrpc.error_code": "-32700", "rpc.jsonrpc.error_message": "Parse error",
			"svz.outcome": "rpc_error"})},
	}
	for i, w := range want {
		s := spans[i]
		if s.Name() != w.name || s.SpanKind() != trace.SpanKindServer {
			t.Errorf("span %d: %q %v, want %q server", i, s.Name(), s.SpanKind(), w.name)
		}
		sameMap(t, w.name, attrs(s.Attributes()), w.attrs)
	}
	first := spans[0]
	if first.Parent().TraceID().String() != callerTrace || first.Parent().SpanID().String() != callerSpan || !first.Parent().IsRemote() {
		t.Errorf("job.start's parent: %v, want the caller's %s", first.Parent(), callerParent)
	}
	if !seen.Equal(first.SpanContext()) {
		t.Errorf("the handler's context carries %v, want the call's span %v", seen, first.SpanContext())
	}
	if spans[1].Parent().IsValid() {
		t.Errorf("a call without traceparent has parent %v", spans[1].Parent())
	}
	got := rec.points(t, telemetry.CallDuration)
	wantPoints := map[string]int64{
		"rpc.method=supervaizer/action.invoke,rpc.system=jsonrpc,svz.action=job.start,svz.outcome=ok":     1,
		"rpc.method=supervaizer/action.invoke,rpc.system=jsonrpc,svz.action=job.stop,svz.outcome=error":   1,
		"rpc.method=supervaizer/action.invoke,rpc.system=jsonrpc,svz.action=_OTHER,svz.outcome=rpc_error": 1,
		"rpc.method=_OTHER,rpc.system=jsonrpc,svz.outcome=rpc_error":                                      1,
	}
	if len(got) != len(wantPoints) {
		t.Errorf("%s: %v", telemetry.CallDuration, got)
	}
	for k, n := range wantPoints {
		if got[k] != n {
			t.Errorf("%s{%s} = %d, want %d (all: %v)", telemetry.CallDuration, k, got[k], n, got)
		}
	}
}

// TestCallWithoutTelemetry: with nothing configured no span is recorded, yet a handler's context
// carries the caller's trace context, so that the log lines it writes carry its ids.
func TestCallWithoutTelemetry(t *testing.T) {
	var seen trace.SpanContext
	c := newController(t, core.Config{}, handlers{actions: map[string]core.ActionFunc{
		"job.start": func(ctx context.Context, _ *contract.ActionRequest) (*contract.ActionResult, error) {
			seen = trace.SpanContextFromContext(ctx)
			return contract.OK(), nil
		},
	}})
	post(t, c, rpcBody(t, 1, "supervaizer/action.invoke", params(nil)), map[string]string{"Traceparent": callerParent})
	if seen.TraceID().String() != callerTrace || seen.SpanID().String() != callerSpan || !seen.IsRemote() {
		t.Fatalf("handler's span context %v, want the caller's", seen)
	}
}

// TestJobTrace: a job.start whose work runs over three deliveries of the in-process pool (a step
// fails twice, retried at once) is one trace: the call's span, then each delivery the child of
// the one that handed it on (the pool delivers its first message again, attempt 0), each step's run the child of its delivery with its try; the jobs'
// counters and histograms say the same.
func TestJobTrace(t *testing.T) {
	rec := newRecorded()
	a := workShell(t)
	var fails atomic.Int32
	w := jobs.Define(a, "greet", func(ctx context.Context, _ map[string]string) error {
		if _, err := jobs.Step(ctx, "lookup", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return err
		}
		_, err := jobs.Step(ctx, "write", func(context.Context) (int, error) {
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
	c, err := core.New(core.Config{APIKey: testKey, ServerID: "SRV-test", Authorizer: grant.LocalBypass{ServerID: "SRV-test"},
		Store: memory.New(), Jobs: jobs.NewPool(jobs.ScanEvery(0)), Logger: quietLogger(), Telemetry: rec.p}, a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	post(t, c, rpcBody(t, 1, "supervaizer/action.invoke", actionParams("job.start", "job-1", map[string]any{})), map[string]string{"Traceparent": callerParent})
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		_, body := post(t, c, rpcBody(t, 2, "supervaizer/action.invoke", actionParams("job.sync", "job-1", map[string]any{})), nil)
		if strings.Contains(string(body), `"job_state":{"job":{"id":"job-1","agent_slug":"w","mission_id":"mission-1","status":"completed"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job did not complete: %s", body)
		}
	}
	// The delivery's span ends after the job.synced effect is appended: wait for the third.
	var deliveries, steps []sdktrace.ReadOnlySpan
	var call sdktrace.ReadOnlySpan
	for deadline := time.Now().Add(60 * time.Second); len(deliveries) < 3; time.Sleep(5 * time.Millisecond) {
		deliveries, steps = nil, nil
		for _, s := range rec.spans.Ended() {
			switch {
			case s.Name() == "supervaizer/action.invoke job.start":
				call = s
			case s.Name() == "deliver greet":
				deliveries = append(deliveries, s)
			case strings.HasPrefix(s.Name(), "step "):
				steps = append(steps, s)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d delivery spans", len(deliveries))
		}
	}
	if call == nil || call.Parent().SpanID().String() != callerSpan {
		t.Fatalf("the call's span: %v", call)
	}
	parent := call.SpanContext()
	for i, d := range deliveries {
		if d.SpanContext().TraceID().String() != callerTrace || d.Parent().SpanID() != parent.SpanID() || d.SpanKind() != trace.SpanKindConsumer {
			t.Errorf("delivery %d: trace %s parent %s kind %v, want trace %s parent %s consumer", i, d.SpanContext().TraceID(), d.Parent().SpanID(),
				d.SpanKind(), callerTrace, parent.SpanID())
		}
		outcome := map[int]string{0: "handed_on", 1: "handed_on", 2: "completed"}[i]
		sameMap(t, "delivery", attrs(d.Attributes()), map[string]string{"svz.agent.slug": "w", "svz.workspace.id": "workspace-1",
			"svz.job.id": "job-1", "svz.job.work": "greet", "svz.job.attempt": "0", "svz.job.receive": "0", "svz.job.take_over": "false",
			"svz.job.deliveries": itoa(i + 1), "svz.job.continuation": map[bool]string{true: "true", false: "false"}[i > 0], "svz.job.outcome": outcome})
		parent = d.SpanContext()
	}
	type stepRun struct{ name, try, outcome, delivery string }
	var got []stepRun
	for _, s := range steps {
		at := "?"
		for i, d := range deliveries {
			if s.Parent().SpanID() == d.SpanContext().SpanID() {
				at = itoa(i)
			}
		}
		a := attrs(s.Attributes())
		if a["svz.job.work"] != "greet" || a["svz.step.name"] != strings.TrimPrefix(s.Name(), "step ") || len(a) != 4 {
			t.Errorf("step span %q: %v", s.Name(), a)
		}
		got = append(got, stepRun{a["svz.step.name"], a["svz.step.try"], a["svz.step.outcome"], at})
	}
	want := []stepRun{{"lookup", "1", "completed", "0"}, {"write", "1", "failed", "0"}, {"write", "2", "failed", "1"}, {"write", "3", "completed", "2"}}
	if len(got) != len(want) {
		t.Fatalf("step spans %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("step span %d: %v, want %v", i, got[i], want[i])
		}
	}
	for name, wantPoints := range map[string]map[string]int64{
		telemetry.JobsStarted:  {"svz.agent.slug=w,svz.job.work=greet": 1},
		telemetry.JobsFinished: {"svz.agent.slug=w,svz.job.outcome=completed,svz.job.work=greet": 1},
		telemetry.StepRetries:  {"svz.job.work=greet": 2},
		telemetry.StepDuration: {"svz.job.work=greet,svz.step.outcome=completed": 2, "svz.job.work=greet,svz.step.outcome=failed": 2},
		telemetry.QueueLag:     {"svz.job.work=greet": 1},
	} {
		got := rec.points(t, name)
		if len(got) != len(wantPoints) {
			t.Errorf("%s: %v, want %v", name, got, wantPoints)
		}
		for k, n := range wantPoints {
			if got[k] != n {
				t.Errorf("%s{%s} = %d, want %d", name, k, got[k], n)
			}
		}
	}
}

func itoa(i int) string { return attribute.IntValue(i).String() }

// TestCallSpanResultCode: only a status "error" result with an error names a code; an error
// result without one, or an ok result carrying errors, names none. Only an internal error (a
// handler that failed) marks the span as an error: a refusal the caller caused does not.
func TestCallSpanResultCode(t *testing.T) {
	rec := newRecorded()
	c := newController(t, core.Config{Telemetry: rec.p}, handlers{actions: map[string]core.ActionFunc{
		"job.start": okAction(&contract.ActionResult{Status: contract.StatusError}),
		"job.stop":  okAction(&contract.ActionResult{Status: contract.StatusOK, Errors: []contract.ResultError{{Code: "late", Message: "noted"}}}),
		"job.start.preview": func(context.Context, *contract.ActionRequest) (*contract.ActionResult, error) {
			return nil, errors.New("the database is down")
		},
	}})
	post(t, c, rpcBody(t, 1, "supervaizer/action.invoke", params(map[string]any{"job_id": "job-8"})), nil)
	post(t, c, rpcBody(t, 2, "supervaizer/action.invoke", params(map[string]any{"action": "job.stop"})), nil)
	post(t, c, rpcBody(t, 3, "supervaizer/action.invoke", params(map[string]any{"action": "job.start.preview"})), nil)
	post(t, c, rpcBody(t, 4, "supervaizer/action.invoke", params(map[string]any{"action": "nope"})), nil)
	spans := rec.spans.Ended()
	if len(spans) != 4 {
		t.Fatalf("%d spans, want 4", len(spans))
	}
	for i, want := range []sdktrace.Status{{Code: codes.Unset}, {Code: codes.Unset}, {Code: codes.Error, Description: "Action handler failed"}, {Code: codes.Unset}} {
		if got := spans[i].Status(); got != want {
			t.Errorf("span %d (%s): status %+v, want %+v", i, spans[i].Name(), got, want)
		}
	}
	for i, outcome := range []string{"error", "ok"} {
		got := attrs(spans[i].Attributes())
		if got["svz.outcome"] != outcome || got["svz.result.error_code"] != "" {
			t.Errorf("span %d (%s): %v", i, spans[i].Name(), got)
		}
		if _, named := got["svz.result.error_code"]; named {
			t.Errorf("span %d names a result code: %v", i, got)
		}
	}
}

// TestEventStreamsCounted: an open effect stream is counted while it is open, and no longer once
// it ended.
func TestEventStreamsCounted(t *testing.T) {
	rec := newRecorded()
	c := effectController(t, core.Config{Telemetry: rec.p})
	srv := httptest.NewServer(c)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // before srv.Close, which waits for the stream
	r := openStream(t, ctx, srv.URL, nil)
	if ev := readEvent(t, r); ev.event != core.EventConnected {
		t.Fatalf("first event %+v", ev)
	}
	if got := rec.points(t, telemetry.EventStreams); got[""] != 1 {
		t.Fatalf("a stream open: %v, want 1", got)
	}
	cancel()
	srv.Close() // returns once the stream's handler has
	if got := rec.points(t, telemetry.EventStreams); got[""] != 0 {
		t.Fatalf("the stream ended: %v, want 0", got)
	}
}
