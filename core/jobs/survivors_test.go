package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
)

// Tests that each kill a mutant a mutation sample left alive (issue 30): the boundaries of the
// busy check, the continuation check, a stop that comes after the last step, and the message's
// required members. They run on the memory store: what they pin is the service's logic, the
// same on every backend (the suite runs the scenarios on each).

func memStore(t *testing.T) store.Store {
	s := memory.New()
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// published records the effects a service publishes.
type published struct {
	mu      sync.Mutex
	effects []contract.Effect
}

func (p *published) publish(_ context.Context, _, _ string, effects []contract.Effect) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.effects = append(p.effects, effects...)
}

func (p *published) synced() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, e := range p.effects {
		if e.Type == contract.EffectJobSynced {
			n++
		}
	}
	return n
}

// publishingInstance is newInstance whose service publishes into p.
func publishingInstance(t *testing.T, s store.Store, o owner, c *clock, q *queue, p *published) *instance {
	t.Helper()
	in := &instance{q: q, clock: c, after: newManualAfter(), o: o}
	in.svc = jobs.NewService(jobs.Config{Store: s, Dispatcher: q, Now: c.Now, After: in.after.After, Logger: quiet, Publish: p.publish,
		Works: func(slug string) (*jobs.Registry, time.Duration, bool) { return o.reg, 0, slug == agentSlug }})
	t.Cleanup(in.svc.Close)
	return in
}

