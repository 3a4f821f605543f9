package bill_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/jobs/jobstest"
	"github.com/supervaize/svz/core/store/storeenv/storeenvtest"
	"github.com/supervaize/svz/internal/bill"
)

// score is a fan-out item's result: a small one, as a model's verdict on a lead is.
type score struct {
	Lead   string `json:"lead"`
	Score  int    `json:"score"`
	Reason string `json:"reason"`
}

// meterFanout runs a job that fans out over n leads (jobs.Map, each item returning a score) on a
// DynamoDB table behind the metering proxy, delivered as SQS would deliver it (no pool index),
// and returns the job's usage from its start to its end. The units do not depend on the
// concurrency: 4 at once and a long store timeout keep moto_server, behind the proxy's own reads,
// within its time on a loaded machine.
func meterFanout(t testing.TB, n int) bill.Usage {
	meter, env := meteredTable(t, "fan")
	st := storeenvtest.Open(t, append(env, "SUPERVAIZER_STORE_TIMEOUT=1m"))
	r := registry{jobs.NewRegistry()}
	w := jobs.Define(r, "score", func(ctx context.Context, leads []string) error {
		_, err := jobs.Map(ctx, "score", leads, func(_ context.Context, l string) (score, error) {
			return score{Lead: l, Score: 40 + len(l), Reason: "Head of Operations at a 200-person logistics company in the region"}, nil
		}, jobs.Concurrency(4))
		return err
	})
	q := &jobstest.Queue{}
	svc := jobs.NewService(jobs.Config{Store: st, Dispatcher: q, Logger: slog.New(slog.DiscardHandler),
		Works: func(string) (*jobs.Registry, time.Duration, bool) { return r.reg, 0, true }})
	t.Cleanup(svc.Close)
	ctx := jobs.NewContext(context.Background(), svc, r.reg, "leads-agent", &contract.VerifiedWorkspaceContext{WorkspaceID: "ws-1"})
	leads := make([]string, n)
	for i := range leads {
		leads[i] = fmt.Sprintf("person%d@example%d.com", i, i%7)
	}
	var u bill.Usage
	for i := range 2 { // the first job warms the connections up
		before := meter.Usage()
		job := fmt.Sprintf("fan-%d", i)
		if _, err := w.Start(ctx, &contract.ActionRequest{Action: "job.start", JobID: &job}, leads); err != nil {
			t.Fatal(err)
		}
		for msgs := q.Take(); len(msgs) > 0; msgs = q.Take() {
			for _, m := range msgs {
				if err := svc.Deliver(context.Background(), m, jobs.Delivery{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if snap, err := jobs.State(ctx, job); err != nil || snap.Job.Status != contract.StateCompleted {
			t.Fatalf("job %s: %+v %v; want completed", job, snap, err)
		}
		u = meter.Usage().Sub(before)
	}
	return u
}

// fanoutItems is the size of the metered fan-out.
const fanoutItems = 100

// perItem is what each item of a fan-out of fanoutItems adds to a job's usage: the job with
// them, less the same job over no items.
func perItem(t testing.TB) (all, none bill.Usage, wcu, rcu float64) {
	all, none = meterFanout(t, fanoutItems), meterFanout(t, 0)
	return all, none, (all.WCU - none.WCU) / fanoutItems, (all.RCU - none.RCU) / fanoutItems
}

// TestBillFanout pins what a fan-out item costs on DynamoDB: one write unit for a small result
// (its record, written once), whatever the number of items, and no read in the task's first
// delivery (no item can be recorded before it).
func TestBillFanout(t *testing.T) {
	all, none, wcu, rcu := perItem(t)
	if wcu != 1 || rcu != 0 {
		t.Errorf("a fan-out item: %.2f WCU and %.2f RCU, want 1 and 0 (the job over %d items: %.0f WCU, %.0f RCU, %s; over none: %.0f WCU, %.0f RCU, %s)",
			wcu, rcu, fanoutItems, all.WCU, all.RCU, all.Ops(), none.WCU, none.RCU, none.Ops())
	}
}

// BenchmarkJobsFanoutUnits prints the DynamoDB units of a fan-out item (make bench-jobs).
func BenchmarkJobsFanoutUnits(b *testing.B) {
	for b.Loop() {
	}
	all, none, wcu, rcu := perItem(b)
	fmt.Fprintf(os.Stdout, "\nDynamoDB, a job fanning out over %d items (a small result each): %s, %.0f WCU, %.0f RCU; over none: %s, %.0f WCU, %.0f RCU\n",
		fanoutItems, all.Ops(), all.WCU, all.RCU, none.Ops(), none.WCU, none.RCU)
	b.ReportMetric(wcu, "WCU/item")
	b.ReportMetric(rcu, "RCU/item")
	b.ReportMetric(all.WCU/fanoutItems, "job-WCU/item")
}
