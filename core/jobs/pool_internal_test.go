package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
)

// idlePool is a pool whose queue nobody takes from (no worker runs), of cap messages, for a
// service on the in-memory store.
func idlePool(t *testing.T, cap int) (*Pool, *memory.Store) {
	t.Helper()
	s := memory.New()
	p := NewPool()
	p.svc = NewService(Config{Store: s, Dispatcher: nopDispatcher{}})
	p.queue = make(chan Message, cap)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	t.Cleanup(p.close)
	return p, s
}

type nopDispatcher struct{}

func (nopDispatcher) Dispatch(context.Context, Message, time.Duration) error { return nil }

// TestPoolEnqueue: a task is queued once; one queued or running already is marked to be queued
// again when its delivery ends; a full queue drops a task (the scan finds it), a closing pool
// queues nothing.
func TestPoolEnqueue(t *testing.T) {
	p, _ := idlePool(t, 2)
	a := Message{Agent: "a", Workspace: "w", Job: "1", Work: "x"}
	b, c, d := a, a, a
	b.Job, c.Job, d.Job = "2", "3", "4"
	p.enqueue(a)
	p.enqueue(a)
	p.enqueue(a)
	if got := p.queued[a.Key()]; got != 2 || len(p.queue) != 1 {
		t.Fatalf("a task queued thrice: marked %d, %d queued; want marked to queue again (2), 1 queued", got, len(p.queue))
	}
	p.enqueue(b)
	p.enqueue(c)
	if _, kept := p.queued[c.Key()]; kept || len(p.queue) != 2 || p.queued[b.Key()] != 1 {
		t.Fatalf("a full queue: %v, %d queued", p.queued, len(p.queue))
	}
	<-p.queue
	p.cancel()
	p.enqueue(d)
	if _, kept := p.queued[d.Key()]; kept || len(p.queue) != 1 {
		t.Fatalf("a closing pool: %v, %d queued", p.queued, len(p.queue))
	}
}

// TestPoolDispatchDelay: a task due at once is queued, and its index entry written; a delayed
// one waits on a timer, its entry saying when it is due.
func TestPoolDispatchDelay(t *testing.T) {
	p, s := idlePool(t, 4)
	ctx := context.Background()
	now, later := Message{Agent: "a", Workspace: "w", Job: "now", Work: "x"}, Message{Agent: "a", Workspace: "w", Job: "later", Work: "x", At: 1}
	if err := p.Dispatch(ctx, now, 0); err != nil {
		t.Fatal(err)
	}
	if err := p.Dispatch(ctx, later, time.Hour); err != nil {
		t.Fatal(err)
	}
	if len(p.queue) != 1 || len(p.timers) != 1 {
		t.Fatalf("%d queued, %d timers; want the task due at once queued, the other on a timer", len(p.queue), len(p.timers))
	}
	if m := <-p.queue; m != now {
		t.Fatalf("queued %+v", m)
	}
	for _, m := range []Message{now, later} {
		rec, err := s.Get(ctx, indexKey(m))
		if err != nil {
			t.Fatal(err)
		}
		// Without telemetry, no trace context: the entry is the message.
		if e, _, err := decodeIndexEntry(rec.Value); err != nil || e.At != m.At || string(rec.Value) != string(m.Encode()) {
			t.Fatalf("index entry %s: %+v, %v", rec.Value, e, err)
		}
	}
}

// TestPoolDispatchWritesTheEntryFirst: a task due at once is queued only once its index entry is
// written. A failed write queues nothing: the job.start it fails is retried and dispatches again,
// whereas a delivery that ran ahead of its entry, killed inside a step, was lost (no scan finds
// the task, and a retried job.start does not dispatch a task delivered once).
func TestPoolDispatchWritesTheEntryFirst(t *testing.T) {
	p, _ := idlePool(t, 4)
	s := &failingIndex{Store: memory.New()}
	s.fail.Store(true)
	p.svc.cfg.Store = s
	ctx := context.Background()
	m := Message{Agent: "a", Workspace: "w", Job: "1", Work: "x"}
	if err := p.Dispatch(ctx, m, 0); !errors.Is(err, errIndexDown) {
		t.Fatalf("dispatch while the index write fails: %v, want %v", err, errIndexDown)
	}
	if len(p.queue) != 0 || len(p.queued) != 0 {
		t.Fatalf("a task whose entry was not written: %d queued (%v), want none", len(p.queue), p.queued)
	}
	s.fail.Store(false)
	if err := p.Dispatch(ctx, m, 0); err != nil {
		t.Fatal(err)
	}
	if len(p.queue) != 1 || p.queued[m.Key()] != 1 {
		t.Fatalf("the dispatch again: %d queued (%v), want the task", len(p.queue), p.queued)
	}
	if _, err := s.Get(ctx, indexKey(m)); err != nil {
		t.Fatalf("the index entry: %v", err)
	}
}

