package jobs_test

import (
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
)

// suite2 runs the scenarios of jobs round two (fan-out, timers, limits, failure handlers, builds)
// on one store.
func suite2(t *testing.T, s store.Store) {
	t.Run("MapResultsInOrder", func(t *testing.T) { testMapInOrder(t, s) })
	t.Run("MapConcurrencyBound", func(t *testing.T) { testMapConcurrency(t, s) })
	t.Run("MapContinuation", func(t *testing.T) { testMapContinuation(t, s) })
	t.Run("MapItemRetry", func(t *testing.T) { testMapItemRetry(t, s) })
	t.Run("MapItemsChanged", func(t *testing.T) { testMapItemsChanged(t, s) })
	t.Run("Parallel", func(t *testing.T) { testParallel(t, s) })
	t.Run("Sleep", func(t *testing.T) { testSleep(t, s) })
	t.Run("SleepChained", func(t *testing.T) { testSleepChained(t, s) })
	t.Run("ParallelError", func(t *testing.T) { testParallelError(t, s) })
	t.Run("MapItemGivesUp", func(t *testing.T) { testMapItemGivesUp(t, s) })
	t.Run("MapLapsedButKept", func(t *testing.T) { testMapLapsedButKept(t, s) })
	t.Run("MapNamesAndCounts", func(t *testing.T) { testMapNamesAndCounts(t, s) })
	t.Run("MapItemGone", func(t *testing.T) { testMapItemGone(t, s) })
	t.Run("MapAfterRemovedStep", func(t *testing.T) { testMapAfterRemovedStep(t, s) })
	t.Run("OnFailure", func(t *testing.T) { testOnFailure(t, s) })
	t.Run("OnFailureTimeoutWhileAwaiting", func(t *testing.T) { testOnFailureAwaitTimeout(t, s) })
	t.Run("OnFailureStopped", func(t *testing.T) { testOnFailureStopped(t, s) })
	t.Run("StopWhileHandling", func(t *testing.T) { testStopWhileHandling(t, s) })
	t.Run("OnFailureHandlerFails", func(t *testing.T) { testOnFailureHandlerFails(t, s) })
	t.Run("OnFailureDeadLetter", func(t *testing.T) { testOnFailureLastReceive(t, s) })
	t.Run("ChangedStepType", func(t *testing.T) { testChangedType(t, s) })
	t.Run("RemovedStep", func(t *testing.T) { testRemovedStep(t, s) })
	t.Run("Patched", func(t *testing.T) { testPatched(t, s) })
	t.Run("ResultTooLarge", func(t *testing.T) { testTooLarge(t, s) })
	t.Run("LimitAcrossInstances", func(t *testing.T) { testLimitAcrossInstances(t, s) })
	t.Run("RateLimit", func(t *testing.T) { testRateLimit(t, s) })
	t.Run("LeaseLapsedCancelsStep", func(t *testing.T) { testLeaseLapsed(t, s) })
	t.Run("AwaitAnswerAndIds", func(t *testing.T) { testAwaitAnswer(t, s) })
	t.Run("CancelWithLabel", func(t *testing.T) { testCancelLabel(t, s) })
	t.Run("StartRefusals", func(t *testing.T) { testStartRefusals(t, s) })
}

// gate holds the runs of a function until the test lets them go, and tells how many run at once.
type gate struct {
	mu      sync.Mutex
	running int
	most    int
	entered chan int
	release chan struct{}
}

func newGate() *gate { return &gate{entered: make(chan int, 1000), release: make(chan struct{})} }

func (g *gate) enter(i int) {
	g.mu.Lock()
	g.running++
	g.most = max(g.most, g.running)
	g.mu.Unlock()
	g.entered <- i
	<-g.release
	g.mu.Lock()
	g.running--
	g.mu.Unlock()
}

