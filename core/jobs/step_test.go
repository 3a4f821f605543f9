package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/store/memory"
)

// TestStepNamedAsAnotherKind: a Step named as an answered Await, a finished Sleep or a Map of
// the same work fails the job; the recorded result is never taken for the step's.
func TestStepNamedAsAnotherKind(t *testing.T) {
	for _, tc := range []struct {
		kind  string
		first func(ctx context.Context) error
	}{
		{"await", func(ctx context.Context) error {
			_, err := jobs.Await[review](ctx, "x", contract.Awaiting{})
			return err
		}},
		{"sleep", func(ctx context.Context) error { return jobs.Sleep(ctx, "x", time.Minute) }},
		{"map", func(ctx context.Context) error {
			_, err := jobs.Map(ctx, "x", []int{1}, func(_ context.Context, n int) (int, error) { return n, nil })
			return err
		}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			o, c := newOwner(), &counter{}
			w := jobs.Define(o, "twice", func(ctx context.Context, _ struct{}) error {
				if err := tc.first(ctx); err != nil {
					return err
				}
				_, err := jobs.Step(ctx, "x", func(context.Context) (int, error) { c.inc("step"); return 1, nil })
				return err
			})
			in := newInstance(t, memory.New(), o, newClock(), &queue{})
			job := start(t, in, w, struct{}{})
			in.deliverAll(t, 4, nil)
			if tc.kind == "await" {
				answer(t, in, job, "x")
			}
			got := mustJSON(t, stateOf(t, in, job))
			if !strings.Contains(got, `"status":"failed"`) || !strings.Contains(got, `"error":{"message":"jobs: \"x\" is not a Step: step names are unique within a work"}`) || c.get("step") != 0 {
				t.Fatalf("the step ran %d times; state %s", c.get("step"), got)
			}
		})
	}
}

