package jobs_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/core/store/storeenv/storeenvtest"
)

// limitStores are the stores the races of limits run on: memory, and PostgreSQL under
// scripts/with-services (skipped without it).
func limitStores() map[string]func(t *testing.T) store.Store {
	return map[string]func(t *testing.T) store.Store{
		"memory": func(*testing.T) store.Store { return memory.New() },
		"postgres": func(t *testing.T) store.Store {
			s := storeenvtest.Open(t, storeenvtest.Postgres(t, "svz_jobs_limit_"))
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
	}
}

// racingLimit is a store on which another instance takes the last slot of a limit first: right
// before the first write of a limit record goes through, it writes the record itself with the
// limit full, so that the first write conflicts and the taker reads again.
type racingLimit struct {
	store.Store
	once sync.Once
	full string // the record written first
}

func (r *racingLimit) race(ctx context.Context, key string) {
	if !strings.HasPrefix(key, jobs.TaskKeyPrefix+"~l/") {
		return
	}
	r.once.Do(func() {
		if _, err := r.Store.Create(ctx, key, []byte(r.full), store.Never); err != nil {
			panic(err)
		}
	})
}

func (r *racingLimit) Create(ctx context.Context, key string, v []byte, exp time.Time) (store.Record, error) {
	r.race(ctx, key)
	return r.Store.Create(ctx, key, v, exp)
}

func (r *racingLimit) Update(ctx context.Context, key string, ver uint64, v []byte, exp time.Time) (store.Record, error) {
	r.race(ctx, key)
	return r.Store.Update(ctx, key, ver, v, exp)
}

// TestLimitTakenMeanwhile: a job finds its limit free, but another instance takes the last slot
// before its write lands; read again, the limit is full: the job gets in line and does not run
// (it ran, slotless, beside the holder: 6 jobs at once under a limit of 5 in
// BenchmarkLimitTwoInstances).
func TestLimitTakenMeanwhile(t *testing.T) {
	for name, open := range limitStores() {
		t.Run(name, func(t *testing.T) {
			o, c := newOwner(), &counter{}
			lim := jobs.NewLimit("provider", jobs.MaxRunning(1), jobs.Shared())
			w := jobs.Define(o, "limited", func(ctx context.Context, _ struct{}) error {
				_, err := jobs.Step(ctx, "call", func(context.Context) (int, error) { c.inc("call"); return 1, nil })
				return err
			}, jobs.Limited(lim))
			clk := newClock()
			full := `{"slots":[{"holder":"other-instance/job","workspace":"` + wsID + `","until":"` +
				clk.Now().Add(time.Hour).Format(time.RFC3339Nano) + `"}],"tokens":0}`
			in := newInstance(t, &racingLimit{Store: open(t), full: full}, o, clk, &queue{})
			job := start(t, in, w, struct{}{})
			if err := in.svc.Deliver(context.Background(), in.q.take()[0].M, jobs.Delivery{}); err != nil {
				t.Fatal(err)
			}
			snap := stateOf(t, in, job)
			if got := mustJSON(t, snap); c.get("call") != 0 || snap.Job.Status != contract.StateActive ||
				!strings.Contains(got, `"waiting":{"reason":"limit","limit":"provider"`) {
				t.Fatalf("the step ran %d times under a full limit; state %s", c.get("call"), got)
			}
			// No slot was handed to it: it looks again later (a freed slot is handed to it first).
			if msgs := in.q.take(); len(msgs) != 1 || msgs[0].Delay != 2*(jobs.DefaultLease+jobs.SkewMargin) {
				t.Fatalf("dispatched %+v, want one message in %s", msgs, 2*(jobs.DefaultLease+jobs.SkewMargin))
			}
		})
	}
}

// inLine is a store that calls hook once, right after a write that put job in line in a limit
// record (the job's delivery has not recorded that it waits yet).
type inLine struct {
	store.Store
	job  string
	once sync.Once
	hook func()
}

func (l *inLine) after(key string, v []byte, err error) {
	if err == nil && strings.HasPrefix(key, jobs.TaskKeyPrefix+"~l/") && strings.Contains(string(v), `"waiters":[`) &&
		strings.Contains(string(v), `"job":"`+l.job+`"`) {
		l.once.Do(l.hook)
	}
}

func (l *inLine) Create(ctx context.Context, key string, v []byte, exp time.Time) (store.Record, error) {
	rec, err := l.Store.Create(ctx, key, v, exp)
	l.after(key, v, err)
	return rec, err
}

func (l *inLine) Update(ctx context.Context, key string, ver uint64, v []byte, exp time.Time) (store.Record, error) {
	rec, err := l.Store.Update(ctx, key, ver, v, exp)
	l.after(key, v, err)
	return rec, err
}

// TestLimitHandedWhileGettingInLine: a job gets in line under a full limit on one instance;
// before its delivery records that it waits, the holder on another instance ends and hands the
// slot to it, and that hand-over's delivery finds the task still held (busy: the pool drops it,
// SQS retries it after its visibility timeout). The waiting job must still run at once, not after
// its minute of looking again, its slot reserved and idle meanwhile (a 70 s stall, 4 of 5 slots
// used, in BenchmarkLimitTwoInstances).
func TestLimitHandedWhileGettingInLine(t *testing.T) {
	for name, open := range limitStores() {
		t.Run(name, func(t *testing.T) {
			o, c := newOwner(), &counter{}
			lim := jobs.NewLimit("provider", jobs.MaxRunning(1), jobs.Shared())
			entered, gate := make(chan struct{}, 1), make(chan struct{})
			w := jobs.Define(o, "limited", func(ctx context.Context, kind string) error {
				_, err := jobs.Step(ctx, "call", func(context.Context) (int, error) {
					if kind == "hold" {
						entered <- struct{}{}
						<-gate
					}
					c.inc(kind)
					return 1, nil
				})
				return err
			}, jobs.Limited(lim))
			s, clk, q := open(t), newClock(), &queue{}
			a := newInstance(t, s, o, clk, q)
			holder := start(t, a, w, "hold")
			waiter := start(t, a, w, "go")
			msgs := q.take()
			held := make(chan error, 1)
			go func() { held <- a.svc.Deliver(context.Background(), msgs[0].M, jobs.Delivery{}) }()
			<-entered
			var handOver error
			lined := &inLine{Store: s, job: waiter, hook: func() {
				close(gate)
				if err := <-held; err != nil {
					t.Errorf("the holder's delivery: %v", err)
				}
				for _, m := range q.take() {
					if m.M.Job == waiter && m.Delay == 0 {
						handOver = a.svc.Deliver(context.Background(), m.M, jobs.Delivery{})
					}
				}
			}}
			b := newInstance(t, lined, o, clk, q)
			if err := b.svc.Deliver(context.Background(), msgs[1].M, jobs.Delivery{}); err != nil {
				t.Fatal(err)
			}
			if !errors.Is(handOver, jobs.ErrBusy) || c.get("hold") != 1 || c.get("go") != 0 {
				t.Fatalf("the hand-over's delivery: %v, want busy (holder ran %d, waiter %d)", handOver, c.get("hold"), c.get("go"))
			}
			var next []sent
			for _, m := range q.take() {
				if m.M.Job == waiter {
					next = append(next, m)
				}
			}
			if len(next) == 0 || next[0].Delay != 0 {
				t.Fatalf("the waiting job, its slot reserved, is dispatched %+v; want at once", next)
			}
			if err := a.svc.Deliver(context.Background(), next[0].M, jobs.Delivery{}); err != nil {
				t.Fatal(err)
			}
			if st := stateOf(t, a, waiter).Job.Status; c.get("go") != 1 || st != contract.StateCompleted {
				t.Fatalf("the waiting job ran %d times, %s", c.get("go"), st)
			}
			_ = holder
		})
	}
}