func testMapInOrder(t *testing.T, s store.Store) {
	o, c := newOwner(), &counter{}
	var got []string
	w := jobs.Define(o, "fan", func(ctx context.Context, in []int) error {
		res, err := jobs.Map(ctx, "double", in, func(_ context.Context, n int) (string, error) {
			c.inc(fmt.Sprint(n))
			return fmt.Sprint(n * 2), nil
		}, jobs.Concurrency(3), jobs.Title("Double"))
		got = res
		return err
	})
	cs := &counting{Store: s}
	in := newInstance(t, cs, o, newClock(), &queue{})
	items := []int{5, 1, 4, 2, 3, 9, 7}
	job := start(t, in, w, items)
	before := cs.writes.Load()
	if n := in.deliverAll(t, 3, nil); n != 1 {
		t.Fatalf("%d deliveries", n)
	}
	// One write per item, one for the fan-out's record, two for the delivery (claim, end).
	if writes := cs.writes.Load() - before; writes != int64(len(items))+3 {
		t.Fatalf("%d writes for %d items, want %d", writes, len(items), len(items)+3)
	}
	if strings.Join(got, ",") != "10,2,8,4,6,18,14" {
		t.Fatalf("results %v", got)
	}
	for _, n := range items {
		if c.get(fmt.Sprint(n)) != 1 {
			t.Fatalf("item %d ran %d times", n, c.get(fmt.Sprint(n)))
		}
	}
	want := `{"id":"` + job + `-double","activity":"operation","status":"completed","title":"Double","outputs":[],"items":{"done":7,"total":7}}`
	if got := mustJSON(t, stateOf(t, in, job).Cases[0].Steps[0]); got != want {
		t.Fatalf("step\n%s\nwant\n%s", got, want)
	}
	// A later delivery of a work that reaches the completed fan-out again reads its results.
	got = nil
	if err := in.svc.Deliver(context.Background(), jobs.Message{Agent: agentSlug, Workspace: wsID, Job: job, Work: "fan"}, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	if got != nil {
		t.Fatalf("a finished job ran again: %v", got)
	}
}

func testMapConcurrency(t *testing.T, s store.Store) {
	o := newOwner()
	g := newGate()
	w := jobs.Define(o, "fan-bounded", func(ctx context.Context, in []int) error {
		_, err := jobs.Map(ctx, "work", in, func(_ context.Context, n int) (int, error) { g.enter(n); return n, nil }, jobs.Concurrency(4))
		return err
	})
	in := newInstance(t, s, o, newClock(), &queue{})
	items := make([]int, 20)
	for i := range items {
		items[i] = i
	}
	start(t, in, w, items)
	_, done := deliverInBackground(t, in)
	// Four enter; no fifth until one is released.
	for range 4 {
		<-g.entered
	}
	select {
	case i := <-g.entered:
		t.Fatalf("item %d entered while 4 ran", i)
	default:
	}
	close(g.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if g.most != 4 {
		t.Fatalf("at most %d ran at once, want 4", g.most)
	}
}

// testMapContinuation: a delivery whose time is nearly up starts no more items, records those that
// ran, and hands on; the next runs only the others.
func testMapContinuation(t *testing.T, s store.Store) {
	o, c := newOwner(), &counter{}
	clk := newClock()
	w := jobs.Define(o, "fan-slow", func(ctx context.Context, in []int) error {
		_, err := jobs.Map(ctx, "slow", in, func(_ context.Context, n int) (int, error) {
			c.inc(fmt.Sprint(n))
			clk.Add(4 * time.Second)
			return n, nil
		}, jobs.Concurrency(1))
		return err
	})
	in := newInstance(t, s, o, clk, &queue{})
	job := start(t, in, w, []int{0, 1, 2, 3, 4, 5, 6, 7})
	n := in.deliverAll(t, 20, func() jobs.Delivery { return jobs.Delivery{Deadline: clk.Now().Add(15 * time.Second)} })
	if n < 3 {
		t.Fatalf("%d deliveries, want at least 3", n)
	}
	for i := range 8 {
		if c.get(fmt.Sprint(i)) != 1 {
			t.Fatalf("item %d ran %d times", i, c.get(fmt.Sprint(i)))
		}
	}
	if st := stateOf(t, in, job).Job.Status; st != contract.StateCompleted {
		t.Fatalf("status %s", st)
	}
}

func testMapItemRetry(t *testing.T, s store.Store) {
	o, c := newOwner(), &counter{}
	w := jobs.Define(o, "fan-flaky", func(ctx context.Context, in []int) error {
		_, err := jobs.Map(ctx, "call", in, func(_ context.Context, n int) (int, error) {
			c.inc(fmt.Sprint(n))
			if n == 2 && c.get("2") < 3 {
				return 0, errBoom
			}
			return n, nil
		}, jobs.Concurrency(1))
		return err
	}, jobs.Backoff(time.Second))
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, []int{1, 2, 3})
	// The first delivery runs 1 and 2 (fails); 3 does not start; the retry after 1 s runs 2 (fails
	// again), the next after 2 s runs 2 and 3.
	if got := delays(in.deliverInTurn(t, 10)); got != "[0s 1s 2s]" || c.get("1") != 1 || c.get("2") != 3 || c.get("3") != 1 {
		t.Fatalf("delays %v, runs 1:%d 2:%d 3:%d", got, c.get("1"), c.get("2"), c.get("3"))
	}
	if st := stateOf(t, in, job).Job.Status; st != contract.StateCompleted {
		t.Fatalf("status %s", st)
	}
	// An item that keeps failing fails the job with its index, the other results kept.
	o2 := newOwner()
	w2 := jobs.Define(o2, "fan-doomed", func(ctx context.Context, in []int) error {
		_, err := jobs.Map(ctx, "call", in, func(_ context.Context, n int) (int, error) {
			if n == 1 {
				return 0, jobs.Permanent(errors.New("no such lead"))
			}
			return n, nil
		}, jobs.Concurrency(1)) // in order: item 2 would race item 1's failure otherwise
		return err
	})
	in2 := newInstance(t, s, o2, newClock(), &queue{})
	job2 := start(t, in2, w2, []int{0, 1, 2})
	in2.deliverAll(t, 3, nil)
	got := mustJSON(t, stateOf(t, in2, job2))
	if !strings.Contains(got, `"error":{"message":"item 1 of fan-out \"call\" failed: no such lead"}`) || !strings.Contains(got, `"status":"failed","title":"call","outputs":[],"items":{"done":1,"total":3}`) {
		t.Fatalf("state %s", got)
	}
}

func testMapItemsChanged(t *testing.T, s store.Store) {
	o := newOwner()
	var items atomic.Value
	items.Store([]string{"a", "b", "c"})
	first := true
	w := jobs.Define(o, "fan-changing", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Map(ctx, "m", items.Load().([]string), func(_ context.Context, x string) (string, error) {
			if x == "c" && first {
				first = false
				return "", errBoom // retried later
			}
			return x, nil
		}, jobs.Concurrency(1))
		return err
	}, jobs.Backoff(time.Second))
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	m := in.q.take()[0]
	if err := in.svc.Deliver(context.Background(), m.M, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	items.Store([]string{"a", "x", "c"}) // not the items whose results are recorded
	in.deliverAll(t, 3, nil)
	got := mustJSON(t, stateOf(t, in, job))
	if !strings.Contains(got, `item 1 of fan-out \"m\" changed since its result was recorded`) {
		t.Fatalf("state %s", got)
	}
}

func testParallel(t *testing.T, s store.Store) {
	o, c := newOwner(), &counter{}
	bothIn := make(chan struct{}, 2)
	release := make(chan struct{})
	var sum int
	w := jobs.Define(o, "par", func(ctx context.Context, _ struct{}) error {
		var a, b int
		err := jobs.Parallel(ctx, func(ctx context.Context) error {
			var err error
			a, err = jobs.Step(ctx, "a", func(context.Context) (int, error) { c.inc("a"); bothIn <- struct{}{}; <-release; return 1, nil })
			return err
		}, func(ctx context.Context) error {
			var err error
			b, err = jobs.Step(ctx, "b", func(context.Context) (int, error) { c.inc("b"); bothIn <- struct{}{}; <-release; return 2, nil })
			return err
		})
		if err != nil {
			return err
		}
		sum, err = jobs.Step(ctx, "sum", func(context.Context) (int, error) { c.inc("sum"); return a + b, nil })
		return err
	})
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	_, done := deliverInBackground(t, in)
	<-bothIn
	<-bothIn // both steps run at once
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if sum != 3 || c.get("a") != 1 || c.get("b") != 1 || c.get("sum") != 1 {
		t.Fatalf("sum %d, runs a:%d b:%d sum:%d", sum, c.get("a"), c.get("b"), c.get("sum"))
	}
	if st := stateOf(t, in, job); st.Job.Status != contract.StateCompleted || len(st.Cases[0].Steps) != 3 {
		t.Fatalf("state %s", mustJSON(t, st))
	}
}

// testParallelError: a branch's error is Parallel's, whichever branch returns it: the work goes no
// further.
func testParallelError(t *testing.T, s store.Store) {
	o, c := newOwner(), &counter{}
	w := jobs.Define(o, "par-fails", func(ctx context.Context, _ struct{}) error {
		if err := jobs.Parallel(ctx, func(context.Context) error { return nil }, func(context.Context) error {
			return jobs.Permanent(errors.New("the second branch gave up"))
		}); err != nil {
			return err
		}
		_, err := jobs.Step(ctx, "after", func(context.Context) (int, error) { c.inc("after"); return 1, nil })
		return err
	})
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	in.deliverAll(t, 3, nil)
	if got := mustJSON(t, stateOf(t, in, job)); c.get("after") != 0 || !strings.Contains(got, `"status":"failed"`) || !strings.Contains(got, "the second branch gave up") {
		t.Fatalf("after ran %d; state %s", c.get("after"), got)
	}
}

// testMapItemGivesUp: an item that keeps failing is tried MaxAttempts times, one delivery each,
// then fails the job saying how many times.
func testMapItemGivesUp(t *testing.T, s store.Store) {
	o, c := newOwner(), &counter{}
	w := jobs.Define(o, "fan-gives-up", func(ctx context.Context, in []int) error {
		_, err := jobs.Map(ctx, "call", in, func(_ context.Context, n int) (int, error) {
			c.inc(fmt.Sprint(n))
			if n == 1 {
				return 0, errBoom
			}
			return n, nil
		}, jobs.Concurrency(1))
		return err
	}, jobs.MaxAttempts(3), jobs.Backoff(time.Second))
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, []int{0, 1, 2})
	if n := in.deliverAll(t, 10, nil); n != 3 || c.get("1") != 3 || c.get("0") != 1 {
		t.Fatalf("%d deliveries, item 1 ran %d times, item 0 %d: want 3, 3 and 1", n, c.get("1"), c.get("0"))
	}
	if got := mustJSON(t, stateOf(t, in, job)); !strings.Contains(got, `"error":{"message":"item 1 of fan-out \"call\" failed 3 times; last error: boom"}`) {
		t.Fatalf("state %s", got)
	}
}

