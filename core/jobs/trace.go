package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/supervaize/svz/core/telemetry"
)

// Telemetry of background work (package telemetry names it): a span per delivery, child of the
// trace context the message carried (the call that started the job, or the delivery that handed
// it on), a span per step run, and the jobs' counters and histograms. The queues carry the trace
// context beside the message, never in it: SQS message attributes, a Cloud Tasks task's headers,
// the pool's index entry (indexEntry). With nothing configured every method is a no-op.
type jobsTelemetry struct {
	p        telemetry.Providers
	tracer   trace.Tracer
	started  telemetry.Counter
	finished telemetry.Counter
	stepDur  telemetry.Histogram
	retries  telemetry.Counter
	lag      telemetry.Histogram
}

func newJobsTelemetry(p telemetry.Providers) *jobsTelemetry {
	return &jobsTelemetry{p: p, tracer: p.Tracer(),
		started:  p.Counter(telemetry.JobsStarted, "{job}", "Background jobs started."),
		finished: p.Counter(telemetry.JobsFinished, "{job}", "Background jobs finished, by outcome: completed, failed or stopped."),
		stepDur:  p.Histogram(telemetry.StepDuration, "Duration of a step's run."),
		retries:  p.Counter(telemetry.StepRetries, "{retry}", "Runs of a step after it failed."),
		lag:      p.Histogram(telemetry.QueueLag, "Time from a job's start to its first delivery."),
	}
}

// delivery is one delivery's span.
type delivery struct {
	span    trace.Span
	outcome string
}

type deliveryKey struct{}

// deliveryStarted starts the span of a delivery of m; done ends it with the delivery's error.
func (t *jobsTelemetry) deliveryStarted(ctx context.Context, m Message, d Delivery) (context.Context, func(error)) {
	if !t.p.Tracing() {
		return ctx, func(error) {}
	}
	ctx, span := t.tracer.Start(ctx, "deliver "+m.Work, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		attribute.String(telemetry.Agent, m.Agent), attribute.String(telemetry.Workspace, m.Workspace), attribute.String(telemetry.Job, m.Job),
		attribute.String(telemetry.Work, m.Work), attribute.Int(telemetry.Attempt, m.Attempt), attribute.Int(telemetry.Receive, d.Receive),
		attribute.Bool(telemetry.TakeOver, d.takeOver)))
	dl := &delivery{span: span}
	ctx = context.WithValue(ctx, deliveryKey{}, dl)
	return ctx, func(err error) {
		outcome := dl.outcome
		switch {
		case errors.Is(err, ErrBusy):
			outcome = "busy"
		case err != nil:
			span.SetStatus(codes.Error, err.Error())
			if outcome == "" {
				outcome = "error"
			}
		case outcome == "":
			outcome = "acknowledged" // a duplicate, or a message for a job nobody needs to run
		}
		span.SetAttributes(attribute.String(telemetry.JobOutcome, outcome))
		span.End()
	}
}

// claimed notes that the delivery holds the task of r: how many deliveries ran it, and on the
// first, how long it waited in the queue since its start.
func (t *jobsTelemetry) claimed(ctx context.Context, r *record, now time.Time) {
	if dl, _ := ctx.Value(deliveryKey{}).(*delivery); dl != nil {
		dl.span.SetAttributes(attribute.Int(telemetry.Deliveries, r.Deliveries), attribute.Bool(telemetry.Continuation, r.Deliveries > 1))
	}
	if r.Deliveries == 1 {
		t.lag.Record(ctx, now.Sub(r.Created).Seconds(), attribute.String(telemetry.Work, r.Work))
	}
}

// haltName names how a delivery ended, in its span (svz.job.outcome).
func haltName(h halt) string {
	switch h {
	case running:
		return "completed"
	case handOn:
		return "handed_on"
	case awaitHalt:
		return "awaiting"
	case stopHalt:
		return "stopped"
	case timedOut:
		return "timed_out"
	case failHalt:
		return "failed"
	case cancelHalt:
		return "cancelled"
	case lostHalt:
		return "lost"
	}
	return "store_error"
}

