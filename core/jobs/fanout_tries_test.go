package jobs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/store/memory"
)

// TestFanOutItemTriesDropSucceededItem: an item that failed once and then succeeded leaves the
// open fan-out's failed-attempt counts. With Concurrency 1, delivery 1 runs item 0, which fails
// (retryable, MaxAttempts 5), and stops there; delivery 2 runs item 0, which succeeds, then
// item 1, which fails, so the fan-out stays open. After delivery 2, Show must count item 1's one
// failed attempt only: a result clears an item's tries, or the operator would see a done item as
// failing.
func TestFanOutItemTriesDropSucceededItem(t *testing.T) {
	o, c := newOwner(), &counter{}
	w := jobs.Define(o, "fan-tries", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Map(ctx, "score", []int{0, 1}, func(_ context.Context, i int) (int, error) {
			c.inc(fmt.Sprint(i))
			if i == 1 || c.get("0") == 1 { // item 0 fails at its first run only; item 1 always
				return 0, errBoom
			}
			return i * 10, nil
		}, jobs.Concurrency(1))
		return err
	}, jobs.MaxAttempts(5), jobs.Backoff(time.Second))
	s := memory.New()
	t.Cleanup(func() { _ = s.Close() })
	in := newInstance(t, s, o, newClock(), &queue{})
	job := start(t, in, w, struct{}{})
	// Two deliveries, one at a time (deliverAll would go on to the retries after them).
	for n := 1; n <= 2; n++ {
		msgs := in.q.take()
		if len(msgs) != 1 {
			t.Fatalf("before delivery %d: %d messages queued, want 1", n, len(msgs))
		}
		in.clock.Add(msgs[0].Delay)
		if err := in.svc.Deliver(context.Background(), msgs[0].M, jobs.Delivery{}); err != nil {
			t.Fatalf("delivery %d: %v", n, err)
		}
	}
	// Item 1 did not run in delivery 1: item 0's failure ended that delivery before it.
	if c.get("0") != 2 || c.get("1") != 1 {
		t.Fatalf("item runs %v, want map[0:2 1:1]", c.n)
	}
	d, err := operator(t, s, in.clock, &queue{}).Show(context.Background(), ref(job))
	if err != nil || len(d.Steps) != 1 {
		t.Fatalf("show: %v %+v", err, d)
	}
	// Item 0 is done: only item 1, failed once, is counted.
	if st := d.Steps[0]; st.Kind != jobs.KindFanOut || st.Status != "active" || st.Items == nil ||
		st.Items.Done != 1 || st.Items.Total != 2 || fmt.Sprint(st.Items.Failed) != "map[1:1]" {
		t.Fatalf("fan-out %+v (items %+v), want active, 1 of 2 done, failed map[1:1]", st, st.Items)
	}
}
