// Tests written for mutants that lived in make mutate runs (docs/development.md): each fails
// on its mutant.
package jobs_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
)

// itemStore wraps a store to play tricks on the records of fan-out items (keys with "/i/", or
// with keys when set): another instance's record written first, a store that refuses the size,
// a smaller limit.
type itemStore struct {
	store.Store
	keys      string
	limit     int  // MaxValueSize's answer when not 0
	preempt   bool // write the item's record before the caller does, as another instance would
	tooLarge  bool // refuse every item record with store.ErrTooLarge
	mu        sync.Mutex
	creates   map[string]int // item key → Create calls
	lastValue int            // length of the last item value given to Create
}

func (s *itemStore) MaxValueSize() int {
	if s.limit != 0 {
		return s.limit
	}
	return s.Store.MaxValueSize()
}

func (s *itemStore) Create(ctx context.Context, key string, v []byte, exp time.Time) (store.Record, error) {
	if !strings.Contains(key, cmp.Or(s.keys, "/i/")) {
		return s.Store.Create(ctx, key, v, exp)
	}
	s.mu.Lock()
	if s.creates == nil {
		s.creates = map[string]int{}
	}
	s.creates[key]++
	s.lastValue = len(v)
	s.mu.Unlock()
	if s.tooLarge {
		return store.Record{}, fmt.Errorf("%w: the store's own limit", store.ErrTooLarge)
	}
	if s.preempt {
		if _, err := s.Store.Create(ctx, key, v, exp); err != nil {
			return store.Record{}, err
		}
	}
	return s.Store.Create(ctx, key, v, exp)
}

func (s *itemStore) calls() (keys, most int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.creates {
		keys, most = keys+1, max(most, n)
	}
	return keys, most
}

// runItems runs a job that fans out 3 items on s (each counted, each returning its double and
// 2 KB of incompressible bytes, so that an item's record is the largest the job writes) and
// returns its state as JSON, the fan-out's results (the doubles) and how often each item ran.
func runItems(t *testing.T, s store.Store) (string, []int, *counter) {
	t.Helper()
	o, c := newOwner(), &counter{}
	var got []int
	type result struct {
		Double int
		Pad    []byte
	}
	w := jobs.Define(o, "items", func(ctx context.Context, in []int) error {
		res, err := jobs.Map(ctx, "double", in, func(_ context.Context, n int) (result, error) {
			c.inc(fmt.Sprint(n))
			return result{Double: 2 * n, Pad: noise(2048)}, nil
		})
		got = nil
		for _, r := range res {
			got = append(got, r.Double)
		}
		return err
	})
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, []int{1, 2, 3})
	if n := in.deliverAll(t, 3, nil); n != 1 {
		t.Fatalf("%d deliveries", n)
	}
	return mustJSON(t, stateOf(t, in, job)), got, c
}

// TestItemRecordedByAnother: an item whose record another instance wrote first takes that
// record's result, written once: the store's "exists" is final, not retried, not a failure.
func TestItemRecordedByAnother(t *testing.T) {
	s := &itemStore{Store: memory.New(), preempt: true}
	state, got, c := runItems(t, s)
	if !strings.Contains(state, `"status":"completed"`) || fmt.Sprint(got) != "[2 4 6]" {
		t.Fatalf("results %v, state %s", got, state)
	}
	if keys, most := s.calls(); keys != 3 || most != 1 {
		t.Fatalf("%d item records, Create called up to %d times for one", keys, most)
	}
	for _, n := range []string{"1", "2", "3"} {
		if c.get(n) != 1 {
			t.Fatalf("item %s ran %d times", n, c.get(n))
		}
	}
}

// TestItemStoreRefusesSize: a store that refuses an item's record as too large fails the job at
// once, naming the item, without trying the write again.
func TestItemStoreRefusesSize(t *testing.T) {
	s := &itemStore{Store: memory.New(), tooLarge: true}
	state, _, _ := runItems(t, s)
	if !strings.Contains(state, `"status":"failed"`) || !strings.Contains(state, `step \"double (item `) ||
		!strings.Contains(state, "more than the store holds in a record") {
		t.Fatalf("state %s", state)
	}
	if _, most := s.calls(); most != 1 {
		t.Fatalf("an item's record written %d times", most)
	}
}

