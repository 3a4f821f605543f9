package core

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
)

// followTo starts e's follower and appends data, one event each, waiting (on the follower's
// signal, no clock) until it holds them all. It returns the follower's epoch.
func followTo(t *testing.T, e *effectLog, data ...string) string {
	t.Helper()
	t.Cleanup(e.follow())
	ctx := context.Background()
	wait := func(done func() bool) { t.Helper(); waitFollower(t, e, done) }
	wait(func() bool { return e.ready })
	var last store.LogPosition
	for _, d := range data {
		var err error
		if last, err = e.log.AppendLog(ctx, e.name, []byte(d), e.keep); err != nil {
			t.Fatal(err)
		}
	}
	wait(func() bool { return e.to >= last.Seq })
	return e.epoch
}

// waitFollower waits (on the follower's signal, no clock) until done, called under e.mu, holds.
func waitFollower(t *testing.T, e *effectLog, done func() bool) {
	t.Helper()
	for {
		e.mu.Lock()
		ok, changed := done(), e.changed
		e.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-time.After(time.Minute): // a failure bound only
			t.Fatal("the follower never got there")
		}
	}
}

// heldSeqs is the positions the follower holds, and from.
func heldSeqs(e *effectLog) (seqs []uint64, from uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ev := range e.recent {
		seqs = append(seqs, ev.Seq)
	}
	return seqs, e.from
}

// TestFollowerBufferBytes: the follower keeps the newest events within EventBufferBytes, dropping
// the oldest first, and always the newest one however large; a stream behind what it keeps is
// told to read the store.
func TestFollowerBufferBytes(t *testing.T) {
	newLog := func() *effectLog {
		return newEffectLog(Config{EventBuffer: 100, EventBufferBytes: 25, EventReplayBytes: 1 << 20, EventPageBytes: 1 << 20},
			slog.New(slog.DiscardHandler), make(chan struct{}))
	}
	ten := strings.Repeat("x", 10)

	e := newLog()
	epoch := followTo(t, e, ten, ten, ten) // 30 bytes: the first goes
	if seqs, from := heldSeqs(e); !slices.Equal(seqs, []uint64{2, 3}) || from != 1 || e.recentLen != 20 {
		t.Fatalf("after three events of 10 bytes within 25: holds %v (%d bytes) from %d; want [2 3] (20 bytes) from 1", seqs, e.recentLen, from)
	}
	if events, through, ok, _, _ := e.since(position{epoch, 1}); !ok || through != 3 || len(events) != 2 || events[0].Seq != 2 {
		t.Fatalf("since 1: %v through %d ok %v; want 2 and 3", events, through, ok)
	}
	if _, _, ok, _, _ := e.since(position{epoch, 0}); ok {
		t.Fatal("since 0, behind what the follower holds: answered; want the store read")
	}

	e = newLog()
	followTo(t, e, ten, ten, "xxxxx") // 25 bytes: exactly the bound, all kept
	if seqs, from := heldSeqs(e); !slices.Equal(seqs, []uint64{1, 2, 3}) || from != 0 {
		t.Fatalf("after 25 bytes of events within 25: holds %v from %d; want [1 2 3] from 0", seqs, from)
	}

	e = newLog()
	followTo(t, e, strings.Repeat("x", 40)) // larger than the bound alone: kept
	if seqs, from := heldSeqs(e); !slices.Equal(seqs, []uint64{1}) || from != 0 {
		t.Fatalf("after one event of 40 bytes within 25: holds %v from %d; want [1] from 0", seqs, from)
	}
	// An event appended by another instance is sized when the follower reads it: the pages of
	// the streams are sized with it.
	if m := e.maxEvent.Load(); m != 40 {
		t.Fatalf("after reading an event of 40 bytes, the largest event seen is %d bytes", m)
	}

	// The count bound first: the bytes of the events it drops no longer count against the byte
	// bound (three of 10 within 2 events and 25 bytes: the newest two, 20 bytes).
	e = newEffectLog(Config{EventBuffer: 2, EventBufferBytes: 25, EventReplayBytes: 1 << 20, EventPageBytes: 1 << 20},
		slog.New(slog.DiscardHandler), make(chan struct{}))
	followTo(t, e, ten, ten, ten)
	if seqs, from := heldSeqs(e); !slices.Equal(seqs, []uint64{2, 3}) || from != 1 || e.recentLen != 20 {
		t.Fatalf("after three events of 10 bytes within 2 events and 25 bytes: holds %v (%d bytes) from %d; want [2 3] (20 bytes) from 1", seqs, e.recentLen, from)
	}
}

