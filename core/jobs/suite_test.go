package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/store"
)

// suite runs the scenarios on one store: each test on its own jobs.
func suite(t *testing.T, s store.Store) {
	t.Run("StartStepsComplete", func(t *testing.T) { testStartStepsComplete(t, s) })
	t.Run("Continuation", func(t *testing.T) { testContinuation(t, s) })
	t.Run("RetriesThenFailure", func(t *testing.T) { testRetriesThenFailure(t, s) })
	t.Run("RetryThenSuccess", func(t *testing.T) { testRetryThenSuccess(t, s) })
	t.Run("StopMidRun", func(t *testing.T) { testStopMidRun(t, s) })
	t.Run("StopFromAnotherInstance", func(t *testing.T) { testStopFromAnotherInstance(t, s) })
	t.Run("Timeout", func(t *testing.T) { testTimeout(t, s) })
	t.Run("TimeoutOutsideAStep", func(t *testing.T) { testTimeoutOutsideAStep(t, s) })
	t.Run("Await", func(t *testing.T) { testAwait(t, s) })
	t.Run("Wake", func(t *testing.T) { testWake(t, s) })
	t.Run("WakeBeforeWait", func(t *testing.T) { testWakeBeforeWait(t, s) })
	t.Run("WakeWhileRunning", func(t *testing.T) { testWakeWhileRunning(t, s) })
	t.Run("WakeBeforeDelivery", func(t *testing.T) { testWakeBeforeDelivery(t, s) })
	t.Run("TakeOverAfterLease", func(t *testing.T) { testTakeOver(t, s) })
	t.Run("StoreDownDuringStep", func(t *testing.T) { testStoreDown(t, s) })
	t.Run("Pool", func(t *testing.T) { testPool(t, s) })
	t.Run("LastReceiveFailsTheJob", func(t *testing.T) { testLastReceive(t, s) })
}

// jobID is a job id unique to the test (the suite shares stores between backends' runs).
func jobID(t *testing.T) string {
	return strings.ReplaceAll(t.Name(), "/", ".") + fmt.Sprintf(".%d", time.Now().UnixNano())
}

// threeSteps defines work of three steps that count their runs.
func threeSteps(o owner, c *counter, opts ...jobs.Option) *jobs.Work[map[string]int] {
	return jobs.Define(o, "three", func(ctx context.Context, in map[string]int) error {
		a, err := jobs.Step(ctx, "one", func(context.Context) (int, error) { c.inc("one"); return in["n"] + 1, nil })
		if err != nil {
			return err
		}
		b, err := jobs.Step(ctx, "two", func(context.Context) (int, error) { c.inc("two"); return a * 10, nil }, jobs.Title("Multiply"))
		if err != nil {
			return err
		}
		_, err = jobs.Step(ctx, "three", func(context.Context) (string, error) { c.inc("three"); return fmt.Sprint(b), nil },
			jobs.InCase("report", "deliverable", "Report"))
		return err
	}, opts...)
}

