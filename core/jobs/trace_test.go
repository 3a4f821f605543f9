package jobs_test

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/core/telemetry"
)

// TestJobsMeasured: the queue lag is measured at a job's first delivery only, and a job counts
// as finished when it ends, not when it waits.
func TestJobsMeasured(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	o := newOwner()
	w := jobs.Define(o, "measured", func(ctx context.Context, _ struct{}) error {
		if err := jobs.Sleep(ctx, "nap", time.Minute); err != nil {
			return err
		}
		_, err := jobs.Await[review](ctx, "review", contract.Awaiting{})
		return err
	})
	q, clk := &queue{}, newClock()
	in := &instance{q: q, clock: clk, after: newManualAfter(), o: o}
	in.svc = jobs.NewService(jobs.Config{Store: memory.New(), Dispatcher: q, Now: clk.Now, After: in.after.After, Logger: quiet,
		Works:     func(string) (*jobs.Registry, time.Duration, bool) { return o.reg, 0, true },
		Telemetry: telemetry.Providers{Meters: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}})
	t.Cleanup(in.svc.Close)
	job := start(t, in, w, struct{}{})
	in.deliverAll(t, 3, nil) // two deliveries: the sleep's, then the one that waits
	counts := func() (lag, finished uint64) {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				switch m.Name {
				case telemetry.QueueLag:
					for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
						lag += dp.Count
					}
				case telemetry.JobsFinished:
					for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
						finished += uint64(dp.Value)
					}
				}
			}
		}
		return lag, finished
	}
	if lag, finished := counts(); lag != 1 || finished != 0 {
		t.Fatalf("after two deliveries, waiting: lag measured %d times, %d finished; want 1, 0", lag, finished)
	}
	answer(t, in, job, "review")
	if lag, finished := counts(); lag != 1 || finished != 1 {
		t.Fatalf("completed: lag measured %d times, %d finished; want 1, 1", lag, finished)
	}
}