// TestItemAtSizeLimit: an item's record of exactly the store's limit is written; one byte over
// it, the job fails before any write.
func TestItemAtSizeLimit(t *testing.T) {
	probe := &itemStore{Store: memory.New()}
	if state, _, _ := runItems(t, probe); !strings.Contains(state, `"status":"completed"`) {
		t.Fatalf("state %s", state)
	}
	size := probe.lastValue // the items' records all have this size: same hash, same result length
	at := &itemStore{Store: memory.New(), limit: size}
	if state, got, _ := runItems(t, at); !strings.Contains(state, `"status":"completed"`) || fmt.Sprint(got) != "[2 4 6]" {
		t.Fatalf("at the limit (%d bytes): results %v, state %s", size, got, state)
	}
	over := &itemStore{Store: memory.New(), limit: size - 1}
	state, _, _ := runItems(t, over)
	if !strings.Contains(state, `"status":"failed"`) || !strings.Contains(state, "more than the store holds in a record") {
		t.Fatalf("one byte over the limit: state %s", state)
	}
	if keys, _ := over.calls(); keys != 0 {
		t.Fatalf("%d item records written over the limit", keys)
	}
}

// TestRunningLimitOverTime: a limit on running jobs only (no rate) is taken again and again as
// time passes: no token bucket is kept for it (one with a rate of 0 would divide by zero and
// write a NaN the store cannot hold).
func TestRunningLimitOverTime(t *testing.T) {
	o := newOwner()
	lim := jobs.NewLimit("one-at-a-time", jobs.MaxRunning(1))
	w := jobs.Define(o, "limited", func(ctx context.Context, n int) error {
		_, err := jobs.Step(ctx, "call", func(context.Context) (int, error) { return n, nil })
		return err
	}, jobs.Limited(lim))
	clk := newClock()
	in := newInstance(t, memory.New(), o, clk, &queue{})
	for i := range 3 {
		job := start(t, in, w, i)
		if n := in.deliverAll(t, 3, nil); n != 1 {
			t.Fatalf("job %d: %d deliveries", i, n)
		}
		if state := mustJSON(t, stateOf(t, in, job)); !strings.Contains(state, `"status":"completed"`) {
			t.Fatalf("job %d: %s", i, state)
		}
		clk.Add(time.Second)
	}
}

// TestSleepOutsideWork: SleepUntil outside a work's function is refused as Sleep is.
func TestSleepOutsideWork(t *testing.T) {
	if err := jobs.SleepUntil(context.Background(), "later", time.Now().Add(time.Hour)); !errors.Is(err, jobs.ErrNotInWork) {
		t.Fatalf("SleepUntil: %v", err)
	}
	if err := jobs.Sleep(context.Background(), "later", time.Hour); !errors.Is(err, jobs.ErrNotInWork) {
		t.Fatalf("Sleep: %v", err)
	}
}

// TestSleepNamedAsAnOpenStep: a Sleep that takes the name of a step still open (failed, to be
// retried) fails the job, naming the clash, instead of sleeping.
func TestSleepNamedAsAnOpenStep(t *testing.T) {
	o := newOwner()
	var deliveries atomic.Int32
	w := jobs.Define(o, "clash", func(ctx context.Context, _ struct{}) error {
		if deliveries.Add(1) == 1 {
			_, err := jobs.Step(ctx, "fetch", func(context.Context) (int, error) { return 0, errors.New("try again") })
			return err
		}
		return jobs.Sleep(ctx, "fetch", time.Minute)
	})
	clk := newClock()
	in := newInstance(t, memory.New(), o, clk, &queue{})
	job := start(t, in, w, struct{}{})
	in.deliverAll(t, 3, func() jobs.Delivery { clk.Add(time.Hour); return jobs.Delivery{} })
	state := mustJSON(t, stateOf(t, in, job))
	if !strings.Contains(state, `"status":"failed"`) || !strings.Contains(state, `\"fetch\" is not a Sleep step: step names are unique within a work`) {
		t.Fatalf("after %d deliveries: %s", deliveries.Load(), state)
	}
}

