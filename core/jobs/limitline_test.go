package jobs_test

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
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
)

// sharedLimitKey is the store key of the shared limit name of the test agent.
func sharedLimitKey(name string) string {
	return jobs.TaskKeyPrefix + "~l/" + agentSlug + "/" + name + "/~shared"
}

// limitedByName defines work under lim whose one step counts its runs under the job's input,
// and calls during (when not nil) as it runs.
func limitedByName(o owner, c *counter, lim *jobs.Limit, during func()) *jobs.Work[string] {
	return jobs.Define(o, "limited", func(ctx context.Context, name string) error {
		_, err := jobs.Step(ctx, "call", func(context.Context) (int, error) {
			if during != nil {
				during()
			}
			c.inc(name)
			return 1, nil
		})
		return err
	}, jobs.Limited(lim))
}

// deliverJob delivers a queued message of job dispatched with delay, when it is due (the others
// stay queued).
func deliverJob(t *testing.T, in *instance, job string, delay time.Duration) {
	t.Helper()
	var rest []sent
	var found *sent
	for _, m := range in.q.take() {
		if m.M.Job == job && m.Delay == delay && found == nil {
			found = &m
			continue
		}
		rest = append(rest, m)
	}
	for _, m := range rest {
		_ = in.q.Dispatch(context.Background(), m.M, m.Delay)
	}
	if found == nil {
		t.Fatalf("job %s: no message in %s queued (queued: %+v)", job, delay, rest)
	}
	if at := time.UnixMilli(found.M.At); at.After(in.clock.Now()) {
		in.clock.Add(at.Sub(in.clock.Now())) // delivered when due
	}
	if err := in.svc.Deliver(context.Background(), found.M, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
}

// TestLimitLineOrder: jobs under a full limit wait in line in the order they came. A slot freed
// without a hand-over (its holder stopped renewing it) goes to the first in line, not to a job
// that comes later; a job leaves the line when it runs, so the slot it frees goes to the next;
// and a slot handed to a job is its own though others still wait.
func TestLimitLineOrder(t *testing.T) {
	o, c := newOwner(), &counter{}
	w := limitedByName(o, c, jobs.NewLimit("provider", jobs.MaxRunning(1), jobs.Shared()), nil)
	s, clk, q := memory.New(), newClock(), &queue{}
	until := clk.Now().Add(time.Minute)
	held := `{"slots":[{"holder":"crashed/job","until":"` + until.Format(time.RFC3339Nano) + `"}]}`
	if _, err := s.Create(context.Background(), sharedLimitKey("provider"), []byte(held), store.Never); err != nil {
		t.Fatal(err)
	}
	in := newInstance(t, s, o, clk, q)
	lookAgain := 2 * (jobs.DefaultLease + jobs.SkewMargin)

	first := start(t, in, w, "first")
	deliverJob(t, in, first, 0)
	clk.Add(until.Sub(clk.Now()) + jobs.SkewMargin) // the crashed holder's slot has expired
	later := start(t, in, w, "later")
	deliverJob(t, in, later, 0)
	last := start(t, in, w, "last")
	deliverJob(t, in, last, 0)
	if c.get("first")+c.get("later")+c.get("last") != 0 {
		t.Fatalf("a job passed the one first in line: runs %v", c.n)
	}
	if got := waitersOf(t, s, "provider"); got != first+","+later+","+last {
		t.Fatalf("in line %s, want %s,%s,%s", got, first, later, last)
	}

	// The first in line looks again, runs, and hands its slot to the next: at once.
	deliverJob(t, in, first, lookAgain)
	if c.get("first") != 1 || c.get("later") != 0 {
		t.Fatalf("runs %v, want first once", c.n)
	}
	// The slot is reserved for the job it was handed to, for a lease and the skew margin: its
	// delivery may come from a queue's retry.
	if rec := limitOf(t, s, "provider"); len(rec.Slots) != 1 || !strings.HasSuffix(rec.Slots[0].Holder, "/"+later) ||
		!rec.Slots[0].Until.Equal(clk.Now().Add(jobs.DefaultLease+jobs.SkewMargin)) {
		t.Fatalf("slots %+v, want one reserved for %s until %s", rec.Slots, later, clk.Now().Add(jobs.DefaultLease+jobs.SkewMargin))
	}
	deliverJob(t, in, later, 0)
	if c.get("later") != 1 || c.get("last") != 0 {
		t.Fatalf("the job the slot was handed to, with another in line, ran %d times", c.get("later"))
	}
	deliverJob(t, in, last, 0)
	for _, job := range []string{first, later, last} {
		if st := stateOf(t, in, job).Job.Status; st != contract.StateCompleted {
			t.Fatalf("job %s is %s", job, st)
		}
	}
	// Every slot free, no one in line, and no token counted (there is no rate).
	rec, err := s.Get(context.Background(), sharedLimitKey("provider"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"tokens":0,"served":"` + wsID + `"}`; c.get("last") != 1 || string(rec.Value) != want {
		t.Fatalf("last ran %d times; the limit's record %s, want %s", c.get("last"), rec.Value, want)
	}
}

// TestLimitLineIsBounded: a limit keeps at most 500 jobs in line; the next looks again later.
func TestLimitLineIsBounded(t *testing.T) {
	o, c := newOwner(), &counter{}
	w := limitedByName(o, c, jobs.NewLimit("provider", jobs.MaxRunning(1), jobs.Shared()), nil)
	s, clk, q := memory.New(), newClock(), &queue{}
	var line []string
	for i := range 500 {
		line = append(line, fmt.Sprintf(`{"agent":%q,"workspace":%q,"job":"w%d","work":"limited","attempt":0}`, agentSlug, wsID, i))
	}
	held := `{"slots":[{"holder":"other/job","until":"` + clk.Now().Add(time.Hour).Format(time.RFC3339Nano) + `"}],"waiters":[` + strings.Join(line, ",") + `]}`
	if _, err := s.Create(context.Background(), sharedLimitKey("provider"), []byte(held), store.Never); err != nil {
		t.Fatal(err)
	}
	in := newInstance(t, s, o, clk, q)
	job := start(t, in, w, "job")
	deliverJob(t, in, job, 0)
	if got := waitersOf(t, s, "provider"); c.get("job") != 0 || strings.Contains(got, job) || strings.Count(got, ",") != 499 {
		t.Fatalf("ran %d times; in line (%d) %s", c.get("job"), strings.Count(got, ",")+1, got[max(0, len(got)-40):])
	}
	if msgs := q.take(); len(msgs) != 1 || msgs[0].M.Job != job || msgs[0].M.Attempt != 1 || msgs[0].Delay != 2*(jobs.DefaultLease+jobs.SkewMargin) {
		t.Fatalf("dispatched %+v, want the job's next attempt in %s", msgs, 2*(jobs.DefaultLease+jobs.SkewMargin))
	}
}

// limitRecord is a limit's record as the store keeps it.
type limitRecord struct {
	Slots []struct {
		Holder string
		Until  time.Time
	}
	Waiters []jobs.Message
	Served  string
}

// limitOf reads the record of the shared limit name.
func limitOf(t *testing.T, s store.Store, name string) limitRecord {
	t.Helper()
	got, err := s.Get(context.Background(), sharedLimitKey(name))
	if err != nil {
		t.Fatal(err)
	}
	var rec limitRecord
	if err := json.Unmarshal(got.Value, &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// waitersOf is the jobs in line of the shared limit name, comma-separated.
func waitersOf(t *testing.T, s store.Store, name string) string {
	t.Helper()
	rec := limitOf(t, s, name)
	var jobsInLine []string
	for _, m := range rec.Waiters {
		jobsInLine = append(jobsInLine, m.Job)
	}
	return strings.Join(jobsInLine, ",")
}

// TestLimitRateAloneHoldsNoSlot: a job under a rate alone takes a token and holds no slot.
func TestLimitRateAloneHoldsNoSlot(t *testing.T) {
	o, c := newOwner(), &counter{}
	w := limitedByName(o, c, jobs.NewLimit("provider", jobs.Rate(2, time.Minute), jobs.Shared()), nil)
	s, clk, q := memory.New(), newClock(), &queue{}
	in := newInstance(t, s, o, clk, q)
	job := start(t, in, w, "job")
	deliverJob(t, in, job, 0)
	got, err := s.Get(context.Background(), sharedLimitKey("provider"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"tokens":1,"filled":"` + clk.Now().Format(time.RFC3339Nano) + `"}`
	if c.get("job") != 1 || string(got.Value) != want {
		t.Fatalf("ran %d times; the limit's record %s, want %s", c.get("job"), got.Value, want)
	}
}

// TestLimitRateWaitsForTheNextToken: under a rate of 2 a minute, a job waits for its token, the
// time since the last refill counted: 30 s a token.
func TestLimitRateWaitsForTheNextToken(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tokens string
		ago    time.Duration
		wait   time.Duration // 0: runs
	}{
		{"half a token now", "0.5", 0, 15 * time.Second},
		{"none 15 s ago", "0", 15 * time.Second, 15 * time.Second},
		{"half a token 15 s ago", "0.5", 15 * time.Second, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, c := newOwner(), &counter{}
			w := limitedByName(o, c, jobs.NewLimit("provider", jobs.Rate(2, time.Minute), jobs.Shared()), nil)
			s, clk, q := memory.New(), newClock(), &queue{}
			rec := `{"tokens":` + tc.tokens + `,"filled":"` + clk.Now().Add(-tc.ago).Format(time.RFC3339Nano) + `"}`
			if _, err := s.Create(context.Background(), sharedLimitKey("provider"), []byte(rec), store.Never); err != nil {
				t.Fatal(err)
			}
			in := newInstance(t, s, o, clk, q)
			job := start(t, in, w, "job")
			deliverJob(t, in, job, 0)
			msgs := q.take()
			switch {
			case tc.wait == 0 && (c.get("job") != 1 || len(msgs) != 0):
				t.Fatalf("ran %d times, dispatched %+v; want one run", c.get("job"), msgs)
			case tc.wait > 0 && (c.get("job") != 0 || len(msgs) != 1 || msgs[0].Delay != tc.wait):
				t.Fatalf("ran %d times; dispatched %+v, want the job again in %s", c.get("job"), msgs, tc.wait)
			}
		})
	}
}