func testStartStepsComplete(t *testing.T, s store.Store) {
	o, c := newOwner(), &counter{}
	w := threeSteps(o, c)
	in := newInstance(t, s, o, newClock(), &queue{})
	job := jobID(t)
	res, err := w.Started(in.ctx(), startReq(job), map[string]int{"n": 4})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"status":"ok","effects":[{"type":"job.started","job_id":"` + job + `","status":"active"}],"job_state":{"job":{"id":"` + job +
		`","agent_slug":"jobs-agent","mission_id":"m-1","status":"active","source":{"type":"fresh_start"}},"cases":[{"id":"` + job +
		`-work","lane":"work","title":"three","status":"pending","metadata":{},"steps":[]}]}}`
	if got := mustJSON(t, res); got != want {
		t.Fatalf("job.start answered\n%s\nwant\n%s", got, want)
	}
	msgs := in.q.take()
	if len(msgs) != 1 || msgs[0].M != (jobs.Message{Agent: agentSlug, Workspace: wsID, Job: job, Work: "three"}) || msgs[0].Delay != 0 {
		t.Fatalf("dispatched %+v", msgs)
	}
	// The message carries the reference only, never the input.
	if body := string(msgs[0].M.Encode()); strings.Contains(body, `"n"`) || body != `{"agent":"jobs-agent","workspace":"ws-jobs","job":"`+job+`","work":"three","attempt":0}` {
		t.Fatalf("message body %s", body)
	}
	// A second job.start for the job starts nothing.
	if _, err := w.Start(in.ctx(), startReq(job), map[string]int{"n": 4}); err != nil {
		t.Fatal(err)
	}
	if again := in.q.take(); len(again) != 1 {
		// Not delivered yet: the record is pending and unclaimed, so it is dispatched again
		// (the first dispatch may have been lost with its call).
		t.Fatalf("a start of an undelivered job dispatches it again once, got %d", len(again))
	}
	in.q.msgs = msgs
	if n := in.deliverAll(t, 5, nil); n != 1 {
		t.Fatalf("%d deliveries, want 1", n)
	}
	for _, step := range []string{"one", "two", "three"} {
		if c.get(step) != 1 {
			t.Fatalf("step %s ran %d times", step, c.get(step))
		}
	}
	snap := stateOf(t, in, job)
	want = `{"job":{"id":"` + job + `","agent_slug":"jobs-agent","mission_id":"m-1","status":"completed","source":{"type":"fresh_start"}},"cases":[` +
		`{"id":"` + job + `-work","lane":"work","title":"three","status":"completed","metadata":{},"steps":[` +
		`{"id":"` + job + `-one","activity":"operation","status":"completed","title":"one","outputs":[]},` +
		`{"id":"` + job + `-two","activity":"operation","status":"completed","title":"Multiply","outputs":[]}]},` +
		`{"id":"` + job + `-report","lane":"deliverable","title":"Report","status":"completed","metadata":{},"steps":[` +
		`{"id":"` + job + `-three","activity":"operation","status":"completed","title":"three","outputs":[]}]}]}`
	if got := mustJSON(t, snap); got != want {
		t.Fatalf("job.sync state\n%s\nwant\n%s", got, want)
	}
	// Started again once running or done: the state, no second run, no dispatch.
	if _, err := w.Start(in.ctx(), startReq(job), map[string]int{"n": 4}); err != nil {
		t.Fatal(err)
	}
	if again := in.q.take(); len(again) != 0 {
		t.Fatalf("a finished job was dispatched again: %+v", again)
	}
	// A duplicate delivery of the finished task does nothing.
	if err := in.svc.Deliver(context.Background(), msgs[0].M, jobs.Delivery{}); err != nil || c.get("one") != 1 {
		t.Fatalf("duplicate delivery: %v, step one ran %d times", err, c.get("one"))
	}
}

func testContinuation(t *testing.T, s store.Store) {
	o, c := newOwner(), &counter{}
	clk := newClock()
	var in *instance
	w := jobs.Define(o, "slow", func(ctx context.Context, _ struct{}) error {
		for i := range 6 {
			if _, err := jobs.Step(ctx, fmt.Sprintf("s%d", i), func(context.Context) (int, error) {
				c.inc(fmt.Sprintf("s%d", i))
				clk.Add(4 * time.Second) // each step takes 4 s of the delivery's time
				return i, nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	in = newInstance(t, s, o, clk, &queue{})
	job := start(t, in, w, struct{}{})
	// Each delivery has 15 s: with the 10 s margin, it runs two steps and hands on.
	n := in.deliverAll(t, 20, func() jobs.Delivery { return jobs.Delivery{Deadline: clk.Now().Add(15 * time.Second)} })
	if n < 3 {
		t.Fatalf("%d deliveries, want at least 3", n)
	}
	for i := range 6 {
		if got := c.get(fmt.Sprintf("s%d", i)); got != 1 {
			t.Fatalf("step s%d ran %d times", i, got)
		}
	}
	if st := stateOf(t, in, job).Job.Status; st != contract.StateCompleted {
		t.Fatalf("status %s", st)
	}
}

func testRetriesThenFailure(t *testing.T, s store.Store) {
	o := newOwner()
	runs := 0
	w := jobs.Define(o, "flaky", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Step(ctx, "call", func(context.Context) (int, error) { runs++; return 0, errBoom })
		if err != nil {
			return err
		}
		_, err = jobs.Step(ctx, "never", func(context.Context) (int, error) { t.Error("a step after a failed one ran"); return 0, nil })
		return err
	}, jobs.MaxAttempts(3), jobs.Backoff(time.Second))
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	var delays []time.Duration
	for range 10 {
		msgs := in.q.take()
		if len(msgs) == 0 {
			break
		}
		m := msgs[0]
		delays = append(delays, m.Delay)
		if m.Delay > 0 {
			// Delivered early (a queue that held it back for less time): nothing runs, and the
			// message is handed on for the time left.
			before := runs
			if err := in.svc.Deliver(context.Background(), m.M, jobs.Delivery{}); err != nil || runs != before {
				t.Fatalf("early delivery: %v, ran %d", err, runs-before)
			}
			if again := in.q.take(); len(again) != 1 || again[0].M != m.M || again[0].Delay != m.Delay {
				t.Fatalf("early delivery handed on %+v, want %+v", again, m)
			}
			in.clock.Add(m.Delay)
		}
		if err := in.svc.Deliver(context.Background(), m.M, jobs.Delivery{}); err != nil {
			t.Fatal(err)
		}
	}
	if runs != 3 || fmt.Sprint(delays) != "[0s 1s 2s]" {
		t.Fatalf("runs %d, delays %v; want 3 runs after 0s, 1s, 2s", runs, delays)
	}
	snap := stateOf(t, in, job)
	got := mustJSON(t, snap)
	if snap.Job.Status != contract.StateFailed || !strings.Contains(got, `"error":{"message":"step \"call\" failed 3 times; last error: boom"}`) ||
		!strings.Contains(got, `"id":"`+job+`-call","activity":"operation","status":"failed"`) {
		t.Fatalf("state %s", got)
	}
}

func testRetryThenSuccess(t *testing.T, s store.Store) {
	o := newOwner()
	runs := 0
	w := jobs.Define(o, "once-flaky", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Step(ctx, "call", func(context.Context) (int, error) {
			if runs++; runs == 1 {
				return 0, errBoom
			}
			return 7, nil
		})
		return err
	})
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	if n := in.deliverAll(t, 5, nil); n != 2 || runs != 2 {
		t.Fatalf("%d deliveries, %d runs", n, runs)
	}
	if st := stateOf(t, in, job).Job.Status; st != contract.StateCompleted {
		t.Fatalf("status %s", st)
	}
	// A permanent error fails at once.
	o2 := newOwner()
	w2 := jobs.Define(o2, "bad", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Step(ctx, "call", func(context.Context) (int, error) { return 0, jobs.Permanent(errors.New("no such region")) })
		return err
	})
	in2 := newInstance(t, s, o2, newClock(), &queue{})
	job2 := jobID(t) + "-2"
	if _, err := w2.Start(in2.ctx(), startReq(job2), struct{}{}); err != nil {
		t.Fatal(err)
	}
	if n := in2.deliverAll(t, 5, nil); n != 1 {
		t.Fatalf("%d deliveries", n)
	}
	if got := mustJSON(t, stateOf(t, in2, job2)); !strings.Contains(got, `"status":"failed"`) || !strings.Contains(got, `step \"call\" failed: no such region`) {
		t.Fatalf("state %s", got)
	}
}

// stoppable defines a work whose first step runs until it is stopped (entered is closed once it
// runs) and whose second step must never start.
func stoppable(t *testing.T, o owner) (w *jobs.Work[struct{}], entered chan struct{}) {
	entered = make(chan struct{})
	w = jobs.Define(o, "stoppable", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Step(ctx, "wait", func(ctx context.Context) (int, error) {
			close(entered)
			<-ctx.Done()
			return 0, ctx.Err()
		})
		if err != nil {
			return err
		}
		_, err = jobs.Step(ctx, "after", func(context.Context) (int, error) { t.Error("a step started after job.stop"); return 0, nil })
		return err
	})
	return w, entered
}

func testStopMidRun(t *testing.T, s store.Store) {
	o := newOwner()
	w, entered := stoppable(t, o)
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	_, done := deliverInBackground(t, in)
	<-entered
	snap, err := jobs.Stop(in.ctx(), job)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Job.Status != contract.StateActive { // asked; the delivery stops it
		t.Fatalf("status right after stop %s", snap.Job.Status)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := stateOf(t, in, job)
	if got.Job.Status != contract.StateCancelled || got.Cases[0].Steps[0].Status != contract.StateCancelled {
		t.Fatalf("state %s", mustJSON(t, got))
	}
	if msgs := in.q.take(); len(msgs) != 0 {
		t.Fatalf("a stopped job was dispatched again: %+v", msgs)
	}
	// A job stopped before its delivery never runs.
	job2 := job + "-2"
	if _, err := w.Start(in.ctx(), startReq(job2), struct{}{}); err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.Stop(in.ctx(), job2); err != nil {
		t.Fatal(err)
	}
	if st := stateOf(t, in, job2).Job.Status; st != contract.StateCancelled {
		t.Fatalf("status %s", st)
	}
	if n := in.deliverAll(t, 3, nil); n != 1 {
		t.Fatalf("%d deliveries", n)
	}
	if _, err := jobs.Stop(in.ctx(), "no-such-job"); !errors.Is(err, jobs.ErrNoJob) {
		t.Fatalf("stop of an unknown job: %v", err)
	}
}

func testStopFromAnotherInstance(t *testing.T, s store.Store) {
	o := newOwner()
	w, entered := stoppable(t, o)
	clk := newClock()
	a := newInstance(t, s, o, clk, &queue{})
	b := newInstance(t, s, o, clk, &queue{})
	job := start(t, a, w, struct{}{})
	_, done := deliverInBackground(t, a)
	<-entered
	if _, err := jobs.Stop(b.ctx(), job); err != nil {
		t.Fatal(err)
	}
	// A sees the request at its next lease renewal.
	a.after.fire(t)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := stateOf(t, b, job).Job.Status; st != contract.StateCancelled {
		t.Fatalf("status %s", st)
	}
}

func testTimeout(t *testing.T, s store.Store) {
	o := newOwner()
	clk := newClock()
	w := jobs.Define(o, "long", func(ctx context.Context, _ struct{}) error {
		for i := range 3 {
			if _, err := jobs.Step(ctx, fmt.Sprint(i), func(context.Context) (int, error) { clk.Add(40 * time.Minute); return i, nil }); err != nil {
				return err
			}
		}
		return nil
	}, jobs.Timeout(time.Hour))
	in := newInstance(t, s, o, clk, &queue{})
	job := start(t, in, w, struct{}{})
	in.deliverAll(t, 3, nil)
	got := mustJSON(t, stateOf(t, in, job))
	if !strings.Contains(got, `"status":"failed"`) || !strings.Contains(got, `"error":{"message":"the job did not finish within 1h0m0s (its timeout)"}`) {
		t.Fatalf("state %s", got)
	}
}

type review struct {
	Approved bool   `json:"approved"`
	Comment  string `json:"comment"`
}

func testAwait(t *testing.T, s store.Store) {
	o, c := newOwner(), &counter{}
	var got review
	w := jobs.Define(o, "reviewed", func(ctx context.Context, _ struct{}) error {
		if _, err := jobs.Step(ctx, "draft", func(context.Context) (string, error) { c.inc("draft"); return "text", nil }); err != nil {
			return err
		}
		r, err := jobs.Await[review](ctx, "review", contract.Awaiting{Fields: []contract.FieldDefinition{{ID: "approved", Label: "Approve", Type: contract.FieldBoolean}}},
			jobs.Title("Review the draft"))
		if err != nil {
			return err
		}
		got = r
		_, err = jobs.Step(ctx, "publish", func(context.Context) (bool, error) { c.inc("publish"); return r.Approved, nil })
		return err
	})
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	in.deliverAll(t, 3, nil)
	snap := stateOf(t, in, job)
	step := snap.Cases[0].Steps[1]
	if snap.Job.Status != contract.StateAwaiting || step.ID != job+"-review" || step.Status != contract.StateAwaiting || step.Awaiting == nil ||
		mustJSON(t, step.Awaiting) != `{"reason":"human_input","surface":"case.step.awaiting","action":"step.awaiting.submit","fields":[{"id":"approved","label":"Approve","type":"boolean","required":false}],"reopenable":false}` {
		t.Fatalf("state %s", mustJSON(t, snap))
	}
	// A wrong step id is refused; the right one continues the work.
	req := startReq(job)
	req.Action = contract.StepAwaitingSubmitAction
	wrong := job + "-draft"
	req.StepID = &wrong
	req.Input = json.RawMessage(`{"approved":true,"comment":"fine"}`)
	if _, err := jobs.Answer(in.ctx(), req); !errors.Is(err, jobs.ErrNotAwaiting) {
		t.Fatalf("answer to a step that does not wait: %v", err)
	}
	right := job + "-review"
	req.StepID = &right
	// An answer is checked against the step's fields, and recorded coerced ("yes" is true).
	req.Input = json.RawMessage(`{"approved":"maybe"}`)
	if _, err := jobs.Answer(in.ctx(), req); mustJSON(t, err) != `[{"code":"input_type","message":"Input should be a valid boolean","field":"approved"}]` {
		t.Fatalf("an answer that does not fit the step's fields: %v", err)
	}
	req.Input = json.RawMessage(`{"approved":"yes","comment":"fine"}`)
	in.q.fail = errors.New("queue down")
	if _, err := jobs.Answer(in.ctx(), req); err == nil || !strings.Contains(err.Error(), "after its answer: queue down") {
		t.Fatalf("an answer whose dispatch fails: %v", err)
	}
	in.q.fail = nil
	// The same answer again (coerced alike) is the retry: dispatched, the first answer kept.
	req.Input = json.RawMessage(`{"approved":true,"comment":"fine"}`)
	if snap, err := jobs.Answer(in.ctx(), req); err != nil || snap.Job.Status != contract.StateActive {
		t.Fatalf("the answer retried: %v %s", err, mustJSON(t, snap))
	}
	msgs := in.q.take()
	if len(msgs) != 1 || msgs[0].M.Job != job || msgs[0].Delay != 0 {
		t.Fatalf("the retry dispatched %+v, want the job's message", msgs)
	}
	// Another answer, or the same by someone else, is a second answer: refused.
	for _, tc := range []struct{ input, user string }{{`{"approved":false,"comment":"fine"}`, req.Actor.UserID}, {`{"approved":true,"comment":"fine"}`, "someone-else"}} {
		again := *req
		again.Input, again.Actor.UserID = json.RawMessage(tc.input), tc.user
		if _, err := jobs.Answer(in.ctx(), &again); !errors.Is(err, jobs.ErrNotAwaiting) {
			t.Fatalf("a second answer %s by %s: %v", tc.input, tc.user, err)
		}
	}
	in.q.msgs = msgs
	in.deliverAll(t, 3, nil)
	if got != (review{Approved: true, Comment: "fine"}) || c.get("draft") != 1 || c.get("publish") != 1 {
		t.Fatalf("answer %+v, draft ran %d, publish %d", got, c.get("draft"), c.get("publish"))
	}
	if st := stateOf(t, in, job).Job.Status; st != contract.StateCompleted {
		t.Fatalf("status %s", st)
	}
}

// testWake: a step that waits for another action than step.awaiting.submit (a rule checkpoint's
// resume) takes no answer; Wake for that action continues the work, for another leaves it.
func testWake(t *testing.T, s store.Store) {
	o := newOwner()
	var got map[string]string
	w := jobs.Define(o, "governed", func(ctx context.Context, _ struct{}) error {
		a, err := jobs.Await[map[string]string](ctx, "decision", contract.Awaiting{Reason: "rule_checkpoint", Action: contract.RuleCheckpointResumeAction})
		got = a
		return err
	})
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	in.deliverAll(t, 3, nil)
	req := startReq(job)
	step := job + "-decision"
	req.Action, req.StepID = contract.StepAwaitingSubmitAction, &step
	if _, err := jobs.Answer(in.ctx(), req); !errors.Is(err, jobs.ErrNotAwaiting) {
		t.Fatalf("step.awaiting.submit to a step that waits for %s: %v", contract.RuleCheckpointResumeAction, err)
	}
	if woke, err := jobs.Wake(in.ctx(), job, "other.action", json.RawMessage(`{}`)); woke || err != nil {
		t.Fatalf("Wake for another action: %v, %v", woke, err)
	}
	if st := stateOf(t, in, job).Job.Status; st != contract.StateAwaiting {
		t.Fatalf("status %s after the refused answers", st)
	}
	in.q.fail = errors.New("queue down")
	if woke, err := jobs.Wake(in.ctx(), job, contract.RuleCheckpointResumeAction, json.RawMessage(`{"status":"allow"}`)); woke || err == nil || !strings.Contains(err.Error(), "after waking it: queue down") {
		t.Fatalf("Wake whose dispatch fails: %v, %v", woke, err)
	}
	in.q.fail = nil
	if len(in.q.take()) != 0 {
		t.Fatal("a failed dispatch queued a message")
	}
	// Called again (Studio delivers the resume again), it dispatches again; the first answer
	// stands, and none is kept for a later Await.
	if woke, err := jobs.Wake(in.ctx(), job, contract.RuleCheckpointResumeAction, json.RawMessage(`{"status":"deny"}`)); !woke || err != nil {
		t.Fatalf("Wake again: %v, %v", woke, err)
	}
	if n := in.deliverAll(t, 3, nil); n != 1 {
		t.Fatalf("%d deliveries, want the one Wake dispatched", n)
	}
	if snap := stateOf(t, in, job); snap.Job.Status != contract.StateCompleted || got["status"] != "allow" {
		t.Fatalf("answer %v, state %s", got, mustJSON(t, snap))
	}
}

// testWakeBeforeWait: the decision arrives while the delivery runs, before its Await records the
// wait (Studio answered the paused checkpoint at once): the Await takes the kept answer, and the
// job completes in the same delivery instead of waiting for a wake that came already.
func testWakeBeforeWait(t *testing.T, s store.Store) {
	o := newOwner()
	var in *instance
	var got map[string]string
	w := jobs.Define(o, "governed-fast", func(ctx context.Context, _ struct{}) error {
		if err := pauseDecided(ctx, t, in, "pause", "allow"); err != nil {
			return err
		}
		a, err := jobs.Await[map[string]string](ctx, "decision", contract.Awaiting{Reason: "rule_checkpoint", Action: contract.RuleCheckpointResumeAction})
		got = a
		return err
	})
	in = newInstance(t, s, o, newClock(), &queue{})
	if _, err := w.Start(in.ctx(), startReq(jobIDOf(t)), struct{}{}); err != nil {
		t.Fatal(err)
	}
	if n := in.deliverAll(t, 3, nil); n != 1 {
		t.Fatalf("%d deliveries, want 1", n)
	}
	if snap := stateOf(t, in, jobIDOf(t)); snap.Job.Status != contract.StateCompleted || got["status"] != "allow" {
		t.Fatalf("answer %v, state %s", got, mustJSON(t, snap))
	}
}

// testWakeWhileRunning: a decision for a later Await arrives while the delivery that took the
// first decision runs: it is kept for that Await (not taken for a retry of the first wake), and
// only for it: the Await after waits for its own.
func testWakeWhileRunning(t *testing.T, s store.Store) {
	o := newOwner()
	var in *instance
	var got []string
	resume := contract.Awaiting{Reason: "rule_checkpoint", Action: contract.RuleCheckpointResumeAction}
	w := jobs.Define(o, "governed-twice", func(ctx context.Context, _ struct{}) error {
		a, err := jobs.Await[map[string]string](ctx, "decision-1", resume)
		if err != nil {
			return err
		}
		if err := pauseDecided(ctx, t, in, "pause-2", "deny"); err != nil {
			return err
		}
		b, err := jobs.Await[map[string]string](ctx, "decision-2", resume)
		got = []string{a["status"], b["status"]}
		if err != nil {
			return err
		}
		// The kept decision was decision-2's: the next Await waits for its own.
		_, err = jobs.Await[map[string]string](ctx, "decision-3", resume)
		return err
	})
	in = newInstance(t, s, o, newClock(), &queue{})
	if _, err := w.Start(in.ctx(), startReq(jobIDOf(t)), struct{}{}); err != nil {
		t.Fatal(err)
	}
	in.deliverAll(t, 1, nil)
	if woke, err := jobs.Wake(in.ctx(), jobIDOf(t), contract.RuleCheckpointResumeAction, json.RawMessage(`{"status":"allow"}`)); !woke || err != nil {
		t.Fatalf("Wake: %v, %v", woke, err)
	}
	if n := in.deliverAll(t, 3, nil); n != 1 {
		t.Fatalf("%d deliveries, want 1", n)
	}
	snap := stateOf(t, in, jobIDOf(t))
	if steps := snap.Cases[0].Steps; snap.Job.Status != contract.StateAwaiting || !slices.Equal(got, []string{"allow", "deny"}) ||
		len(steps) != 4 || steps[3].ID != jobs.StepID(jobIDOf(t), "decision-3") || steps[3].Status != contract.StateAwaiting {
		t.Fatalf("answers %v, state %s; want awaiting decision-3", got, mustJSON(t, snap))
	}
}

// testWakeBeforeDelivery: Studio's decision for the work's next Await arrives after the operator
// answered its review, before the delivery that answer sent: it is kept for that Await (the
// answered review is not a wake to retry), and the one delivery completes the job.
func testWakeBeforeDelivery(t *testing.T, s store.Store) {
	o := newOwner()
	var got map[string]string
	w := jobs.Define(o, "reviewed-then-governed", func(ctx context.Context, _ struct{}) error {
		if _, err := jobs.Await[map[string]any](ctx, "review", contract.Awaiting{}); err != nil {
			return err
		}
		a, err := jobs.Await[map[string]string](ctx, "decision", contract.Awaiting{Reason: "rule_checkpoint", Action: contract.RuleCheckpointResumeAction})
		got = a
		return err
	})
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	in.deliverAll(t, 1, nil)
	req := startReq(job)
	step := jobs.StepID(job, "review")
	req.StepID = &step
	if _, err := jobs.Answer(in.ctx(), req); err != nil {
		t.Fatal(err)
	}
	if woke, err := jobs.Wake(in.ctx(), job, contract.RuleCheckpointResumeAction, json.RawMessage(`{"status":"allow"}`)); woke || err != nil {
		t.Fatalf("Wake before the delivery: %v, %v (want false, nil: kept for the Await)", woke, err)
	}
	if n := in.deliverAll(t, 2, nil); n != 1 {
		t.Fatalf("%d deliveries, want the answer's", n)
	}
	if snap := stateOf(t, in, job); snap.Job.Status != contract.StateCompleted || got["status"] != "allow" {
		t.Fatalf("decision %v, state %s", got, mustJSON(t, snap))
	}
}

// pauseDecided runs step name, in which Studio's decision (status) arrives for the test's job
// while its delivery runs: Wake keeps it for the job's next Await (false, nil).
func pauseDecided(ctx context.Context, t *testing.T, in *instance, name, status string) error {
	_, err := jobs.Step(ctx, name, func(context.Context) (string, error) {
		woke, err := jobs.Wake(in.ctx(), jobIDOf(t), contract.RuleCheckpointResumeAction, json.RawMessage(`{"status":"`+status+`"}`))
		if woke || err != nil {
			t.Errorf("Wake while the job runs: %v, %v (want false, nil: kept for the next Await)", woke, err)
		}
		return "paused", nil
	})
	return err
}

var jobIDs sync.Map

// jobIDOf is one job id per test, the same at every call.
func jobIDOf(t *testing.T) string {
	id, _ := jobIDs.LoadOrStore(t.Name(), jobID(t))
	return id.(string)
}

func testTakeOver(t *testing.T, s store.Store) {
	o, c := newOwner(), &counter{}
	entered, release := make(chan struct{}), make(chan struct{})
	first := true
	w := jobs.Define(o, "taken", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Step(ctx, "slow", func(ctx context.Context) (int, error) {
			c.inc("slow")
			if first {
				first = false
				close(entered)
				<-release
			}
			return 1, nil
		})
		if err != nil {
			return err
		}
		_, err = jobs.Step(ctx, "next", func(context.Context) (int, error) { c.inc("next"); return 2, nil })
		return err
	})
	clk := newClock()
	a := newInstance(t, s, o, clk, &queue{})
	b := newInstance(t, s, o, clk, &queue{})
	job := start(t, a, w, struct{}{})
	m, done := deliverInBackground(t, a)
	<-entered
	// While A holds the lease, B's delivery is refused for later.
	if err := b.svc.Deliver(context.Background(), m, jobs.Delivery{}); !errors.Is(err, jobs.ErrBusy) {
		t.Fatalf("delivery while another instance runs the task: %v", err)
	}
	// A stalls past its lease (no renewal fires): B takes the task over and finishes it.
	clk.Add(jobs.DefaultLease + jobs.SkewMargin + time.Second)
	if err := b.svc.Deliver(context.Background(), m, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The interrupted step ran once more; A's late result was not recorded over B's.
	if c.get("slow") != 2 || c.get("next") != 1 {
		t.Fatalf("slow ran %d, next %d", c.get("slow"), c.get("next"))
	}
	if st := stateOf(t, b, job).Job.Status; st != contract.StateCompleted {
		t.Fatalf("status %s", st)
	}
}

// flaky is a store whose writes fail while down is set.
type flaky struct {
	store.Store
	down func(key string) bool
}

func (f *flaky) Update(ctx context.Context, key string, version uint64, value []byte, exp time.Time) (store.Record, error) {
	if f.down != nil && f.down(key) {
		return store.Record{}, errors.New("store unreachable")
	}
	return f.Store.Update(ctx, key, version, value, exp)
}

func (f *flaky) Create(ctx context.Context, key string, value []byte, exp time.Time) (store.Record, error) {
	if f.down != nil && f.down(key) {
		return store.Record{}, errors.New("store unreachable")
	}
	return f.Store.Create(ctx, key, value, exp)
}

func testStoreDown(t *testing.T, s store.Store) {
	o, c := newOwner(), &counter{}
	fs := &flaky{Store: s}
	w := jobs.Define(o, "fragile", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Step(ctx, "a", func(context.Context) (int, error) {
			c.inc("a")
			if c.get("a") == 1 {
				fs.down = func(string) bool { return true } // the store goes down while the step runs
			}
			return 1, nil
		})
		return err
	})
	in := newInstance(t, fs, o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	m := in.q.take()[0]
	if err := in.svc.Deliver(context.Background(), m.M, jobs.Delivery{}); err == nil {
		t.Fatal("a delivery whose step could not be recorded was acknowledged")
	}
	fs.down = nil
	// The queue delivers it again after its visibility timeout, longer than the lease (the store
	// was down, so the lease could not be released).
	in.clock.Add(jobs.DefaultLease + jobs.SkewMargin + time.Second)
	if err := in.svc.Deliver(context.Background(), m.M, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	if c.get("a") != 2 {
		t.Fatalf("step a ran %d times, want 2 (once more after the fault)", c.get("a"))
	}
	if st := stateOf(t, in, job).Job.Status; st != contract.StateCompleted {
		t.Fatalf("status %s", st)
	}
}

func testPool(t *testing.T, s store.Store) {
	if _, ok := s.(store.Lister); !ok {
		t.Skip("the store cannot list")
	}
	o, c := newOwner(), &counter{}
	done := make(chan struct{})
	w := jobs.Define(o, "pooled", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Step(ctx, "a", func(context.Context) (int, error) { c.inc("a"); return 1, nil })
		if err == nil {
			close(done)
		}
		return err
	})
	pool := jobs.NewPool(jobs.ScanEvery(0))
	svc := jobs.NewService(jobs.Config{Store: s, Dispatcher: pool, Works: func(string) (*jobs.Registry, time.Duration, bool) { return o.reg, 0, true }})
	t.Cleanup(svc.Close)
	ctx := jobs.NewContext(context.Background(), svc, o.reg, agentSlug, &contract.VerifiedWorkspaceContext{WorkspaceID: wsID})
	job := jobID(t)
	if _, err := w.Start(ctx, startReq(job), struct{}{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(2 * time.Minute): // a failure bound only
		t.Fatal("the pool did not run the task")
	}
	waitCompleted(ctx, t, job, "the pool did not complete the task")
	if c.get("a") != 1 {
		t.Fatalf("ran %d", c.get("a"))
	}
	// The scan drops the index entry of the finished task.
	if err := pool.Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	page, err := s.(store.Lister).List(context.Background(), "jobs/v1/p/"+agentSlug+"/"+wsID+"/"+job, "", 10)
	if err != nil || len(page.Items) != 0 {
		t.Fatalf("index after the scan: %v %+v", err, page.Items)
	}
}

// testLastReceive: a delivery that fails at the queue's last receive (the message goes to the
// dead-letter queue next) marks the job failed first, with the reason; an earlier one does not.
func testLastReceive(t *testing.T, s store.Store) {
	o := newOwner()
	fs := &flaky{Store: s}
	w := jobs.Define(o, "doomed", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Step(ctx, "a", func(context.Context) (int, error) {
			// The store fails the step's record (and the release that follows, 4 tries each),
			// then comes back, for the job's failure to be recorded.
			n := 0
			fs.down = func(string) bool { n++; return n <= 8 }
			return 1, nil
		})
		return err
	})
	in := newInstance(t, fs, o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	m := in.q.take()[0]
	for receive := 1; receive <= 2; receive++ {
		if err := in.svc.Deliver(context.Background(), m.M, jobs.Delivery{Receive: receive, MaxReceives: 2}); err == nil {
			t.Fatalf("receive %d: the delivery was acknowledged", receive)
		}
		fs.down = nil
		if st := stateOf(t, in, job).Job.Status; receive == 1 && st != contract.StateActive {
			t.Fatalf("after receive 1 the job is %s", st)
		}
		in.clock.Add(jobs.DefaultLease + jobs.SkewMargin + time.Second)
	}
	got := mustJSON(t, stateOf(t, in, job))
	if !strings.Contains(got, `"status":"failed"`) || !strings.Contains(got, `"error":{"message":"the task was delivered 2 times without finishing (last error: jobs: delivery of job`) {
		t.Fatalf("state after the last receive: %s", got)
	}
}

// testTimeoutOutsideAStep: the job's timeout ends work that waits outside a step (its context is
// done at the deadline, whatever the work returns): the job fails with the timeout's message.
func testTimeoutOutsideAStep(t *testing.T, s store.Store) {
	o := newOwner()
	w := jobs.Define(o, "waits", func(ctx context.Context, _ struct{}) error {
		<-ctx.Done()
		return ctx.Err()
	}, jobs.Timeout(100*time.Millisecond))
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	in.deliverAll(t, 2, nil)
	got := mustJSON(t, stateOf(t, in, job))
	if !strings.Contains(got, `"status":"failed"`) || !strings.Contains(got, `"error":{"message":"the job did not finish within 100ms (its timeout)"}`) {
		t.Fatalf("state %s", got)
	}
}
