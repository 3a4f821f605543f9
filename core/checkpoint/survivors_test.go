package checkpoint_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/core/contract"
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
// checkpoint waits out that instance's lease, even one that ends up to lease + 2 × SkewMargin
// after the resume starts (the two instances' clocks may disagree by a skew margin each way),
// then sends the after checkpoint again and finishes the step. A lease that ends later is being
// renewed by a live instance, and one that ends past the call's deadline cannot be waited out:
// both are refused at once (ErrActive, for Studio to deliver the resume again), nothing waited.
func TestResumeWaitsOutALeaseWithinTwoSkewMargins(t *testing.T) {
	const lease, skew = checkpoint.DefaultLease, checkpoint.SkewMargin
	for _, c := range []struct {
		name     string
		ends     time.Duration // when the dead instance's lease ends, after the resume starts
		deadline time.Duration // of the resume's context (real time), 0 for none
		refused  string        // the refusal's words; "" when the resume waits
	}{
		{"1.5 skew margins", lease + skew*3/2, 0, ""},
		{"exactly 2 skew margins", lease + 2*skew, 0, ""},
		{"past 2 skew margins", lease + 2*skew + time.Nanosecond, 0, "its lease keeps being renewed"},
		{"a deadline after the lease", lease + skew*3/2, time.Hour, ""},
		{"a deadline before the lease ends", lease + skew*3/2, 10 * time.Second, "past this call's deadline"},
	} {
		t.Run(c.name, func(t *testing.T) { resumeWhileDeadInAfter(t, c.ends, c.deadline, c.refused) })
	}
}

func resumeWhileDeadInAfter(t *testing.T, ends, deadline time.Duration, refused string) {
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

	// B's clock reads the lease as ending ends from now.
	var mu sync.Mutex
	now := until.Add(-ends)
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
	ctx := b.ctx()
	if deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, deadline)
		defer cancel()
	}
	type result struct {
		res string
		err error
	}
	doneB := make(chan result, 1)
	go func() {
		var r result
		res, err := checkpoint.Resume(ctx, req)
		if r.err = err; err == nil {
			b, _ := contract.AppendJSON(nil, res)
			r.res = string(b)
		}
		doneB <- r
	}()
	select {
	case r := <-doneB:
		if refused == "" {
			t.Fatalf("the resume answered without waiting for the dead instance's lease: %s, %v", r.res, r.err)
		}
		if !errors.Is(r.err, checkpoint.ErrActive) || !strings.Contains(r.err.Error(), refused) {
			t.Fatalf("the resume answered %s, %v; want ErrActive, %q", r.res, r.err, refused)
		}
		j.wantCounts(t, 1, 0) // A, still in its after checkpoint, finishes the step
		once.Do(func() { close(unblock) })
		if err := <-doneA; err != nil {
			t.Fatal(err)
		}
		j.wantCounts(t, 1, 1)
		return
	case tm := <-timers:
		if refused != "" {
			t.Fatalf("the resume waits %s, want it refused (%s)", tm.d, refused)
		}
		if tm.d != ends {
			t.Fatalf("the resume waits %s, want %s", tm.d, ends)
		}
		mu.Lock()
		now = now.Add(tm.d)
		mu.Unlock()
		tm.c <- time.Now()
	case <-time.After(positiveWait):
		t.Fatal("the resume neither answered nor waited")
	}
	var got result
	timeout := time.After(positiveWait)
wait:
	for {
		select {
		case got = <-doneB:
			break wait
		case <-timers: // B's own lease renewals, never fired
		case <-timeout:
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
