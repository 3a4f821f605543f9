package storetest

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/supervaize/svz/core/store"
)

// remote returns the backend's Remote, or ends the subtest: skipped, saying why, for an
// in-process backend; failed for a backend that did not say how it is reached.
func (cfg *config) remoteOrSkip(t *testing.T) *Remote {
	t.Helper()
	switch {
	case cfg.remote != nil:
		return cfg.remote
	case cfg.inProcess != "":
		t.Skip("in process: " + cfg.inProcess)
	default:
		t.Fatal("say how the backend is reached: pass storetest.Network(...) or storetest.InProcess(why) to Run")
	}
	return nil
}

// lostAnswer: a write the server applied but whose answer was lost on the way back, then sent
// again by a retry (the driver's or the store's own), must report what happened, the write, and
// not the state its own first attempt left: a Create that finds its own record succeeds (an
// ErrExists there left new idempotency keys "in progress" for minutes), and so does an Update
// that finds its own version. Records of others are still told apart.
func (cfg *config) lostAnswer(t *testing.T, s store.Store, c *Clock, key func(string) string) {
	r := cfg.remoteOrSkip(t)
	p := NewProxy(t, r.Addr)
	via := r.Open(t, c.Now, p.Addr(), time.Minute)
	t.Cleanup(func() { _ = via.Close() })
	ctx := context.Background()
	exp := c.Now().Add(time.Hour)

	// Load scripts, prepare statements, open connections: the lost answer must be a write's.
	warm := mustCreate(t, via, key("warm-up"), "w", exp)
	warm, err := via.Update(ctx, key("warm-up"), warm.Version, []byte("w2"), exp)
	if err != nil {
		t.Fatalf("warm-up Update: %v", err)
	}
	if err := via.Delete(ctx, key("warm-up"), warm.Version); err != nil {
		t.Fatalf("warm-up Delete: %v", err)
	}
	lost := func(want int, what string) {
		t.Helper()
		if got := p.Lost(); got != want {
			t.Fatalf("%s: %d answers lost so far, want %d: the proxy did not see the request", what, got, want)
		}
	}

	mine := key("mine")
	p.LoseAnswerTo(mine)
	created, err := via.Create(ctx, mine, []byte("claim"), exp)
	if err != nil {
		t.Fatalf("Create whose answer was lost: %v (a retry that finds its own record must succeed)", err)
	}
	lost(1, "Create")
	assertRecord(t, "Get after a Create whose answer was lost", mustGet(t, s, mine),
		store.Record{Value: []byte("claim"), Version: created.Version, ExpiresAt: exp.UTC()})

	p.LoseAnswerTo(mine)
	updated, err := via.Update(ctx, mine, created.Version, []byte("done"), exp)
	if err != nil {
		t.Fatalf("Update whose answer was lost: %v (a retry that finds its own version must succeed)", err)
	}
	lost(2, "Update")
	if updated.Version == created.Version {
		t.Errorf("Update kept version %d", created.Version)
	}
	assertRecord(t, "Get after an Update whose answer was lost", mustGet(t, s, mine),
		store.Record{Value: []byte("done"), Version: updated.Version, ExpiresAt: exp.UTC()})

	p.LoseAnswerTo(mine)
	if err := via.Delete(ctx, mine, updated.Version); err != nil {
		t.Fatalf("Delete whose answer was lost: %v", err)
	}
	lost(3, "Delete")
	if _, err := s.Get(ctx, mine); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get after a Delete whose answer was lost: error = %v, want ErrNotFound", err)
	}

	// Someone else's record is no lost answer of one's own.
	theirs := key("theirs")
	rec := mustCreate(t, s, theirs, "theirs", exp)
	p.LoseAnswerTo(theirs)
	cur, err := via.Create(ctx, theirs, []byte("mine"), exp)
	if !errors.Is(err, store.ErrExists) {
		t.Fatalf("Create over another's record, answer lost: error = %v, want ErrExists", err)
	}
	lost(4, "Create over another's record")
	assertRecord(t, "the existing record", cur, rec)
	p.LoseAnswerTo(theirs)
	if _, err := via.Update(ctx, theirs, rec.Version+1, []byte("mine"), exp); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale Update, answer lost: error = %v, want ErrConflict", err)
	}
	lost(5, "stale Update")
	assertRecord(t, "Get after refused writes", mustGet(t, s, theirs), rec)
}

// OutageTimeout is the store timeout of the Outage subtest.
const OutageTimeout = 2 * time.Second

// outage: when the server stops answering without refusing anything (paused, partitioned),
// every call fails once the store timeout has passed, with an error matching
// context.DeadlineExceeded, instead of hanging for as long as the caller waits; connections do
// not pile up; and the store works again once the server answers.
func (cfg *config) outage(t *testing.T, s store.Store, c *Clock, key func(string) string) {
	r := cfg.remoteOrSkip(t)
	p := NewProxy(t, r.Addr)
	via := r.Open(t, c.Now, p.Addr(), OutageTimeout)
	t.Cleanup(func() { _ = via.Close() })
	t.Cleanup(p.Close) // first: a store whose calls hang could not close
	ctx := context.Background()
	k := key("k")
	rec := mustCreate(t, via, k, "v", c.Now().Add(time.Hour))

	p.Blackhole(true)
	const callers = 16
	errs := make(chan error, callers)
	for i := range callers {
		go func() {
			var err error
			switch i % 5 {
			case 0:
				_, err = via.Get(ctx, k)
			case 1:
				_, err = via.Create(ctx, key("new"+strconv.Itoa(i)), []byte("v"), c.Now().Add(time.Hour))
			case 2:
				_, err = via.Update(ctx, k, rec.Version, []byte("changed"), c.Now().Add(time.Hour))
			case 3:
				err = via.Delete(ctx, k, rec.Version)
			case 4:
				if l, ok := via.(store.Lister); ok {
					_, err = l.List(ctx, key(""), "", 10)
				} else {
					_, err = via.Get(ctx, k)
				}
			}
			errs <- err
		}()
	}
	// Generous: a loaded machine may run late, but not by ten times the store timeout.
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	for range callers {
		select {
		case err := <-errs:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("a call during the outage: error = %v, want one matching context.DeadlineExceeded", err)
			}
		case <-deadline.C:
			t.Fatalf("calls still hang 60 s into the outage, with a store timeout of %s", OutageTimeout)
		}
	}
	eventually(t, "connections to drop to at most one per caller", func() bool { return p.Open() <= callers })

	p.Blackhole(false)
	var got store.Record
	eventually(t, "the store to answer again", func() bool {
		var err error
		got, err = via.Get(ctx, k)
		return err == nil
	})
	assertRecord(t, "Get after the outage (no call of the outage reached the server)", got, rec)
}

// eventually polls cond until it holds, failing the test after a minute.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
