package jobs

import (
	"context"
	"testing"
)

// TestMapOverAnOpenStepOfNoItems: an open step that is active, of no items and no tries is what
// a renewal writes for a step caught running, or for a fan-out of no items between its start and
// its record (the delivery then died). A Map of no items takes it as its own and completes; a Map
// with items refuses it, as it refuses any open step that is not a fan-out of its items.
func TestMapOverAnOpenStepOfNoItems(t *testing.T) {
	for _, c := range []struct {
		items []int
		want  string
	}{{nil, taskCompleted}, {[]int{1}, taskFailed}} {
		w := newLeaseWorld(t)
		work := Define(regOwner{w.reg}, "x", func(ctx context.Context, _ struct{}) error {
			_, err := Map(ctx, "fetch", c.items, func(context.Context, int) (int, error) { return 0, nil })
			return err
		})
		w.start(t, work, "j")
		if _, err := w.svc.update(w.ctx, taskKey("a", "w", "j"), func(r *record) (bool, error) {
			r.Open = append(r.Open, &stepRecord{Name: "fetch", Status: stepActive})
			return true, nil
		}); err != nil {
			t.Fatal(err)
		}
		w.deliver(t, "j")
		r, _, err := w.svc.load(w.ctx, taskKey("a", "w", "j"))
		if err != nil || r.Status != c.want {
			t.Fatalf("Map of %d items over an open step of none: %s (%s), %v; want %s", len(c.items), r.Status, r.Error, err, c.want)
		}
	}
}