var errIndexDown = errors.New("the index is down")

// failingIndex is a store whose creations of the pool's index entries fail while fail is set.
type failingIndex struct {
	*memory.Store
	fail atomic.Bool
}

func (f *failingIndex) Create(ctx context.Context, key string, value []byte, expiresAt time.Time) (store.Record, error) {
	if f.fail.Load() && strings.HasPrefix(key, keyPrefix+"p/") {
		return store.Record{}, errIndexDown
	}
	return f.Store.Create(ctx, key, value, expiresAt)
}

// gatedGets is a store whose reads of a task wait for the test's answer: the error to return
// (nil: the store's own answer); List says when it is called.
type gatedGets struct {
	*memory.Store
	listed chan struct{}
	gets   chan chan error
}

func (g *gatedGets) Get(ctx context.Context, key string) (store.Record, error) {
	if strings.HasPrefix(key, TaskKeyPrefix) {
		answer := make(chan error)
		g.gets <- answer
		if err := <-answer; err != nil {
			return store.Record{}, err
		}
	}
	return g.Store.Get(ctx, key)
}

func (g *gatedGets) List(ctx context.Context, prefix, after string, limit int) (store.Page, error) {
	select {
	case g.listed <- struct{}{}:
	default:
	}
	return g.Store.List(ctx, prefix, after, limit)
}

type regOwner struct{ reg *Registry }

func (o regOwner) Works() *Registry { return o.reg }

// TestPoolDeliversAgainADispatchWhileRunning: a task dispatched while its delivery runs is
// delivered again when that delivery ends (an answer may have come meanwhile), once; a delivery
// that fails is logged, one that finds nothing to do is not.
func TestPoolDeliversAgainADispatchWhileRunning(t *testing.T) {
	reg := NewRegistry()
	Define(regOwner{reg}, "x", func(context.Context, struct{}) error { return nil })
	s := &gatedGets{Store: memory.New(), listed: make(chan struct{}, 1), gets: make(chan chan error)}
	failed := make(chan slog.Record, 4)
	p := NewPool(Workers(1), ScanEvery(0))
	svc := NewService(Config{Store: s, Dispatcher: p, Logger: slog.New(recordsOf{"background delivery failed: the pool's scan delivers the task again", failed}),
		Works: func(string) (*Registry, time.Duration, bool) { return reg, 0, true }})
	t.Cleanup(svc.Close)
	<-s.listed // the first scan found the index empty
	ctx := context.Background()
	m := Message{Agent: "a", Workspace: "w", Job: "j", Work: "x"}
	read := func(what string) chan error {
		t.Helper()
		select {
		case answer := <-s.gets:
			return answer
		case <-time.After(time.Minute): // a bound on failure, not a timing
			t.Fatalf("no %s", what)
			return nil
		}
	}
	if err := p.Dispatch(ctx, m, 0); err != nil {
		t.Fatal(err)
	}
	first := read("delivery")
	if err := p.Dispatch(ctx, m, 0); err != nil { // while the first delivery runs
		t.Fatal(err)
	}
	first <- nil // the task is not found: nothing to do
	read("second delivery") <- errors.New("store down")
	// One more task: when the worker reads it, it is done with the first.
	m2 := m
	m2.Job = "j2"
	if err := p.Dispatch(ctx, m2, 0); err != nil {
		t.Fatal(err)
	}
	read("delivery of another task") <- nil
	if len(failed) != 1 {
		t.Fatalf("%d deliveries logged as failed, want the second", len(failed))
	}
	if logged := attrs(<-failed)["error"]; !strings.Contains(logged, "store down") {
		t.Fatalf("logged as failed: the delivery of error %q, want the one of the store's error", logged)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.queued[m.Key()]; ok || len(p.queue) != 0 {
		t.Fatalf("after the second delivery: marked %v, %d queued", p.queued, len(p.queue))
	}
}

// recordsOf is a log handler that sends the records of message msg to ch.
type recordsOf struct {
	msg string
	ch  chan<- slog.Record
}

func (h recordsOf) Enabled(context.Context, slog.Level) bool { return true }
func (h recordsOf) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h recordsOf) WithGroup(string) slog.Handler            { return h }
func (h recordsOf) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.ch <- r
	}
	return nil
}

