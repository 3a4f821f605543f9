package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/store"
)

const (
	agentSlug = "jobs-agent"
	wsID      = "ws-jobs"
)

// owner is an agent's registry, as core.Agent has one.
type owner struct{ reg *jobs.Registry }

func (o owner) Works() *jobs.Registry { return o.reg }

func newOwner() owner { return owner{reg: jobs.NewRegistry()} }

// clock is a manual clock near the real time (a job's deadline also bounds real contexts).
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Now().UTC().Truncate(time.Millisecond)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// queue is a Dispatcher that keeps what it is given: the test delivers the messages itself, as
// the platform's queue would.
type queue struct {
	mu   sync.Mutex
	msgs []sent
	fail error
}

type sent struct {
	M     jobs.Message
	Delay time.Duration
}

func (q *queue) Dispatch(_ context.Context, m jobs.Message, delay time.Duration) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.fail != nil {
		return q.fail
	}
	q.msgs = append(q.msgs, sent{m, delay})
	return nil
}

// take removes and returns the messages sent so far.
func (q *queue) take() []sent {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.msgs
	q.msgs = nil
	return out
}

// manualAfter is a lease-renewal timer the test fires.
type manualAfter struct{ ch chan time.Time }

func newManualAfter() *manualAfter { return &manualAfter{ch: make(chan time.Time)} }

func (m *manualAfter) After(time.Duration) <-chan time.Time { return m.ch }

// fire makes one waiting renewal happen; false when none waits within 30 s.
func (m *manualAfter) fire(t *testing.T) {
	t.Helper()
	select {
	case m.ch <- time.Time{}:
	case <-time.After(30 * time.Second):
		t.Fatal("no lease renewal was waiting")
	}
}

// instance is one controller instance's job service on a store.
type instance struct {
	svc   *jobs.Service
	q     *queue
	clock *clock
	after *manualAfter
	o     owner
}

func newInstance(t testing.TB, s store.Store, o owner, c *clock, q *queue) *instance {
	t.Helper()
	return newLoggedInstance(t, s, o, c, q, quiet)
}

// newLoggedInstance is newInstance logging to log.
func newLoggedInstance(t testing.TB, s store.Store, o owner, c *clock, q *queue, log *slog.Logger) *instance {
	t.Helper()
	in := &instance{q: q, clock: c, after: newManualAfter(), o: o}
	in.svc = jobs.NewService(jobs.Config{Store: s, Dispatcher: q, Now: c.Now, After: in.after.After, Logger: log,
		Works: func(slug string) (*jobs.Registry, time.Duration, bool) {
			if slug != agentSlug {
				return nil, 0, false
			}
			return o.reg, 0, true
		}})
	t.Cleanup(in.svc.Close)
	return in
}

// ctx is a handler's context for the test workspace.
func (in *instance) ctx() context.Context {
	return jobs.NewContext(context.Background(), in.svc, in.o.reg, agentSlug, &contract.VerifiedWorkspaceContext{GrantID: "g-1", WorkspaceID: wsID, AgentSlug: agentSlug})
}

func startReq(job string) *contract.ActionRequest {
	return &contract.ActionRequest{AgentSlug: agentSlug, Action: contract.JobStartAction, JobID: &job, MissionID: "m-1", Input: json.RawMessage(`{}`)}
}

// deliverAll delivers the queued messages (and those they lead to) until none is left, at most
// limit deliveries; it returns how many there were.
func (in *instance) deliverAll(t *testing.T, limit int, d func() jobs.Delivery) int {
	t.Helper()
	n := 0
	for {
		msgs := in.q.take()
		if len(msgs) == 0 {
			return n
		}
		for _, m := range msgs {
			if n++; n > limit {
				t.Fatalf("more than %d deliveries", limit)
			}
			in.clock.Add(m.Delay)
			var del jobs.Delivery
			if d != nil {
				del = d()
			}
			if err := in.svc.Deliver(context.Background(), m.M, del); err != nil {
				t.Fatalf("delivery %d: %v", n, err)
			}
		}
	}
}

