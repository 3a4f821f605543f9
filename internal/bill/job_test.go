package bill_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/jobs/jobstest"
	"github.com/supervaize/svz/core/store/storeenv/storeenvtest"
	"github.com/supervaize/svz/internal/bill"
)

// jobSteps is how many steps the metered job records.
const jobSteps = 4

type registry struct{ reg *jobs.Registry }

func (r registry) Works() *jobs.Registry { return r.reg }

type lead struct {
	Name    string `json:"name"`
	Email   string `json:"email"`
	Company string `json:"company"`
	Title   string `json:"title"`
	Score   int    `json:"score"`
}

// meterJob runs rounds background jobs of a lead search (find 12 leads, score them, write a
// report, import them: jobSteps steps whose results the task record keeps) on a DynamoDB table
// behind the metering proxy, and returns the usage of one job from its start to its completion.
func meterJob(t testing.TB, rounds int) bill.Usage {
	meter, env := meteredTable(t, "jobs")
	st := storeenvtest.Open(t, env)
	r := registry{jobs.NewRegistry()}
	w := jobs.Define(r, "leads", func(ctx context.Context, in struct{ Query string }) error {
		found, err := jobs.Step(ctx, "find", func(context.Context) ([]lead, error) {
			out := make([]lead, 12)
			for i := range out {
				out[i] = lead{fmt.Sprintf("Person %d", i), fmt.Sprintf("person%d@example%d.com", i, i%4), fmt.Sprintf("Company %d", i%4), "Head of Operations", 0}
			}
			return out, nil
		})
		if err != nil {
			return err
		}
		scored, err := jobs.Step(ctx, "score", func(context.Context) ([]lead, error) {
			for i := range found {
				found[i].Score = 50 + i*3
			}
			return found, nil
		})
		if err != nil {
			return err
		}
		if _, err := jobs.Step(ctx, "report", func(context.Context) (string, error) {
			return fmt.Sprintf("%d leads for %q; the best: %s (%d)", len(scored), in.Query, scored[11].Name, scored[11].Score), nil
		}); err != nil {
			return err
		}
		_, err = jobs.Step(ctx, "import", func(context.Context) (int, error) { return len(scored), nil })
		return err
	})
	q := &jobstest.Queue{}
	svc := jobs.NewService(jobs.Config{Store: st, Dispatcher: q, Logger: slog.New(slog.DiscardHandler),
		Works: func(string) (*jobs.Registry, time.Duration, bool) { return r.reg, 0, true }})
	t.Cleanup(svc.Close)
	ctx := jobs.NewContext(context.Background(), svc, r.reg, "leads-agent", &contract.VerifiedWorkspaceContext{WorkspaceID: "ws-1"})
	var total bill.Usage
	for i := range rounds + 1 { // the first job warms the connections up
		before := meter.Usage()
		job := fmt.Sprintf("job-%d", i)
		req := &contract.ActionRequest{Action: "job.start", JobID: &job}
		if _, err := w.Start(ctx, req, struct{ Query string }{"operations leaders in Lyon"}); err != nil {
			t.Fatal(err)
		}
		for msgs := q.Take(); len(msgs) > 0; msgs = q.Take() {
			for _, m := range msgs {
				if err := svc.Deliver(context.Background(), m, jobs.Delivery{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		snap, err := jobs.State(ctx, job)
		if err != nil || snap.Job.Status != contract.StateCompleted {
			t.Fatalf("job %s: %+v %v; want completed", job, snap, err)
		}
		if i > 0 {
			total = total.Add(meter.Usage().Sub(before))
		}
	}
	return total.Per(rounds)
}

// TestBillJob pins what a background job costs on DynamoDB: the task record is written once at
// the start, once as the delivery takes its lease, once per step and once at the end, each under
// 1 KB packed (the same record as plain JSON takes 2 units a step by its last steps).
func TestBillJob(t *testing.T) {
	u := meterJob(t, 2)
	if u.WCU != wantJobWCU || strings.Contains(u.Ops(), "BatchWriteItem") {
		t.Errorf("a %d-step job: %.2f WCU (index %.2f), %.2f RCU (%s); want %d WCU", jobSteps, u.WCU, u.IndexWCU, u.RCU, u.Ops(), wantJobWCU)
	}
}
