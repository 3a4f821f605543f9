package kit

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestThrough(t *testing.T) {
	for _, tc := range []struct{ after, lastRead, first, last, want uint64 }{
		{0, 3, 1, 3, 3}, // read everything
		{0, 2, 1, 3, 2}, // cut short
		{3, 0, 1, 3, 3}, // nothing new
		{7, 0, 1, 3, 7}, // ahead of the log
		{0, 0, 9, 8, 8}, // everything kept is behind: all gone
		{2, 0, 5, 9, 4}, // nothing read (an entry still being written at 5): up to what is gone
		{2, 6, 5, 9, 6}, // read 5, 6 after a loss
		{0, 0, 1, 0, 0}, // empty log
	} {
		if got := Through(tc.after, tc.lastRead, tc.first, tc.last); got != tc.want {
			t.Errorf("Through(%d, %d, %d, %d) = %d, want %d", tc.after, tc.lastRead, tc.first, tc.last, got, tc.want)
		}
	}
}

func TestHeads(t *testing.T) {
	var h Heads
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h.Observe("l", "e", 5) // untracked: ignored
	started := make(chan string, 1)
	w := Watch{Start: func(name string) { started <- name }}
	woke := make(chan error, 1)
	go func() { woke <- h.Wait(ctx, "l", 5, w) }()
	if name := <-started; name != "l" {
		t.Fatalf("started %q", name)
	}
	h.Observe("l", "e", 5) // known, at the waiter's position: it sleeps on
	h.Observe("l", "", 0)  // a late read from before the first append: ignored
	h.Observe("l", "e", 4) // never backwards within an epoch
	select {
	case err := <-woke:
		t.Fatalf("woke at the position waited after: %v", err)
	default:
	}
	h.Observe("l", "e", 6)
	if err := <-woke; err != nil {
		t.Fatal(err)
	}
	// Another epoch replaces the position, even lower.
	go func() { woke <- h.Wait(ctx, "l", 6, w) }()
	h.Observe("l", "f", 1)
	if err := <-woke; err != nil {
		t.Fatal(err)
	}
	if !h.Tracked("l") || len(h.Names()) != 1 {
		t.Errorf("a log waited on a moment ago is no longer watched: %v", h.Names())
	}
	short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	defer stop()
	if err := h.Wait(short, "l", 1, w); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait at the newest position: %v", err)
	}
}
