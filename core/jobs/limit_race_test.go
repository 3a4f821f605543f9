package jobs_test

import (
	"context"
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
	stores := map[string]func(t *testing.T) store.Store{"memory": func(*testing.T) store.Store { return memory.New() }}
	stores["postgres"] = func(t *testing.T) store.Store {
		s := storeenvtest.Open(t, storeenvtest.Postgres(t, "svz_jobs_limrace_"))
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	for name, open := range stores {
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
		})
	}
}