// counter counts the runs of each step.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) inc(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[name]++
}

func (c *counter) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

func stateOf(t *testing.T, in *instance, job string) *contract.JobState {
	t.Helper()
	snap, err := jobs.State(in.ctx(), job)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := contract.AppendJSON(nil, v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var errBoom = errors.New("boom")

var quiet = slog.New(slog.DiscardHandler)

// start starts w for a new job of the test on in, with input, and returns the job's id.
func start[In any](t *testing.T, in *instance, w *jobs.Work[In], input In) string {
	t.Helper()
	job := jobID(t)
	if _, err := w.Start(in.ctx(), startReq(job), input); err != nil {
		t.Fatal(err)
	}
	return job
}

// deliverInBackground delivers the one message in's queue holds, on its own goroutine, and
// returns the message and the delivery's result.
func deliverInBackground(t *testing.T, in *instance) (jobs.Message, <-chan error) {
	t.Helper()
	msgs := in.q.take()
	if len(msgs) != 1 {
		t.Fatalf("%d messages queued, want 1", len(msgs))
	}
	done := make(chan error, 1)
	go func() { done <- in.svc.Deliver(context.Background(), msgs[0].M, jobs.Delivery{}) }()
	return msgs[0].M, done
}

// waitCompleted polls job's state (ctx names the agent and workspace) until the job completed,
// for at most two minutes: a failure bound only, long enough for a loaded machine. what says
// what the wait is for in the failure.
func waitCompleted(ctx context.Context, t testing.TB, job, what string) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
		snap, err := jobs.State(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Job.Status == contract.StateCompleted {
			return
		}
		if time.Now().After(deadline) {
			b, _ := json.Marshal(snap)
			t.Fatalf("%s: %s", what, b)
		}
	}
}

// sleepThenAfter defines work that sleeps d in a step named sleep, then runs step "after",
// counting its runs in c.
func sleepThenAfter(o owner, work, sleep string, d time.Duration, c *counter) *jobs.Work[struct{}] {
	return jobs.Define(o, work, func(ctx context.Context, _ struct{}) error {
		if err := jobs.Sleep(ctx, sleep, d); err != nil {
			return err
		}
		_, err := jobs.Step(ctx, "after", func(context.Context) (int, error) { c.inc("after"); return 1, nil })
		return err
	})
}

// answer answers job's awaiting step (its name) with an empty object, then delivers what that
// queues.
func answer(t *testing.T, in *instance, job, step string) {
	t.Helper()
	req := startReq(job)
	id := job + "-" + step
	req.StepID, req.Input = &id, json.RawMessage(`{}`)
	if _, err := jobs.Answer(in.ctx(), req); err != nil {
		t.Fatal(err)
	}
	in.deliverAll(t, 4, nil)
}

// deliverInTurn delivers the first queued message when it is due (the clock moved by its
// delay), then the next, until none is left (at most limit deliveries); it returns the messages
// it delivered.
func (in *instance) deliverInTurn(t *testing.T, limit int) []sent {
	t.Helper()
	var done []sent
	for {
		msgs := in.q.take()
		if len(msgs) == 0 {
			return done
		}
		if len(done) == limit {
			t.Fatalf("more than %d deliveries", limit)
		}
		for _, m := range msgs[1:] {
			_ = in.q.Dispatch(context.Background(), m.M, m.Delay)
		}
		done = append(done, msgs[0])
		in.clock.Add(msgs[0].Delay)
		if err := in.svc.Deliver(context.Background(), msgs[0].M, jobs.Delivery{}); err != nil {
			t.Fatalf("delivery %d: %v", len(done), err)
		}
	}
}

// delays are the delays the messages were sent with.
func delays(msgs []sent) string {
	var d []time.Duration
	for _, m := range msgs {
		d = append(d, m.Delay)
	}
	return fmt.Sprint(d)
}