// conflictOnce is a store on which, once armed, the next write of a limit record conflicts:
// another instance wrote the record right before it.
type conflictOnce struct {
	store.Store
	armed atomic.Bool
}

func (c *conflictOnce) Update(ctx context.Context, key string, ver uint64, v []byte, exp time.Time) (store.Record, error) {
	if strings.HasPrefix(key, jobs.TaskKeyPrefix+"~l/") && c.armed.CompareAndSwap(true, false) {
		cur, err := c.Store.Get(ctx, key)
		if err != nil {
			return store.Record{}, err
		}
		if _, err := c.Store.Update(ctx, key, cur.Version, cur.Value, exp); err != nil {
			return store.Record{}, err
		}
	}
	return c.Store.Update(ctx, key, ver, v, exp)
}

// TestLimitReleaseRetriesAConflict: another instance writes the limit's record as a job frees
// its slot: the release reads the record again and frees the slot.
func TestLimitReleaseRetriesAConflict(t *testing.T) {
	o, c := newOwner(), &counter{}
	s := &conflictOnce{Store: memory.New()}
	w := limitedByName(o, c, jobs.NewLimit("provider", jobs.MaxRunning(1), jobs.Shared()), func() { s.armed.Store(true) })
	warned := signalOn{msg: "a limit's slot was not released: it frees itself after the lease", said: make(chan struct{}), once: &sync.Once{}}
	in := newLoggedInstance(t, s, o, newClock(), &queue{}, slog.New(warned))
	job := start(t, in, w, "job")
	deliverJob(t, in, job, 0)
	if rec := limitOf(t, s, "provider"); c.get("job") != 1 || len(rec.Slots) != 0 || s.armed.Load() {
		t.Fatalf("ran %d times; slots left %+v (the conflict came: %t)", c.get("job"), rec.Slots, !s.armed.Load())
	}
	if warned.wasSaid() {
		t.Fatal("the release was logged as failed")
	}
}

