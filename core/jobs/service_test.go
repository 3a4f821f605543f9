package jobs_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
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
			var delays []time.Duration
			for range 5 {
				msgs := in.q.take()
				if len(msgs) != 1 {
					t.Fatalf("%d messages", len(msgs))
				}
				if len(delays) > 0 && msgs[0].M.At != wake.UnixMilli() {
					t.Fatalf("the sleep's message is due at %d, want %d", msgs[0].M.At, wake.UnixMilli())
				}
				delays = append(delays, msgs[0].Delay)
				in.clock.Add(msgs[0].Delay)
				if err := in.svc.Deliver(context.Background(), msgs[0].M, jobs.Delivery{}); err != nil {
					t.Fatal(err)
				}
				if c.get("after") == 1 {
					break
				}
			}
			if fmt.Sprint(delays) != tc.want || !in.clock.Now().Equal(wake) {
				t.Fatalf("delays %v, want %s; woke at %v, want %v", delays, tc.want, in.clock.Now(), wake)
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
			select {
			case <-unmarked.said:
				t.Fatal("logged as not marked failed")
			default:
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
	if msgs := in.q.take(); len(msgs) != 1 || c.get("one") != 1 || c.get("two") != 0 {
		t.Fatalf("handed on: %+v (steps %v)", msgs, c.n)
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