// TestParallelSleepsTakeTheEarliest: two branches that sleep hand the job on to the earlier
// wake-up, whichever asked first, and both sleeps count from the delivery that reached them
// (a sleep reached after the other had handed the job on used to be skipped, then counted from
// the next delivery).
func TestParallelSleepsTakeTheEarliest(t *testing.T) {
	for _, first := range []time.Duration{time.Minute, 10 * time.Minute} {
		t.Run(fmt.Sprint("first ", first), func(t *testing.T) {
			o := newOwner()
			second := 11*time.Minute - first
			w := jobs.Define(o, "naps", func(ctx context.Context, _ struct{}) error {
				asked := make(chan struct{})
				return jobs.Parallel(ctx, func(ctx context.Context) error {
					defer close(asked) // Sleep has handed the job on when it returns
					return jobs.Sleep(ctx, "first", first)
				}, func(ctx context.Context) error {
					<-asked
					return jobs.Sleep(ctx, "second", second)
				})
			})
			in := newInstance(t, memory.New(), o, newClock(), &queue{})
			job := start(t, in, w, struct{}{})
			if err := in.svc.Deliver(context.Background(), in.q.take()[0].M, jobs.Delivery{}); err != nil {
				t.Fatal(err)
			}
			msgs := in.q.take()
			if len(msgs) != 1 || msgs[0].Delay != time.Minute {
				t.Fatalf("dispatched %+v, want one message in 1m", msgs)
			}
			name := map[bool]string{true: "first", false: "second"}[first == time.Minute]
			until := in.clock.Now().Add(time.Minute).Format(time.RFC3339Nano)
			if got := mustJSON(t, stateOf(t, in, job)); !strings.Contains(got, `"waiting":{"reason":"timer","step_id":"`+job+`-`+name+`","until":"`+until+`"}`) {
				t.Fatalf("state %s", got)
			}
			// The longer sleep counts from the first delivery too: 9 minutes are left of it.
			in.clock.Add(time.Minute)
			if err := in.svc.Deliver(context.Background(), msgs[0].M, jobs.Delivery{}); err != nil {
				t.Fatal(err)
			}
			if msgs = in.q.take(); len(msgs) != 1 || msgs[0].Delay != 9*time.Minute {
				t.Fatalf("dispatched %+v, want one message in 9m", msgs)
			}
			in.clock.Add(9 * time.Minute)
			if err := in.svc.Deliver(context.Background(), msgs[0].M, jobs.Delivery{}); err != nil {
				t.Fatal(err)
			}
			if got := mustJSON(t, stateOf(t, in, job)); !strings.Contains(got, `"status":"completed"`) {
				t.Fatalf("state %s", got)
			}
		})
	}
}

// TestSleepBadNameWhileHandingOn: a Sleep with an invalid name is refused even when another
// branch has already handed the job on.
func TestSleepBadNameWhileHandingOn(t *testing.T) {
	o := newOwner()
	var got error
	w := jobs.Define(o, "naps", func(ctx context.Context, _ struct{}) error {
		asked := make(chan struct{})
		return jobs.Parallel(ctx, func(ctx context.Context) error {
			defer close(asked)
			return jobs.Sleep(ctx, "first", time.Minute)
		}, func(ctx context.Context) error {
			<-asked
			got = jobs.Sleep(ctx, " ", time.Minute)
			return got
		})
	})
	in := newInstance(t, memory.New(), o, newClock(), &queue{})
	start(t, in, w, struct{}{})
	if err := in.svc.Deliver(context.Background(), in.q.take()[0].M, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	if got == nil || !strings.Contains(got.Error(), "a step name is 1 to") {
		t.Fatalf("Sleep(\" \") while handing on: %v", got)
	}
}

// TestParallelSleepsEqual: of two sleeps that wake at the same time, job.sync shows the one that
// asked first.
func TestParallelSleepsEqual(t *testing.T) {
	o := newOwner()
	w := jobs.Define(o, "naps", func(ctx context.Context, _ struct{}) error {
		asked := make(chan struct{})
		return jobs.Parallel(ctx, func(ctx context.Context) error {
			defer close(asked)
			return jobs.Sleep(ctx, "first", 5*time.Minute)
		}, func(ctx context.Context) error {
			<-asked
			return jobs.Sleep(ctx, "second", 5*time.Minute)
		})
	})
	in := newInstance(t, memory.New(), o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	if err := in.svc.Deliver(context.Background(), in.q.take()[0].M, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	if msgs := in.q.take(); len(msgs) != 1 || msgs[0].Delay != 5*time.Minute {
		t.Fatalf("dispatched %+v, want one message in 5m", msgs)
	}
	if got := mustJSON(t, stateOf(t, in, job)); !strings.Contains(got, `"waiting":{"reason":"timer","step_id":"`+job+`-first"`) {
		t.Fatalf("state %s", got)
	}
}

// signalOn is a log handler that closes said the first time a record with message msg is logged.
type signalOn struct {
	msg  string
	said chan struct{}
	once *sync.Once
}

func (h signalOn) Enabled(context.Context, slog.Level) bool { return true }
func (h signalOn) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h signalOn) WithGroup(string) slog.Handler            { return h }
func (h signalOn) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() { close(h.said) })
	}
	return nil
}

