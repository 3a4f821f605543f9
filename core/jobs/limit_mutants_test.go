package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
)

// The tests of this file pin what the limits' code does at the lines whose mutants the package's
// other tests let live (scripts/mutants): the limit record a take or a release leaves, the
// errors they return, and what a delivery holds and frees.

var errLimitStore = errors.New("the limit store is down")

const slotNotReleased = "a limit's slot was not released: it frees itself after the lease"

// limitStore is the in-memory store with the faults of a shared one: reads of a key that fail,
// and a write of a limit record that another instance's write reaches first (before runs once,
// right before that write).
type limitStore struct {
	*memory.Store
	mu      sync.Mutex
	failGet func(key string) bool
	before  func(key string)
	gets    int
	// failUpdate fails the updates of every record but the limits'.
	failUpdate bool
}

func (s *limitStore) Get(ctx context.Context, key string) (store.Record, error) {
	s.mu.Lock()
	s.gets++
	fail := s.failGet != nil && s.failGet(key)
	s.mu.Unlock()
	if fail {
		return store.Record{}, errLimitStore
	}
	return s.Store.Get(ctx, key)
}

func (s *limitStore) race(key string) {
	s.mu.Lock()
	before := s.before
	if strings.Contains(key, "~l/") {
		s.before = nil
	}
	s.mu.Unlock()
	if before != nil && strings.Contains(key, "~l/") {
		before(key)
	}
}

func (s *limitStore) Create(ctx context.Context, key string, v []byte, exp time.Time) (store.Record, error) {
	s.race(key)
	return s.Store.Create(ctx, key, v, exp)
}

func (s *limitStore) Update(ctx context.Context, key string, ver uint64, v []byte, exp time.Time) (store.Record, error) {
	s.mu.Lock()
	fail := s.failUpdate && !strings.Contains(key, "~l/")
	s.mu.Unlock()
	if fail {
		return store.Record{}, errLimitStore
	}
	s.race(key)
	return s.Store.Update(ctx, key, ver, v, exp)
}

func (s *limitStore) reads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets
}

// sentMessage is a message the service dispatched.
type sentMessage struct {
	m     Message
	delay time.Duration
}

type sentLog struct {
	mu   sync.Mutex
	sent []sentMessage
}

func (d *sentLog) Dispatch(_ context.Context, m Message, delay time.Duration) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sent = append(d.sent, sentMessage{m, delay})
	return nil
}

func (d *sentLog) take() []sentMessage {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.sent
	d.sent = nil
	return s
}

// limWorld is a job service on a limitStore at a manual time.
type limWorld struct {
	svc  *Service
	st   *limitStore
	sent *sentLog
	// unreleased gets the logs of a slot not released.
	unreleased chan slog.Record
	reg        *Registry
	now        time.Time
	// after answers the service's timer (nil: a channel that fires at once).
	after func(time.Duration) <-chan time.Time
	waits atomic.Int64
}

func newLimWorld(t *testing.T) *limWorld {
	t.Helper()
	w := &limWorld{st: &limitStore{Store: memory.New()}, sent: &sentLog{}, unreleased: make(chan slog.Record, 64), reg: NewRegistry(),
		now: time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)}
	w.svc = NewService(Config{Store: w.st, Dispatcher: w.sent, Logger: slog.New(recordsOf{slotNotReleased, w.unreleased}), Now: func() time.Time { return w.now },
		After: func(d time.Duration) <-chan time.Time {
			w.waits.Add(1)
			if w.after != nil {
				return w.after(d)
			}
			c := make(chan time.Time, 1)
			c <- w.now
			return c
		},
		Works: func(string) (*Registry, time.Duration, bool) { return w.reg, 0, true }})
	t.Cleanup(w.svc.Close)
	return w
}