// halted notes how the delivery ended.
func (t *jobsTelemetry) halted(ctx context.Context, h halt) {
	if dl, _ := ctx.Value(deliveryKey{}).(*delivery); dl != nil {
		dl.outcome = haltName(h)
	}
}

// jobStarted counts a job whose task was written and dispatched.
func (t *jobsTelemetry) jobStarted(ctx context.Context, agent, work string) {
	if t.started.On() {
		t.started.Add(ctx, 1, attribute.String(telemetry.Agent, agent), attribute.String(telemetry.Work, work))
	}
}

// jobEnded counts a job that finished (completed, failed or stopped).
func (t *jobsTelemetry) jobEnded(ctx context.Context, r *record) {
	if t.finished.On() && terminal(r.Status) {
		t.finished.Add(ctx, 1, attribute.String(telemetry.Agent, r.Agent), attribute.String(telemetry.Work, r.Work),
			attribute.String(telemetry.JobOutcome, r.Status))
	}
}

// stepStarted starts the span of a step's run (tries: its failed runs before this one); done
// ends it with the step function's error and records its duration.
func (t *jobsTelemetry) stepStarted(ctx context.Context, work, name string, tries int) (context.Context, func(error)) {
	if !t.p.Enabled() {
		return ctx, func(error) {}
	}
	if tries > 0 && t.retries.On() {
		t.retries.Add(ctx, 1, attribute.String(telemetry.Work, work))
	}
	began := time.Now()
	ctx, span := t.tracer.Start(ctx, "step "+name, trace.WithAttributes(attribute.String(telemetry.Step, name),
		attribute.String(telemetry.Work, work), attribute.Int(telemetry.StepTry, tries+1)))
	return ctx, func(err error) {
		outcome := "completed"
		if err != nil {
			outcome = "failed"
			if context.Cause(ctx) != nil {
				outcome = "interrupted" // stopped, timed out, taken over or out of time: not the step's failure
			}
			span.SetStatus(codes.Error, err.Error())
		}
		span.SetAttributes(attribute.String(telemetry.StepOutcome, outcome))
		span.End()
		if t.stepDur.On() {
			t.stepDur.Record(ctx, time.Since(began).Seconds(), attribute.String(telemetry.Work, work), attribute.String(telemetry.StepOutcome, outcome))
		}
	}
}

// indexEntry is the pool's index entry of m: the message and the trace context of ctx, so that a
// process that takes the task over continues the job's trace.
func (t *jobsTelemetry) indexEntry(ctx context.Context, m Message) []byte {
	tc := t.p.Inject(ctx)
	if tc == nil {
		return m.Encode()
	}
	b, _ := json.Marshal(struct {
		Message
		Trace map[string]string `json:"trace"`
	}{m, tc}) // strings, an int and a map of strings always encode
	return b
}

// decodeIndexEntry reads a pool's index entry: a message, with or without its trace context.
func decodeIndexEntry(b []byte) (Message, map[string]string, error) {
	var e struct {
		Message
		Trace map[string]string `json:"trace"`
	}
	if err := strictDecode(b, &e); err != nil {
		return Message{}, nil, err
	}
	m, err := DecodeMessage(e.Message.Encode())
	return m, e.Trace, err
}

// traceMemo keeps, per task, the trace context of its latest dispatch to the pool, until a worker
// of the pool delivers it.
type traceMemo struct {
	mu sync.Mutex
	m  map[string]map[string]string
}

// keep remembers tc for key, unless tc is empty or key has one (replace: the latest wins).
func (k *traceMemo) keep(key string, tc map[string]string, replace bool) {
	if len(tc) == 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil {
		k.m = map[string]map[string]string{}
	}
	if _, ok := k.m[key]; ok && !replace {
		return
	}
	k.m[key] = tc
}

// take returns ctx with the trace context remembered for key, forgetting it.
func (k *traceMemo) take(ctx context.Context, key string, t *jobsTelemetry) context.Context {
	k.mu.Lock()
	tc := k.m[key]
	delete(k.m, key)
	k.mu.Unlock()
	return t.p.Extract(ctx, tc)
}