// testMapLapsedButKept: an item that outlasts the lease on the clock, with no other instance
// taking the task, is recorded: the lease is confirmed (and renewed), not given up.
func testMapLapsedButKept(t *testing.T, s store.Store) {
	o, c := newOwner(), &counter{}
	clk := newClock()
	w := jobs.Define(o, "fan-slow", func(ctx context.Context, in []int) error {
		_, err := jobs.Map(ctx, "call", in, func(_ context.Context, n int) (int, error) {
			c.inc(fmt.Sprint(n))
			clk.Add(jobs.DefaultLease + jobs.SkewMargin + time.Second) // a paused process
			return n, nil
		}, jobs.Concurrency(1))
		return err
	})
	in := newInstance(t, s, o, clk, &queue{})
	job := start(t, in, w, []int{0, 1})
	if n := in.deliverAll(t, 3, nil); n != 1 || c.get("0") != 1 || c.get("1") != 1 {
		t.Fatalf("%d deliveries, items ran %d and %d times: want 1, 1 and 1", n, c.get("0"), c.get("1"))
	}
	if st := stateOf(t, in, job); st.Job.Status != contract.StateCompleted {
		t.Fatalf("state %s", mustJSON(t, st))
	}
}

// testMapNamesAndCounts: Map refuses a name a step or a timer recorded, and items that are not
// those of the completed fan-out of that name; Concurrency(0) is the default, a negative one is
// refused.
func testMapNamesAndCounts(t *testing.T, s store.Store) {
	run := func(ctx context.Context, n int) (int, error) { return n, nil }
	var items, fewer atomic.Int32
	items.Store(3)
	fewer.Store(3)
	for _, c := range []struct {
		name string
		work func(ctx context.Context, _ struct{}) error
		want string // the job's error, "" when it completes
	}{
		{"after a step", func(ctx context.Context, _ struct{}) error {
			if _, err := jobs.Step(ctx, "x", func(context.Context) (int, error) { return 1, nil }); err != nil {
				return err
			}
			_, err := jobs.Map(ctx, "x", []int{1, 2}, run)
			return err
		}, `jobs: \"x\" is not a fan-out: step names are unique within a work`},
		{"after a timer", func(ctx context.Context, _ struct{}) error {
			if err := jobs.Sleep(ctx, "x", time.Minute); err != nil {
				return err
			}
			_, err := jobs.Map(ctx, "x", []int{1, 2}, run)
			return err
		}, `jobs: \"x\" is not a fan-out: step names are unique within a work`},
		{"other items", func(ctx context.Context, _ struct{}) error {
			if _, err := jobs.Map(ctx, "x", make([]int, items.Load()), run); err != nil {
				return err
			}
			if err := jobs.Sleep(ctx, "pause", time.Minute); err != nil {
				return err
			}
			items.Store(4)
			_, err := jobs.Map(ctx, "x", make([]int, items.Load()), run)
			return err
		}, `jobs: fan-out \"x\" had 3 items when it completed, 4 now: its items must be the same at every delivery`},
		{"fewer items", func(ctx context.Context, _ struct{}) error {
			if _, err := jobs.Map(ctx, "x", make([]int, fewer.Load()), run); err != nil {
				return err
			}
			if err := jobs.Sleep(ctx, "pause", time.Minute); err != nil {
				return err
			}
			fewer.Store(2)
			_, err := jobs.Map(ctx, "x", make([]int, fewer.Load()), run)
			return err
		}, `jobs: fan-out \"x\" had 3 items when it completed, 2 now: its items must be the same at every delivery`},
		{"no items, replayed", func(ctx context.Context, _ struct{}) error {
			if _, err := jobs.Map(ctx, "x", []int{}, run); err != nil {
				return err
			}
			return jobs.Sleep(ctx, "pause", time.Minute) // the next delivery replays the fan-out
		}, ""},
		{"default concurrency", func(ctx context.Context, _ struct{}) error {
			_, err := jobs.Map(ctx, "x", []int{1, 2}, run, jobs.Concurrency(0))
			return err
		}, ""},
		{"negative concurrency", func(ctx context.Context, _ struct{}) error {
			_, err := jobs.Map(ctx, "x", []int{1, 2}, run, jobs.Concurrency(-1))
			return err
		}, `jobs: fan-out \"x\": Concurrency must be at least 1`},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := newOwner()
			w := jobs.Define(o, "named", c.work)
			in := newInstance(t, s, o, newClock(), &queue{})
			job := start(t, in, w, struct{}{})
			in.deliverAll(t, 4, nil)
			got := mustJSON(t, stateOf(t, in, job))
			if c.want == "" && !strings.Contains(got, `"status":"completed"`) || c.want != "" && !strings.Contains(got, `"error":{"message":"`+c.want+`"}`) {
				t.Fatalf("state %s\nwant %s", got, cmp.Or(c.want, "completed"))
			}
		})
	}
}

// testMapItemGone: a completed fan-out whose item record is gone when a later delivery replays it
// fails the job, naming the item, instead of running the item again.
func testMapItemGone(t *testing.T, s store.Store) {
	o, c := newOwner(), &counter{}
	w := jobs.Define(o, "fan-gone", func(ctx context.Context, _ struct{}) error {
		if _, err := jobs.Map(ctx, "x", []int{0, 1}, func(_ context.Context, n int) (int, error) { c.inc(fmt.Sprint(n)); return n, nil }); err != nil {
			return err
		}
		return jobs.Sleep(ctx, "pause", time.Minute)
	})
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	if err := in.svc.Deliver(context.Background(), in.q.take()[0].M, jobs.Delivery{}); err != nil { // the items, then the sleep
		t.Fatal(err)
	}
	key := jobs.TaskKeyPrefix + url.PathEscape(agentSlug) + "/" + url.PathEscape(wsID) + "/" + url.PathEscape(job) + "/i/x/1"
	rec, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("item 1's record: %v", err)
	}
	if err := s.Delete(context.Background(), key, rec.Version); err != nil {
		t.Fatal(err)
	}
	in.deliverAll(t, 2, nil)
	if got := mustJSON(t, stateOf(t, in, job)); c.get("1") != 1 || !strings.Contains(got, `"error":{"message":"jobs: fan-out \"x\" completed, but the result of its item 1 is gone (expired?)"}`) {
		t.Fatalf("item 1 ran %d times; state %s", c.get("1"), got)
	}
}