// TestLimitReleaseOfATakenSlot: a job whose slot expired and was taken meanwhile (its delivery
// was paused) frees nothing when it ends: the limit is still full, no slot is handed on.
func TestLimitReleaseOfATakenSlot(t *testing.T) {
	o, c := newOwner(), &counter{}
	s, clk, q := memory.New(), newClock(), &queue{}
	key := sharedLimitKey("provider")
	taken := `{"slots":[{"holder":"other/job","until":"` + clk.Now().Add(time.Hour).Format(time.RFC3339Nano) + `"}],` +
		`"waiters":[{"agent":"` + agentSlug + `","workspace":"` + wsID + `","job":"w0","work":"limited","attempt":0}]}`
	w := limitedByName(o, c, jobs.NewLimit("provider", jobs.MaxRunning(1), jobs.Shared()), func() {
		got, err := s.Get(context.Background(), key)
		if err == nil {
			_, err = s.Update(context.Background(), key, got.Version, []byte(taken), store.Never)
		}
		if err != nil {
			t.Error(err)
		}
	})
	in := newInstance(t, s, o, clk, q)
	job := start(t, in, w, "job")
	deliverJob(t, in, job, 0)
	if rec := limitOf(t, s, "provider"); c.get("job") != 1 || len(rec.Slots) != 1 || rec.Slots[0].Holder != "other/job" || waitersOf(t, s, "provider") != "w0" {
		t.Fatalf("ran %d times; slots %+v, in line %s", c.get("job"), rec.Slots, waitersOf(t, s, "provider"))
	}
	if msgs := q.take(); len(msgs) != 0 {
		t.Fatalf("dispatched %+v past a full limit", msgs)
	}
}

