package core_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
)

// readCounter is a memory store that records the limit of every ReadLog that asks for entries.
type readCounter struct {
	*memory.Store
	mu     sync.Mutex
	limits []int
}

func (r *readCounter) ReadLog(ctx context.Context, name string, after uint64, limit int) (store.LogRange, error) {
	if limit > 0 {
		r.mu.Lock()
		r.limits = append(r.limits, limit)
		r.mu.Unlock()
	}
	return r.Store.ReadLog(ctx, name, after, limit)
}

func (r *readCounter) reads() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.limits...)
}

// TestReplayReadsAPageAtOnce: a replay reads as many events as its page holds in one store read
// (the size of the largest event is known from the appends), and one that reaches the newest
// position stops there: 10 small events behind, one read.
func TestReplayReadsAPageAtOnce(t *testing.T) {
	st := &readCounter{Store: memory.New()}
	t.Cleanup(func() { _ = st.Close() })
	c := effectController(t, core.Config{Store: st})
	invokeN(t, c, 10, "r")
	before := len(st.reads())
	_, _, evs := pollEvents(t, c, "0-0")
	if len(evs) != 11 {
		t.Fatalf("a poll 10 events behind: %v", names(evs))
	}
	for i, ev := range evs[1:] {
		if !strings.HasSuffix(ev.id, fmt.Sprintf("-%d", i+1)) || !strings.Contains(ev.data, fmt.Sprintf(`"r-%d"`, i)) {
			t.Fatalf("event %d: %+v", i+1, ev)
		}
	}
	if reads := st.reads()[before:]; len(reads) != 1 || reads[0] < 10 {
		t.Errorf("the replay of 10 small events read the log %d times (limits %v); want once, for all of them", len(reads), reads)
	}
}