// testMapAfterRemovedStep: new code that no longer reaches a step an earlier build recorded fails
// the job when it starts a fan-out instead, before any item runs.
func testMapAfterRemovedStep(t *testing.T, s store.Store) {
	clk, q := newClock(), &queue{}
	o1 := newOwner()
	w1 := jobs.Define(o1, "reshaped", func(ctx context.Context, _ struct{}) error {
		if _, err := jobs.Step(ctx, "enrich", func(context.Context) (int, error) { return 2, nil }); err != nil {
			return err
		}
		return jobs.Sleep(ctx, "pause", time.Minute)
	})
	a := buildInstance(t, s, o1, clk, q, oldBuild)
	job := start(t, a, w1, struct{}{})
	if err := a.svc.Deliver(context.Background(), q.take()[0].M, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	o2, c := newOwner(), &counter{}
	jobs.Define(o2, "reshaped", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Map(ctx, "score", []int{0, 1}, func(_ context.Context, n int) (int, error) { c.inc("score"); return n, nil })
		return err
	})
	b := buildInstance(t, s, o2, clk, q, newBuild)
	b.deliverAll(t, 3, nil)
	if got := mustJSON(t, stateOf(t, b, job)); c.get("score") != 0 || !strings.Contains(got, `"status":"failed"`) ||
		!strings.Contains(got, `step \"enrich\", recorded by agent 1.0.0, svz v0.9.0 (aaaaaaaaaaaa), is no longer reached by agent 1.1.0, svz v0.9.1 (bbbbbbbbbbbb)`) {
		t.Fatalf("score ran %d; state %s", c.get("score"), got)
	}
}

func testSleep(t *testing.T, s store.Store) {
	o, c := newOwner(), &counter{}
	w := jobs.Define(o, "sleepy", func(ctx context.Context, _ struct{}) error {
		if _, err := jobs.Step(ctx, "before", func(context.Context) (int, error) { c.inc("before"); return 1, nil }); err != nil {
			return err
		}
		if err := jobs.Sleep(ctx, "cool-down", 2*time.Hour, jobs.Title("Cool down")); err != nil {
			return err
		}
		_, err := jobs.Step(ctx, "after", func(context.Context) (int, error) { c.inc("after"); return 2, nil })
		return err
	})
	cs := &counting{Store: s}
	in := newInstance(t, cs, o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	in.svc.Deliver(context.Background(), in.q.take()[0].M, jobs.Delivery{})
	msgs := in.q.take()
	if len(msgs) != 1 || msgs[0].Delay != 2*time.Hour || msgs[0].M.At != in.clock.Now().Add(2*time.Hour).UnixMilli() {
		t.Fatalf("dispatched %+v, want one message in 2h", msgs)
	}
	until := in.clock.Now().Add(2 * time.Hour).Format(time.RFC3339Nano)
	snap := stateOf(t, in, job)
	got := mustJSON(t, snap)
	if snap.Job.Status != contract.StateActive ||
		!strings.Contains(got, `"waiting":{"reason":"timer","step_id":"`+job+`-cool-down","until":"`+until+`"}`) ||
		!strings.Contains(got, `{"id":"`+job+`-cool-down","activity":"operation","status":"pending","title":"Cool down","outputs":[],"scheduled_at":"`+until+`"}`) {
		t.Fatalf("state while sleeping %s", got)
	}
	// A duplicate delivered now does nothing, not even a write.
	before := cs.writes.Load()
	dup := msgs[0].M
	dup.At = 0
	if err := in.svc.Deliver(context.Background(), dup, jobs.Delivery{}); err != nil || cs.writes.Load() != before || c.get("after") != 0 {
		t.Fatalf("a duplicate while sleeping: %v, %d writes, after ran %d", err, cs.writes.Load()-before, c.get("after"))
	}
	in.clock.Add(2 * time.Hour)
	if err := in.svc.Deliver(context.Background(), msgs[0].M, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	if c.get("before") != 1 || c.get("after") != 1 {
		t.Fatalf("runs before:%d after:%d", c.get("before"), c.get("after"))
	}
	snap = stateOf(t, in, job)
	if snap.Job.Status != contract.StateCompleted || snap.Cases[0].Steps[1].Status != contract.StateCompleted || snap.Job.Extra["waiting"] != nil {
		t.Fatalf("state after the sleep %s", mustJSON(t, snap))
	}
}

// limitedQueue holds messages back 15 minutes at most, as SQS does.
type limitedQueue struct{ queue }

func (*limitedQueue) MaxDelay() time.Duration { return 15 * time.Minute }

// testSleepChained: on a queue that holds a message back 15 minutes at most, a sleep of an hour is
// handed on every 15 minutes without reading or writing the store, and the job wakes on time.
func testSleepChained(t *testing.T, s store.Store) {
	o, c := newOwner(), &counter{}
	w := sleepThenAfter(o, "sleepy-long", "wait", time.Hour, c)
	cs := &counting{Store: s}
	q := &limitedQueue{}
	in := &instance{q: &q.queue, clock: newClock(), after: newManualAfter(), o: o}
	in.svc = jobs.NewService(jobs.Config{Store: cs, Dispatcher: q, Now: in.clock.Now, After: in.after.After, Logger: quiet,
		Works: func(string) (*jobs.Registry, time.Duration, bool) { return o.reg, 0, true }})
	job := start(t, in, w, struct{}{})
	wake := in.clock.Now().Add(time.Hour)
	var delays []time.Duration
	writes := cs.writes.Load()
	hops := 0
	for range 10 {
		msgs := in.q.take()
		if len(msgs) != 1 {
			t.Fatalf("%d messages", len(msgs))
		}
		delays = append(delays, msgs[0].Delay)
		in.clock.Add(msgs[0].Delay)
		before := cs.writes.Load()
		if err := in.svc.Deliver(context.Background(), msgs[0].M, jobs.Delivery{}); err != nil {
			t.Fatal(err)
		}
		if c.get("after") == 1 {
			break
		}
		if len(delays) > 1 && cs.writes.Load() != before {
			t.Fatalf("a hop wrote to the store")
		}
		hops++
	}
	if fmt.Sprint(delays) != "[0s 15m0s 15m0s 15m0s 15m0s]" || !in.clock.Now().Equal(wake) {
		t.Fatalf("delays %v; woke at %v, want %v", delays, in.clock.Now(), wake)
	}
	_ = writes
	if st := stateOf(t, in, job).Job.Status; st != contract.StateCompleted {
		t.Fatalf("status %s", st)
	}
}

// failures records the failure handler's runs.
type failures struct {
	mu   sync.Mutex
	got  []jobs.Failure
	in   []string
	fail int // fail this many runs first
}

func (f *failures) handler(ctx context.Context, in map[string]string, fl jobs.Failure) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, fl)
	f.in = append(f.in, in["lead"])
	if len(f.got) <= f.fail {
		return errBoom
	}
	return nil
}