// TestFollowerStopsWithItsLastStream: the follower runs while a stream follows and stops with
// the last one, forgetting what it held; a second stream keeps it running.
func TestFollowerStopsWithItsLastStream(t *testing.T) {
	closing := make(chan struct{})
	defer close(closing)
	e := newEffectLog(Config{EventBuffer: 4, EventBufferBytes: 1 << 20, EventReplayBytes: 1 << 20, EventPageBytes: 1 << 16},
		slog.New(slog.DiscardHandler), closing)
	running := func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.stop != nil
	}
	first := e.follow()
	second := e.follow()
	waitFollower(t, e, func() bool { return e.ready })
	first()
	if !running() {
		t.Fatal("one of two streams left: the follower stopped")
	}
	e.mu.Lock()
	changed := e.changed
	e.mu.Unlock()
	second()
	if running() {
		t.Fatal("the last stream left: the follower still runs")
	}
	select {
	case <-changed: // a stream waiting on the follower is woken (to read the store)
	default:
		t.Fatal("the last stream left: the streams waiting on the follower were not woken")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ready || e.recent != nil || e.followers != 0 {
		t.Fatalf("a stopped follower: ready %v, %d events held, %d followers", e.ready, len(e.recent), e.followers)
	}
}

// TestPageLimit: a page holds as many events of the largest size seen as fit its bytes, at
// least one, at most what the read may take; one event when no size is known yet.
func TestPageLimit(t *testing.T) {
	e := &effectLog{}
	for _, tc := range []struct {
		largest, bytes int64
		most, want     int
	}{{0, 1 << 20, 100, 1}, {0, 1 << 20, 0, 0}, {1000, 4500, 100, 4}, {1000, 4000, 100, 4}, {1000, 500, 100, 1}, {1000, 1 << 20, 100, 100}} {
		e.maxEvent.Store(tc.largest)
		if got := e.pageLimit(tc.bytes, tc.most); got != tc.want {
			t.Errorf("largest %d, %d bytes, at most %d: %d, want %d", tc.largest, tc.bytes, tc.most, got, tc.want)
		}
	}
}

// TestNoteSizeKeepsTheLargest: a smaller event noted after a larger one leaves the largest size.
func TestNoteSizeKeepsTheLargest(t *testing.T) {
	e := &effectLog{}
	for _, n := range []int{10, 40, 10} {
		e.noteSize(n)
	}
	if m := e.maxEvent.Load(); m != 40 {
		t.Fatalf("after events of 10, 40 and 10 bytes, the largest seen is %d", m)
	}
}

// TestEffectLogInProcessWarns: a store that keeps no logs is warned about (effect events then
// reach this instance's streams only); no store at all is local mode's choice, not warned about.
func TestEffectLogInProcessWarns(t *testing.T) {
	type kvOnly struct{ store.Store } // a store.Store and nothing more
	for _, tc := range []struct {
		store store.Store
		warn  bool
	}{{nil, false}, {kvOnly{memory.New()}, true}} {
		var out strings.Builder
		e := newEffectLog(Config{Store: tc.store}, slog.New(slog.NewTextHandler(&out, nil)), nil)
		if got := strings.Contains(out.String(), "the store keeps no logs"); got != tc.warn || !e.inProcess {
			t.Errorf("store %T: warned %v (%q), in process %v; want warned %v", tc.store, got, out.String(), e.inProcess, tc.warn)
		}
	}
}

// heldLog is a log whose WaitLog the test controls: it fails the first call when failFirst is
// set, and otherwise waits for release (closed) before waiting on the log.
type heldLog struct {
	*memory.Store
	failFirst bool
	failed    atomic.Bool
	release   chan struct{}
}

