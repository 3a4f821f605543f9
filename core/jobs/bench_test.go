package jobs_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/core/store/storeenv/storeenvtest"
	"github.com/supervaize/svz/internal/testenv"
)

// counting is a store that counts its writes and reads.
type counting struct {
	store.Store
	writes, reads atomic.Int64
}

// countingLister is counting over a store that lists (a pool needs one); a list is no write.
// listed, when set, is closed once the first List has answered.
type countingLister struct {
	*counting
	l      store.Lister
	listed chan struct{}
	once   *sync.Once
}

func (c countingLister) List(ctx context.Context, prefix, after string, limit int) (store.Page, error) {
	p, err := c.l.List(ctx, prefix, after, limit)
	if c.listed != nil {
		c.once.Do(func() { close(c.listed) })
	}
	return p, err
}

var _ store.Lister = countingLister{}

func (c *counting) Get(ctx context.Context, key string) (store.Record, error) {
	c.reads.Add(1)
	return c.Store.Get(ctx, key)
}

func (c *counting) Create(ctx context.Context, key string, v []byte, exp time.Time) (store.Record, error) {
	c.writes.Add(1)
	return c.Store.Create(ctx, key, v, exp)
}

func (c *counting) Update(ctx context.Context, key string, ver uint64, v []byte, exp time.Time) (store.Record, error) {
	c.writes.Add(1)
	return c.Store.Update(ctx, key, ver, v, exp)
}

func (c *counting) Delete(ctx context.Context, key string, ver uint64) error {
	c.writes.Add(1)
	return c.Store.Delete(ctx, key, ver)
}

// writesOf counts the store writes of a job of n steps, started and delivered once: by the
// test's queue, or (pool) by an in-process pool, whose scan then finds the job ended.
func writesOf(t testing.TB, n int, pool bool) int64 {
	mem := memory.New()
	cs := &counting{Store: mem}
	o := newOwner()
	w := jobs.Define(o, "steps", func(ctx context.Context, _ struct{}) error {
		for i := range n {
			if _, err := jobs.Step(ctx, fmt.Sprint(i), func(context.Context) (int, error) { return i, nil }); err != nil {
				return err
			}
		}
		return nil
	})
	q := &queue{}
	var d jobs.Dispatcher = q
	p := jobs.NewPool(jobs.Workers(1), jobs.ScanEvery(0))
	if pool {
		d = p
	}
	st := countingLister{counting: cs, l: mem, listed: make(chan struct{}), once: &sync.Once{}}
	svc := jobs.NewService(jobs.Config{Store: st, Dispatcher: d, Logger: quiet, Works: func(string) (*jobs.Registry, time.Duration, bool) { return o.reg, 0, true }})
	defer svc.Close()
	if pool {
		// The pool's first scan (at its start) must have looked at the empty index before the job
		// starts: on a loaded machine it could otherwise run after the job ended and drop the
		// index entry the scan below is counted on.
		select {
		case <-st.listed:
		case <-time.After(time.Minute): // a failure bound only
			t.Fatal("the pool's first scan never listed the index")
		}
	}
	ctx := jobs.NewContext(context.Background(), svc, o.reg, agentSlug, &contract.VerifiedWorkspaceContext{WorkspaceID: wsID})
	if _, err := w.Start(ctx, startReq("job"), struct{}{}); err != nil {
		t.Fatal(err)
	}
	for _, m := range q.take() {
		if err := svc.Deliver(context.Background(), m.M, jobs.Delivery{}); err != nil {
			t.Fatal(err)
		}
	}
	if pool {
		// The job's end is its last write of the delivery; the scan then deletes its index entry.
		waitCompleted(ctx, t, "job", "the pool did not complete the job")
		svc.Close() // the delivery has ended: nothing more is written by it
		before := cs.writes.Load()
		if err := p.Scan(context.Background()); err != nil {
			t.Fatal(err)
		}
		if cs.writes.Load() != before+1 {
			t.Fatalf("the scan wrote %d times, want 1 (the index entry's delete)", cs.writes.Load()-before)
		}
	}
	return cs.writes.Load()
}

// TestStoreWritesPerStep: each step costs one store write; a job adds three (the task, the
// claim of its delivery, its end), and on the in-process pool two more (its index entry,
// written at the dispatch and deleted by the scan once the job ended).
func TestStoreWritesPerStep(t *testing.T) {
	for _, c := range []struct {
		name   string
		pool   bool
		perJob int64
	}{{"queue", false, 3}, {"pool", true, 5}} {
		t.Run(c.name, func(t *testing.T) {
			none, ten := writesOf(t, 0, c.pool), writesOf(t, 10, c.pool)
			if none != c.perJob || ten-none != 10 {
				t.Fatalf("writes: %d for a job without steps (want %d), %d more for 10 steps (want 10)", none, c.perJob, ten-none)
			}
		})
	}
}

