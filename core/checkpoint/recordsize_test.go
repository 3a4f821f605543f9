package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/cryptotest"
	"time"

	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
)

// sizedStore is a memory store that accepts values of at most limit bytes (MaxValueSize) and
// records the size of every occurrence record written.
type sizedStore struct {
	store.Store
	limit int
	mu    sync.Mutex
	sizes []int
}

func (s *sizedStore) MaxValueSize() int { return s.limit }

func (s *sizedStore) note(key string, value []byte) {
	if strings.HasPrefix(key, "rulecheckpoint/v1/step/") {
		s.mu.Lock()
		s.sizes = append(s.sizes, len(value))
		s.mu.Unlock()
	}
}

func (s *sizedStore) Create(ctx context.Context, key string, value []byte, exp time.Time) (store.Record, error) {
	s.note(key, value)
	return s.Store.Create(ctx, key, value, exp)
}

func (s *sizedStore) Update(ctx context.Context, key string, version uint64, value []byte, exp time.Time) (store.Record, error) {
	s.note(key, value)
	return s.Store.Update(ctx, key, version, value, exp)
}

// runSized runs one allowed occurrence on a store that accepts limit bytes, with the same
// randomness (ids, the lease's owner) and clock every time, so that its records are the same
// bytes.
func runSized(t *testing.T, limit int) (*sizedStore, checkpoint.Outcome[receipt], *job, error) {
	t.Helper()
	cryptotest.SetGlobalRandom(t, 30)
	mem := memory.New()
	t.Cleanup(func() { _ = mem.Close() })
	s := &sizedStore{Store: mem, limit: limit}
	w := newWorld(t, s, nil)
	clock := newManualClock()
	clock.set(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	i := w.instance(behaviour{}, clock.frozen(0))
	j := w.job()
	out, err := j.run(t, i)
	return s, out, j, err
}

// TestRecordAtTheStoreLimit: an occurrence record of exactly the store's MaxValueSize is written;
// one byte over is refused with store.ErrTooLarge, naming both sizes, before the store is called:
// the first record too, which is then never created.
func TestRecordAtTheStoreLimit(t *testing.T) {
	probe, out, _, err := runSized(t, 1<<20)
	wantStatus(t, out, err, checkpoint.Completed, "")
	largest := 0
	for _, n := range probe.sizes {
		largest = max(largest, n)
	}
	if largest == 0 {
		t.Fatal("no occurrence record written")
	}

	s, out, j, err := runSized(t, largest)
	wantStatus(t, out, err, checkpoint.Completed, "")
	j.wantCounts(t, 1, 1)
	if fmt.Sprint(s.sizes) != fmt.Sprint(probe.sizes) {
		t.Fatalf("the records of the same run differ: %v, then %v", probe.sizes, s.sizes)
	}

	s, out, _, err = runSized(t, largest-1)
	if !errors.Is(err, store.ErrTooLarge) || !strings.Contains(fmt.Sprint(err), fmt.Sprintf("is %d bytes packed, more than the store accepts (%d)", largest, largest-1)) {
		t.Fatalf("a record one byte over the limit: %+v, %v; want ErrTooLarge naming %d and %d", out, err, largest, largest-1)
	}
	for _, n := range s.sizes {
		if n > largest-1 {
			t.Errorf("a record of %d bytes reached the store, which accepts %d", n, largest-1)
		}
	}

	// A first record over the limit: refused before it is created, nothing sent.
	first := probe.sizes[0]
	s, out, j, err = runSized(t, first-1)
	if !errors.Is(err, store.ErrTooLarge) || !strings.Contains(fmt.Sprint(err), fmt.Sprintf("is %d bytes packed, more than the store accepts (%d)", first, first-1)) {
		t.Fatalf("a first record one byte over the limit: %+v, %v; want ErrTooLarge naming %d and %d", out, err, first, first-1)
	}
	if len(s.sizes) != 0 || len(j.w.studio.allCalls()) != 0 {
		t.Errorf("records of %v bytes written, %d checkpoints sent; want none", s.sizes, len(j.w.studio.allCalls()))
	}
}