// wasSaid reports whether the record was logged.
func (h signalOn) wasSaid() bool {
	select {
	case <-h.said:
		return true
	default:
		return false
	}
}

// retryLogged signals the first "retried in a later delivery" of a fan-out item.
func retryLogged() signalOn {
	return signalOn{msg: "fan-out item failed: retried in a later delivery", said: make(chan struct{}), once: &sync.Once{}}
}

// signalled waits for ch to close; the minute is a bound on failure, not a timing.
func signalled(ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-time.After(time.Minute):
		return errors.New("never signalled")
	}
}

// TestItemFailsForGoodAfterARetry: an item that fails for good after another item of the same
// fan-out asked for a retry fails the job in that delivery, naming it; the retry asked first
// does not hide it.
func TestItemFailsForGoodAfterARetry(t *testing.T) {
	o := newOwner()
	running := make(chan struct{}) // closed when item 1 runs
	retried := retryLogged()
	w := jobs.Define(o, "items", func(ctx context.Context, in []int) error {
		_, err := jobs.Map(ctx, "check", in, func(ctx context.Context, n int) (int, error) {
			if n == 0 { // item 0 fails once item 1 runs: started after a retry, item 1 would wait for the next delivery
				if err := signalled(running); err != nil {
					return 0, err
				}
				return 0, errors.New("the CRM is busy")
			}
			close(running)
			if err := signalled(retried.said); err != nil { // item 1 fails once item 0's retry is recorded
				return 0, err
			}
			return 0, jobs.Permanent(errors.New("the lead is malformed"))
		}, jobs.Concurrency(2))
		return err
	})
	s := memory.New()
	t.Cleanup(func() { _ = s.Close() })
	in := newLoggedInstance(t, s, o, newClock(), &queue{}, slog.New(retried))
	job := start(t, in, w, []int{0, 1})
	in.deliverAll(t, 1, nil)
	state := mustJSON(t, stateOf(t, in, job))
	if !strings.Contains(state, `"status":"failed"`) || !strings.Contains(state, `item 1 of fan-out \"check\" failed: the lead is malformed`) {
		t.Fatalf("state %s", state)
	}
}