// TestPoolScan: a scan queues the tasks due (their index entry due now or before), not those of
// an entry due later, nor one held by another process until its lease and the skew margin
// lapsed; it drops the entries of tasks that ended or no longer exist.
func TestPoolScan(t *testing.T) {
	p, s := idlePool(t, 8)
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	p.svc.cfg.Now = func() time.Time { return now }
	reg := NewRegistry()
	w := Define(regOwner{reg}, "x", func(context.Context, struct{}) error { return nil })
	p.svc.cfg.Works = func(string) (*Registry, time.Duration, bool) { return reg, 0, true }
	ctx := NewContext(context.Background(), p.svc, reg, "a", &contract.VerifiedWorkspaceContext{GrantID: "g", WorkspaceID: "w", AgentSlug: "a"})
	entries := map[string]int64{ // job → its index entry's due time
		"due-before":   now.Add(-time.Minute).UnixMilli(),
		"due-now":      0,
		"due-later":    now.Add(time.Minute).UnixMilli(),
		"ended":        0,
		"gone":         0,
		"held-in-skew": 0, // its holder's lease lapsed, the skew margin not
		"held-lapsed":  0, // both lapsed, to the millisecond
	}
	for job, at := range entries {
		m := Message{Agent: "a", Workspace: "w", Job: job, Work: "x", At: at}
		if job != "gone" {
			if _, err := w.Start(ctx, &contract.ActionRequest{AgentSlug: "a", Action: contract.JobStartAction, JobID: &job, MissionID: "m", Input: []byte(`{}`)}, struct{}{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := indexTask(ctx, s, m, m.Encode()); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.svc.failJob(ctx, Message{Agent: "a", Workspace: "w", Job: "ended", Work: "x"}, CauseDelivery, "ended"); err != nil {
		t.Fatal(err)
	}
	for job, lease := range map[string]time.Time{"held-in-skew": now.Add(-SkewMargin + time.Millisecond), "held-lapsed": now.Add(-SkewMargin)} {
		if _, err := p.svc.update(ctx, taskKey("a", "w", job), func(r *record) (bool, error) {
			r.Holder, r.LeaseUntil = "another-process", lease
			return true, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Scan(ctx); err != nil {
		t.Fatal(err)
	}
	var queued []string
	for len(p.queue) > 0 {
		queued = append(queued, (<-p.queue).Job)
	}
	slices.Sort(queued)
	if fmt.Sprint(queued) != "[due-before due-now held-lapsed]" {
		t.Fatalf("queued %v, want the tasks due", queued)
	}
	page, err := s.List(ctx, keyPrefix+"p/", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, it := range page.Items {
		kept = append(kept, it.Key[strings.LastIndex(it.Key, "/")+1:])
	}
	if fmt.Sprint(kept) != "[due-before due-later due-now held-in-skew held-lapsed]" {
		t.Fatalf("index entries kept %v, want those of the tasks not ended", kept)
	}
}

// TestPoolScanFailureLogged: a periodic scan that fails is logged with its error; one that
// passes is not.
func TestPoolScanFailureLogged(t *testing.T) {
	s := &failingList{Store: memory.New(), fail: 1}
	failed := make(chan slog.Record, 4)
	ticks := make(chan chan time.Time)
	p := NewPool(ScanEvery(time.Minute))
	svc := NewService(Config{Store: s, Dispatcher: p, Logger: slog.New(recordsOf{"background task scan failed", failed}),
		After: func(time.Duration) <-chan time.Time { tick := make(chan time.Time, 1); ticks <- tick; return tick }})
	t.Cleanup(svc.Close)
	(<-ticks) <- time.Now() // after the first scan, which failed
	<-ticks                 // after the second, which passed
	if len(failed) != 1 {
		t.Fatalf("%d scans logged as failed, want the first", len(failed))
	}
	if r := <-failed; !strings.Contains(fmt.Sprint(attrs(r)), "list down") {
		t.Fatalf("logged %v", attrs(r))
	}
}

// failingList is a store whose first fail lists fail.
type failingList struct {
	*memory.Store
	mu   sync.Mutex
	fail int
}

func (f *failingList) List(ctx context.Context, prefix, after string, limit int) (store.Page, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail > 0 {
		f.fail--
		return store.Page{}, errors.New("list down")
	}
	return f.Store.List(ctx, prefix, after, limit)
}

// attrs is a log record's attributes, by key.
func attrs(r slog.Record) map[string]string {
	m := map[string]string{}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
	return m
}

// TestPoolClose: closing a pool that never started does nothing; closing one that did stops it.
func TestPoolClose(t *testing.T) {
	NewPool().close()
	p := NewPool(ScanEvery(0))
	NewService(Config{Store: memory.New(), Dispatcher: p})
	p.close()
	if p.ctx.Err() == nil {
		t.Fatal("the pool runs on after its close")
	}
}

// TestPoolScanTakesBackItsOwn: a pool of an instance name takes back at once, in its first scan
// only, the tasks an earlier process of its name held; a task another live instance holds waits.
func TestPoolScanTakesBackItsOwn(t *testing.T) {
	p, s := idlePool(t, 8)
	p.svc.instance = "i1"
	reg := NewRegistry()
	w := Define(regOwner{reg}, "x", func(context.Context, struct{}) error { return nil })
	p.svc.cfg.Works = func(string) (*Registry, time.Duration, bool) { return reg, 0, true }
	ctx := NewContext(context.Background(), p.svc, reg, "a", &contract.VerifiedWorkspaceContext{GrantID: "g", WorkspaceID: "w", AgentSlug: "a"})
	for job, holder := range map[string]string{"mine": "i1#0a", "theirs": "i2#0b"} {
		if _, err := w.Start(ctx, &contract.ActionRequest{AgentSlug: "a", Action: contract.JobStartAction, JobID: &job, MissionID: "m", Input: []byte(`{}`)}, struct{}{}); err != nil {
			t.Fatal(err)
		}
		m := Message{Agent: "a", Workspace: "w", Job: job, Work: "x"}
		if _, err := p.svc.update(ctx, m.Key(), func(r *record) (bool, error) {
			r.Holder, r.LeaseUntil = holder, p.svc.now().Add(time.Minute)
			return true, nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := indexTask(ctx, s, m, m.Encode()); err != nil {
			t.Fatal(err)
		}
	}
	for _, first := range []bool{false, true} {
		clear(p.queued)
		if err := p.scan(ctx, first); err != nil {
			t.Fatal(err)
		}
		var queued []string
		for len(p.queue) > 0 {
			queued = append(queued, (<-p.queue).Job)
		}
		if want := map[bool]string{false: "[]", true: "[mine]"}[first]; fmt.Sprint(queued) != want {
			t.Fatalf("first scan %t: queued %v, want %s", first, queued, want)
		}
	}
	if own, ok := p.orphans[Message{Agent: "a", Workspace: "w", Job: "mine"}.Key()]; !ok || own {
		t.Fatalf("orphans %v: want mine, taken back as this instance's (false)", p.orphans)
	}
}

// TestTraceMemo: a task's trace context is kept until taken, the first kept unless replaced;
// an empty one is not kept.
func TestTraceMemo(t *testing.T) {
	var k traceMemo
	k.keep("a", map[string]string{}, true)
	k.keep("b", map[string]string{"traceparent": "1"}, false)
	k.keep("b", map[string]string{"traceparent": "2"}, false)
	k.keep("c", map[string]string{"traceparent": "1"}, false)
	k.keep("c", map[string]string{"traceparent": "2"}, true)
	if fmt.Sprint(k.m) != "map[b:map[traceparent:1] c:map[traceparent:2]]" {
		t.Fatalf("kept %v", k.m)
	}
}