// A lease is honoured for SkewMargin past its end: a delivery 1 s after LeaseUntil (inside the
// margin) is busy; one at LeaseUntil + SkewMargin takes the task over.
func TestBusyInsideTheSkewMargin(t *testing.T) {
	s, o := memStore(t), newOwner()
	entered, release := make(chan struct{}), make(chan struct{})
	runs := 0
	w := jobs.Define(o, "held", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Step(ctx, "slow", func(context.Context) (int, error) {
			if runs++; runs == 1 {
				close(entered)
				<-release
			}
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
	clk.Add(jobs.DefaultLease + time.Second)
	if err := b.svc.Deliver(context.Background(), m, jobs.Delivery{}); !errors.Is(err, jobs.ErrBusy) {
		t.Fatalf("delivery 1 s after the lease's end (inside the skew margin): %v, want ErrBusy", err)
	}
	clk.Add(jobs.SkewMargin - time.Second)
	if err := b.svc.Deliver(context.Background(), m, jobs.Delivery{}); err != nil {
		t.Fatalf("delivery at the lease's end + the skew margin: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if runs != 2 || stateOf(t, b, job).Job.Status != contract.StateCompleted {
		t.Fatalf("the step ran %d times, job %s", runs, mustJSON(t, stateOf(t, b, job)))
	}
}

// A job waiting in Await is not claimed by a duplicate delivery: no second run of the work, no
// second job.synced.
func TestAwaitingJobIgnoresDuplicates(t *testing.T) {
	s, o, p := memStore(t), newOwner(), &published{}
	runs := 0
	w := jobs.Define(o, "waits", func(ctx context.Context, _ struct{}) error {
		runs++
		_, err := jobs.Await[review](ctx, "review", contract.Awaiting{Fields: []contract.FieldDefinition{{ID: "approved", Label: "Approve", Type: contract.FieldBoolean}}})
		return err
	})
	in := publishingInstance(t, s, o, newClock(), &queue{}, p)
	job := start(t, in, w, struct{}{})
	m := in.q.take()[0].M
	for i := range 3 {
		if err := in.svc.Deliver(context.Background(), m, jobs.Delivery{}); err != nil {
			t.Fatalf("delivery %d: %v", i+1, err)
		}
	}
	if runs != 1 || p.synced() != 1 {
		t.Fatalf("the work ran %d times and job.synced was published %d times, want 1 and 1", runs, p.synced())
	}
	if st := stateOf(t, in, job); st.Job.Status != contract.StateAwaiting {
		t.Fatalf("state %s", mustJSON(t, st))
	}
	if msgs := in.q.take(); len(msgs) != 0 {
		t.Fatalf("dispatched %+v", msgs)
	}
}

// A delivery with less time left than the margin still runs one step (it hands on only after
// progress): with 5 s per delivery and a 10 s margin, the job completes, one step a delivery.
func TestShortDeliveriesStillProgress(t *testing.T) {
	s, o, c := memStore(t), newOwner(), &counter{}
	w := threeSteps(o, c)
	clk := newClock()
	in := newInstance(t, s, o, clk, &queue{})
	job := start(t, in, w, map[string]int{"n": 1})
	n := in.deliverAll(t, 10, func() jobs.Delivery { return jobs.Delivery{Deadline: clk.Now().Add(5 * time.Second)} })
	if n != 3 || c.get("one") != 1 || c.get("two") != 1 || c.get("three") != 1 {
		t.Fatalf("%d deliveries; steps ran one %d, two %d, three %d", n, c.get("one"), c.get("two"), c.get("three"))
	}
	if st := stateOf(t, in, job).Job.Status; st != contract.StateCompleted {
		t.Fatalf("status %s", st)
	}
}

// A stop that arrives (from another instance) after the work's last step, before the work
// returns, leaves a finished job completed: nothing was left to stop.
func TestStopAfterTheLastStepCompletes(t *testing.T) {
	s, o := memStore(t), newOwner()
	clk := newClock()
	a := newInstance(t, s, o, clk, &queue{})
	b := newInstance(t, s, o, clk, &queue{})
	var job string
	w := jobs.Define(o, "ends", func(ctx context.Context, _ struct{}) error {
		if _, err := jobs.Step(ctx, "last", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return err
		}
		if _, err := jobs.Stop(b.ctx(), job); err != nil {
			t.Error(err)
		}
		return nil
	})
	job = start(t, a, w, struct{}{})
	if n := a.deliverAll(t, 1, nil); n != 1 {
		t.Fatalf("%d deliveries", n)
	}
	got := stateOf(t, a, job)
	if got.Job.Status != contract.StateCompleted || got.Cases[0].Steps[0].Status != contract.StateCompleted {
		t.Fatalf("state %s", mustJSON(t, got))
	}
}

// Every member of a task message is required: each one empty is refused.
func TestDecodeMessageRefusesEachEmptyMember(t *testing.T) {
	for _, bad := range []string{
		`{"agent":"a","workspace":"","job":"j","work":"x","attempt":0}`,
		`{"agent":"a","workspace":"w","job":"","work":"x","attempt":0}`,
		`{"agent":"a","workspace":"w","job":"j","work":"","attempt":0}`,
		`{"agent":"a","workspace":"w","job":"j","work":"x","attempt":0,"at":-1}`, // a due time before 1970
	} {
		if m, err := jobs.DecodeMessage([]byte(bad)); err == nil {
			t.Errorf("DecodeMessage(%s) accepted: %+v", bad, m)
		}
	}
	if _, err := jobs.DecodeMessage([]byte(`{"agent":"a","workspace":"w","job":"j","work":"x","attempt":0}`)); err != nil {
		t.Fatalf("attempt 0 refused: %v", err)
	}
}

// A step name is 1 to 200 printable characters: a bad one fails the job at once, naming it; a
// name of exactly 200 runs.
func TestStepNames(t *testing.T) {
	s := memStore(t)
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{strings.Repeat("n", 200), true},
		{"", false},
		{"  ", false},
		{strings.Repeat("n", 201), false},
		{"a\nb", false},
		{"\tstep", false}, // a control character first
	} {
		o := newOwner()
		runs := 0
		w := jobs.Define(o, "named", func(ctx context.Context, _ struct{}) error {
			_, err := jobs.Step(ctx, tc.name, func(context.Context) (int, error) { runs++; return 1, nil })
			return err
		})
		in := newInstance(t, s, o, newClock(), &queue{})
		job := start(t, in, w, struct{}{})
		in.deliverAll(t, 2, nil)
		got := stateOf(t, in, job)
		if tc.ok {
			if got.Job.Status != contract.StateCompleted || runs != 1 {
				t.Errorf("name of %d bytes: ran %d times, state %s", len(tc.name), runs, mustJSON(t, got))
			}
			continue
		}
		want := fmt.Sprintf(`"error":{"message":"jobs: a step name is 1 to 200 printable characters, got %s"}`, strings.TrimSuffix(strings.TrimPrefix(mustJSON(t, fmt.Sprintf("%q", tc.name)), `"`), `"`))
		if js := mustJSON(t, got); got.Job.Status != contract.StateFailed || runs != 0 || !strings.Contains(js, want) {
			t.Errorf("name %q: ran %d times, state %s; want failed with %s", tc.name, runs, js, want)
		}
	}
}