func (h *heldLog) WaitLog(ctx context.Context, name string, after uint64) error {
	if h.failFirst && h.failed.CompareAndSwap(false, true) {
		return errors.New("the store is unreachable")
	}
	select {
	case <-h.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return h.Store.WaitLog(ctx, name, after)
}

// TestFollowerRetriesAFailedWait: a wait on the log that fails (the store unreachable) is tried
// again after a pause; the follower does not stop.
func TestFollowerRetriesAFailedWait(t *testing.T) {
	h := &heldLog{Store: memory.New(), failFirst: true, release: make(chan struct{})}
	close(h.release)
	e := newEffectLog(Config{Store: h, EventBuffer: 100, EventBufferBytes: 1 << 20, EventReplayBytes: 1 << 20, EventPageBytes: 1 << 20},
		slog.New(slog.DiscardHandler), make(chan struct{}))
	followTo(t, e, "after the failure")
	if seqs, _ := heldSeqs(e); !slices.Equal(seqs, []uint64{1}) || !h.failed.Load() {
		t.Fatalf("holds %v (the wait failed: %v)", seqs, h.failed.Load())
	}
}

// TestFollowerPassedByRetention: a burst of more events than the log keeps lands between two
// reads of a follower that started on an empty log: it holds the events kept and vouches for
// nothing before them (a stream there reads the store, and is told what was lost).
func TestFollowerPassedByRetention(t *testing.T) {
	h := &heldLog{Store: memory.New(), release: make(chan struct{})}
	e := newEffectLog(Config{Store: h, EventRetentionCount: 2, EventBuffer: 100, EventBufferBytes: 1 << 20, EventReplayBytes: 1 << 20,
		EventPageBytes: 1 << 20}, slog.New(slog.DiscardHandler), make(chan struct{}))
	t.Cleanup(e.follow())
	wait := func(done func() bool) { t.Helper(); waitFollower(t, e, done) }
	wait(func() bool { return e.ready })
	for _, d := range []string{"1", "2", "3", "4", "5"} { // the log keeps 4 and 5
		if _, err := e.log.AppendLog(context.Background(), e.name, []byte(d), e.keep); err != nil {
			t.Fatal(err)
		}
	}
	close(h.release)
	wait(func() bool { return e.to >= 5 })
	e.mu.Lock()
	epoch := e.epoch
	e.mu.Unlock()
	if seqs, from := heldSeqs(e); !slices.Equal(seqs, []uint64{4, 5}) || from != 3 {
		t.Fatalf("holds %v from %d; want [4 5] from 3", seqs, from)
	}
	if events, through, ok, _, _ := e.since(position{epoch, 3}); !ok || through != 5 || len(events) != 2 {
		t.Fatalf("since 3: %v through %d ok %v; want 4 and 5", events, through, ok)
	}
	if _, _, ok, _, _ := e.since(position{epoch, 2}); ok {
		t.Fatal("since 2, before what the log kept: answered; want the store read")
	}
}

// endedWaitLog is a log whose waits last until their context ends, then say so on ended.
type endedWaitLog struct {
	*memory.Store
	ended chan struct{}
}

func (l endedWaitLog) WaitLog(ctx context.Context, _ string, _ uint64) error {
	<-ctx.Done()
	select {
	case l.ended <- struct{}{}:
	default:
	}
	return ctx.Err()
}

// TestFollowerStops: the follower's wait on the log ends when its last stream leaves, and when
// the controller closes while streams still follow it.
func TestFollowerStops(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(leave func(), closing chan struct{})
	}{
		{"the last stream leaves", func(leave func(), _ chan struct{}) { leave() }},
		{"the controller closes", func(_ func(), closing chan struct{}) { close(closing) }},
	} {
		l := endedWaitLog{Store: memory.New(), ended: make(chan struct{}, 1)}
		closing := make(chan struct{})
		e := newEffectLog(Config{Store: l, EventBuffer: 4, EventBufferBytes: 1 << 20, EventReplayBytes: 1 << 20, EventPageBytes: 1 << 16},
			slog.New(slog.DiscardHandler), closing)
		leave := e.follow()
		waitFollower(t, e, func() bool { return e.ready })
		tc.stop(leave, closing)
		select {
		case <-l.ended:
		case <-time.After(time.Minute): // a failure bound only
			t.Fatalf("%s: the follower still waits on the log", tc.name)
		}
	}
}

// flakyReadLog is a memory store whose first ReadLog fails.
type flakyReadLog struct {
	*memory.Store
	failed atomic.Bool
}

func (l *flakyReadLog) ReadLog(ctx context.Context, name string, after uint64, limit int) (store.LogRange, error) {
	if l.failed.CompareAndSwap(false, true) {
		return store.LogRange{}, errors.New("the store is unreachable")
	}
	return l.Store.ReadLog(ctx, name, after, limit)
}

// TestFollowerStart: the follower's first read asks for no events (it starts at the newest
// position, whatever the log holds); a read that fails is logged and tried again, the follower
// ready only with a position of the log.
func TestFollowerStart(t *testing.T) {
	for _, fail := range []bool{false, true} {
		var limits []int
		var l store.Log = limitLog{memory.New(), &limits}
		if fail {
			l = &flakyReadLog{Store: memory.New()}
		}
		var logs strings.Builder
		e := newEffectLog(Config{Store: l.(store.Store), EventBuffer: 4, EventBufferBytes: 1 << 20, EventReplayBytes: 1 << 20, EventPageBytes: 1 << 16},
			slog.New(slog.NewTextHandler(&logs, nil)), make(chan struct{}))
		if _, err := l.AppendLog(context.Background(), e.name, []byte("before"), e.keep); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.follow())
		waitFollower(t, e, func() bool { return e.ready })
		e.mu.Lock()
		epoch, from, to := e.epoch, e.from, e.to
		e.mu.Unlock()
		if epoch == "" || from != 1 || to != 1 || (!fail && !slices.Equal(limits, []int{0})) {
			t.Errorf("failing first: %v: ready at %q %d-%d after reads of %v; want the log's epoch at 1, one read of no events", fail, epoch, from, to, limits)
		}
		if warned := strings.Contains(logs.String(), `level=WARN msg="effect stream: reading the log failed; retrying" error="the store is unreachable"`); warned != fail {
			t.Errorf("failing first: %v: logs %q", fail, logs.String())
		}
	}
}
