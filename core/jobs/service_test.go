package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
)

// maxDelayQueue is a queue that holds a message back for at most max (0: no bound, as the
// DelayLimit interface allows).
type maxDelayQueue struct {
	queue
	max time.Duration
}

func (q *maxDelayQueue) MaxDelay() time.Duration { return q.max }

// TestSleepDelayLimits: a delayed message carries when it is due, and is held back as long as
// the queue allows, never longer than its delay: a sleep of 20 minutes hops once on a queue of
// 15 minutes at most, none on a queue without a bound.
func TestSleepDelayLimits(t *testing.T) {
	for _, tc := range []struct {
		max  time.Duration
		want string
	}{
		{15 * time.Minute, "[0s 15m0s 5m0s]"},
		{0, "[0s 20m0s]"},
		{time.Hour, "[0s 20m0s]"},
	} {
		t.Run(fmt.Sprint(tc.max), func(t *testing.T) {
			o, c := newOwner(), &counter{}
			w := sleepThenAfter(o, "sleepy", "wait", 20*time.Minute, c)
			q := &maxDelayQueue{max: tc.max}
			in := &instance{q: &q.queue, clock: newClock(), after: newManualAfter(), o: o}
			in.svc = jobs.NewService(jobs.Config{Store: memory.New(), Dispatcher: q, Now: in.clock.Now, After: in.after.After, Logger: quiet,
				Works: func(string) (*jobs.Registry, time.Duration, bool) { return o.reg, 0, true }})
			t.Cleanup(in.svc.Close)
			job := start(t, in, w, struct{}{})
			wake := in.clock.Now().Add(20 * time.Minute)
			sent := in.deliverInTurn(t, 5)
			for _, m := range sent[1:] {
				if m.M.At != wake.UnixMilli() {
					t.Fatalf("the sleep's message is due at %d, want %d", m.M.At, wake.UnixMilli())
				}
			}
			if delays(sent) != tc.want || !in.clock.Now().Equal(wake) || c.get("after") != 1 {
				t.Fatalf("delays %v, want %s; woke at %v, want %v", delays(sent), tc.want, in.clock.Now(), wake)
			}
			if st := stateOf(t, in, job).Job.Status; st != contract.StateCompleted {
				t.Fatalf("status %s", st)
			}
		})
	}
}

// TestLastReceiveSucceeds: a queue's last receive of a message fails the job only when that
// delivery fails (the job marked failed before the queue dead-letters the message); a delivery
// that fails without a known bound of receives leaves the job to the next one.
func TestLastReceiveSucceeds(t *testing.T) {
	for _, tc := range []struct {
		name string
		down bool
		d    jobs.Delivery
		want string
	}{
		{"last receive succeeds", false, jobs.Delivery{Receive: 2, MaxReceives: 2}, contract.StateCompleted},
		{"no bound, fails", true, jobs.Delivery{Receive: 5}, contract.StateActive},
		{"last receive fails", true, jobs.Delivery{Receive: 2, MaxReceives: 2}, contract.StateFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOwner()
			fs := &flaky{Store: memory.New()}
			w := jobs.Define(o, "job", func(ctx context.Context, _ struct{}) error {
				_, err := jobs.Step(ctx, "a", func(context.Context) (int, error) {
					if tc.down {
						n := 0
						fs.down = func(string) bool { n++; return n <= 8 } // the step's record and the release
					}
					return 1, nil
				})
				return err
			})
			unmarked := signalOn{msg: "job not marked failed before its message is dead-lettered", said: make(chan struct{}), once: &sync.Once{}}
			in := newLoggedInstance(t, fs, o, newClock(), &queue{}, slog.New(unmarked))
			job := start(t, in, w, struct{}{})
			err := in.svc.Deliver(context.Background(), in.q.take()[0].M, tc.d)
			fs.down = nil
			if st := stateOf(t, in, job).Job.Status; (err != nil) != tc.down || st != tc.want {
				t.Fatalf("delivery: %v; the job is %s, want %s", err, st, tc.want)
			}
			if unmarked.wasSaid() {
				t.Fatal("logged as not marked failed")
			}
		})
	}
}