// TestItemRetriesTakeTheEarliest: two items of a fan-out fail in the same delivery, one for the
// second time (a backoff of 2 s), one for the first (1 s): the job is handed on for the earlier
// retry, whichever failed first.
func TestItemRetriesTakeTheEarliest(t *testing.T) {
	for _, zeroFirst := range []bool{true, false} {
		t.Run(fmt.Sprint("item 0 first ", zeroFirst), func(t *testing.T) {
			o := newOwner()
			retried, retriedAgain := retryLogged(), retryLogged() // in the first delivery, in the second
			var delivery atomic.Int32
			second := make(chan struct{}) // closed when item 2 runs, in the second delivery
			w := jobs.Define(o, "items", func(ctx context.Context, in []int) error {
				_, err := jobs.Map(ctx, "check", in, func(ctx context.Context, n int) (int, error) {
					switch {
					case n == 1 && delivery.Load() == 1: // done once item 0's retry is recorded: item 2 is then not started
						return n, signalled(retried.said)
					case n == 1:
						return 0, errors.New("item 1 ran again after it completed")
					case n == 2:
						close(second)
						if zeroFirst { // item 2 fails once item 0's retry is recorded
							if err := signalled(retriedAgain.said); err != nil {
								return 0, err
							}
						}
					case delivery.Load() == 2: // item 0 fails once item 2 runs beside it (and failed, unless first)
						if err := signalled(second); err != nil {
							return 0, err
						}
						if !zeroFirst {
							if err := signalled(retriedAgain.said); err != nil {
								return 0, err
							}
						}
					}
					return 0, errors.New("the CRM is busy")
				}, jobs.Concurrency(2))
				return err
			}, jobs.Backoff(time.Second), jobs.MaxAttempts(5))
			s, clk, q := memory.New(), newClock(), &queue{}
			t.Cleanup(func() { _ = s.Close() })
			in := []*instance{newLoggedInstance(t, s, o, clk, q, slog.New(retried)), newLoggedInstance(t, s, o, clk, q, slog.New(retriedAgain))}
			job := start(t, in[0], w, []int{0, 1, 2})
			for d := int32(1); d <= 2; d++ {
				delivery.Store(d)
				m := q.take()
				if len(m) != 1 {
					t.Fatalf("delivery %d: %d messages queued", d, len(m))
				}
				clk.Add(m[0].Delay)
				if err := in[d-1].svc.Deliver(context.Background(), m[0].M, jobs.Delivery{}); err != nil {
					t.Fatal(err)
				}
			}
			if m := q.take(); len(m) != 1 || m[0].Delay != time.Second {
				t.Fatalf("after item 0's second failure and item 2's first: %+v; want one message a second later; state %s", m, mustJSON(t, stateOf(t, in[0], job)))
			}
		})
	}
}

// TestItemTooLargeAfterARetry: an item whose result the store cannot hold fails the job in that
// delivery even after another item asked for a retry (a retry would fail it again).
func TestItemTooLargeAfterARetry(t *testing.T) {
	o := newOwner()
	running := make(chan struct{}) // closed when item 1 runs
	retried := retryLogged()
	w := jobs.Define(o, "items", func(ctx context.Context, in []int) error {
		_, err := jobs.Map(ctx, "fetch", in, func(ctx context.Context, n int) ([]byte, error) {
			if n == 0 { // item 0 fails once item 1 runs: started after a retry, item 1 would wait for the next delivery
				if err := signalled(running); err != nil {
					return nil, err
				}
				return nil, errors.New("the CRM is busy")
			}
			close(running)
			if err := signalled(retried.said); err != nil { // item 1 returns once item 0's retry is recorded
				return nil, err
			}
			return noise(4096), nil
		}, jobs.Concurrency(2))
		return err
	})
	s := &itemStore{Store: memory.New(), limit: 2048}
	t.Cleanup(func() { _ = s.Close() })
	in := newLoggedInstance(t, s, o, newClock(), &queue{}, slog.New(retried))
	job := start(t, in, w, []int{0, 1})
	in.deliverAll(t, 1, nil)
	if state := mustJSON(t, stateOf(t, in, job)); !strings.Contains(state, `"status":"failed"`) || !strings.Contains(state, "more than the store holds in a record") {
		t.Fatalf("state %s", state)
	}
}

// taskWritesFail fails every write of a task record once the step record numbered after has
// been created: a store that goes down between a step's record and the delivery's end.
type taskWritesFail struct {
	store.Store
	after string // a step record key suffix, "/s/2"
	down  atomic.Bool
	once  bool // the outage ends with the first write it refuses
}

func (s *taskWritesFail) Create(ctx context.Context, key string, v []byte, exp time.Time) (store.Record, error) {
	r, err := s.Store.Create(ctx, key, v, exp)
	if err == nil && strings.HasSuffix(key, s.after) {
		s.down.Store(true)
	}
	return r, err
}

