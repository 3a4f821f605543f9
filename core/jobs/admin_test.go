package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/dynamodb/dynamodbtest"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/core/store/storeenv/storeenvtest"
	"github.com/supervaize/svz/internal/awsapi"
	"github.com/supervaize/svz/internal/testenv"
)

// The operator controls (List, Show, Retry, Cancel) on every backend, against its real server; on
// DynamoDB through storeenv, which keeps the task records out of the listing index, so List
// scans the table.

func TestOperator(t *testing.T) {
	for _, b := range []struct {
		name string
		open func(t *testing.T) store.Store
	}{
		{"Memory", func(*testing.T) store.Store { return memory.New() }},
		{"Bolt", func(t *testing.T) store.Store { return storeenvtest.Open(t, storeenvtest.Bolt(t)) }},
		{"Postgres", func(t *testing.T) store.Store { return storeenvtest.Open(t, storeenvtest.Postgres(t, "svz_jobsop_")) }},
		{"Redis", func(t *testing.T) store.Store { return storeenvtest.Open(t, storeenvtest.Redis(t)) }},
		{"DynamoDB", func(t *testing.T) store.Store {
			endpoint := testenv.Need(t, testenv.AWSEndpoint)
			_, table := dynamodbtest.Table(t, endpoint, "svz-jobsop-", awsapi.WithHTTPClient(&testenv.MotoWrites{}))
			s := storeenvtest.Open(t, dynamodbtest.Env(endpoint, table))
			if _, err := s.(store.Lister).List(context.Background(), jobs.TaskKeyPrefix, "", 1); !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("the DynamoDB store of storeenv lists task records (%v): this test means to scan for them", err)
			}
			return s
		}},
	} {
		t.Run(b.name, func(t *testing.T) {
			s := b.open(t)
			t.Cleanup(func() { _ = s.Close() })
			operatorSuite(t, s)
		})
	}
}

func operatorSuite(t *testing.T, s store.Store) {
	t.Run("List", func(t *testing.T) { testOperatorList(t, s) })
	t.Run("ListSkipsStepRecords", func(t *testing.T) { testListSkips(t, s) })
	t.Run("Show", func(t *testing.T) { testOperatorShow(t, s) })
	t.Run("Retry", func(t *testing.T) { testOperatorRetry(t, s) })
	t.Run("RetryRefusals", func(t *testing.T) { testRetryRefusals(t, s) })
	t.Run("RetryRecordsGone", func(t *testing.T) { testRetryRecordsGone(t, s) })
	t.Run("RetryDispatchLost", func(t *testing.T) { testRetryDispatchLost(t, s) })
	t.Run("RetryKeepsLongLivedRecords", func(t *testing.T) { testRetryKeepsRecords(t, s) })
	t.Run("RetryFanOut", func(t *testing.T) { testRetryFanOut(t, s) })
	t.Run("RetryRunsTheFailureHandlerAgain", func(t *testing.T) { testRetryHandler(t, s) })
	t.Run("RetryStoppedSleep", func(t *testing.T) { testRetryStoppedSleep(t, s) })
	t.Run("RetryTimedOutWait", func(t *testing.T) { testRetryTimedOutWait(t, s) })
	t.Run("RetryCancelledByTheWork", func(t *testing.T) { testRetryCancelled(t, s) })
	t.Run("Cancel", func(t *testing.T) { testOperatorCancel(t, s) })
	t.Run("CancelWithoutTheAgentsCode", func(t *testing.T) { testCancelRequested(t, s) })
	t.Run("RetryThroughThePoolIndex", func(t *testing.T) { testRetryPoolIndex(t, s) })
}

// operator is a job service without the agent's code on the store, as svz jobs has one.
func operator(t *testing.T, s store.Store, c *clock, d jobs.Dispatcher) *jobs.Service {
	svc := jobs.NewService(jobs.Config{Store: s, Dispatcher: d, Now: c.Now, Logger: quiet,
		Works: func(string) (*jobs.Registry, time.Duration, bool) { return nil, 0, false }})
	t.Cleanup(svc.Close)
	return svc
}

// inWorkspace is in's handler context for workspace ws and agent slug.
func (in *instance) inWorkspace(slug, ws string) context.Context {
	return jobs.NewContext(context.Background(), in.svc, in.o.reg, slug, &contract.VerifiedWorkspaceContext{GrantID: "g-1", WorkspaceID: ws, AgentSlug: slug})
}

func ref(job string) jobs.Ref { return jobs.Ref{Agent: agentSlug, Workspace: wsID, Job: job} }

// failedJob starts a job of failOnce's work (with opts) on s and delivers it until it failed;
// setting fail to false lets a retry complete it.
func failedJob(t *testing.T, s store.Store, opts ...jobs.Option) (in *instance, c *counter, fail *atomic.Bool, job string) {
	o := newOwner()
	c, fail = &counter{}, &atomic.Bool{}
	fail.Store(true)
	w := failOnce(o, c, fail, opts...)
	in = newInstance(t, s, o, newClock(), &queue{})
	job = start(t, in, w, struct{}{})
	in.deliverAll(t, 5, nil)
	return in, c, fail, job
}