// put writes the record of l for agent a, workspace w.
func (w *limWorld) put(t *testing.T, l *Limit, rec limitRecord) {
	t.Helper()
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	key := l.key("a", "w")
	if got, err := w.st.Store.Get(context.Background(), key); err == nil {
		_, err = w.st.Store.Update(context.Background(), key, got.Version, b, store.Never)
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := w.st.Store.Create(context.Background(), key, b, store.Never); err != nil {
		t.Fatal(err)
	}
}

// rec reads the record of l.
func (w *limWorld) rec(t *testing.T, l *Limit) (limitRecord, uint64) {
	t.Helper()
	got, err := w.st.Store.Get(context.Background(), l.key("a", "w"))
	if err != nil {
		t.Fatal(err)
	}
	var r limitRecord
	if err := decodeJSON(got.Value, &r); err != nil {
		t.Fatal(err)
	}
	return r, got.Version
}

func (w *limWorld) take(l *Limit, holder string, m *Message) (bool, time.Duration, error) {
	return w.svc.take(context.Background(), l, "a", "w", holder, m)
}

// lineMsg is the message of job id of workspace ws, as it waits in line.
func lineMsg(ws, id string) Message { return Message{Agent: "a", Workspace: ws, Job: id, Work: "x"} }

func holdersOf(r limitRecord) string {
	var hs []string
	for _, sl := range r.Slots {
		hs = append(hs, sl.Holder)
	}
	return strings.Join(hs, ",")
}

func waitersOf(r limitRecord) string {
	var ws []string
	for _, m := range r.Waiters {
		ws = append(ws, m.Job)
	}
	return strings.Join(ws, ",")
}

// TestLimitMutantsTake: what a take leaves in the limit record and answers, case by case.
func TestLimitMutantsTake(t *testing.T) {
	one := func() *Limit { return NewLimit("p", MaxRunning(1)) }
	t.Run("a holder takes its own slot back", func(t *testing.T) {
		w, l := newLimWorld(t), one()
		w.put(t, l, limitRecord{Slots: []limitSlot{{Holder: "d/u", Until: w.now.Add(time.Minute)}}})
		ok, retry, err := w.take(l, "d/u", nil)
		r, _ := w.rec(t, l)
		if !ok || retry != 0 || err != nil || holdersOf(r) != "d/u" || !r.Slots[0].Until.Equal(w.now.Add(DefaultLease)) {
			t.Fatalf("take of its own slot: %v %v %v, slots %+v", ok, retry, err, r.Slots)
		}
	})
	t.Run("a job takes the slot handed to it", func(t *testing.T) {
		w, l := newLimWorld(t), one()
		j := lineMsg("w", "j")
		w.put(t, l, limitRecord{Slots: []limitSlot{{Holder: reservedFor(j), Until: w.now.Add(time.Minute)}}, Waiters: []Message{lineMsg("w", "k")}})
		ok, _, err := w.take(l, "d/job", &j)
		r, _ := w.rec(t, l)
		if !ok || err != nil || holdersOf(r) != "d/job" || waitersOf(r) != "k" {
			t.Fatalf("take of the slot handed: %v %v, record %+v", ok, err, r)
		}
	})
	t.Run("a step takes a free slot while jobs wait", func(t *testing.T) {
		w, l := newLimWorld(t), NewLimit("p", MaxRunning(2))
		w.put(t, l, limitRecord{Slots: []limitSlot{{Holder: "o/job", Until: w.now.Add(time.Minute)}}, Waiters: []Message{lineMsg("w", "k")}})
		ok, _, err := w.take(l, "d/u", nil)
		r, _ := w.rec(t, l)
		if !ok || err != nil || holdersOf(r) != "o/job,d/u" || waitersOf(r) != "k" {
			t.Fatalf("take by a step: %v %v, record %+v", ok, err, r)
		}
	})
	t.Run("a step finds the limit full", func(t *testing.T) {
		w, l := newLimWorld(t), one()
		w.put(t, l, limitRecord{Slots: []limitSlot{{Holder: "o/job", Until: w.now.Add(time.Minute)}}, Waiters: []Message{lineMsg("w", "k")}})
		_, v0 := w.rec(t, l)
		ok, retry, err := w.take(l, "d/u", nil)
		r, v := w.rec(t, l)
		if ok || retry != 0 || err != nil || waitersOf(r) != "k" || v != v0 {
			t.Fatalf("take by a step of a full limit: %v %v %v, record %+v (version %d, was %d)", ok, retry, err, r, v, v0)
		}
	})
	t.Run("a job not in line takes a free slot", func(t *testing.T) {
		w, l := newLimWorld(t), one()
		w.put(t, l, limitRecord{Served: "v"})
		j := lineMsg("w", "j")
		ok, _, err := w.take(l, "d/job", &j)
		r, _ := w.rec(t, l)
		if !ok || err != nil || r.Served != "v" || holdersOf(r) != "d/job" {
			t.Fatalf("take by a job not in line: %v %v, record %+v", ok, err, r)
		}
	})
	t.Run("the first in line takes a freed slot and its workspace is served", func(t *testing.T) {
		w, l := newLimWorld(t), NewLimit("p", MaxRunning(1), Shared())
		w.put(t, l, limitRecord{Waiters: []Message{lineMsg("x", "j"), lineMsg("x", "k")}, Served: "v"})
		j := lineMsg("x", "j")
		ok, _, err := w.svc.take(context.Background(), l, "a", "x", "d/job", &j)
		r, _ := w.rec(t, l)
		if !ok || err != nil || r.Served != "x" || waitersOf(r) != "k" {
			t.Fatalf("take by the first in line: %v %v, record %+v", ok, err, r)
		}
	})
	t.Run("a job finds the limit full and gets in line once", func(t *testing.T) {
		w, l := newLimWorld(t), one()
		w.put(t, l, limitRecord{Slots: []limitSlot{{Holder: "o/job", Until: w.now.Add(time.Minute)}}})
		j := lineMsg("w", "j")
		for range 2 {
			if ok, retry, err := w.take(l, "d/job", &j); ok || retry != 0 || err != nil {
				t.Fatalf("take of a full limit: %v %v %v", ok, retry, err)
			}
		}
		if r, _ := w.rec(t, l); waitersOf(r) != "j" {
			t.Fatalf("in line %q, want j once", waitersOf(r))
		}
	})
	t.Run("the line holds 500 jobs", func(t *testing.T) {
		w, l := newLimWorld(t), one()
		var line []Message
		for i := range maxWaiters {
			line = append(line, lineMsg("w", fmt.Sprintf("w%d", i)))
		}
		w.put(t, l, limitRecord{Slots: []limitSlot{{Holder: "o/job", Until: w.now.Add(time.Minute)}}, Waiters: line})
		j := lineMsg("w", "late")
		ok, retry, err := w.take(l, "d/job", &j)
		if r, _ := w.rec(t, l); ok || retry != 0 || err != nil || len(r.Waiters) != maxWaiters || strings.Contains(waitersOf(r), "late") {
			t.Fatalf("take with the line full: %v %v %v, %d in line", ok, retry, err, len(r.Waiters))
		}
	})
	t.Run("a slot full and no token: wait for the slot", func(t *testing.T) {
		w, l := newLimWorld(t), NewLimit("p", MaxRunning(1), Rate(1, time.Minute))
		w.put(t, l, limitRecord{Slots: []limitSlot{{Holder: "o/u", Until: w.now.Add(time.Minute)}}, Tokens: 0, Filled: w.now})
		if ok, retry, err := w.take(l, "d/u", nil); ok || retry != 0 || err != nil {
			t.Fatalf("take with the limit full and no token: %v %v %v, want false 0 nil", ok, retry, err)
		}
	})
	t.Run("no token, not its turn: the job gets in line", func(t *testing.T) {
		w, l := newLimWorld(t), NewLimit("p", MaxRunning(2), Rate(1, time.Minute))
		w.put(t, l, limitRecord{Waiters: []Message{lineMsg("w", "k")}, Tokens: 0, Filled: w.now})
		j := lineMsg("w", "j")
		ok, retry, err := w.take(l, "d/job", &j)
		if r, _ := w.rec(t, l); ok || retry != 0 || err != nil || waitersOf(r) != "k,j" {
			t.Fatalf("take out of turn with no token: %v %v %v, in line %q, want k,j", ok, retry, err, waitersOf(r))
		}
	})
	t.Run("no token, its turn: retry when the token comes", func(t *testing.T) {
		w, l := newLimWorld(t), NewLimit("p", MaxRunning(2), Rate(1, time.Minute))
		w.put(t, l, limitRecord{Tokens: 0.5, Filled: w.now})
		if ok, retry, err := w.take(l, "d/u", nil); ok || retry != 30*time.Second || err != nil {
			t.Fatalf("take with half a token: %v %v %v, want false 30s nil", ok, retry, err)
		}
	})
}

// TestLimitMutantsTakeRaces: a take whose write another instance's write reached first (the
// record created meanwhile, updated, or deleted) reads again and decides afresh.
func TestLimitMutantsTakeRaces(t *testing.T) {
	for name, c := range map[string]struct {
		seed bool
		race func(s *memory.Store, key string)
	}{
		"created meanwhile": {race: func(s *memory.Store, key string) {
			if _, err := s.Create(context.Background(), key, []byte(`{"tokens":0}`), store.Never); err != nil {
				panic(err)
			}
		}},
		"updated meanwhile": {seed: true, race: func(s *memory.Store, key string) {
			got, err := s.Get(context.Background(), key)
			if err == nil {
				_, err = s.Update(context.Background(), key, got.Version, []byte(`{"tokens":0,"served":"v"}`), store.Never)
			}
			if err != nil {
				panic(err)
			}
		}},
		"deleted meanwhile": {seed: true, race: func(s *memory.Store, key string) {
			got, err := s.Get(context.Background(), key)
			if err == nil {
				err = s.Delete(context.Background(), key, got.Version)
			}
			if err != nil {
				panic(err)
			}
		}},
	} {
		t.Run(name, func(t *testing.T) {
			w, l := newLimWorld(t), NewLimit("p", MaxRunning(1))
			if c.seed {
				w.put(t, l, limitRecord{})
			}
			w.st.before = func(key string) { c.race(w.st.Store, key) }
			ok, _, err := w.take(l, "d/u", nil)
			if r, _ := w.rec(t, l); !ok || err != nil || holdersOf(r) != "d/u" {
				t.Fatalf("take: %v %v, record %+v", ok, err, r)
			}
		})
	}
}

// TestLimitMutantsRelease: what a release leaves in the limit record, hands on and answers.
func TestLimitMutantsRelease(t *testing.T) {
	release := func(w *limWorld, l *Limit, holder string) (*Message, error) {
		return w.svc.release(context.Background(), l, "a", "w", holder)
	}
	t.Run("the slot goes to the next in line, who leaves the line", func(t *testing.T) {
		w, l := newLimWorld(t), NewLimit("p", MaxRunning(1))
		// A crashed holder's slot expired; this one's is the only one that counts.
		w.put(t, l, limitRecord{Slots: []limitSlot{{Holder: "crashed/u", Until: w.now.Add(-SkewMargin)}, {Holder: "d/u", Until: w.now.Add(time.Minute)}},
			Waiters: []Message{lineMsg("x", "j"), lineMsg("y", "k")}, Served: "w"})
		next, err := release(w, l, "d/u")
		r, _ := w.rec(t, l)
		if err != nil || next == nil || next.Job != "j" || holdersOf(r) != reservedFor(lineMsg("x", "j")) || waitersOf(r) != "k" || r.Served != "x" {
			t.Fatalf("release: %+v %v, record %+v", next, err, r)
		}
	})
	t.Run("a slot not held writes nothing", func(t *testing.T) {
		w, l := newLimWorld(t), NewLimit("p", MaxRunning(1))
		w.put(t, l, limitRecord{Slots: []limitSlot{{Holder: "o/u", Until: w.now.Add(time.Minute)}}, Waiters: []Message{lineMsg("w", "j")}})
		_, v0 := w.rec(t, l)
		next, err := release(w, l, "d/u")
		if _, v := w.rec(t, l); next != nil || err != nil || v != v0 {
			t.Fatalf("release of a slot not held: %+v %v, version %d, was %d", next, err, v, v0)
		}
	})
	t.Run("no record", func(t *testing.T) {
		w, l := newLimWorld(t), NewLimit("p", MaxRunning(1))
		if next, err := release(w, l, "d/u"); next != nil || err != nil {
			t.Fatalf("release with no record: %+v %v", next, err)
		}
	})
	t.Run("a failed read", func(t *testing.T) {
		w, l := newLimWorld(t), NewLimit("p", MaxRunning(1))
		w.put(t, l, limitRecord{Slots: []limitSlot{{Holder: "d/u", Until: w.now.Add(time.Minute)}}})
		w.st.failGet = func(string) bool { return true }
		if next, err := release(w, l, "d/u"); next != nil || !errors.Is(err, errLimitStore) {
			t.Fatalf("release on a failing store: %+v %v, want the store's error", next, err)
		}
	})
	t.Run("a rate alone reads nothing", func(t *testing.T) {
		w, l := newLimWorld(t), NewLimit("p", Rate(1, time.Minute))
		w.st.failGet = func(string) bool { return true }
		if next, err := release(w, l, "d/u"); next != nil || err != nil || w.st.reads() != 0 {
			t.Fatalf("release of a rate: %+v %v, %d reads", next, err, w.st.reads())
		}
	})
	for name, race := range map[string]func(s *memory.Store, key string){
		"updated meanwhile": func(s *memory.Store, key string) {
			got, err := s.Get(context.Background(), key)
			if err == nil {
				_, err = s.Update(context.Background(), key, got.Version, got.Value, store.Never)
			}
			if err != nil {
				panic(err)
			}
		},
		"deleted meanwhile": func(s *memory.Store, key string) {
			got, err := s.Get(context.Background(), key)
			if err == nil {
				err = s.Delete(context.Background(), key, got.Version)
			}
			if err != nil {
				panic(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			w, l := newLimWorld(t), NewLimit("p", MaxRunning(1))
			w.put(t, l, limitRecord{Slots: []limitSlot{{Holder: "d/u", Until: w.now.Add(time.Minute)}}})
			w.st.before = func(key string) { race(w.st.Store, key) }
			next, err := release(w, l, "d/u")
			if got, gerr := w.st.Store.Get(context.Background(), l.key("a", "w")); next != nil || err != nil ||
				gerr == nil && strings.Contains(string(got.Value), "d/u") {
				t.Fatalf("release: %+v %v; record %s %v", next, err, got.Value, gerr)
			}
		})
	}
}

// TestLimitMutantsRefill: the bucket fills from the last refill written, not from the first.
func TestLimitMutantsRefill(t *testing.T) {
	w, l := newLimWorld(t), NewLimit("p", Rate(1, time.Minute))
	for i, c := range []struct {
		after time.Duration
		ok    bool
		retry time.Duration
	}{{0, true, 0}, {time.Minute, true, 0}, {30 * time.Second, false, 30 * time.Second}} {
		w.now = w.now.Add(c.after)
		if ok, retry, err := w.take(l, "d/u", nil); ok != c.ok || retry != c.retry || err != nil {
			t.Fatalf("take %d, %s later: %v %v %v, want %v %v", i, c.after, ok, retry, err, c.ok, c.retry)
		}
	}
}

// TestLimitMutantsUnwritableRecord: a record that cannot be encoded (a clock past year 9999) is
// an error, not an empty record written.
func TestLimitMutantsUnwritableRecord(t *testing.T) {
	w, l := newLimWorld(t), NewLimit("p", MaxRunning(1))
	w.now = time.Date(9999, 12, 31, 23, 59, 50, 0, time.UTC) // the slot's lease ends in year 10000
	ok, _, err := w.take(l, "d/u", nil)
	if _, gerr := w.st.Store.Get(context.Background(), l.key("a", "w")); ok || err == nil || !errors.Is(gerr, store.ErrNotFound) {
		t.Fatalf("take with a lease past year 9999: %v %v; record read: %v", ok, err, gerr)
	}
}

// task is a delivery of job j of agent a, workspace w, with its lease and the job's deadline an
// hour away.
func (w *limWorld) task() *task {
	return &task{svc: w.svc, holder: "d", msg: Message{Agent: "a", Workspace: "w", Job: "j", Work: "x"}, log: w.svc.log,
		rec: &record{Deadline: w.now.Add(time.Hour)}, leaseUntil: w.now.Add(time.Hour)}
}

// TestLimitMutantsAcquire: a unit that cannot take every limit's slot frees those it took, and
// waits in its delivery, hands the task on, or halts, as the case says.
func TestLimitMutantsAcquire(t *testing.T) {
	free := func() *Limit { return NewLimit("free", MaxRunning(1)) }
	full := func(w *limWorld) *Limit {
		l := NewLimit("full", MaxRunning(1))
		w.put(t, l, limitRecord{Slots: []limitSlot{{Holder: "o/u", Until: w.now.Add(time.Hour)}}})
		return l
	}
	// freed: the free limit's slot is not held, in the store nor by the delivery.
	freed := func(t *testing.T, w *limWorld, tk *task, l *Limit) {
		t.Helper()
		if r, _ := w.rec(t, l); len(r.Slots) != 0 || len(tk.held) != 0 {
			t.Fatalf("the slot of limit %s: %+v; held %+v", l.name, r.Slots, tk.held)
		}
	}
	t.Run("a limit without bounds", func(t *testing.T) {
		w, a := newLimWorld(t), free()
		tk := w.task()
		err := tk.acquire(context.Background(), "u", []*Limit{a, NewLimit("bad")})
		var perm *permanentError
		if !errors.As(err, &perm) || !strings.Contains(err.Error(), `limit "bad" needs MaxRunning(n) or Rate(n, per)`) {
			t.Fatalf("acquire under a limit without bounds: %v", err)
		}
		freed(t, w, tk, a)
	})
	t.Run("a failed read", func(t *testing.T) {
		w, a, b := newLimWorld(t), free(), NewLimit("down", MaxRunning(1))
		w.st.failGet = func(key string) bool { return strings.Contains(key, "/down/") }
		tk := w.task()
		if err := tk.acquire(context.Background(), "u", []*Limit{a, b}); !errors.Is(err, errHalted) || tk.halt != storeHalt || !errors.Is(tk.failErr, errLimitStore) || w.waits.Load() != 0 {
			t.Fatalf("acquire on a failing store: %v, halt %v %v, %d waits", err, tk.halt, tk.failErr, w.waits.Load())
		}
		freed(t, w, tk, a)
	})
	t.Run("a slot that does not free itself soon", func(t *testing.T) {
		w, a := newLimWorld(t), free()
		b := full(w)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		w.after = func(time.Duration) <-chan time.Time {
			if w.waits.Load() > 100 { // a bound on failure: the delivery ends
				cancel()
				return nil
			}
			c := make(chan time.Time, 1)
			c <- w.now
			return c
		}
		tk := w.task()
		err := tk.acquire(ctx, "u", []*Limit{a, b})
		if !errors.Is(err, errHalted) || tk.halt != handOn || tk.delay != limitPoll || tk.wait == nil || tk.wait.Limit != "full" ||
			w.waits.Load() != int64(limitWaitInDelivery/limitPoll)-1 {
			t.Fatalf("acquire of a full limit: %v, halt %v in %s for %+v, after %d waits", err, tk.halt, tk.delay, tk.wait, w.waits.Load())
		}
		freed(t, w, tk, a)
	})
	t.Run("a job stopped meanwhile", func(t *testing.T) {
		w, a := newLimWorld(t), free()
		b := full(w)
		tk := w.task()
		tk.rec.Stop = true
		if err := tk.acquire(context.Background(), "u", []*Limit{a, b}); !errors.Is(err, errHalted) || tk.halt != stopHalt || w.waits.Load() != 0 {
			t.Fatalf("acquire for a stopped job: %v, halt %v, after %d waits", err, tk.halt, w.waits.Load())
		}
		freed(t, w, tk, a)
	})
	t.Run("the delivery ends while it waits", func(t *testing.T) {
		w, a := newLimWorld(t), free()
		b := full(w)
		ctx, cancel := context.WithCancel(context.Background())
		w.after = func(time.Duration) <-chan time.Time { cancel(); return nil }
		tk := w.task()
		if err := tk.acquire(ctx, "u", []*Limit{a, b}); !errors.Is(err, errHalted) || tk.halt != storeHalt || w.waits.Load() != 1 {
			t.Fatalf("acquire cancelled: %v, halt %v, after %d waits", err, tk.halt, w.waits.Load())
		}
		freed(t, w, tk, a)
	})
}

// TestLimitMutantsHeld: the slots a delivery holds are renewed with its lease until released,
// each unit's apart: a released slot is no longer read at each renewal.
func TestLimitMutantsHeld(t *testing.T) {
	w, a, b := newLimWorld(t), NewLimit("a", MaxRunning(3)), NewLimit("b", MaxRunning(1))
	tk := w.task()
	ctx := context.Background()
	if err := tk.acquire(ctx, "u", []*Limit{a}); err != nil {
		t.Fatal(err)
	}
	if err := tk.acquire(ctx, "v", []*Limit{a}); err != nil {
		t.Fatal(err)
	}
	// The job's slot of b, and a step named "job" under a: one holder, two limits.
	if err := tk.acquire(ctx, "job", []*Limit{b}); err != nil {
		t.Fatal(err)
	}
	if err := tk.acquire(ctx, "job", []*Limit{a}); err != nil {
		t.Fatal(err)
	}
	tk.releaseLimits(ctx, "u", []*Limit{a})
	tk.releaseLimits(ctx, "job", []*Limit{a})
	w.now = w.now.Add(10 * time.Second)
	reads := w.st.reads()
	tk.renewHeld(ctx)
	ra, _ := w.rec(t, a)
	rb, _ := w.rec(t, b)
	if holdersOf(ra) != "d/v" || !ra.Slots[0].Until.Equal(w.now.Add(DefaultLease)) || !rb.Slots[0].Until.Equal(w.now.Add(DefaultLease)) ||
		w.st.reads()-reads != 2 {
		t.Fatalf("after a renewal: slots of a %+v, of b %+v, want each renewed until %s; %d reads, want 2", ra.Slots, rb.Slots, w.now.Add(DefaultLease), w.st.reads()-reads)
	}
}

// TestLimitMutantsReleaseFailureLogged: a slot the store fails to free is logged (it frees itself
// after its lease).
func TestLimitMutantsReleaseFailureLogged(t *testing.T) {
	w, a := newLimWorld(t), NewLimit("a", MaxRunning(1))
	tk := w.task()
	if err := tk.acquire(context.Background(), "u", []*Limit{a}); err != nil {
		t.Fatal(err)
	}
	w.st.failGet = func(string) bool { return true }
	tk.releaseLimits(context.Background(), "u", []*Limit{a})
	if len(w.unreleased) != 1 {
		t.Fatalf("%d logs %q, want 1", len(w.unreleased), slotNotReleased)
	}
	if r := attrs(<-w.unreleased); r["limit"] != "a" || !strings.Contains(r["error"], errLimitStore.Error()) {
		t.Fatalf("logged %v", r)
	}
}

// TestLimitMutantsJobWaits: a job whose second limit is full frees its slot of the first, does
// not run, gets in line as a bare message (no attempt, no due time), and looks again when its
// lease and the skew margin have passed twice, the message due then.
func TestLimitMutantsJobWaits(t *testing.T) {
	w := newLimWorld(t)
	a, b := NewLimit("free", MaxRunning(1)), NewLimit("full", MaxRunning(1))
	w.put(t, b, limitRecord{Slots: []limitSlot{{Holder: "o/job", Until: w.now.Add(time.Hour)}}})
	w.after = func(time.Duration) <-chan time.Time { return nil } // no lease renewal in the delivery
	runs := 0
	work := Define(regOwner{w.reg}, "x", func(ctx context.Context, _ struct{}) error {
		_, err := Step(ctx, "call", func(context.Context) (int, error) { runs++; return 1, nil })
		return err
	}, Limited(a, b))
	ctx := NewContext(context.Background(), w.svc, w.reg, "a", &contract.VerifiedWorkspaceContext{GrantID: "g", WorkspaceID: "w", AgentSlug: "a"})
	id := "j"
	if _, err := work.Start(ctx, &contract.ActionRequest{AgentSlug: "a", Action: contract.JobStartAction, JobID: &id, MissionID: "m", Input: []byte(`{}`)}, struct{}{}); err != nil {
		t.Fatal(err)
	}
	sent := w.sent.take()
	if len(sent) != 1 {
		t.Fatalf("started: %+v", sent)
	}
	m := sent[0].m
	m.Attempt, m.At = 2, w.now.UnixMilli() // a delivery that looks again
	if err := w.svc.Deliver(context.Background(), m, Delivery{}); err != nil {
		t.Fatal(err)
	}
	ra, _ := w.rec(t, a)
	rb, _ := w.rec(t, b)
	if runs != 0 || len(ra.Slots) != 0 || len(rb.Waiters) != 1 || rb.Waiters[0] != (Message{Agent: "a", Workspace: "w", Job: "j", Work: "x"}) {
		t.Fatalf("%d runs; slots of the free limit %+v; in line for the full one %+v", runs, ra.Slots, rb.Waiters)
	}
	d := 2 * (DefaultLease + SkewMargin)
	next := m
	next.Attempt, next.At = 3, w.now.Add(d).UnixMilli()
	if sent := w.sent.take(); len(sent) != 1 || sent[0] != (sentMessage{next, d}) {
		t.Fatalf("dispatched %+v, want %+v in %s", sent, next, d)
	}
	r, _, err := w.svc.load(context.Background(), m.Key())
	if err != nil || r.Wait == nil || r.Wait.Limit != "full" || !r.NotBefore.Equal(w.now.Add(d)) {
		t.Fatalf("task record: %+v %v", r, err)
	}
}

// TestLimitMutantsRenewSlot: a renewal extends the holder's slot alone; a slot no longer held
// (expired and taken) is left as it is, a rate alone holds no slot and reads nothing, and a
// failed read is the store's error.
func TestLimitMutantsRenewSlot(t *testing.T) {
	renew := func(w *limWorld, l *Limit, holder string) error {
		return w.svc.renewSlot(context.Background(), l, "a", "w", holder)
	}
	t.Run("the holder's slot", func(t *testing.T) {
		w, l := newLimWorld(t), NewLimit("p", MaxRunning(2))
		w.put(t, l, limitRecord{Slots: []limitSlot{{Holder: "o/u", Until: w.now.Add(time.Second)}, {Holder: "d/u", Until: w.now.Add(time.Second)}}})
		w.now = w.now.Add(10 * time.Second)
		r, _ := w.rec(t, l)
		if err := renew(w, l, "d/u"); err != nil {
			t.Fatal(err)
		}
		got, _ := w.rec(t, l)
		if holdersOf(got) != "o/u,d/u" || !got.Slots[0].Until.Equal(r.Slots[0].Until) || !got.Slots[1].Until.Equal(w.now.Add(DefaultLease)) {
			t.Fatalf("after the renewal of d/u: %+v", got.Slots)
		}
	})
	t.Run("a slot not held", func(t *testing.T) {
		w, l := newLimWorld(t), NewLimit("p", MaxRunning(1))
		w.put(t, l, limitRecord{Slots: []limitSlot{{Holder: "o/u", Until: w.now.Add(time.Minute)}}})
		_, v0 := w.rec(t, l)
		if err := renew(w, l, "d/u"); err != nil {
			t.Fatalf("renewal of a slot not held: %v", err)
		}
		if r, v := w.rec(t, l); v != v0 || holdersOf(r) != "o/u" {
			t.Fatalf("renewal of a slot not held wrote %+v (version %d, was %d)", r, v, v0)
		}
	})
	t.Run("a rate alone", func(t *testing.T) {
		w, l := newLimWorld(t), NewLimit("p", Rate(1, time.Minute))
		w.st.failGet = func(string) bool { return true }
		if err := renew(w, l, "d/u"); err != nil || w.st.reads() != 0 {
			t.Fatalf("renewal under a rate alone: %v, %d reads", err, w.st.reads())
		}
	})
	t.Run("a failed read", func(t *testing.T) {
		w, l := newLimWorld(t), NewLimit("p", MaxRunning(1))
		w.put(t, l, limitRecord{Slots: []limitSlot{{Holder: "d/u", Until: w.now.Add(time.Minute)}}})
		w.st.failGet = func(string) bool { return true }
		if err := renew(w, l, "d/u"); !errors.Is(err, errLimitStore) {
			t.Fatalf("renewal on a failing store: %v, want the store's error", err)
		}
	})
}

// TestLimitMutantsRenewalLogged: a slot whose renewal fails is logged, once per renewal; one
// renewed, or not renewed because the delivery is ending, is not.
func TestLimitMutantsRenewalLogged(t *testing.T) {
	const notRenewed = "a limit's slot was not renewed: retrying at the next tick"
	for _, tc := range []struct {
		name   string
		fail   bool
		ending bool
		logs   int
	}{
		{"renewed", false, false, 0},
		{"a failed read", true, false, 1},
		{"a failed read as the delivery ends", true, true, 0},
	} {
		w, l := newLimWorld(t), NewLimit("p", MaxRunning(1))
		tk := w.task()
		logs := make(chan slog.Record, 4)
		tk.log = slog.New(recordsOf{notRenewed, logs})
		if err := tk.acquire(context.Background(), "u", []*Limit{l}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		if tc.ending {
			cancel()
		}
		if tc.fail {
			w.st.failGet = func(string) bool { return true }
		}
		tk.renewHeld(ctx)
		cancel()
		if len(logs) != tc.logs {
			t.Fatalf("%s: %d logs %q, want %d", tc.name, len(logs), notRenewed, tc.logs)
		}
		if tc.logs > 0 {
			if r := attrs(<-logs); r["limit"] != "p" || !strings.Contains(r["error"], errLimitStore.Error()) {
				t.Fatalf("%s: logged %v", tc.name, r)
			}
		}
	}
}

// TestLimitMutantsJobWaitsAfterTheLeaseWent: a job that finds its limit full records its wait
// and is dispatched again for later; but one whose task record another delivery holds by the
// time it writes its wait neither waits nor fails: the holder goes on with the task. A store
// that fails that write is the delivery's error.
func TestLimitMutantsJobWaitsAfterTheLeaseWent(t *testing.T) {
	for _, tc := range []struct {
		name    string
		holder  string // of the task record ("": none)
		failing bool   // its writes fail
		err     string
		sent    int
	}{
		{"held by this delivery", "d", false, "", 1},
		{"held by another", "other", false, "", 0},
		{"gone", "", false, "", 0},
		{"a failed write", "d", true, `jobs: record that job "j" waits for limit "full": ` + errLimitStore.Error(), 0},
	} {
		w := newLimWorld(t)
		l := NewLimit("full", MaxRunning(1))
		w.put(t, l, limitRecord{Slots: []limitSlot{{Holder: "o/job", Until: w.now.Add(time.Hour)}}})
		tk := w.task()
		tk.key, tk.version, tk.settings.limits = "task", 99, []*Limit{l} // a version another write passed
		if tc.holder != "" {
			rec := record{Holder: tc.holder, LeaseUntil: w.now.Add(time.Minute)}
			b, _ := w.svc.encode(&rec)
			if _, err := w.st.Store.Create(context.Background(), tk.key, b, store.Never); err != nil {
				t.Fatal(err)
			}
		}
		w.st.failUpdate = tc.failing
		ok, err := tk.acquireJob(context.Background())
		if got := fmt.Sprint(err); ok || (tc.err == "" && err != nil) || (tc.err != "" && got != tc.err) || len(w.sent.take()) != tc.sent {
			t.Errorf("%s: %v, %v; want false, %q and %d dispatched", tc.name, ok, err, tc.err, tc.sent)
		}
	}
}