func testOnFailure(t *testing.T, s store.Store) {
	o := newOwner()
	f := &failures{fail: 1}
	w := jobs.Define(o, "undone", func(ctx context.Context, _ map[string]string) error {
		if _, err := jobs.Step(ctx, "import", func(context.Context) (int, error) { return 3, nil }); err != nil {
			return err
		}
		_, err := jobs.Step(ctx, "notify", func(context.Context) (int, error) { return 0, errBoom })
		return err
	}, jobs.MaxAttempts(2), jobs.Backoff(time.Second), jobs.OnFailure(f.handler))
	var published []contract.Effect
	var pmu sync.Mutex
	in := newInstance(t, s, o, newClock(), &queue{})
	in.svc = jobs.NewService(jobs.Config{Store: s, Dispatcher: in.q, Now: in.clock.Now, After: in.after.After, Logger: quiet,
		Works: func(string) (*jobs.Registry, time.Duration, bool) { return o.reg, 0, true },
		Publish: func(_ context.Context, _, _ string, e []contract.Effect) {
			pmu.Lock()
			published = append(published, e...)
			pmu.Unlock()
		}})
	job := jobID(t)
	if _, err := w.Start(in.ctx(), startReq(job), map[string]string{"lead": "acme"}); err != nil {
		t.Fatal(err)
	}
	// notify fails twice (retry after 1 s), then the handler runs: fails once, retried after 1 s.
	n := in.deliverAll(t, 10, nil)
	if n != 4 {
		t.Fatalf("%d deliveries, want 4 (two of the work, two of the handler)", n)
	}
	wantReason := `step "notify" failed 2 times; last error: boom`
	if len(f.got) != 2 || f.got[1] != (jobs.Failure{Job: job, Cause: jobs.CauseStep, Reason: wantReason, Step: "notify"}) || f.in[1] != "acme" {
		t.Fatalf("handler runs %+v (inputs %v)", f.got, f.in)
	}
	snap := stateOf(t, in, job)
	if snap.Job.Status != contract.StateFailed || !strings.Contains(mustJSON(t, snap), `"error":{"message":"`+strings.ReplaceAll(wantReason, `"`, `\"`)+`"}`) {
		t.Fatalf("state %s", mustJSON(t, snap))
	}
	// job.synced once, after the handler ran.
	if len(published) != 1 || published[0].Status != contract.StateFailed || published[0].Message != wantReason {
		t.Fatalf("published %+v", published)
	}
	// Any later delivery runs nothing more.
	if err := in.svc.Deliver(context.Background(), jobs.Message{Agent: agentSlug, Workspace: wsID, Job: job, Work: "undone"}, jobs.Delivery{}); err != nil || len(f.got) != 2 {
		t.Fatalf("a later delivery: %v, %d handler runs", err, len(f.got))
	}
}

// testOnFailureHandlerFails: a failure handler that keeps failing is tried as many times as the
// work's steps (MaxAttempts), then the job fails saying so: never a loop.
func testOnFailureHandlerFails(t *testing.T, s store.Store) {
	o := newOwner()
	f := &failures{fail: 100}
	w := jobs.Define(o, "undone-for-good", func(ctx context.Context, _ map[string]string) error {
		_, err := jobs.Step(ctx, "notify", func(context.Context) (int, error) { return 0, jobs.Permanent(errBoom) })
		return err
	}, jobs.MaxAttempts(3), jobs.Backoff(time.Second), jobs.OnFailure(f.handler))
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, map[string]string{"lead": "acme"})
	if n := in.deliverAll(t, 10, nil); n != 4 || len(f.got) != 3 {
		t.Fatalf("%d deliveries, %d handler runs: want 4 (the work's, three of the handler's) and 3", n, len(f.got))
	}
	if got := mustJSON(t, stateOf(t, in, job)); !strings.Contains(got, `"status":"failed"`) || !strings.Contains(got, `the failure handler failed: boom`) {
		t.Fatalf("state %s", got)
	}
}

// testOnFailureAwaitTimeout: a job that waits for an answer past its timeout is delivered at its
// timeout when its work has a failure handler, which then runs.
func testOnFailureAwaitTimeout(t *testing.T, s store.Store) {
	o := newOwner()
	f := &failures{}
	w := jobs.Define(o, "waits-forever", func(ctx context.Context, _ map[string]string) error {
		_, err := jobs.Await[review](ctx, "review", contract.Awaiting{})
		return err
	}, jobs.Timeout(time.Hour), jobs.OnFailure(f.handler))
	unscheduled := signalOn{msg: "the timeout of a waiting job was not scheduled: its failure handler runs at its next delivery", said: make(chan struct{}), once: &sync.Once{}}
	in := newLoggedInstance(t, s, o, newClock(), &queue{}, slog.New(unscheduled))
	job := start(t, in, w, map[string]string{})
	in.svc.Deliver(context.Background(), in.q.take()[0].M, jobs.Delivery{})
	msgs := in.q.take()
	// The message says when it is due: a queue that holds it back less delivers it early, and
	// the delivery hands it on.
	if len(msgs) != 1 || msgs[0].Delay != time.Hour || msgs[0].M.At != in.clock.Now().Add(time.Hour).UnixMilli() {
		t.Fatalf("the timeout of a waiting job is not scheduled: %+v", msgs)
	}
	if unscheduled.wasSaid() {
		t.Fatal("logged as not scheduled")
	}
	in.q.msgs = msgs
	in.deliverAll(t, 4, nil)
	if len(f.got) != 1 || f.got[0].Cause != jobs.CauseTimeout || f.got[0].Reason != "the job did not finish within 1h0m0s (its timeout)" {
		t.Fatalf("handler runs %+v", f.got)
	}
	if st := stateOf(t, in, job); st.Job.Status != contract.StateFailed {
		t.Fatalf("state %s", mustJSON(t, st))
	}
}