func (s *taskWritesFail) Update(ctx context.Context, key string, ver uint64, v []byte, exp time.Time) (store.Record, error) {
	if strings.HasPrefix(key, jobs.TaskKeyPrefix) && !strings.Contains(key, "/s/") && (s.once && s.down.CompareAndSwap(true, false) || !s.once && s.down.Load()) {
		return store.Record{}, errors.New("the store is down")
	}
	return s.Store.Update(ctx, key, ver, v, exp)
}

// TestStepRecordsPastTheTaskCount: a delivery whose step records were written but whose task
// write failed (the store went down) leaves the task counting fewer steps than it recorded; the
// next delivery finds the records past the count and replays them: no step runs twice.
func TestStepRecordsPastTheTaskCount(t *testing.T) {
	for _, tc := range []struct {
		name  string
		short int    // deliveries of one step each (5 s left: under the margin) before the outage
		after string // the outage starts once this step record is written
	}{
		{"the task counts none", 0, "/s/1"},
		{"the task counts one", 1, "/s/2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, c := newOwner(), &counter{}
			w := threeSteps(o, c)
			s := &taskWritesFail{Store: memory.New(), after: tc.after}
			t.Cleanup(func() { _ = s.Close() })
			clk := newClock()
			in := newInstance(t, s, o, clk, &queue{})
			job := start(t, in, w, map[string]int{"n": 1})
			m := in.q.take()[0].M
			for range tc.short + 1 { // the last one meets the outage after its step
				if err := in.svc.Deliver(context.Background(), m, jobs.Delivery{Deadline: clk.Now().Add(5 * time.Second)}); err != nil && !s.down.Load() {
					t.Fatal(err)
				}
				if q := in.q.take(); len(q) > 0 {
					m = q[0].M
				}
			}
			if !s.down.Load() {
				t.Fatal("the outage never started")
			}
			s.down.Store(false)
			clk.Add(time.Hour) // the failed delivery's lease lapses
			in.deliverAll(t, 5, nil)
			in.q.take()
			if err := in.svc.Deliver(context.Background(), m, jobs.Delivery{}); err != nil {
				t.Fatal(err)
			}
			if st := stateOf(t, in, job).Job.Status; st != "completed" || c.get("one") != 1 || c.get("two") != 1 || c.get("three") != 1 {
				t.Fatalf("job %s; steps ran one %d, two %d, three %d times", st, c.get("one"), c.get("two"), c.get("three"))
			}
		})
	}
}

// TestStepRecordSize: a step's record of exactly the store's limit is written; one the store
// itself refuses as too large fails the job at once, naming the step, written once.
func TestStepRecordSize(t *testing.T) {
	run := func(s store.Store) (string, *counter) {
		t.Helper()
		o, c := newOwner(), &counter{}
		w := jobs.Define(o, "big", func(ctx context.Context, _ struct{}) error {
			_, err := jobs.Step(ctx, "fetch", func(context.Context) ([]byte, error) { c.inc("fetch"); return noise(2048), nil })
			return err
		})
		in := newInstance(t, s, o, newClock(), &queue{})
		job := start(t, in, w, struct{}{})
		in.deliverAll(t, 1, nil)
		return mustJSON(t, stateOf(t, in, job)), c
	}
	probe := &itemStore{Store: memory.New(), keys: "/s/"}
	if state, _ := run(probe); !strings.Contains(state, `"status":"completed"`) {
		t.Fatalf("state %s", state)
	}
	at := &itemStore{Store: memory.New(), keys: "/s/", limit: probe.lastValue}
	if state, _ := run(at); !strings.Contains(state, `"status":"completed"`) {
		t.Fatalf("a step record of exactly the limit (%d bytes): state %s", probe.lastValue, state)
	}
	refused := &itemStore{Store: memory.New(), keys: "/s/", tooLarge: true}
	state, c := run(refused)
	if !strings.Contains(state, `"status":"failed"`) || !strings.Contains(state, `step \"fetch\" returned`) || c.get("fetch") != 1 {
		t.Fatalf("ran %d times; state %s", c.get("fetch"), state)
	}
	if _, most := refused.calls(); most != 1 {
		t.Fatalf("the step's record written %d times", most)
	}
}