// TestStepsNotReachedNamesTheFirst: work that no longer reaches the steps an earlier delivery
// recorded fails the job naming the first of them (of many: not whichever comes first out of
// a map).
func TestStepsNotReachedNamesTheFirst(t *testing.T) {
	o := newOwner()
	skip := false
	w := jobs.Define(o, "path", func(ctx context.Context, _ struct{}) error {
		if skip {
			return nil
		}
		for i := range 20 {
			name := string(rune('a' + i))
			if _, err := jobs.Step(ctx, name, func(context.Context) (int, error) { return 1, nil }); err != nil {
				return err
			}
		}
		_, err := jobs.Await[review](ctx, "review", contract.Awaiting{})
		return err
	})
	in := newInstance(t, memory.New(), o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	in.deliverAll(t, 2, nil)
	skip = true
	answer(t, in, job, "review")
	want := `"error":{"message":"jobs: step \"a\", recorded by an earlier delivery, was not reached by this one`
	if got := mustJSON(t, stateOf(t, in, job)); !strings.Contains(got, want) {
		t.Fatalf("state %s\nwant %s", got, want)
	}
}

// TestStepOutputs: the artifacts a Step, a Map or an Await names are its outputs in the job's
// state once it completes, each member kept; a step without any shows an empty list.
func TestStepOutputs(t *testing.T) {
	o := newOwner()
	report := contract.ArtifactRef{ID: "a-1", Type: "document", Title: "Report", MediaType: "application/pdf"}
	sheet := contract.ArtifactRef{ID: "a-2", Type: "sheet"}
	w := jobs.Define(o, "outputs", func(ctx context.Context, _ struct{}) error {
		if _, err := jobs.Step(ctx, "write", func(context.Context) (int, error) { return 1, nil }, jobs.Outputs(report, sheet)); err != nil {
			return err
		}
		if _, err := jobs.Map(ctx, "each", []int{1}, func(_ context.Context, n int) (int, error) { return n, nil }, jobs.Outputs(sheet)); err != nil {
			return err
		}
		if _, err := jobs.Step(ctx, "plain", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return err
		}
		_, err := jobs.Await[review](ctx, "review", contract.Awaiting{}, jobs.Outputs(report))
		return err
	})
	in := newInstance(t, memory.New(), o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	in.deliverAll(t, 4, nil)
	if got := mustJSON(t, stateOf(t, in, job)); !strings.Contains(got, `"awaiting":{"reason":"human_input","surface":"case.step.awaiting","action":"step.awaiting.submit","fields":[],"reopenable":false},"outputs":[]}`) {
		t.Fatalf("while awaiting, state %s: want no outputs yet", got)
	}
	answer(t, in, job, "review")
	got := mustJSON(t, stateOf(t, in, job))
	for _, want := range []string{
		`"title":"write","outputs":[{"id":"a-1","type":"document","title":"Report","media_type":"application/pdf"},{"id":"a-2","type":"sheet"}]}`,
		`"title":"each","outputs":[{"id":"a-2","type":"sheet"}]`,
		`"title":"plain","outputs":[]}`,
		`"title":"review","outputs":[{"id":"a-1","type":"document","title":"Report","media_type":"application/pdf"}]`,
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("state %s\nwant %s", got, want)
		}
	}
}

// TestAwaitOffThePath: new code that waits for an answer before the steps an earlier delivery
// recorded fails the job naming the first of them, instead of waiting.
func TestAwaitOffThePath(t *testing.T) {
	o := newOwner()
	offPath := false
	w := jobs.Define(o, "path", func(ctx context.Context, _ struct{}) error {
		if offPath {
			_, err := jobs.Await[review](ctx, "x", contract.Awaiting{})
			return err
		}
		if _, err := jobs.Step(ctx, "a", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return err
		}
		return jobs.Sleep(ctx, "nap", time.Minute)
	})
	in := newInstance(t, memory.New(), o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	if err := in.svc.Deliver(context.Background(), in.q.take()[0].M, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	offPath = true
	in.deliverAll(t, 2, nil)
	want := `"status":"failed","source":{"type":"fresh_start"},"error":{"message":"jobs: step \"a\", recorded by an earlier delivery, was not reached by this one`
	if got := mustJSON(t, stateOf(t, in, job)); !strings.Contains(got, want) {
		t.Fatalf("state %s\nwant %s", got, want)
	}
}

// TestDeliveryGrant: a delivery runs the work in the context of the grant the job was started
// under, every member kept, scopes an empty list when the grant had none.
func TestDeliveryGrant(t *testing.T) {
	for _, scopes := range [][]string{{"jobs:run"}, nil} {
		o := newOwner()
		w := jobs.Define(o, "granted", func(context.Context, struct{}) error { return nil })
		var got []*contract.VerifiedWorkspaceContext
		q, clk := &queue{}, newClock()
		in := &instance{q: q, clock: clk, after: newManualAfter(), o: o}
		in.svc = jobs.NewService(jobs.Config{Store: memory.New(), Dispatcher: q, Now: clk.Now, After: in.after.After, Logger: quiet,
			Works: func(string) (*jobs.Registry, time.Duration, bool) { return o.reg, 0, true },
			Bind: func(ctx context.Context, _ string, v *contract.VerifiedWorkspaceContext) context.Context {
				got = append(got, v)
				return ctx
			}})
		t.Cleanup(in.svc.Close)
		slug, ref := "acme", "ref-1"
		grant := &contract.VerifiedWorkspaceContext{GrantID: "g-1", WorkspaceID: wsID, WorkspaceSlug: &slug, AgentSlug: agentSlug,
			AgentID: "agent-1", ServerID: "server-1", AgentWorkspaceRef: &ref, Scopes: scopes}
		job := jobID(t)
		if _, err := w.Start(jobs.NewContext(context.Background(), in.svc, o.reg, agentSlug, grant), startReq(job), struct{}{}); err != nil {
			t.Fatal(err)
		}
		in.deliverAll(t, 2, nil)
		want := *grant
		if want.Scopes == nil {
			want.Scopes = []string{}
		}
		if len(got) != 1 || mustJSON(t, got[0]) != mustJSON(t, &want) || got[0].Scopes == nil {
			t.Fatalf("the work's grant %s, want %s", mustJSON(t, got), mustJSON(t, &want))
		}
	}
}

// waitingWorks defines two works whose first delivery leaves an open step waiting: "retried",
// its step "call" for a retry; "sleepy", its timer "nap".
func waitingWorks(o owner) (retried, sleepy *jobs.Work[struct{}]) {
	retried = jobs.Define(o, "retried", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Step(ctx, "call", func(context.Context) (int, error) { return 0, errBoom })
		return err
	}, jobs.MaxAttempts(3))
	sleepy = jobs.Define(o, "sleepy", func(ctx context.Context, _ struct{}) error { return jobs.Sleep(ctx, "nap", time.Hour) })
	return retried, sleepy
}

// TestOperatorCancelOpenSteps: an operator's cancel (without the agent's code) of a job nobody
// runs shows its open steps cancelled, whatever they wait for (a retry, a timer), and sends the
// job's message at once, in the pool's index due now; a job whose holder's lease ran out counts
// as nobody's.
func TestOperatorCancelOpenSteps(t *testing.T) {
	o := newOwner()
	retried, sleepy := waitingWorks(o)
	held, entered := stoppable(t, o)
	s, clk := memory.New(), newClock()
	in := newInstance(t, s, o, clk, &queue{})
	var jobsOf []string
	for _, w := range []*jobs.Work[struct{}]{retried, sleepy} {
		job := start(t, in, w, struct{}{})
		if err := in.svc.Deliver(context.Background(), in.q.take()[0].M, jobs.Delivery{}); err != nil {
			t.Fatal(err)
		}
		in.q.take()
		jobsOf = append(jobsOf, job)
	}
	job := start(t, in, held, struct{}{})
	deliverInBackground(t, in)
	<-entered
	clk.Add(jobs.DefaultLease + jobs.SkewMargin) // the holder stopped renewing
	jobsOf = append(jobsOf, job)

	ops := operator(t, s, clk, jobs.PoolIndex{Store: s})
	for i, job := range jobsOf {
		d, err := ops.Cancel(context.Background(), ref(job))
		if err != nil {
			t.Fatal(err)
		}
		var steps []string
		for _, st := range d.Steps {
			steps = append(steps, st.Name+"="+st.Status)
		}
		want := map[int]string{0: "[call=cancelled]", 1: "[nap=cancelled]", 2: "[]"}[i] // the holder wrote no open step
		if d.Status != "pending" || !d.StopRequested || fmt.Sprint(steps) != want {
			t.Fatalf("job %d cancelled: status %s, steps %v, want %s", i, d.Status, steps, want)
		}
		entry, err := s.Get(context.Background(), "jobs/v1/p/"+agentSlug+"/"+wsID+"/"+job)
		if err != nil || strings.Contains(string(entry.Value), `"at"`) {
			t.Fatalf("job %d: index entry %s (%v), want one due now", i, entry.Value, err)
		}
	}
}

// TestPoolIndexDispatch: the pool's index entry of a message dispatched for later says when it
// is due, counted from now when the message does not say; one due at once says nothing.
func TestPoolIndexDispatch(t *testing.T) {
	s := memory.New()
	q := jobs.PoolIndex{Store: s}
	ctx := context.Background()
	before := time.Now()
	for _, m := range []jobs.Message{
		{Agent: "a", Workspace: "w", Job: "later", Work: "x"},
		{Agent: "a", Workspace: "w", Job: "at", Work: "x", At: 42},
		{Agent: "a", Workspace: "w", Job: "now", Work: "x"},
	} {
		delay := time.Hour
		if m.Job == "now" {
			delay = 0
		}
		if err := q.Dispatch(ctx, m, delay); err != nil {
			t.Fatal(err)
		}
	}
	at := func(job string) int64 {
		rec, err := s.Get(ctx, "jobs/v1/p/a/w/"+job)
		if err != nil {
			t.Fatal(err)
		}
		var m jobs.Message
		if err := json.Unmarshal(rec.Value, &m); err != nil {
			t.Fatal(err)
		}
		return m.At
	}
	if got := time.UnixMilli(at("later")); got.Before(before.Add(time.Hour).Truncate(time.Millisecond)) || got.After(time.Now().Add(time.Hour)) {
		t.Errorf("a message due in an hour: entry due %v", got)
	}
	if got := at("at"); got != 42 {
		t.Errorf("a message saying when it is due: entry due %d", got)
	}
	if got := at("now"); got != 0 {
		t.Errorf("a message due at once: entry due %d", got)
	}
}

// TestStartOnAnotherAgent: a work starts only in the context of the agent that defined it, even
// when that agent defines a work of the same name; a context without works refuses it too.
func TestStartOnAnotherAgent(t *testing.T) {
	a, b := newOwner(), newOwner()
	w := jobs.Define(a, "same", func(context.Context, struct{}) error { return nil })
	jobs.Define(b, "same", func(context.Context, struct{}) error { return nil })
	in := newInstance(t, memory.New(), b, newClock(), &queue{})
	want := `jobs: work "same" is not defined on agent "` + agentSlug + `" (define it with jobs.Define on the agent, before core.New)`
	for name, reg := range map[string]*jobs.Registry{"another agent's": b.reg, "no": nil} {
		ctx := jobs.NewContext(context.Background(), in.svc, reg, agentSlug, &contract.VerifiedWorkspaceContext{GrantID: "g-1", WorkspaceID: wsID, AgentSlug: agentSlug})
		if _, err := w.Start(ctx, startReq(jobID(t)), struct{}{}); err == nil || err.Error() != want {
			t.Errorf("started with %s works: %v", name, err)
		}
	}
	if msgs := in.q.take(); len(msgs) != 0 {
		t.Fatalf("dispatched %+v", msgs)
	}
}

// TestStopCancelsOpenSteps: job.stop of a job nobody runs shows its open steps cancelled,
// whatever they wait for: a retry, a timer, an answer.
func TestStopCancelsOpenSteps(t *testing.T) {
	o := newOwner()
	retried, sleepy := waitingWorks(o)
	waiting := jobs.Define(o, "waiting", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Await[review](ctx, "review", contract.Awaiting{})
		return err
	})
	s, clk := memory.New(), newClock()
	in := newInstance(t, s, o, clk, &queue{})
	for _, tc := range []struct {
		w    *jobs.Work[struct{}]
		step string
	}{{retried, "call"}, {sleepy, "nap"}, {waiting, "review"}} {
		job := start(t, in, tc.w, struct{}{})
		if err := in.svc.Deliver(context.Background(), in.q.take()[0].M, jobs.Delivery{}); err != nil {
			t.Fatal(err)
		}
		in.q.take()
		if st, err := jobs.Stop(in.ctx(), job); err != nil || st.Job.Status != contract.StateCancelled {
			t.Fatalf("stop: %v %+v", err, st)
		}
		d, err := operator(t, s, clk, &queue{}).Show(context.Background(), ref(job))
		if err != nil || len(d.Steps) != 1 || d.Steps[0].Name != tc.step || d.Steps[0].Status != "cancelled" {
			t.Fatalf("stopped: %v %+v", err, d)
		}
	}
}

// TestAnswerRefusals: an answer names its job and step; a step the job does not have is
// ErrNoStep, one recorded already (answered, or not an Await) ErrNotAwaiting.
func TestAnswerRefusals(t *testing.T) {
	o := newOwner()
	w := jobs.Define(o, "asks", func(ctx context.Context, _ struct{}) error {
		if _, err := jobs.Step(ctx, "first", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return err
		}
		_, err := jobs.Await[review](ctx, "review", contract.Awaiting{})
		return err
	})
	in := newInstance(t, memory.New(), o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	in.deliverAll(t, 2, nil)
	id := func(s string) *string { return &s }
	for _, tc := range []struct {
		job, step *string
		want      error
		msg       string
	}{
		{&job, nil, jobs.ErrNotAwaiting, "step.awaiting.submit needs job_id and step_id"},
		{nil, id(job + "-review"), jobs.ErrNotAwaiting, "step.awaiting.submit needs job_id and step_id"},
		{&job, id(job + "-none"), jobs.ErrNoStep, ""},
		{&job, id(job + "-first"), jobs.ErrNotAwaiting, ""},
	} {
		req := startReq(job)
		req.JobID, req.StepID, req.Input = tc.job, tc.step, json.RawMessage(`{}`)
		_, err := jobs.Answer(in.ctx(), req)
		if !errors.Is(err, tc.want) || !strings.Contains(fmt.Sprint(err), tc.msg) {
			t.Errorf("job %v, step %v: %v, want %v %s", tc.job, tc.step, err, tc.want, tc.msg)
		}
	}
}

// TestStatePastTheTimeout: past its timeout, a job nobody delivers shows failed with the
// timeout's message; one that ended shows as it ended. A job stopped without a label shows none.
func TestStatePastTheTimeout(t *testing.T) {
	o := newOwner()
	quick := jobs.Define(o, "quick", func(context.Context, struct{}) error { return nil }, jobs.Timeout(time.Minute))
	waits := jobs.Define(o, "waits", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Await[review](ctx, "review", contract.Awaiting{})
		return err
	}, jobs.Timeout(time.Minute))
	in := newInstance(t, memory.New(), o, newClock(), &queue{})
	done := start(t, in, quick, struct{}{})
	in.deliverAll(t, 2, nil)
	waiting := start(t, in, waits, struct{}{})
	in.deliverAll(t, 2, nil)
	stopped := start(t, in, waits, struct{}{})
	if _, err := jobs.Stop(in.ctx(), stopped); err != nil {
		t.Fatal(err)
	}
	in.clock.Add(2 * time.Minute)
	for job, want := range map[string]string{
		done:    `{"job":{"id":"` + done + `","agent_slug":"jobs-agent","mission_id":"m-1","status":"completed","source":{"type":"fresh_start"}}`,
		waiting: `{"job":{"id":"` + waiting + `","agent_slug":"jobs-agent","mission_id":"m-1","status":"failed","source":{"type":"fresh_start"},"error":{"message":"the job did not finish within 1m0s (its timeout)"}}`,
		stopped: `{"job":{"id":"` + stopped + `","agent_slug":"jobs-agent","mission_id":"m-1","status":"cancelled","source":{"type":"fresh_start"}},` +
			`"cases":[{"id":"` + stopped + `-work","lane":"work","title":"waits","status":"cancelled","metadata":{},"steps":[]}]}`,
	} {
		if got := mustJSON(t, stateOf(t, in, job)); !strings.HasPrefix(got, want) {
			t.Errorf("state %s\nwant %s…", got, want)
		}
	}
}

// TestDefaultCase: steps outside a case of their own are in the job's default case, in the
// registration's default lane ("work" when none), titled with the work's name; a step in a case
// of its own shows that case's lane and title.
func TestDefaultCase(t *testing.T) {
	o := newOwner()
	w := jobs.Define(o, "cased", func(ctx context.Context, _ struct{}) error {
		if _, err := jobs.Step(ctx, "plain", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return err
		}
		_, err := jobs.Step(ctx, "reviewed", func(context.Context) (int, error) { return 1, nil }, jobs.InCase("c-1", "review", "Review"))
		return err
	})
	in := newInstance(t, memory.New(), o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	in.deliverAll(t, 2, nil)
	got := mustJSON(t, stateOf(t, in, job))
	for _, want := range []string{
		`{"id":"` + job + `-work","lane":"work","title":"cased","status":"completed"`,
		`{"id":"` + job + `-c-1","lane":"review","title":"Review","status":"completed"`,
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("state %s\nwant %s", got, want)
		}
	}
}

// TestProgressWhileRunning: the progress a running delivery reported shows in job.sync before
// the delivery ends (written with its step records), the latest report of each case winning,
// a case without steps of its own included; a case never reported shows no progress.
func TestProgressWhileRunning(t *testing.T) {
	o := newOwner()
	var seen string
	var in *instance
	var job string
	w := jobs.Define(o, "progressing", func(ctx context.Context, _ struct{}) error {
		if _, err := jobs.Step(ctx, "quietly", func(context.Context) (int, error) { return 1, nil }, jobs.InCase("quiet", "", "Quiet")); err != nil {
			return err
		}
		for i, name := range []string{"one", "two"} {
			if _, err := jobs.Step(ctx, name, func(ctx context.Context) (int, error) {
				if err := jobs.Progress(ctx, "", i+1, 3); err != nil {
					return 0, err
				}
				return 1, jobs.Progress(ctx, "later", i, 5)
			}); err != nil {
				return err
			}
		}
		_, err := jobs.Step(ctx, "look", func(context.Context) (int, error) {
			seen = mustJSON(t, stateOf(t, in, job))
			return 1, nil
		})
		return err
	})
	in = newInstance(t, memory.New(), o, newClock(), &queue{})
	job = start(t, in, w, struct{}{})
	in.deliverAll(t, 2, nil)
	for _, want := range []string{
		`{"id":"` + job + `-work","lane":"work","title":"progressing","status":"active","metadata":{"progress":{"done":2,"total":3}}`,
		`{"id":"` + job + `-later","lane":"work","status":"pending","metadata":{"progress":{"done":1,"total":5}}`,
		`{"id":"` + job + `-quiet","lane":"work","title":"Quiet","status":"completed","metadata":{}`,
	} {
		if !strings.Contains(seen, want) {
			t.Fatalf("state while running %s\nwant %s", seen, want)
		}
	}
	if got, want := mustJSON(t, stateOf(t, in, job)), `{"id":"`+job+`-quiet","lane":"work","title":"Quiet","status":"completed","metadata":{}`; !strings.Contains(got, want) {
		t.Fatalf("state when done %s\nwant %s", got, want)
	}
}

// TestSleepPastTheTimeout: a sleep that would end after the job's timeout hands the job on to its
// deadline, not to the sleep's end: the timeout is recorded when it passes, not an hour late.
func TestSleepPastTheTimeout(t *testing.T) {
	o := newOwner()
	w := jobs.Define(o, "nap", func(ctx context.Context, _ struct{}) error {
		return jobs.Sleep(ctx, "nap", time.Hour)
	}, jobs.Timeout(time.Minute))
	in := newInstance(t, memory.New(), o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	in.clock.Add(10 * time.Second)
	if err := in.svc.Deliver(context.Background(), in.q.take()[0].M, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	if got := delays(in.q.take()); got != "[50s]" {
		t.Fatalf("handed on after %s, want the 50s left to the timeout", got)
	}
	in.clock.Add(50 * time.Second)
	in.deliverAll(t, 2, nil)
	if snap := stateOf(t, in, job); snap.Job.Status != contract.StateFailed {
		t.Fatalf("state %s, want failed at its timeout", mustJSON(t, snap))
	}
}