// BenchmarkStoreWrites reports the store writes of a job (make bench-jobs).
func BenchmarkStoreWrites(b *testing.B) {
	var none, ten int64
	for b.Loop() {
		none, ten = writesOf(b, 0, false), writesOf(b, 10, false)
	}
	b.ReportMetric(float64(ten-none)/10, "writes/step")
	b.ReportMetric(float64(none), "writes/job")
}

// BenchmarkDispatchToStep measures the time from the dispatch of a task to the start of its
// first step on the in-process pool, on the memory store and, when scripts/with-services runs
// them, on PostgreSQL and Redis; it reports the median and the 99th percentile (make bench-jobs).
func BenchmarkDispatchToStep(b *testing.B) {
	backends := map[string]func(b *testing.B) store.Store{
		"memory": func(*testing.B) store.Store { return memory.New() },
	}
	if os.Getenv(testenv.PostgresURL) != "" {
		backends["postgres"] = func(b *testing.B) store.Store {
			table := testenv.UniqueName("svz_jobs_bench_")
			return storeenvtest.Open(b, []string{"SUPERVAIZER_STORE=postgres", "SUPERVAIZER_STORE_URL=" + os.Getenv(testenv.PostgresURL), "SUPERVAIZER_STORE_TABLE=" + table})
		}
	}
	if os.Getenv(testenv.RedisURL) != "" {
		backends["redis"] = func(b *testing.B) store.Store {
			return storeenvtest.Open(b, []string{"SUPERVAIZER_STORE=redis", "SUPERVAIZER_STORE_URL=" + os.Getenv(testenv.RedisURL)})
		}
	}
	for _, name := range []string{"memory", "postgres", "redis"} {
		open := backends[name]
		if open == nil {
			continue
		}
		b.Run(name, func(b *testing.B) {
			s := open(b)
			b.Cleanup(func() { _ = s.Close() })
			o := newOwner()
			started := make(chan time.Time, 1)
			w := jobs.Define(o, "first", func(ctx context.Context, _ struct{}) error {
				_, err := jobs.Step(ctx, "a", func(context.Context) (int, error) { started <- time.Now(); return 1, nil })
				return err
			})
			pool := jobs.NewPool(jobs.Workers(1), jobs.ScanEvery(0))
			var dispatched time.Time
			d := dispatchFunc(func(ctx context.Context, m jobs.Message, delay time.Duration) error {
				dispatched = time.Now()
				return pool.Dispatch(ctx, m, delay)
			})
			svc := jobs.NewService(jobs.Config{Store: s, Dispatcher: pool, Logger: quiet, Works: func(string) (*jobs.Registry, time.Duration, bool) { return o.reg, 0, true }})
			b.Cleanup(svc.Close)
			// The work's context sees the pool; Start goes through d to time the dispatch.
			svcD := jobs.NewService(jobs.Config{Store: s, Dispatcher: d, Logger: quiet, Works: func(string) (*jobs.Registry, time.Duration, bool) { return o.reg, 0, true }})
			ctx := jobs.NewContext(context.Background(), svcD, o.reg, agentSlug, &contract.VerifiedWorkspaceContext{WorkspaceID: wsID})
			run := fmt.Sprint(time.Now().UnixNano())
			var lat []time.Duration
			i := 0
			for b.Loop() {
				if _, err := w.Start(ctx, startReq(fmt.Sprintf("bench-%s-%d", run, i)), struct{}{}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, (<-started).Sub(dispatched))
				i++
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-us")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-us")
		})
	}
}

type dispatchFunc func(ctx context.Context, m jobs.Message, delay time.Duration) error

func (f dispatchFunc) Dispatch(ctx context.Context, m jobs.Message, delay time.Duration) error {
	return f(ctx, m, delay)
}

// TestStoreReadsPerJob: a job's first delivery reads its task only (no step record can exist
// yet), and job.sync of the finished job reads the task and exactly its step records.
func TestStoreReadsPerJob(t *testing.T) {
	cs := &counting{Store: memory.New()}
	o := newOwner()
	w := jobs.Define(o, "four", func(ctx context.Context, _ struct{}) error {
		for i := range 4 {
			if _, err := jobs.Step(ctx, fmt.Sprint(i), func(context.Context) (int, error) { return i, nil }); err != nil {
				return err
			}
		}
		return nil
	})
	in := newInstance(t, cs, o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	before := cs.reads.Load()
	if n := in.deliverAll(t, 2, nil); n != 1 {
		t.Fatalf("%d deliveries", n)
	}
	delivered := cs.reads.Load() - before
	if st := stateOf(t, in, job); st.Job.Status != contract.StateCompleted || len(st.Cases[0].Steps) != 4 {
		t.Fatalf("state %s", mustJSON(t, st))
	}
	if synced := cs.reads.Load() - before - delivered; delivered != 1 || synced != 5 {
		t.Fatalf("reads: %d by the delivery (want 1: the task), %d by job.sync (want 5: the task and its 4 steps)", delivered, synced)
	}
}