// TestLimitTurnsBetweenWorkspaces: under a shared limit, a freed slot goes to the job first in
// line of the workspace after the one served last, whatever their order in line.
func TestLimitTurnsBetweenWorkspaces(t *testing.T) {
	for _, tc := range []struct{ served, want string }{
		{"a", "c1"}, // the next workspace after a
		{"b", "c1"}, // after one no longer in line
		{"c", "a1"}, // round again
		{"", "a1"},  // none served yet
		{"ws-jobs", "a1"},
	} {
		t.Run("served "+tc.served, func(t *testing.T) {
			o, c := newOwner(), &counter{}
			s, clk, q := memory.New(), newClock(), &queue{}
			key := sharedLimitKey("provider")
			// While the job runs, three jobs of two other workspaces get in line behind it.
			w := limitedByName(o, c, jobs.NewLimit("provider", jobs.MaxRunning(1), jobs.Shared()), func() {
				got, err := s.Get(context.Background(), key)
				if err != nil {
					t.Fatal(err)
				}
				var rec map[string]any
				if err := json.Unmarshal(got.Value, &rec); err != nil {
					t.Fatal(err)
				}
				var line []any
				for _, m := range [][2]string{{"c", "c1"}, {"a", "a1"}, {"a", "a2"}} {
					line = append(line, jobs.Message{Agent: agentSlug, Workspace: m[0], Job: m[1], Work: "limited"})
				}
				rec["waiters"], rec["served"] = line, tc.served
				b, _ := json.Marshal(rec)
				if _, err := s.Update(context.Background(), key, got.Version, b, store.Never); err != nil {
					t.Fatal(err)
				}
			})
			in := newInstance(t, s, o, clk, q)
			deliverJob(t, in, start(t, in, w, "job"), 0)
			msgs := q.take()
			if len(msgs) != 1 || msgs[0].M.Job != tc.want || msgs[0].Delay != 0 {
				t.Fatalf("dispatched %+v, want %s at once", msgs, tc.want)
			}
			// The workspace handed the slot is the one served: the next release turns from it,
			// even before its job takes the slot.
			if rec := limitOf(t, s, "provider"); rec.Served != msgs[0].M.Workspace {
				t.Fatalf("served %q after handing the slot to %s", rec.Served, tc.want)
			}
		})
	}
}