// failOnce defines work of three steps whose second fails while *fail is set (MaxAttempts 2).
func failOnce(o owner, c *counter, fail *atomic.Bool, opts ...jobs.Option) *jobs.Work[struct{}] {
	return jobs.Define(o, "fails", func(ctx context.Context, _ struct{}) error {
		if _, err := jobs.Patched(ctx, "v2"); err != nil {
			return err
		}
		if _, err := jobs.Step(ctx, "one", func(context.Context) (int, error) { c.inc("one"); return 1, nil }); err != nil {
			return err
		}
		if _, err := jobs.Step(ctx, "call", func(context.Context) (int, error) {
			c.inc("call")
			if fail.Load() {
				return 0, errBoom
			}
			return 2, nil
		}); err != nil {
			return err
		}
		_, err := jobs.Step(ctx, "three", func(context.Context) (int, error) { c.inc("three"); return 3, nil })
		return err
	}, append([]jobs.Option{jobs.MaxAttempts(2), jobs.Backoff(time.Second)}, opts...)...)
}

func testOperatorList(t *testing.T, s store.Store) {
	o, c := newOwner(), &counter{}
	w := threeSteps(o, c)
	in := newInstance(t, s, o, newClock(), &queue{})
	ws, other := jobID(t), jobID(t)+"-other"
	started := func(slug, workspace, job string) {
		t.Helper()
		if _, err := w.Start(in.inWorkspace(slug, workspace), startReq(job), map[string]int{}); err != nil {
			t.Fatal(err)
		}
		in.clock.Add(time.Second) // listed newest first
	}
	// "a-b" sorts between "a" and the records of "a" ("a/s/1"): the listing must not skip it.
	started(agentSlug, ws, "a")
	started(agentSlug, ws, "a-b")
	started(agentSlug, ws, "b/c") // escaped in its key
	started(agentSlug, other, "a")
	started("another-agent", ws, "a")
	in.deliverAll(t, 10, nil) // all complete (another-agent's deliveries are acknowledged, not run)
	ops := operator(t, s, in.clock, &queue{})
	ctx := context.Background()

	got, err := ops.List(ctx, jobs.Ref{Agent: agentSlug, Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if ids := listedIDs(got); !slices.Equal(ids, []string{"b/c", "a-b", "a"}) {
		t.Fatalf("listed %q, want the workspace's three jobs newest first", ids)
	}
	if g := got[2]; g.Agent != agentSlug || g.Workspace != ws || g.Work != "three" || g.Status != "completed" || g.Error != "" || g.Waiting != nil ||
		g.Created.IsZero() || !g.Created.Before(got[1].Created) {
		t.Fatalf("summary %+v", g)
	}
	// Every workspace of the agent; one job id anywhere; another agent.
	if got, err = ops.List(ctx, jobs.Ref{Agent: agentSlug}); err != nil || len(filterWS(got, ws, other)) != 4 {
		t.Fatalf("agent's jobs: %v %+v", err, got)
	}
	if got, err = ops.List(ctx, jobs.Ref{Job: "a", Workspace: ws}); err != nil || !slices.Equal(refs(got), []string{"another-agent/" + ws + "/a", agentSlug + "/" + ws + "/a"}) {
		t.Fatalf("job a in %s: %v %q", ws, err, refs(got))
	}
	if got, err = ops.List(ctx, jobs.Ref{Agent: "another-agent", Workspace: ws}); err != nil || len(got) != 1 || got[0].Status != "pending" {
		t.Fatalf("another agent's jobs: %v %+v", err, got)
	}
	if got, err = ops.List(ctx, jobs.Ref{Agent: agentSlug, Workspace: ws + "-none"}); err != nil || len(got) != 0 {
		t.Fatalf("an empty workspace: %v %+v", err, got)
	}
}

func listedIDs(l []jobs.Summary) []string {
	var out []string
	for _, s := range l {
		out = append(out, s.Job)
	}
	return out
}

func refs(l []jobs.Summary) []string {
	var out []string
	for _, s := range l {
		out = append(out, s.Agent+"/"+s.Workspace+"/"+s.Job)
	}
	return out
}

func filterWS(l []jobs.Summary, ws ...string) []jobs.Summary {
	var out []jobs.Summary
	for _, s := range l {
		if slices.Contains(ws, s.Workspace) {
			out = append(out, s)
		}
	}
	return out
}

// testListSkips: a listing in small pages lists every task once, and passes over the records of a
// job with many (a fan-out's items) without reading them.
func testListSkips(t *testing.T, s store.Store) {
	l, ok := s.(store.Lister)
	if !ok {
		t.Skip("the store cannot list")
	}
	if _, err := l.List(context.Background(), jobs.TaskKeyPrefix, "", 1); errors.Is(err, store.ErrInvalid) {
		t.Skip("the store keeps task records out of its listing (List scans)")
	}
	o := newOwner()
	items := make([]int, 40)
	w := jobs.Define(o, "fan", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Map(ctx, "m", items, func(_ context.Context, i int) (int, error) { return i, nil })
		return err
	})
	in := newInstance(t, s, o, newClock(), &queue{})
	ws := jobID(t)
	for _, job := range []string{"a", "a-b", "a.c", "b"} {
		if _, err := w.Start(in.inWorkspace(agentSlug, ws), startReq(job), struct{}{}); err != nil {
			t.Fatal(err)
		}
	}
	in.deliverAll(t, 10, nil)
	cl := &countLists{Lister: l}
	prefix := jobs.TaskKeyPrefix + agentSlug + "/" + ws + "/"
	keys, err := jobs.ListTaskKeys(context.Background(), cl, prefix, 5)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, j := range []string{"a", "a-b", "a.c", "b"} {
		want = append(want, prefix+j)
	}
	if !slices.Equal(keys, want) {
		t.Fatalf("listed %q, want %q", keys, want)
	}
	// 4 jobs of 42 records each (the task, 40 items, the fan-out's step record): read in pages of
	// 5, a page at most past each job's first records instead of 34 pages.
	if cl.n > 9 {
		t.Fatalf("%d List calls for 4 jobs: the listing read through their records", cl.n)
	}
}

type countLists struct {
	store.Lister
	n int
}

func (c *countLists) List(ctx context.Context, prefix, after string, limit int) (store.Page, error) {
	c.n++
	return c.Lister.List(ctx, prefix, after, limit)
}

func testOperatorShow(t *testing.T, s store.Store) {
	o, c := newOwner(), &counter{}
	var fail atomic.Bool
	fail.Store(true)
	w := failOnce(o, c, &fail)
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	created := in.clock.Now()
	ops := operator(t, s, in.clock, &queue{})
	// After call's first failure, the job waits for its retry.
	if err := in.svc.Deliver(context.Background(), in.q.take()[0].M, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	d, err := ops.Show(context.Background(), ref(job))
	if err != nil || d.Status != "pending" || d.Waiting == nil ||
		*d.Waiting != (jobs.Waiting{Reason: "retry", Step: "call", Until: created.Add(time.Second)}) || d.Holder != "" {
		t.Fatalf("waiting for the retry: %v %+v (%+v)", err, d, d.Waiting)
	}
	if st := d.Steps[2]; st.Name != "call" || st.Status != "active" || st.Tries != 1 || st.Error != "boom" || st.Record != 0 {
		t.Fatalf("the step waiting for its retry: %+v", st)
	}
	in.deliverAll(t, 5, nil)
	if d, err = ops.Show(context.Background(), ref(job)); err != nil {
		t.Fatal(err)
	}
	wantErr := `step "call" failed 2 times; last error: boom`
	if d.Status != "failed" || d.Error != wantErr || d.Work != "fails" || d.Mission != "m-1" || d.Deliveries != 2 ||
		!d.Created.Equal(created) || !d.Deadline.Equal(created.Add(jobs.DefaultTimeout)) || d.Holder != "" || d.StopRequested ||
		d.Retries != 0 || d.Failure != nil || len(d.Builds) != 1 || d.Builds[0] != "an unstamped build" {
		t.Fatalf("detail %+v", d)
	}
	want := []jobs.StepDetail{
		{Name: "patch:v2", Kind: jobs.KindPatch, Record: 1, Status: "completed"},
		{Name: "one", Kind: jobs.KindStep, Record: 2, Status: "completed", Tries: 1},
		{Name: "call", Kind: jobs.KindStep, Status: "failed", Tries: 2, Error: "boom"},
	}
	if fmt.Sprintf("%+v", d.Steps) != fmt.Sprintf("%+v", want) {
		t.Fatalf("steps %+v\nwant %+v", d.Steps, want)
	}
	// The job_state is job.sync's.
	if got, sync := mustJSON(t, d.State), mustJSON(t, stateOf(t, in, job)); got != sync {
		t.Fatalf("job_state\n%s\njob.sync's\n%s", got, sync)
	}
	if _, err := ops.Show(context.Background(), ref("no-such-job")); !errors.Is(err, jobs.ErrNoJob) {
		t.Fatalf("an unknown job: %v", err)
	}
}

func testOperatorRetry(t *testing.T, s store.Store) {
	in, c, fail, job := failedJob(t, s, jobs.Timeout(2*time.Hour))
	key := jobs.TaskKeyPrefix + agentSlug + "/" + wsID + "/" + job
	before, err := s.Get(context.Background(), key+"/s/1")
	if err != nil {
		t.Fatal(err)
	}

	in.clock.Add(5 * time.Hour) // after the job's own deadline
	q := &queue{}
	ops := operator(t, s, in.clock, q)
	d, err := ops.Retry(context.Background(), ref(job))
	if err != nil {
		t.Fatal(err)
	}
	now := in.clock.Now()
	if d.Status != "pending" || d.Error != "" || d.Retries != 1 || !d.Retried.Equal(now) || !d.Deadline.Equal(now.Add(2*time.Hour)) ||
		d.Waiting != nil || d.State.Job.Status != contract.StateActive {
		t.Fatalf("retried: %+v", d)
	}
	// The completed step keeps its record; the failed one starts over (not shown until it runs).
	if want := `[{Name:patch:v2 Kind:patch Record:1 Status:completed Tries:0 Error: Build: Items:<nil> Until:0001-01-01 00:00:00 +0000 UTC AnsweredBy: AnsweredAt:0001-01-01 00:00:00 +0000 UTC} {Name:one Kind:step Record:2 Status:completed Tries:1`; !strings.HasPrefix(fmt.Sprintf("%+v", d.Steps), want) || len(d.Steps) != 2 {
		t.Fatalf("steps %+v", d.Steps)
	}
	// Its record lives until the new deadline and the retention.
	after, err := s.Get(context.Background(), key+"/s/1")
	if err != nil || !after.ExpiresAt.Equal(now.Add(2*time.Hour+jobs.DefaultRetention)) || !after.ExpiresAt.After(before.ExpiresAt) || string(after.Value) != string(before.Value) {
		t.Fatalf("step record 1 expires %v (was %v), %v", after.ExpiresAt, before.ExpiresAt, err)
	}
	msgs := q.take()
	if len(msgs) != 1 || msgs[0].M != (jobs.Message{Agent: agentSlug, Workspace: wsID, Job: job, Work: "fails"}) || msgs[0].Delay != 0 {
		t.Fatalf("dispatched %+v", msgs)
	}
	// The agent's instance runs it from its first unfinished step: call gets its attempts again.
	in.q.msgs = msgs
	in.deliverAll(t, 5, nil)
	if c.get("one") != 1 || c.get("call") != 4 || c.get("three") != 0 {
		t.Fatalf("runs: one %d, call %d, three %d; want 1, 2+2, 0", c.get("one"), c.get("call"), c.get("three"))
	}
	d, err = ops.Show(context.Background(), ref(job))
	if err != nil || d.Status != "failed" || d.Error != `step "call" failed 2 times; last error: boom` {
		t.Fatalf("failed again: %v %+v", err, d)
	}
	// A second retry, and this time it completes; a timeout message counts from the retry.
	fail.Store(false)
	in.clock.Add(time.Minute)
	if d, err = ops.Retry(context.Background(), ref(job)); err != nil || !d.Deadline.Equal(in.clock.Now().Add(2*time.Hour)) {
		t.Fatalf("second retry: %v, deadline %v, want the job's timeout from now", err, d.Deadline)
	}
	in.q.msgs = q.take()
	in.deliverAll(t, 5, nil)
	if d, err = ops.Show(context.Background(), ref(job)); err != nil || d.Status != "completed" || d.Retries != 2 || c.get("one") != 1 || c.get("call") != 5 || c.get("three") != 1 {
		t.Fatalf("completed: %v %+v, runs %v", err, d, c.n)
	}
	if st := stateOf(t, in, job); st.Job.Status != contract.StateCompleted || len(st.Cases[0].Steps) != 3 { // one, call, three
		t.Fatalf("job.sync: %s", mustJSON(t, st))
	}
}

func testRetryRefusals(t *testing.T, s store.Store) {
	o, c := newOwner(), &counter{}
	w := threeSteps(o, c)
	in := newInstance(t, s, o, newClock(), &queue{})
	q := &queue{}
	ops := operator(t, s, in.clock, q)
	ctx := context.Background()
	pending := start(t, in, w, map[string]int{})
	for _, tc := range []struct {
		job, want string
		err       error
	}{
		{pending, "is pending, it has not ended (cancel it first", jobs.ErrNotRetryable},
		{"no-such-job", `job "no-such-job" of agent "jobs-agent" in workspace "ws-jobs"`, jobs.ErrNoJob},
	} {
		if _, err := ops.Retry(ctx, ref(tc.job)); !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("retry of %s: %v", tc.job, err)
		}
	}
	in.deliverAll(t, 5, nil)
	if _, err := ops.Retry(ctx, ref(pending)); !errors.Is(err, jobs.ErrNotRetryable) || !strings.Contains(err.Error(), "has completed") {
		t.Errorf("retry of a completed job: %v", err)
	}
	if len(q.take()) != 0 {
		t.Error("a refused retry dispatched")
	}
	// A job a delivery runs (after a failed attempt) is running, not retryable, and waits for
	// nothing; once its lease lapsed (its instance died), pending.
	entered := make(chan struct{})
	tries := 0
	w2 := jobs.Define(o, "second-try-hangs", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Step(ctx, "wait", func(ctx context.Context) (int, error) {
			if tries++; tries == 1 {
				return 0, errBoom
			}
			close(entered)
			<-ctx.Done()
			return 0, ctx.Err()
		})
		return err
	})
	job := start(t, in, w2, struct{}{})
	if err := in.svc.Deliver(ctx, in.q.take()[0].M, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	if l, err := ops.List(ctx, jobs.Ref{Agent: agentSlug, Workspace: wsID, Job: job}); err != nil || len(l) != 1 || l[0].Waiting == nil || l[0].Waiting.Reason != "retry" {
		t.Fatalf("listed %v %+v, want it waiting for its retry", err, l)
	}
	in.clock.Add(5 * time.Second)
	_, done := deliverInBackground(t, in)
	<-entered
	if _, err := ops.Retry(ctx, ref(job)); !errors.Is(err, jobs.ErrNotRetryable) || !strings.Contains(err.Error(), "is running") {
		t.Errorf("retry of a running job: %v", err)
	}
	if l, err := ops.List(ctx, jobs.Ref{Agent: agentSlug, Workspace: wsID, Job: job}); err != nil || len(l) != 1 || l[0].Status != jobs.StatusRunning || l[0].Waiting != nil {
		t.Errorf("listed %v %+v, want it running", err, l)
	}
	in.clock.Add(jobs.DefaultLease + jobs.SkewMargin)
	if l, err := ops.List(ctx, jobs.Ref{Agent: agentSlug, Workspace: wsID, Job: job}); err != nil || len(l) != 1 || l[0].Status != "pending" {
		t.Errorf("listed %v %+v, want it pending once its lease lapsed", err, l)
	}
	if _, err := jobs.Stop(in.ctx(), job); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// testRetryRecordsGone: a retry of a job whose completed steps' records are gone (expired) is
// refused, the job left as it was.
func testRetryRecordsGone(t *testing.T, s store.Store) {
	in, _, _, job := failedJob(t, s)
	key := jobs.TaskKeyPrefix + agentSlug + "/" + wsID + "/" + job + "/s/1"
	rec, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(context.Background(), key, rec.Version); err != nil {
		t.Fatal(err)
	}
	q := &queue{}
	ops := operator(t, s, in.clock, q)
	if _, err := ops.Retry(context.Background(), ref(job)); !errors.Is(err, jobs.ErrRecordsGone) || !strings.Contains(err.Error(), "has 0 step records of 2") {
		t.Fatalf("retry: %v", err)
	}
	if d, err := ops.Show(context.Background(), ref(job)); err != nil || d.Status != "failed" || len(q.take()) != 0 {
		t.Fatalf("after the refusal: %v %+v", err, d)
	}
	// A completed fan-out that lost an item's result.
	w2 := jobs.Define(in.o, "fan-then-fail", func(ctx context.Context, _ struct{}) error {
		if _, err := jobs.Map(ctx, "m", []int{0, 1, 2}, func(_ context.Context, i int) (int, error) { return i, nil }); err != nil {
			return err
		}
		_, err := jobs.Step(ctx, "call", func(context.Context) (int, error) { return 0, jobs.Permanent(errBoom) })
		return err
	})
	job2, kept := start(t, in, w2, struct{}{}), start(t, in, w2, struct{}{})
	in.deliverAll(t, 10, nil)
	// With every item's result kept, the retry goes on.
	if d, err := ops.Retry(context.Background(), ref(kept)); err != nil || d.Status != "pending" {
		t.Fatalf("retry of a fan-out that kept its items: %v %+v", err, d)
	}
	key = jobs.TaskKeyPrefix + agentSlug + "/" + wsID + "/" + job2 + "/i/m/1"
	if rec, err = s.Get(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(context.Background(), key, rec.Version); err != nil {
		t.Fatal(err)
	}
	if _, err := ops.Retry(context.Background(), ref(job2)); !errors.Is(err, jobs.ErrRecordsGone) || !strings.Contains(err.Error(), `fan-out "m" has lost the results of some of its 3 items`) {
		t.Fatalf("retry without an item's result: %v", err)
	}
}

// testRetryDispatchLost: a retry whose message could not be sent leaves the job pending; asked
// again, it sends it (once), without a second retry.
func testRetryDispatchLost(t *testing.T, s store.Store) {
	in, c, fail, job := failedJob(t, s)
	q := &queue{fail: errors.New("queue down")}
	cs := &countUpdates{Store: s}
	ops := operator(t, cs, in.clock, q)
	if _, err := ops.Retry(context.Background(), ref(job)); err == nil || !strings.Contains(err.Error(), "is pending again, but its message was not sent (retry it again to send it): queue down") {
		t.Fatalf("retry with the queue down: %v", err)
	}
	// A second past its first run's, the retry's deadline is later: the two step records (the
	// patch's and one's) live on until it, and the task is written once.
	if cs.steps.Load() != 2 || cs.tasks.Load() != 1 {
		t.Fatalf("the retry wrote %d step records and the task %d times, want 2 and 1", cs.steps.Load(), cs.tasks.Load())
	}
	q.fail = nil
	d, err := ops.Retry(context.Background(), ref(job))
	if err != nil || d.Status != "pending" || d.Retries != 1 || cs.tasks.Load() != 1 || cs.steps.Load() != 2 {
		t.Fatalf("retry again: %v %+v (%d task writes, %d step writes): want only the dispatch", err, d, cs.tasks.Load(), cs.steps.Load())
	}
	in.q.msgs = q.take()
	if len(in.q.msgs) != 1 {
		t.Fatalf("dispatched %+v", in.q.msgs)
	}
	fail.Store(false)
	// A delivery with little time left runs call and hands the job on: pending, nobody holds
	// it, but delivered since the retry, so a retry now is refused, not a dispatch again.
	m := in.q.take()[0].M
	if err := in.svc.Deliver(context.Background(), m, jobs.Delivery{Deadline: in.clock.Now().Add(5 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if c.get("call") != 3 || c.get("three") != 0 {
		t.Fatalf("call ran %d times, three %d: want a continuation after call", c.get("call"), c.get("three"))
	}
	if _, err := ops.Retry(context.Background(), ref(job)); !errors.Is(err, jobs.ErrNotRetryable) || !strings.Contains(err.Error(), "is pending") {
		t.Fatalf("retry of a job handed on: %v", err)
	}
	in.deliverAll(t, 5, nil)
	if _, err := ops.Retry(context.Background(), ref(job)); !errors.Is(err, jobs.ErrNotRetryable) || !strings.Contains(err.Error(), "has completed") {
		t.Fatalf("retry of the completed job: %v", err)
	}
}

// testRetryKeepsRecords: a retry at the instant the job failed gives it the same deadline: its
// step records live long enough, and only the task record is written.
func testRetryKeepsRecords(t *testing.T, s store.Store) {
	in, _, _, job := failedJob(t, s, jobs.MaxAttempts(1))
	cs := &countUpdates{Store: s}
	if _, err := operator(t, cs, in.clock, &queue{}).Retry(context.Background(), ref(job)); err != nil {
		t.Fatal(err)
	}
	if cs.steps.Load() != 0 || cs.tasks.Load() != 1 {
		t.Fatalf("the retry wrote %d step records and the task %d times, want 0 and 1", cs.steps.Load(), cs.tasks.Load())
	}
}

// countUpdates counts the Updates of task records and step records.
type countUpdates struct {
	store.Store
	tasks, steps atomic.Int64
}

func (c *countUpdates) Update(ctx context.Context, key string, version uint64, value []byte, exp time.Time) (store.Record, error) {
	if strings.Contains(key, "/s/") {
		c.steps.Add(1)
	} else {
		c.tasks.Add(1)
	}
	return c.Store.Update(ctx, key, version, value, exp)
}

// testRetryFanOut: a fan-out that failed on an item keeps its other items' results; the retry
// runs the failed item only, with its tries from zero; Show counts the items.
func testRetryFanOut(t *testing.T, s store.Store) {
	o, c := newOwner(), &counter{}
	var fail atomic.Bool
	fail.Store(true)
	w := jobs.Define(o, "fan", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Map(ctx, "score", []int{0, 1, 2, 3}, func(_ context.Context, i int) (int, error) {
			c.inc(fmt.Sprint(i))
			if i == 2 && fail.Load() {
				return 0, errBoom
			}
			return i * 10, nil
		}, jobs.Concurrency(1))
		return err
	}, jobs.MaxAttempts(2), jobs.Backoff(time.Second))
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	in.deliverAll(t, 5, nil)
	q := &queue{}
	ops := operator(t, s, in.clock, q)
	d, err := ops.Show(context.Background(), ref(job))
	if err != nil || d.Status != "failed" || len(d.Steps) != 1 {
		t.Fatalf("failed: %v %+v", err, d)
	}
	if st := d.Steps[0]; st.Kind != jobs.KindFanOut || st.Status != "failed" || st.Items == nil || st.Items.Done != 2 || st.Items.Total != 4 ||
		fmt.Sprint(st.Items.Failed) != "map[2:2]" {
		t.Fatalf("fan-out %+v (items %+v)", st, st.Items)
	}
	key := jobs.TaskKeyPrefix + agentSlug + "/" + wsID + "/" + job + "/i/score/0"
	before, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	in.clock.Add(48 * time.Hour)
	if _, err := ops.Retry(context.Background(), ref(job)); err != nil {
		t.Fatal(err)
	}
	if after, err := s.Get(context.Background(), key); err != nil || !after.ExpiresAt.After(before.ExpiresAt) {
		t.Fatalf("item 0 expires %v, was %v (%v)", after.ExpiresAt, before.ExpiresAt, err)
	}
	fail.Store(false)
	// Delivered on a new build.
	in2 := buildInstance(t, s, o, in.clock, &queue{}, jobs.Build{Agent: "2.0.0"})
	in2.q.msgs = q.take()
	in2.deliverAll(t, 5, nil)
	if c.get("0") != 1 || c.get("1") != 1 || c.get("2") != 3 || c.get("3") != 1 {
		t.Fatalf("item runs %v: the retry ran the failed item only", c.n)
	}
	if d, err = ops.Show(context.Background(), ref(job)); err != nil || d.Status != "completed" ||
		d.Steps[0].Record != 1 || d.Steps[0].Items.Done != 4 || d.Steps[0].Items.Failed != nil {
		t.Fatalf("completed: %v %+v", err, d)
	}
	if !slices.Equal(d.Builds, []string{"an unstamped build", "agent 2.0.0"}) || d.Steps[0].Build != "agent 2.0.0" {
		t.Fatalf("builds %q, the fan-out's %q", d.Builds, d.Steps[0].Build)
	}
}

// testRetryHandler: the failure handler ran once for the first failure; after a retry, a second
// failure runs it again.
func testRetryHandler(t *testing.T, s store.Store) {
	o, c := newOwner(), &counter{}
	var fail atomic.Bool
	fail.Store(true)
	f := &failures{}
	w := jobs.Define(o, "handled", func(ctx context.Context, _ map[string]string) error {
		_, err := jobs.Step(ctx, "call", func(context.Context) (int, error) { c.inc("call"); return 0, errBoom })
		return err
	}, jobs.MaxAttempts(1), jobs.OnFailure(f.handler))
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, map[string]string{})
	q := &queue{}
	ops := operator(t, s, in.clock, q)
	// Failed, its handler to run: neither retried nor cancelled.
	if err := in.svc.Deliver(context.Background(), in.q.take()[0].M, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	d, err := ops.Show(context.Background(), ref(job))
	if err != nil || d.Status != "failing" || d.Failure == nil || d.Failure.State != jobs.HandlerPending {
		t.Fatalf("failing: %v %+v", err, d)
	}
	if _, err := ops.Retry(context.Background(), ref(job)); !errors.Is(err, jobs.ErrNotRetryable) || !strings.Contains(err.Error(), "failure handler is still to run") {
		t.Fatalf("retry of a failing job: %v", err)
	}
	if _, err := ops.Cancel(context.Background(), ref(job)); !errors.Is(err, jobs.ErrEnded) || !strings.Contains(err.Error(), "failure handler is to run") {
		t.Fatalf("cancel of a failing job: %v", err)
	}
	in.deliverAll(t, 5, nil)
	d, err = ops.Show(context.Background(), ref(job))
	if err != nil || len(f.got) != 1 || d.Failure == nil || d.Failure.State != jobs.HandlerRan || d.Failure.Cause != jobs.CauseStep {
		t.Fatalf("first failure: %v %+v (handler runs %d)", err, d.Failure, len(f.got))
	}
	if d, err = ops.Retry(context.Background(), ref(job)); err != nil || d.Failure != nil {
		t.Fatalf("retry: %v %+v", err, d)
	}
	in.q.msgs = q.take()
	in.deliverAll(t, 5, nil)
	if len(f.got) != 2 || c.get("call") != 2 {
		t.Fatalf("handler runs %d, call runs %d: want the handler run for each failure", len(f.got), c.get("call"))
	}
	d, err = ops.Show(context.Background(), ref(job))
	if err != nil || d.Status != "failed" || d.Failure.State != jobs.HandlerRan {
		t.Fatalf("second failure: %v %+v", err, d)
	}
	var handlers []string
	for _, st := range d.Steps {
		if st.Kind == jobs.KindHandler {
			handlers = append(handlers, st.Name)
		}
	}
	if !slices.Equal(handlers, []string{"on-failure (before retry 1)", "on-failure"}) {
		t.Fatalf("handler records %q", handlers)
	}
	// A handler that fails for good.
	f.fail = 10
	if _, err = ops.Retry(context.Background(), ref(job)); err != nil {
		t.Fatal(err)
	}
	in.q.msgs = q.take()
	in.deliverAll(t, 5, nil)
	d, err = ops.Show(context.Background(), ref(job))
	if err != nil || d.Status != "failed" || d.Failure == nil || d.Failure.State != jobs.HandlerFailed || !strings.Contains(d.Error, "the failure handler failed: boom") {
		t.Fatalf("a failed handler: %v %+v (%+v)", err, d, d.Failure)
	}
}

// testRetryStoppedSleep: a job stopped while it slept sleeps on, after a retry, to the same wake
// time.
func testRetryStoppedSleep(t *testing.T, s store.Store) {
	o, c := newOwner(), &counter{}
	w := sleepThenAfter(o, "sleeper", "nap", time.Hour, c)
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	wake := in.clock.Now().Add(time.Hour)
	if err := in.svc.Deliver(context.Background(), in.q.take()[0].M, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	in.q.take()
	if _, err := jobs.Stop(in.ctx(), job); err != nil {
		t.Fatal(err)
	}
	q := &queue{}
	ops := operator(t, s, in.clock, q)
	d, err := ops.Retry(context.Background(), ref(job))
	if err != nil || len(d.Steps) != 1 || d.Steps[0].Status != "sleeping" || d.Steps[0].Kind != jobs.KindSleep || !d.Steps[0].Until.Equal(wake) {
		t.Fatalf("retried: %v %+v", err, d)
	}
	in.q.msgs = q.take()
	in.deliverAll(t, 5, nil) // the delivery finds it sleeping: handed on until its wake time
	if c.get("after") != 1 || !in.clock.Now().Equal(wake) {
		t.Fatalf("after ran %d times at %v, want once at %v", c.get("after"), in.clock.Now(), wake)
	}
}

// testRetryTimedOutWait: a job waiting for an answer past its timeout, which no delivery came to
// fail (its work has no failure handler), is failed as job.sync says, and can be retried: it
// waits again, with its timeout from the retry.
func testRetryTimedOutWait(t *testing.T, s store.Store) {
	o := newOwner()
	w := jobs.Define(o, "waits", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Await[review](ctx, "review", contract.Awaiting{})
		return err
	}, jobs.Timeout(time.Hour))
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	in.deliverAll(t, 5, nil)
	in.clock.Add(2 * time.Hour)
	q := &queue{}
	ops := operator(t, s, in.clock, q)
	l, err := ops.List(context.Background(), jobs.Ref{Agent: agentSlug, Workspace: wsID, Job: job})
	if err != nil || len(l) != 1 || l[0].Status != "failed" || l[0].Error != "the job did not finish within 1h0m0s (its timeout)" {
		t.Fatalf("listed %v %+v", err, l)
	}
	if _, err := ops.Retry(context.Background(), ref(job)); err != nil {
		t.Fatal(err)
	}
	in.q.msgs = q.take()
	in.deliverAll(t, 5, nil)
	if st := stateOf(t, in, job); st.Job.Status != contract.StateAwaiting {
		t.Fatalf("after the retry: %s", mustJSON(t, st))
	}
	in.clock.Add(61 * time.Minute)
	if l, err = ops.List(context.Background(), jobs.Ref{Agent: agentSlug, Workspace: wsID, Job: job}); err != nil || l[0].Error != "the job did not finish within 1h0m0s (its timeout)" {
		t.Fatalf("timed out again: %v %+v", err, l)
	}
	// A job waiting for a step's retry past its timeout (its queue lost the message): the step's
	// tries start over.
	w2 := jobs.Define(o, "retries", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Step(ctx, "call", func(context.Context) (int, error) { return 0, errBoom })
		return err
	}, jobs.Timeout(time.Hour), jobs.MaxAttempts(3))
	job2 := start(t, in, w2, struct{}{})
	if err := in.svc.Deliver(context.Background(), in.q.take()[0].M, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	in.q.take() // lost
	in.clock.Add(2 * time.Hour)
	d, err := ops.Retry(context.Background(), ref(job2))
	if err != nil || d.Status != "pending" || d.Waiting != nil || len(d.Steps) != 1 || d.Steps[0].Status != "active" || d.Steps[0].Tries != 0 || d.Steps[0].Error != "" {
		t.Fatalf("retry of a job past its timeout: %v %+v", err, d)
	}
}

// testRetryCancelled: a job its work cancelled (jobs.Cancel) shows the label; a retry runs it
// again, the label gone.
func testRetryCancelled(t *testing.T, s store.Store) {
	o := newOwner()
	var reject atomic.Bool
	reject.Store(true)
	w := jobs.Define(o, "reviewed", func(ctx context.Context, _ struct{}) error {
		if reject.Load() {
			return jobs.Cancel("Rejected by the reviewer")
		}
		return nil
	})
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	in.deliverAll(t, 5, nil)
	q := &queue{}
	ops := operator(t, s, in.clock, q)
	d, err := ops.Show(context.Background(), ref(job))
	if err != nil || d.Status != "stopped" || d.Cancelled != "Rejected by the reviewer" {
		t.Fatalf("cancelled: %v %+v", err, d)
	}
	if d, err = ops.Retry(context.Background(), ref(job)); err != nil || d.Status != "pending" || d.Cancelled != "" || d.StopRequested {
		t.Fatalf("retried: %v %+v", err, d)
	}
	reject.Store(false)
	in.q.msgs = q.take()
	in.deliverAll(t, 5, nil)
	if d, err = ops.Show(context.Background(), ref(job)); err != nil || d.Status != "completed" {
		t.Fatalf("after the retry: %v %+v", err, d)
	}
}

func testOperatorCancel(t *testing.T, s store.Store) {
	o, c := newOwner(), &counter{}
	w := threeSteps(o, c)
	in := newInstance(t, s, o, newClock(), &queue{})
	ctx := context.Background()
	// On the agent's instance: as job.stop.
	job := start(t, in, w, map[string]int{})
	d, err := in.svc.Cancel(ctx, ref(job))
	if err != nil || d.Status != "stopped" || d.State.Job.Status != contract.StateCancelled {
		t.Fatalf("cancel: %v %+v", err, d)
	}
	if _, err := in.svc.Cancel(ctx, ref(job)); !errors.Is(err, jobs.ErrEnded) || !strings.Contains(err.Error(), "is stopped") {
		t.Fatalf("cancel of a stopped job: %v", err)
	}
	if _, err := in.svc.Cancel(ctx, ref("no-such-job")); !errors.Is(err, jobs.ErrNoJob) {
		t.Fatalf("cancel of an unknown job: %v", err)
	}
	// A running one stops at once on this instance.
	w2, entered := stoppable(t, o)
	in.q.take()
	job2 := start(t, in, w2, struct{}{})
	_, done := deliverInBackground(t, in)
	<-entered
	if d, err = in.svc.Cancel(ctx, ref(job2)); err != nil || !d.StopRequested && d.Status != "stopped" { // its delivery may have stopped already
		t.Fatalf("cancel of a running job: %v %+v", err, d)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if d, err = in.svc.Show(ctx, ref(job2)); err != nil || d.Status != "stopped" || d.StopRequested {
		t.Fatalf("after: %v %+v", err, d)
	}
}

// testCancelRequested: without the agent's code (svz jobs), the stop is asked for and the job
// dispatched; the agent's instance stops it at the delivery, running a failure handler that runs
// for stopped jobs.
func testCancelRequested(t *testing.T, s store.Store) {
	o := newOwner()
	f := &failures{}
	w := jobs.Define(o, "stopped", func(ctx context.Context, _ map[string]string) error {
		_, err := jobs.Await[review](ctx, "review", contract.Awaiting{})
		return err
	}, jobs.OnFailure(f.handler, jobs.AlsoWhenStopped()))
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, map[string]string{})
	if err := in.svc.Deliver(context.Background(), in.q.take()[0].M, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	in.q.take() // the timeout's delivery, for the failure handler
	q := &queue{}
	ops := operator(t, s, in.clock, q)
	d, err := ops.Cancel(context.Background(), ref(job))
	if err != nil || d.Status != "pending" || !d.StopRequested || len(d.Steps) != 1 || d.Steps[0].Status != "cancelled" || d.Steps[0].Kind != jobs.KindAwait {
		t.Fatalf("cancel: %v %+v", err, d)
	}
	msgs := q.take()
	if len(msgs) != 1 || msgs[0].M.Job != job {
		t.Fatalf("dispatched %+v", msgs)
	}
	in.q.msgs = msgs
	in.deliverAll(t, 5, nil)
	if d, err = ops.Show(context.Background(), ref(job)); err != nil || d.Status != "stopped" || len(f.got) != 1 || f.got[0].Cause != jobs.CauseStopped {
		t.Fatalf("stopped: %v %+v, handler runs %+v", err, d, f.got)
	}
	if _, err := ops.Cancel(context.Background(), ref(job)); !errors.Is(err, jobs.ErrEnded) {
		t.Fatalf("cancel of a stopped job: %v", err)
	}
	// A job that runs on an instance is only asked to stop: its renewal sees it.
	w2, entered := stoppable(t, o)
	job2 := start(t, in, w2, struct{}{})
	_, done := deliverInBackground(t, in)
	<-entered
	if d, err = ops.Cancel(context.Background(), ref(job2)); err != nil || d.Status != jobs.StatusRunning || !d.StopRequested || len(q.take()) != 0 ||
		d.Holder == "" || !d.LeaseUntil.After(in.clock.Now()) {
		t.Fatalf("cancel of a running job: %v %+v", err, d)
	}
	in.after.fire(t) // the lease renewal
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if d, err = ops.Show(context.Background(), ref(job2)); err != nil || d.Status != "stopped" {
		t.Fatalf("after the renewal: %v %+v", err, d)
	}
}

// testRetryPoolIndex: a retry through the pool's index (svz jobs on a plain server's store) is
// run by the next scan of a pool on the store.
func testRetryPoolIndex(t *testing.T, s store.Store) {
	if _, ok := s.(store.Lister); !ok {
		t.Skip("the store cannot list")
	}
	in, c, fail, job := failedJob(t, s)
	ops := operator(t, s, in.clock, jobs.PoolIndex{Store: s})
	if _, err := ops.Retry(context.Background(), ref(job)); err != nil {
		t.Fatal(err)
	}
	fail.Store(false)
	pool := jobs.NewPool(jobs.ScanEvery(0))
	svc := jobs.NewService(jobs.Config{Store: s, Dispatcher: pool, Logger: quiet, Works: func(string) (*jobs.Registry, time.Duration, bool) { return in.o.reg, 0, true }})
	t.Cleanup(svc.Close)
	if err := pool.Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := ops.Show(context.Background(), ref(job))
		if err != nil {
			t.Fatal(err)
		}
		if d.Status == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool did not run the retried job: %+v", d)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if c.get("one") != 1 || c.get("three") != 1 {
		t.Fatalf("runs %v", c.n)
	}
}