// TestStartAgainDispatchesOnlyANewTask: a job started again with the same request is dispatched
// again only while its task was never delivered (the first call may have failed after the
// write); one handed on, or stopped before its first delivery, is not.
func TestStartAgainDispatchesOnlyANewTask(t *testing.T) {
	o, c := newOwner(), &counter{}
	w := threeSteps(o, c)
	in := newInstance(t, memory.New(), o, newClock(), &queue{})
	again := func(job string) []sent {
		t.Helper()
		if _, err := w.Start(in.ctx(), startReq(job), map[string]int{"n": 1}); err != nil {
			t.Fatal(err)
		}
		return in.q.take()
	}
	job := jobID(t)
	if _, err := w.Start(in.ctx(), startReq(job), map[string]int{"n": 1}); err != nil {
		t.Fatal(err)
	}
	first := in.q.take()
	if msgs := again(job); len(msgs) != 1 || msgs[0].M != first[0].M {
		t.Fatalf("a new task started again: dispatched %+v, want %+v", msgs, first)
	}
	// Handed on after its first step (its delivery's time was short).
	if err := in.svc.Deliver(context.Background(), first[0].M, jobs.Delivery{Deadline: in.clock.Now().Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if msgs := in.q.take(); len(msgs) != 1 || msgs[0].M.Attempt != 1 || c.get("one") != 1 || c.get("two") != 0 {
		t.Fatalf("handed on: %+v (steps %v), want the next attempt", msgs, c.n)
	}
	if msgs := again(job); len(msgs) != 0 {
		t.Fatalf("a job handed on, started again: dispatched %+v", msgs)
	}
	stopped := jobID(t)
	if _, err := w.Start(in.ctx(), startReq(stopped), map[string]int{"n": 1}); err != nil {
		t.Fatal(err)
	}
	in.q.take()
	if _, err := jobs.Stop(in.ctx(), stopped); err != nil {
		t.Fatal(err)
	}
	in.q.take()
	if msgs := again(stopped); len(msgs) != 0 || !strings.Contains(mustJSON(t, stateOf(t, in, stopped)), `"status":"cancelled"`) {
		t.Fatalf("a job stopped before its first delivery, started again: dispatched %+v; %s", msgs, mustJSON(t, stateOf(t, in, stopped)))
	}
}

// TestTimedOutBetweenDeliveries: a job whose timeout passed while it waited for its next
// delivery fails at that delivery, and its failure handler runs; no step runs again.
func TestTimedOutBetweenDeliveries(t *testing.T) {
	o, c, f := newOwner(), &counter{}, &failures{}
	w := jobs.Define(o, "slow", func(ctx context.Context, _ map[string]string) error {
		for _, name := range []string{"one", "two"} {
			if _, err := jobs.Step(ctx, name, func(context.Context) (int, error) { c.inc(name); return 1, nil }); err != nil {
				return err
			}
		}
		return nil
	}, jobs.Timeout(time.Minute), jobs.OnFailure(f.handler))
	in := newInstance(t, memory.New(), o, newClock(), &queue{})
	job := start(t, in, w, map[string]string{})
	if err := in.svc.Deliver(context.Background(), in.q.take()[0].M, jobs.Delivery{Deadline: in.clock.Now().Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	in.clock.Add(2 * time.Minute)
	in.deliverAll(t, 4, nil)
	if len(f.got) != 1 || f.got[0].Cause != jobs.CauseTimeout || c.get("one") != 1 || c.get("two") != 0 {
		t.Fatalf("handler runs %+v; steps %v", f.got, c.n)
	}
	if st := stateOf(t, in, job).Job.Status; st != contract.StateFailed {
		t.Fatalf("status %s", st)
	}
}

// claimRace is a store on which another instance writes a task's record once, right before
// a delivery's claim of it lands: the claim conflicts.
type claimRace struct {
	store.Store
	once sync.Once
}

func (r *claimRace) Update(ctx context.Context, key string, ver uint64, v []byte, exp time.Time) (store.Record, error) {
	if strings.HasPrefix(key, jobs.TaskKeyPrefix) && !strings.Contains(key, "/s/") {
		r.once.Do(func() {
			cur, err := r.Store.Get(ctx, key)
			if err == nil {
				_, err = r.Store.Update(ctx, key, cur.Version, cur.Value, exp)
			}
			if err != nil {
				panic(err)
			}
		})
	}
	return r.Store.Update(ctx, key, ver, v, exp)
}

// TestBusyClaimConflict: a delivery whose claim of the task conflicts with another write reads
// the task again and runs it.
func TestBusyClaimConflict(t *testing.T) {
	o, c := newOwner(), &counter{}
	w := threeSteps(o, c)
	in := newInstance(t, &claimRace{Store: memory.New()}, o, newClock(), &queue{})
	job := start(t, in, w, map[string]int{"n": 1})
	if err := in.svc.Deliver(context.Background(), in.q.take()[0].M, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	if st := stateOf(t, in, job).Job.Status; st != contract.StateCompleted || c.get("one") != 1 {
		t.Fatalf("status %s, steps %v", st, c.n)
	}
}

// sizeStore is a store of a chosen largest value (0: the store's own) that keeps the size of the
// last task record created.
type sizeStore struct {
	store.Store
	max     int
	created int
}

func (s *sizeStore) MaxValueSize() int {
	if s.max > 0 {
		return s.max
	}
	return s.Store.MaxValueSize()
}

func (s *sizeStore) Create(ctx context.Context, key string, v []byte, exp time.Time) (store.Record, error) {
	if strings.HasPrefix(key, jobs.TaskKeyPrefix) {
		s.created = len(v)
	}
	return s.Store.Create(ctx, key, v, exp)
}

// TestStartRecordAtTheSizeLimit: a job whose task record is exactly the store's largest value
// starts; one byte less of room refuses it, naming the sizes.
func TestStartRecordAtTheSizeLimit(t *testing.T) {
	o, c := newOwner(), &counter{}
	w := threeSteps(o, c)
	clk, job, input := newClock(), "job-at-the-limit", map[string]int{"n": 1}
	startOn := func(s *sizeStore) error {
		in := newInstance(t, s, o, clk, &queue{})
		_, err := w.Start(in.ctx(), startReq(job), input)
		return err
	}
	measured := &sizeStore{Store: memory.New()}
	if err := startOn(measured); err != nil {
		t.Fatal(err)
	}
	if err := startOn(&sizeStore{Store: memory.New(), max: measured.created}); err != nil {
		t.Fatalf("a record of exactly the largest value (%d bytes): %v", measured.created, err)
	}
	err := startOn(&sizeStore{Store: memory.New(), max: measured.created - 1})
	var tooLarge *jobs.InputTooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.Size != measured.created || tooLarge.Limit != measured.created-1 {
		t.Fatalf("a record one byte over: %v", err)
	}
}

// TestBuildOfTheFailedStep: a step result that does not decode names the build that recorded
// that step, not the job's first build.
func TestBuildOfTheFailedStep(t *testing.T) {
	s, clk, q := memory.New(), newClock(), &queue{}
	define := func(count func(ctx context.Context) error) (owner, *jobs.Work[struct{}]) {
		o := newOwner()
		w := jobs.Define(o, "typed", func(ctx context.Context, _ struct{}) error {
			if _, err := jobs.Step(ctx, "first", func(context.Context) (int, error) { return 1, nil }); err != nil {
				return err
			}
			if _, err := jobs.Await[review](ctx, "review", contract.Awaiting{}); err != nil {
				return err
			}
			return count(ctx)
		})
		return o, w
	}
	counted := func(ctx context.Context) error {
		if _, err := jobs.Step(ctx, "count", func(context.Context) (int, error) { return 7, nil }); err != nil {
			return err
		}
		_, err := jobs.Await[review](ctx, "again", contract.Awaiting{})
		return err
	}
	// The first build records "first" and waits; the second records "count" and waits again.
	o1, w1 := define(counted)
	a := buildInstance(t, s, o1, clk, q, oldBuild)
	job := start(t, a, w1, struct{}{})
	a.deliverAll(t, 2, nil)
	o2, _ := define(counted)
	answer(t, buildInstance(t, s, o2, clk, q, newBuild), job, "review")
	// The operator's view names the build of each recorded step; an open one is not recorded yet.
	d, err := operator(t, s, clk, q).Show(context.Background(), ref(job))
	if err != nil {
		t.Fatal(err)
	}
	var builds []string
	for _, st := range d.Steps {
		builds = append(builds, st.Name+"="+st.Build)
	}
	if want := "[first=" + oldBuild.String() + " review=" + newBuild.String() + " count=" + newBuild.String() + " again=]"; fmt.Sprint(builds) != want {
		t.Fatalf("steps' builds %v, want %s", builds, want)
	}
	// A third build reads "count" as another type.
	o3, _ := define(func(ctx context.Context) error {
		_, err := jobs.Step(ctx, "count", func(context.Context) (string, error) { return "seven", nil })
		return err
	})
	third := buildInstance(t, s, o3, clk, q, jobs.Build{SVZ: "v0.9.2", Revision: "cccccccccccccccc", Agent: "1.2.0"})
	answer(t, third, job, "again")
	got := mustJSON(t, stateOf(t, third, job))
	want := `"error":{"message":"jobs: the recorded result of step \"count\", recorded by agent 1.1.0, svz v0.9.1 (bbbbbbbbbbbb), ` +
		`does not decode into the step's type in agent 1.2.0, svz v0.9.2 (cccccccccccc)`
	if !strings.Contains(got, `"status":"failed"`) || !strings.Contains(got, want) {
		t.Fatalf("state %s\nwant %s", got, want)
	}
}

// TestRenewalOfALapsedLease: work between two steps that outlasts the delivery's lease (its
// renewal never ran) goes on to the next step in the same delivery when nobody took the task
// meanwhile: the lease is taken again.
func TestRenewalOfALapsedLease(t *testing.T) {
	o, c := newOwner(), &counter{}
	clk := newClock()
	w := jobs.Define(o, "long", func(ctx context.Context, _ struct{}) error {
		for _, name := range []string{"one", "two"} {
			if _, err := jobs.Step(ctx, name, func(context.Context) (int, error) { c.inc(name); return 1, nil }); err != nil {
				return err
			}
			clk.Add(jobs.DefaultLease + time.Second) // work between the steps
		}
		return nil
	})
	in := newInstance(t, memory.New(), o, clk, &queue{})
	job := start(t, in, w, struct{}{})
	if err := in.svc.Deliver(context.Background(), in.q.take()[0].M, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	if st := stateOf(t, in, job).Job.Status; st != contract.StateCompleted || c.get("two") != 1 || len(in.q.take()) != 0 {
		t.Fatalf("status %s, steps %v", st, c.n)
	}
}

// TestFailureHandlerRetryWaits: a failure handler that fails is run again after the work's
// backoff, not at once; and a job that ends its work past its timeout fails as timed out.
func TestFailureHandlerRetryWaits(t *testing.T) {
	o, f := newOwner(), &failures{fail: 1}
	w := jobs.Define(o, "doomed", func(ctx context.Context, _ map[string]string) error {
		return jobs.Permanent(errBoom)
	}, jobs.Backoff(3*time.Second), jobs.OnFailure(f.handler))
	in := newInstance(t, memory.New(), o, newClock(), &queue{})
	job := start(t, in, w, map[string]string{})
	if got := delays(in.deliverInTurn(t, 5)); got != "[0s 0s 3s]" || len(f.got) != 2 {
		t.Fatalf("deliveries after %v, handler runs %d; want [0s 0s 3s], 2", got, len(f.got))
	}
	if st := stateOf(t, in, job).Job.Status; st != contract.StateFailed {
		t.Fatalf("status %s", st)
	}
}

// TestWorkEndingPastItsTimeout: work that returns after its job's timeout passed (a step that
// outlasted it) fails the job as timed out, though the work itself succeeded.
func TestWorkEndingPastItsTimeout(t *testing.T) {
	o, clk := newOwner(), newClock()
	w := jobs.Define(o, "late", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Step(ctx, "long", func(context.Context) (int, error) { clk.Add(2 * time.Minute); return 1, nil })
		return err
	}, jobs.Timeout(time.Minute))
	in := newInstance(t, memory.New(), o, clk, &queue{})
	job := start(t, in, w, struct{}{})
	in.deliverAll(t, 2, nil)
	want := `"status":"failed","source":{"type":"fresh_start"},"error":{"message":"the job did not finish within 1m0s (its timeout)"}`
	if got := mustJSON(t, stateOf(t, in, job)); !strings.Contains(got, want) {
		t.Fatalf("state %s\nwant %s", got, want)
	}
}
