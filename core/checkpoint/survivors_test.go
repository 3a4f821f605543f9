package checkpoint_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/core/store"
)

// Tests that each kill a mutant a mutation sample left alive (issue 30), on the memory store.

// A retry of an occurrence under a gate of another snapshot is refused, even when the job's gate
// record says that snapshot: the occurrence keeps the snapshot it ran under.
func TestRetryUnderAnotherSnapshotRefused(t *testing.T) {
	w := memoryWorld(t, map[string]string{"before": "pause"})
	i := w.instance(behaviour{})
	j := w.job()
	out, err := j.run(t, i)
	wantStatus(t, out, err, checkpoint.Awaiting, "before")
	// The job's gate record now names another snapshot (the gate JobGate hands out follows it).
	it := gateRecordOf(t, w.store, j.occ.JobID)
	var rec map[string]any
	if err := json.Unmarshal(it.Value, &rec); err != nil {
		t.Fatal(err)
	}
	rec["snapshot_hash"] = "snapshot-hash-2"
	b, _ := json.Marshal(rec)
	if _, err := w.store.Update(context.Background(), it.Key, it.Version, b, store.Never); err != nil {
		t.Fatal(err)
	}
	g, err := checkpoint.JobGate(i.ctx(), j.occ.JobID)
	if err != nil || g.SnapshotHash() != "snapshot-hash-2" {
		t.Fatalf("JobGate: %v, %v", g, err)
	}
	_, err = checkpoint.RunGuardedStep(i.ctx(), g, i.step, j.occ, j.before(), j.order)
	if !errors.Is(err, checkpoint.ErrRetrySnapshot) {
		t.Fatalf("a retry under another snapshot: %v, want ErrRetrySnapshot", err)
	}
	if n := len(w.studio.callsOf(j.occ.OccurrenceID)); n != 1 {
		t.Errorf("%d checkpoint calls, want the first one only", n)
	}
	j.wantCounts(t, 0, 0)
}

// A resume delivered again while the instance that ran the first one is dead in its after
// checkpoint waits out that instance's lease, even one that ends lease + 1.5 × SkewMargin after
// the resume starts (the two instances' clocks may disagree by a skew margin each way), then
// sends the after checkpoint again and finishes the step.
func TestResumeWaitsOutALeaseWithinTwoSkewMargins(t *testing.T) {
	w := memoryWorld(t, map[string]string{"before": "pause"})
	clockA := newManualClock()
	a := w.instance(behaviour{}, clockA.frozen(0))
	j := w.job()
	out, err := j.run(t, a)
	wantStatus(t, out, err, checkpoint.Awaiting, "before")
	req := j.resumeRequest(t, "before", "allow")

	// A takes the allow, runs the effect and dies in its after checkpoint (Studio never answers it).
	stalled, unblock := make(chan struct{}), make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(unblock) }) })
	var first atomic.Bool
	w.studio.setHook(func(c studioCall, _ answer) {
		if c.Body.OccurrenceID == j.occ.OccurrenceID && c.Body.Phase == "after" && first.CompareAndSwap(false, true) {
			close(stalled)
			<-unblock
		}
	})
	doneA := make(chan error, 1)
	go func() { _, err := checkpoint.Resume(a.ctx(), req); doneA <- err }()
	recv(t, stalled, "A's after checkpoint")
	until := leaseUntil(t, w.store, j.occ.OccurrenceID)
	if until.IsZero() {
		t.Fatal("A holds no lease")
	}

	// B's clock reads the lease as ending DefaultLease + 1.5 × SkewMargin from now.
	var mu sync.Mutex
	now := until.Add(-(checkpoint.DefaultLease + checkpoint.SkewMargin*3/2))
	type timer struct {
		d time.Duration
		c chan time.Time
	}
	timers := make(chan timer, 64)
	b := w.instance(behaviour{}, func(c *checkpoint.Config) {
		c.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		c.After = func(d time.Duration) <-chan time.Time {
			ch := make(chan time.Time, 1)
			timers <- timer{d, ch}
			return ch
		}
	})
	type result struct {
		res string
		err error
	}
	doneB := make(chan result, 1)
	go func() { res, err := j.resume(t, b, "before", "allow"); doneB <- result{res, err} }()
	select {
	case r := <-doneB:
		t.Fatalf("the resume answered without waiting for the dead instance's lease: %s, %v", r.res, r.err)
	case tm := <-timers:
		if want := checkpoint.DefaultLease + checkpoint.SkewMargin*3/2; tm.d != want {
			t.Fatalf("the resume waits %s, want %s", tm.d, want)
		}
		mu.Lock()
		now = now.Add(tm.d)
		mu.Unlock()
		tm.c <- time.Now()
	case <-time.After(positiveWait):
		t.Fatal("the resume neither answered nor waited")
	}
	var got result
	deadline := time.After(positiveWait)
wait:
	for {
		select {
		case got = <-doneB:
			break wait
		case <-timers: // B's own lease renewals, never fired
		case <-deadline:
			t.Fatal("the resume did not answer after the lease ended")
		}
	}
	ans, _ := w.studio.answer(j.occ.OccurrenceID, "before")
	if got.err != nil || got.res != resumed(j.occ.JobID, "allow", ans.CheckpointID) {
		t.Fatalf("resume after the lease: %s, %v", got.res, got.err)
	}
	if st, err := checkpoint.StepState(b.ctx(), b.step, j.occ); err != nil || st.Status != checkpoint.Completed {
		t.Fatalf("the step after the resume: %+v, %v", st, err)
	}
	once.Do(func() { close(unblock) })
	<-doneA
	j.wantCounts(t, 1, 1)
}