func testOnFailureStopped(t *testing.T, s store.Store) {
	for _, c := range []struct {
		name      string
		also      bool
		fail      int    // the handler's failures before it succeeds
		wantError string // the job's error member, "" for none
	}{
		{"not asked", false, 0, ""},
		{"asked", true, 0, ""},
		// A stopped job has no reason of its own: the handler's failure is the whole message.
		{"asked, failing", true, 100, `"error":{"message":"the failure handler failed: boom"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := newOwner()
			f := &failures{fail: c.fail}
			var opts []jobs.FailureOption
			if c.also {
				opts = append(opts, jobs.AlsoWhenStopped())
			}
			w := jobs.Define(o, "stopped", func(ctx context.Context, _ map[string]string) error {
				_, err := jobs.Await[review](ctx, "review", contract.Awaiting{})
				return err
			}, jobs.OnFailure(f.handler, opts...), jobs.MaxAttempts(1))
			in := newInstance(t, s, o, newClock(), &queue{})
			job := start(t, in, w, map[string]string{})
			if err := in.svc.Deliver(context.Background(), in.q.take()[0].M, jobs.Delivery{}); err != nil {
				t.Fatal(err)
			}
			in.q.take() // the timeout's delivery, for the failure handler
			if c.also {
				// The handler's dispatch fails: the stop fails, and its retry dispatches it.
				in.q.fail = errors.New("queue down")
				if _, err := jobs.Stop(in.ctx(), job); err == nil || !strings.HasSuffix(err.Error(), "dispatch the failure handler of stopped job \""+job+"\": queue down") {
					t.Fatalf("stop with the queue down: %v", err)
				}
				in.q.fail = nil
			}
			if _, err := jobs.Stop(in.ctx(), job); err != nil {
				t.Fatal(err)
			}
			if n := len(in.q.msgs); n != map[bool]int{false: 0, true: 1}[c.also] {
				t.Fatalf("the stop dispatched %d messages", n)
			}
			in.deliverAll(t, 2, nil)
			want := 0
			if c.also {
				want = 1
			}
			if len(f.got) != want || c.also && f.got[0].Cause != jobs.CauseStopped {
				t.Fatalf("handler runs %+v", f.got)
			}
			snap := stateOf(t, in, job)
			got := mustJSON(t, snap)
			if snap.Job.Status != contract.StateCancelled || (c.wantError == "") == strings.Contains(got, `"error"`) || !strings.Contains(got, c.wantError) {
				t.Fatalf("state %s\nwant cancelled with %s", got, cmp.Or(c.wantError, "no error"))
			}
		})
	}
}

// testStopWhileHandling: job.stop while the failure handler of a failed job runs changes nothing
// and sends nothing (the handler's delivery holds the task); the job ends failed.
func testStopWhileHandling(t *testing.T, s store.Store) {
	o := newOwner()
	entered, release := make(chan struct{}), make(chan struct{})
	w := jobs.Define(o, "failed", func(ctx context.Context, _ map[string]string) error {
		return jobs.Permanent(errBoom)
	}, jobs.OnFailure(func(context.Context, map[string]string, jobs.Failure) error {
		close(entered)
		<-release
		return nil
	}, jobs.AlsoWhenStopped()))
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, map[string]string{})
	if err := in.svc.Deliver(context.Background(), in.q.take()[0].M, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	_, done := deliverInBackground(t, in) // the failure handler's
	<-entered
	if snap, err := jobs.Stop(in.ctx(), job); err != nil || snap.Job.Status != contract.StateFailed || len(in.q.msgs) != 0 {
		t.Fatalf("stop while the handler runs: %v, %d sent, %s", err, len(in.q.msgs), mustJSON(t, snap))
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if snap := stateOf(t, in, job); snap.Job.Status != contract.StateFailed || len(in.q.msgs) != 0 {
		t.Fatalf("state %s, %d sent", mustJSON(t, snap), len(in.q.msgs))
	}
}

// testOnFailureLastReceive: a message whose last receive fails (dead-lettered next) fails the job
// and its failure handler runs, once.
func testOnFailureLastReceive(t *testing.T, s store.Store) {
	o := newOwner()
	f := &failures{}
	fs := &flaky{Store: s}
	w := jobs.Define(o, "dead-lettered", func(ctx context.Context, _ map[string]string) error {
		_, err := jobs.Step(ctx, "a", func(context.Context) (int, error) {
			n := 0
			fs.down = func(string) bool { n++; return n <= 8 }
			return 1, nil
		})
		return err
	}, jobs.OnFailure(f.handler))
	in := newInstance(t, fs, o, newClock(), &queue{})
	job := start(t, in, w, map[string]string{})
	m := in.q.take()[0]
	if err := in.svc.Deliver(context.Background(), m.M, jobs.Delivery{Receive: 1, MaxReceives: 1}); err == nil {
		t.Fatal("acknowledged")
	}
	fs.down = nil
	in.deliverAll(t, 2, nil)
	if len(f.got) != 1 || f.got[0].Cause != jobs.CauseDelivery || !strings.HasPrefix(f.got[0].Reason, "the task was delivered 1 times without finishing") {
		t.Fatalf("handler runs %+v", f.got)
	}
	if st := stateOf(t, in, job).Job.Status; st != contract.StateFailed {
		t.Fatalf("status %s", st)
	}
}

// deploy is a change of code between deliveries: the instances of each build on one store.
func buildInstance(t *testing.T, s store.Store, o owner, c *clock, q *queue, b jobs.Build) *instance {
	in := &instance{q: q, clock: c, after: newManualAfter(), o: o}
	in.svc = jobs.NewService(jobs.Config{Store: s, Dispatcher: q, Now: c.Now, After: in.after.After, Logger: quiet,
		Works: func(string) (*jobs.Registry, time.Duration, bool) { return o.reg, 0, true },
		Info:  func(string) jobs.AgentInfo { return jobs.AgentInfo{Build: b} }})
	t.Cleanup(in.svc.Close)
	return in
}

var (
	oldBuild = jobs.Build{SVZ: "v0.9.0", Revision: "aaaaaaaaaaaaaaaa", Agent: "1.0.0"}
	newBuild = jobs.Build{SVZ: "v0.9.1", Revision: "bbbbbbbbbbbbbbbb", Agent: "1.1.0"}
)

// testChangedType: a job started on one build and continued on another whose step returns
// another type fails at that step, naming it and both builds: no panic, no redelivery.
func testChangedType(t *testing.T, s store.Store) {
	clk, q := newClock(), &queue{}
	o1 := newOwner()
	w1 := jobs.Define(o1, "typed", func(ctx context.Context, _ struct{}) error {
		if _, err := jobs.Step(ctx, "count", func(context.Context) (int, error) { return 7, nil }); err != nil {
			return err
		}
		_, err := jobs.Await[review](ctx, "review", contract.Awaiting{})
		return err
	})
	a := buildInstance(t, s, o1, clk, q, oldBuild)
	job := start(t, a, w1, struct{}{})
	a.deliverAll(t, 2, nil)
	o2 := newOwner()
	jobs.Define(o2, "typed", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Step(ctx, "count", func(context.Context) (map[string]int, error) { return map[string]int{"n": 7}, nil })
		return err
	})
	b := buildInstance(t, s, o2, clk, q, newBuild)
	if err := b.svc.Deliver(context.Background(), jobs.Message{Agent: agentSlug, Workspace: wsID, Job: job, Work: "typed"}, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	// The task was awaiting: the message did nothing. Answer it, then the new build delivers.
	req := startReq(job)
	step := job + "-review"
	req.StepID, req.Input = &step, json.RawMessage(`{}`)
	if _, err := jobs.Answer(b.ctx(), req); err != nil {
		t.Fatal(err)
	}
	if n := b.deliverAll(t, 3, nil); n != 1 {
		t.Fatalf("%d deliveries", n)
	}
	got := mustJSON(t, stateOf(t, b, job))
	want := `"error":{"message":"jobs: the recorded result of step \"count\", recorded by agent 1.0.0, svz v0.9.0 (aaaaaaaaaaaa), ` +
		`does not decode into the step's type in agent 1.1.0, svz v0.9.1 (bbbbbbbbbbbb)`
	if !strings.Contains(got, `"status":"failed"`) || !strings.Contains(got, want) {
		t.Fatalf("state %s\nwant %s", got, want)
	}
}

// testRemovedStep: new code that no longer reaches a step an earlier build recorded fails the
// job there, naming the step and both builds; the new code's own step does not run.
func testRemovedStep(t *testing.T, s store.Store) {
	clk, q := newClock(), &queue{}
	o1 := newOwner()
	w1 := jobs.Define(o1, "shape", func(ctx context.Context, _ struct{}) error {
		if _, err := jobs.Step(ctx, "find", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return err
		}
		if _, err := jobs.Step(ctx, "enrich", func(context.Context) (int, error) { return 2, nil }); err != nil {
			return err
		}
		return jobs.Sleep(ctx, "pause", time.Minute)
	})
	a := buildInstance(t, s, o1, clk, q, oldBuild)
	job := start(t, a, w1, struct{}{})
	m := q.take()[0]
	if err := a.svc.Deliver(context.Background(), m.M, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	o2, c := newOwner(), &counter{}
	jobs.Define(o2, "shape", func(ctx context.Context, _ struct{}) error {
		if _, err := jobs.Step(ctx, "find", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return err
		}
		_, err := jobs.Step(ctx, "score", func(context.Context) (int, error) { c.inc("score"); return 3, nil })
		return err
	})
	b := buildInstance(t, s, o2, clk, q, newBuild)
	b.deliverAll(t, 3, nil)
	got := mustJSON(t, stateOf(t, b, job))
	if c.get("score") != 0 || !strings.Contains(got, `"status":"failed"`) ||
		!strings.Contains(got, `step \"enrich\", recorded by agent 1.0.0, svz v0.9.0 (aaaaaaaaaaaa), is no longer reached by agent 1.1.0, svz v0.9.1 (bbbbbbbbbbbb)`) {
		t.Fatalf("score ran %d; state %s", c.get("score"), got)
	}
}

// testPatched: a job that went past the patch point on old code keeps the old path; one that
// reaches it on new code takes the new; each delivery after takes the recorded path.
func testPatched(t *testing.T, s store.Store) {
	clk, q := newClock(), &queue{}
	o1 := newOwner()
	w1 := jobs.Define(o1, "patchy", func(ctx context.Context, _ struct{}) error {
		if _, err := jobs.Step(ctx, "old-score", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return err
		}
		return jobs.Sleep(ctx, "pause", time.Minute)
	})
	a := buildInstance(t, s, o1, clk, q, oldBuild)
	oldJob := start(t, a, w1, struct{}{})
	if err := a.svc.Deliver(context.Background(), q.take()[0].M, jobs.Delivery{}); err != nil { // records old-score, sleeps
		t.Fatal(err)
	}
	q.take()
	o2, c := newOwner(), &counter{}
	var paths []bool
	w2 := jobs.Define(o2, "patchy", func(ctx context.Context, _ struct{}) error {
		p, err := jobs.Patched(ctx, "new-scoring")
		if err != nil {
			return err
		}
		paths = append(paths, p)
		if p {
			if _, err := jobs.Step(ctx, "new-score", func(context.Context) (int, error) { c.inc("new"); return 2, nil }); err != nil {
				return err
			}
		} else if _, err := jobs.Step(ctx, "old-score", func(context.Context) (int, error) { c.inc("old"); return 1, nil }); err != nil {
			return err
		}
		if jobs.StartedBuild(ctx) == oldBuild {
			c.inc("started-old")
		}
		return jobs.Sleep(ctx, "pause", time.Minute)
	})
	b := buildInstance(t, s, o2, clk, q, newBuild)
	clk.Add(time.Minute)
	if err := b.svc.Deliver(context.Background(), jobs.Message{Agent: agentSlug, Workspace: wsID, Job: oldJob, Work: "patchy"}, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	newJob := start(t, b, w2, struct{}{})
	b.deliverAll(t, 4, func() jobs.Delivery { clk.Add(time.Minute); return jobs.Delivery{} })
	if fmt.Sprint(paths) != "[false true true]" || c.get("old") != 0 || c.get("new") != 1 || c.get("started-old") != 1 {
		t.Fatalf("paths %v; runs old %d new %d started-old %d", paths, c.get("old"), c.get("new"), c.get("started-old"))
	}
	for _, job := range []string{oldJob, newJob} {
		snap := stateOf(t, b, job)
		if snap.Job.Status != contract.StateCompleted || strings.Contains(mustJSON(t, snap), "patch:") {
			t.Fatalf("state %s", mustJSON(t, snap))
		}
	}
}

// testTooLarge: a result the store cannot hold fails the job at once, naming the step, the size
// and the store's limit; the step does not run again.
func testTooLarge(t *testing.T, s store.Store) {
	o, c := newOwner(), &counter{}
	size := s.MaxValueSize() + 1000
	w := jobs.Define(o, "large", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Step(ctx, "report", func(context.Context) ([]byte, error) {
			c.inc("report")
			return noise(size), nil
		})
		return err
	})
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	if n := in.deliverAll(t, 3, nil); n != 1 || c.get("report") != 1 {
		t.Fatalf("%d deliveries, the step ran %d times", n, c.get("report"))
	}
	got := mustJSON(t, stateOf(t, in, job))
	if !strings.Contains(got, `"status":"failed"`) || !strings.Contains(got, `step \"report\" returned `) ||
		!strings.Contains(got, "more than the store holds in a record") {
		t.Fatalf("state %s", got)
	}
}

// testLimitAcrossInstances: jobs under a limit of 2 on two instances never run more than 2 at
// once; the others wait their turn, shown in job.sync, and all complete.
func testLimitAcrossInstances(t *testing.T, s store.Store) {
	o := newOwner()
	lim := jobs.NewLimit("provider-"+jobID(t), jobs.MaxRunning(2), jobs.Shared())
	g := newGate()
	w := jobs.Define(o, "limited", func(ctx context.Context, n int) error {
		_, err := jobs.Step(ctx, "call", func(context.Context) (int, error) { g.enter(n); return n, nil })
		return err
	}, jobs.Limited(lim))
	clk, q := newClock(), &queue{}
	a := newInstance(t, s, o, clk, q)
	b := newInstance(t, s, o, clk, q)
	var jobsStarted []string
	for i := range 6 {
		jobsStarted = append(jobsStarted, start(t, a, w, i))
	}
	msgs := q.take()
	errs := make(chan error, 20)
	deliver := func(in *instance, m jobs.Message) {
		go func() { errs <- in.svc.Deliver(context.Background(), m, jobs.Delivery{}) }()
	}
	// Two run (one on each instance), the four others wait.
	for i, m := range msgs {
		deliver([]*instance{a, b}[i%2], m.M)
		if i < 2 {
			<-g.entered
		} else if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	waiting := q.take()
	if len(waiting) != 4 {
		t.Fatalf("%d messages of waiting jobs, want 4", len(waiting))
	}
	snap := stateOf(t, a, jobsStarted[5])
	if !strings.Contains(mustJSON(t, snap), `"waiting":{"reason":"limit","limit":"`+"provider-") {
		t.Fatalf("a waiting job's state %s", mustJSON(t, snap))
	}
	// Each job that ends hands its slot to the next in line.
	close(g.release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		next := q.take()
		if len(next) == 0 {
			break
		}
		for _, m := range next {
			if m.Delay == 0 {
				deliver(b, m.M)
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if g.most != 2 {
		t.Fatalf("at most %d ran at once, want 2", g.most)
	}
	for _, job := range jobsStarted {
		if st := stateOf(t, a, job).Job.Status; st != contract.StateCompleted {
			t.Fatalf("job %s: %s", job, st)
		}
	}
}

// testRateLimit: items under a rate of 2 per minute run 2, then wait for the next tokens.
func testRateLimit(t *testing.T, s store.Store) {
	o, c := newOwner(), &counter{}
	lim := jobs.NewLimit("rate-"+jobID(t), jobs.Rate(2, time.Minute))
	w := jobs.Define(o, "rated", func(ctx context.Context, in []int) error {
		_, err := jobs.Map(ctx, "call", in, func(_ context.Context, n int) (int, error) { c.inc("call"); return n, nil },
			jobs.Concurrency(1), jobs.Under(lim))
		return err
	})
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, []int{1, 2, 3, 4, 5})
	in.svc.Deliver(context.Background(), in.q.take()[0].M, jobs.Delivery{})
	if c.get("call") != 2 {
		t.Fatalf("%d calls in the first minute, want 2", c.get("call"))
	}
	msgs := in.q.take()
	if len(msgs) != 1 || msgs[0].Delay != 30*time.Second {
		t.Fatalf("handed on %+v, want once in 30s (the next token)", msgs)
	}
	if got := mustJSON(t, stateOf(t, in, job)); !strings.Contains(got, `"waiting":{"reason":"limit","step_id":"`+job+`-call/2","limit":"rate-`) {
		t.Fatalf("state %s", got)
	}
	in.q.msgs = msgs
	in.deliverAll(t, 10, nil)
	if c.get("call") != 5 || stateOf(t, in, job).Job.Status != contract.StateCompleted {
		t.Fatalf("%d calls; %s", c.get("call"), mustJSON(t, stateOf(t, in, job)))
	}
}

// testLeaseLapsed: a delivery paused past its lease (SIGSTOP) while another instance took the
// task over has its running step cancelled at its next renewal tick, before it writes anything:
// the step's effect is not finished twice, and CheckLease says so.
func testLeaseLapsed(t *testing.T, s store.Store) {
	o, c := newOwner(), &counter{}
	entered := make(chan struct{}, 2)
	cause := make(chan error, 1)
	var checked error
	w := jobs.Define(o, "paused", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Step(ctx, "effect", func(ctx context.Context) (int, error) {
			if c.get("entered") == 0 {
				c.inc("entered")
				entered <- struct{}{}
				<-ctx.Done()
				cause <- context.Cause(ctx)
				checked = jobs.CheckLease(ctx)
				return 0, ctx.Err()
			}
			c.inc("effect")
			return 1, nil
		})
		return err
	})
	clk := newClock()
	a := newInstance(t, s, o, clk, &queue{})
	b := newInstance(t, s, o, clk, &queue{})
	job := start(t, a, w, struct{}{})
	m, done := deliverInBackground(t, a)
	<-entered
	clk.Add(jobs.DefaultLease + jobs.SkewMargin + time.Second) // A is paused past its lease
	if err := b.svc.Deliver(context.Background(), m, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	a.after.fire(t) // A resumes: its renewal tick finds its lease past
	if err := <-cause; !errors.Is(err, jobs.ErrLeaseLost) {
		t.Fatalf("the step's context ended with %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !errors.Is(checked, jobs.ErrLeaseLost) || c.get("effect") != 1 {
		t.Fatalf("CheckLease %v; effect ran %d times", checked, c.get("effect"))
	}
	if st := stateOf(t, b, job).Job.Status; st != contract.StateCompleted {
		t.Fatalf("status %s", st)
	}
}

func testAwaitAnswer(t *testing.T, s store.Store) {
	o := newOwner()
	var got jobs.Answered[review]
	w := jobs.Define(o, "answered", func(ctx context.Context, _ struct{}) error {
		a, err := jobs.AwaitAnswer[review](ctx, "review", contract.Awaiting{Fields: []contract.FieldDefinition{{ID: "approved", Label: "Approve", Type: contract.FieldBoolean}}},
			jobs.InCase("report", "deliverable", "Report"), jobs.Activity(contract.ActivityDelegation))
		got = a
		return err
	})
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	in.deliverAll(t, 2, nil)
	snap := stateOf(t, in, job)
	if c := snap.Cases[0]; c.ID != jobs.CaseID(job, "report") || c.Steps[0].ID != jobs.StepID(job, "review") || c.Steps[0].Activity != contract.ActivityDelegation {
		t.Fatalf("state %s", mustJSON(t, snap))
	}
	req := startReq(job)
	req.Actor.UserID = "user-42"
	for _, tc := range []struct {
		step string
		want error
	}{{"nope", jobs.ErrNoStep}, {jobs.StepID(job, "review"), nil}, {jobs.StepID(job, "review"), nil}} { // the same answer again: a retry
		req.StepID, req.Input = &tc.step, json.RawMessage(`{"approved":true}`)
		if _, err := jobs.Answer(in.ctx(), req); !errors.Is(err, tc.want) || tc.want == nil && err != nil {
			t.Fatalf("answer to %s: %v, want %v", tc.step, err, tc.want)
		}
	}
	answeredAt := in.clock.Now()
	in.clock.Add(time.Minute)
	in.deliverAll(t, 2, nil)
	if !got.Value.Approved || got.By != "user-42" || !got.At.Equal(answeredAt) {
		t.Fatalf("answer %+v", got)
	}
	// Once the answer is recorded as the step's own record, a second answer is still refused.
	if _, err := jobs.Answer(in.ctx(), req); !errors.Is(err, jobs.ErrNotAwaiting) {
		t.Fatalf("answer after the job went on: %v", err)
	}
}

func testCancelLabel(t *testing.T, s store.Store) {
	o := newOwner()
	f := &failures{}
	w := jobs.Define(o, "rejected", func(ctx context.Context, _ map[string]string) error {
		return jobs.Cancel("Rejected by the reviewer")
	}, jobs.OnFailure(f.handler, jobs.AlsoWhenStopped()))
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, map[string]string{})
	in.deliverAll(t, 2, nil)
	snap := stateOf(t, in, job)
	if snap.Job.Status != contract.StateCancelled || snap.Job.Display == nil || snap.Job.Display.StateLabel != "Rejected by the reviewer" || len(f.got) != 0 {
		t.Fatalf("state %s; handler runs %d", mustJSON(t, snap), len(f.got))
	}
}

func testStartRefusals(t *testing.T, s store.Store) {
	o := newOwner()
	w := jobs.Define(o, "refusing", func(ctx context.Context, in map[string]string) error { return nil })
	jobs.Define(o, "other", func(ctx context.Context, in map[string]string) error { return nil })
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, map[string]string{"a": "1"})
	if _, err := w.Start(in.ctx(), startReq(job), map[string]string{"a": "2"}); !errors.Is(err, jobs.ErrOtherInput) {
		t.Fatalf("a second start with another input: %v", err)
	}
	req := startReq("")
	req.JobID = nil
	if _, err := w.Start(in.ctx(), req, map[string]string{}); !errors.Is(err, jobs.ErrNoJobID) {
		t.Fatalf("a start without a job id: %v", err)
	}
	big := map[string]string{"blob": string(hexNoise(s.MaxValueSize() * 2))}
	if _, err := w.Start(in.ctx(), startReq(job+"-big"), big); !errors.As(err, new(*jobs.InputTooLargeError)) {
		t.Fatalf("a start with a large input: %v", err)
	}
}

// noise is n bytes that do not compress.
func noise(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func hexNoise(n int) []byte { return []byte(hex.EncodeToString(noise(n / 2))) }

// TestSleepZero: a sleep of 0 (a configured pause that is off) is no step and no write.
func TestSleepZero(t *testing.T) {
	cs := &counting{Store: memoryStore(t)}
	o, c := newOwner(), &counter{}
	w := sleepThenAfter(o, "no-pause", "pause", 0, c)
	in := newInstance(t, cs, o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	before := cs.writes.Load()
	if n := in.deliverAll(t, 2, nil); n != 1 {
		t.Fatalf("%d deliveries", n)
	}
	snap := stateOf(t, in, job)
	if w := cs.writes.Load() - before; w != 3 || c.get("after") != 1 || len(snap.Cases[0].Steps) != 1 || snap.Job.Status != contract.StateCompleted {
		t.Fatalf("%d writes (want 3: claim, step, end); state %s", w, mustJSON(t, snap))
	}
}

func memoryStore(t *testing.T) store.Store {
	s := memory.New()
	t.Cleanup(func() { _ = s.Close() })
	return s
}