// TestLimitStepPollsForASlot: a step under a full limit whose slot has no known release looks
// again every second in its delivery.
func TestLimitStepPollsForASlot(t *testing.T) {
	o, c := newOwner(), &counter{}
	lim := jobs.NewLimit("provider", jobs.MaxRunning(1), jobs.Shared())
	w := jobs.Define(o, "under", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Step(ctx, "call", func(context.Context) (int, error) { c.inc("call"); return 1, nil }, jobs.Under(lim))
		return err
	})
	s, clk, q := memory.New(), newClock(), &queue{}
	held := `{"slots":[{"holder":"other/x","until":"` + clk.Now().Add(time.Hour).Format(time.RFC3339Nano) + `"}]}`
	if _, err := s.Create(context.Background(), sharedLimitKey("provider"), []byte(held), store.Never); err != nil {
		t.Fatal(err)
	}
	waits := make(chan time.Duration, 16)
	svc := jobs.NewService(jobs.Config{Store: s, Dispatcher: q, Now: clk.Now, Logger: quiet,
		After: func(d time.Duration) <-chan time.Time {
			if d != jobs.DefaultLease/3 { // not the lease's renewal
				waits <- d
			}
			return nil
		},
		Works: func(string) (*jobs.Registry, time.Duration, bool) { return o.reg, 0, true }})
	t.Cleanup(svc.Close)
	in := &instance{svc: svc, q: q, clock: clk, o: o}
	start(t, in, w, struct{}{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Deliver(ctx, q.take()[0].M, jobs.Delivery{}) }()
	if d := <-waits; d != time.Second {
		t.Errorf("the step looks again in %s, want 1s", d)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || c.get("call") != 0 {
		t.Fatalf("the delivery: %v; the step ran %d times under a full limit", err, c.get("call"))
	}
}

// TestLimitJobAndStepShareALimit: a job under a limit whose step also runs under it holds two
// slots; the step frees its own, and the job's is freed when the job ends.
func TestLimitJobAndStepShareALimit(t *testing.T) {
	o, c := newOwner(), &counter{}
	lim := jobs.NewLimit("provider", jobs.MaxRunning(2), jobs.Shared())
	s := memory.New()
	var during []int
	w := jobs.Define(o, "limited", func(ctx context.Context, _ struct{}) error {
		if _, err := jobs.Step(ctx, "call", func(context.Context) (int, error) {
			during = append(during, len(limitOf(t, s, "provider").Slots))
			return 1, nil
		}, jobs.Under(lim)); err != nil {
			return err
		}
		_, err := jobs.Step(ctx, "after", func(context.Context) (int, error) {
			during = append(during, len(limitOf(t, s, "provider").Slots))
			c.inc("after")
			return 1, nil
		})
		return err
	}, jobs.Limited(lim))
	in := newInstance(t, s, o, newClock(), &queue{})
	deliverJob(t, in, start(t, in, w, struct{}{}), 0)
	if rec := limitOf(t, s, "provider"); c.get("after") != 1 || fmt.Sprint(during) != "[2 1]" || len(rec.Slots) != 0 {
		t.Fatalf("slots held during the steps %v, after the job %+v", during, rec.Slots)
	}
}
