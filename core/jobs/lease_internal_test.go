package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
)

// leaseWorld is a job service on the in-memory store, at a fixed time, whose dispatches go
// nowhere: the tests write the task record's lease themselves.
type leaseWorld struct {
	svc *Service
	reg *Registry
	ctx context.Context
	now time.Time
}

func newLeaseWorld(t *testing.T) *leaseWorld { return newLeaseWorldOn(t, memory.New(), nil) }

// newLeaseWorldOn is newLeaseWorld on a store of the test's, with its own renewal timer when
// after is not nil.
func newLeaseWorldOn(t *testing.T, st store.Store, after func(time.Duration) <-chan time.Time) *leaseWorld {
	t.Helper()
	w := &leaseWorld{reg: NewRegistry(), now: time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)}
	w.svc = NewService(Config{Store: st, Dispatcher: nopDispatcher{}, Now: func() time.Time { return w.now }, After: after,
		Works: func(string) (*Registry, time.Duration, bool) { return w.reg, 0, true }})
	t.Cleanup(w.svc.Close)
	w.ctx = NewContext(context.Background(), w.svc, w.reg, "a", &contract.VerifiedWorkspaceContext{GrantID: "g", WorkspaceID: "w", AgentSlug: "a"})
	return w
}

// deliver runs one delivery of job's task.
func (w *leaseWorld) deliver(t *testing.T, job string) {
	t.Helper()
	if err := w.svc.Deliver(context.Background(), Message{Agent: "a", Workspace: "w", Job: job, Work: "x"}, Delivery{}); err != nil {
		t.Fatal(err)
	}
}

func (w *leaseWorld) start(t *testing.T, work *Work[struct{}], job string) {
	t.Helper()
	if _, err := work.Start(w.ctx, &contract.ActionRequest{AgentSlug: "a", Action: contract.JobStartAction, JobID: &job, MissionID: "m", Input: []byte(`{}`)}, struct{}{}); err != nil {
		t.Fatal(err)
	}
}

// hold writes the task of job as held by another process until until.
func (w *leaseWorld) hold(t *testing.T, job string, until time.Time) {
	t.Helper()
	if _, err := w.svc.update(w.ctx, taskKey("a", "w", job), func(r *record) (bool, error) {
		r.Holder, r.LeaseUntil = "another-process", until
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestStopAfterTheHoldersLease: a job held by a process whose lease and the skew margin lapsed
// (it died) stops at once; one whose margin has not lapsed is only asked to stop.
func TestStopAfterTheHoldersLease(t *testing.T) {
	w := newLeaseWorld(t)
	work := Define(regOwner{w.reg}, "x", func(context.Context, struct{}) error { return nil })
	for job, c := range map[string]struct {
		until time.Time
		want  string
	}{
		"lapsed":  {w.now.Add(-SkewMargin), contract.StateCancelled},
		"in-skew": {w.now.Add(-SkewMargin + time.Millisecond), contract.StateActive},
	} {
		w.start(t, work, job)
		w.hold(t, job, c.until)
		snap, err := Stop(w.ctx, job)
		if err != nil || snap.Job.Status != c.want {
			t.Fatalf("stop of %s: %v %+v, want %s", job, err, snap, c.want)
		}
		r, _, err := w.svc.load(w.ctx, taskKey("a", "w", job))
		if err != nil || !r.Stop || (r.Status == taskStopped) != (c.want == contract.StateCancelled) {
			t.Fatalf("the task of %s: %+v %v", job, r, err)
		}
	}
}

// TestCheckLeaseMarksTheDeliveryLost: a step that finds its task taken by another process (its own
// lease not lapsed) gets ErrLeaseLost; even when the work ignores it, no later step runs.
func TestCheckLeaseMarksTheDeliveryLost(t *testing.T) {
	w := newLeaseWorld(t)
	var checked error
	later := 0
	work := Define(regOwner{w.reg}, "x", func(ctx context.Context, _ struct{}) error {
		_, _ = Step(ctx, "one", func(ctx context.Context) (int, error) {
			w.hold(t, "job", w.now.Add(time.Minute)) // taken over meanwhile
			checked = CheckLease(ctx)
			return 1, nil
		})
		_, err := Step(ctx, "two", func(context.Context) (int, error) { later++; return 2, nil })
		return err
	})
	w.start(t, work, "job")
	if err := w.svc.Deliver(context.Background(), Message{Agent: "a", Workspace: "w", Job: "job", Work: "x"}, Delivery{}); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(checked, ErrLeaseLost) || later != 0 {
		t.Fatalf("CheckLease: %v; the next step ran %d times, want ErrLeaseLost and none", checked, later)
	}
}

// TestWakeLeavesAFailingJob: a job whose failure handler is to run takes no wake: nothing is
// written (an answer kept would reach an Await of the handler's).
func TestWakeLeavesAFailingJob(t *testing.T) {
	w := newLeaseWorld(t)
	work := Define(regOwner{w.reg}, "x", func(context.Context, struct{}) error { return nil },
		OnFailure(func(context.Context, struct{}, Failure) error { return nil }))
	w.start(t, work, "job")
	if err := w.svc.failJob(w.ctx, Message{Agent: "a", Workspace: "w", Job: "job", Work: "x"}, CauseDelivery, "lost"); err != nil {
		t.Fatal(err)
	}
	before, err := w.svc.cfg.Store.Get(w.ctx, taskKey("a", "w", "job"))
	if err != nil {
		t.Fatal(err)
	}
	if woke, err := Wake(w.ctx, "job", contract.RuleCheckpointResumeAction, json.RawMessage(`{"status":"allow"}`)); woke || err != nil {
		t.Fatalf("Wake of a failing job: %v, %v", woke, err)
	}
	if after, err := w.svc.cfg.Store.Get(w.ctx, taskKey("a", "w", "job")); err != nil || after.Version != before.Version {
		t.Fatalf("the task was written: version %d, was %d (%v)", after.Version, before.Version, err)
	}
}
