package jobs_test

import (
	"context"
	"fmt"
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

// pausedItemWrite is a store whose first write of a fan-out item's record waits until resume
// closes (reached closes when it starts waiting): a delivery paused between its lease check and
// its write, as a GC pause or a slow network would pause it.
type pausedItemWrite struct {
	store.Store
	once            sync.Once
	reached, resume chan struct{}
}

func (p *pausedItemWrite) Create(ctx context.Context, key string, v []byte, exp time.Time) (store.Record, error) {
	if strings.Contains(key, "/i/") {
		p.once.Do(func() { close(p.reached); <-p.resume })
	}
	return p.Store.Create(ctx, key, v, exp)
}

// TestItemRecordedByTakenOverDelivery: A runs item 0 (result 1) and pauses right before writing
// it; past A's lease, B takes the task over and runs item 0 again (result 2); A's write lands
// first. B's write finds A's record, so B's Map must give A's recorded 1, the one value the item
// has in the store, not B's own 2. (The other order would show nothing: past its lease, A checks
// it before writing and records nothing more, so A's Map fails whatever the item gave it.)
func TestItemRecordedByTakenOverDelivery(t *testing.T) {
	o := newOwner()
	var runs atomic.Int32
	enteredB, releaseB := make(chan struct{}), make(chan struct{})
	outs := make(chan []int, 2) // what Map gave each delivery that got past it
	w := jobs.Define(o, "taken-fan", func(ctx context.Context, in []string) error {
		out, err := jobs.Map(ctx, "fan", in, func(context.Context, string) (int, error) {
			n := int(runs.Add(1))
			if n == 2 { // B's run: held until A's write has landed
				close(enteredB)
				<-releaseB
			}
			return n, nil
		})
		if err != nil {
			return err
		}
		outs <- out
		return nil
	})
	mem, clk := memory.New(), newClock()
	paused := &pausedItemWrite{Store: mem, reached: make(chan struct{}), resume: make(chan struct{})}
	a := newInstance(t, paused, o, clk, &queue{})
	b := newInstance(t, mem, o, clk, &queue{})
	job := start(t, a, w, []string{"x"})
	m, doneA := deliverInBackground(t, a)
	if err := signalled(paused.reached); err != nil {
		t.Fatalf("A's write of the item: %v", err)
	}
	clk.Add(jobs.DefaultLease + jobs.SkewMargin + time.Second) // A stays paused past its lease
	doneB := make(chan error, 1)
	go func() { doneB <- b.svc.Deliver(context.Background(), m, jobs.Delivery{}) }()
	if err := signalled(enteredB); err != nil {
		t.Fatalf("B's run of the item: %v", err)
	}
	close(paused.resume) // A's write lands; A then finds the task taken and ends
	if err := <-doneA; err != nil {
		t.Fatal(err)
	}
	close(releaseB)
	if err := <-doneB; err != nil {
		t.Fatal(err)
	}
	if st := stateOf(t, b, job).Job.Status; st != contract.StateCompleted {
		t.Fatalf("status %s", st)
	}
	if runs.Load() != 2 || len(outs) != 1 {
		t.Fatalf("the item ran %d times, %d deliveries got past Map; want 2 and 1 (B)", runs.Load(), len(outs))
	}
	if got := fmt.Sprint(<-outs); got != "[1]" {
		t.Fatalf("B's Map gave %s, want [1]: the result A recorded for the item, not B's own", got)
	}
}
