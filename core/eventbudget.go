package core

import (
	"context"
	"sync"
	"time"
)

// Memory bounds of the effect stream. A client that resumes with Last-Event-ID and never reads
// would otherwise hold every event of its catch-up until the write timeout (318 events of 130 KB
// and 40 such sockets once took a process to 1.7 GB).
const (
	// DefaultEventReplayBytes bounds the bytes of catch-up pages all streams of an instance hold
	// at once: a stream that cannot get its page waits for others to finish theirs.
	DefaultEventReplayBytes = 32 << 20
	// DefaultEventPageBytes is what one stream reads from the effect log at a time (a single
	// larger event is read alone, and takes what it needs of the shared budget).
	DefaultEventPageBytes = 1 << 20
	// DefaultEventBufferBytes bounds the recent events the follower keeps for its streams, with
	// EventBuffer bounding their count.
	DefaultEventBufferBytes = 16 << 20
	// DefaultEventWriteTimeout is how long one write to a stream may block: a client that stops
	// reading is cut then, instead of holding its connection and page until the request deadline.
	DefaultEventWriteTimeout = 10 * time.Second
)

// byteBudget is a budget of bytes shared by the streams of an instance: Acquire waits until the
// bytes asked for are free.
type byteBudget struct {
	mu      sync.Mutex
	total   int64
	held    int64
	peak    int64
	changed chan struct{} // closed and replaced when bytes are released
}

func newByteBudget(total int64) *byteBudget {
	return &byteBudget{total: total, changed: make(chan struct{})}
}

// Acquire takes n bytes (at most the total: a larger page takes the whole budget), waiting until
// they are free or ctx or stop ends. It returns what it took.
func (b *byteBudget) Acquire(ctx context.Context, stop <-chan struct{}, n int64) (int64, error) {
	n = min(n, b.total)
	for {
		b.mu.Lock()
		if b.total-b.held >= n {
			b.held += n
			b.peak = max(b.peak, b.held)
			b.mu.Unlock()
			return n, nil
		}
		changed := b.changed
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-stop:
			return 0, context.Canceled
		case <-changed:
		}
	}
}

// TryAcquire takes n bytes when they are free now.
func (b *byteBudget) TryAcquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.total-b.held < n {
		return false
	}
	b.held += n
	b.peak = max(b.peak, b.held)
	return true
}

// Release gives n bytes back.
func (b *byteBudget) Release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.held -= n
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

// usage returns the bytes held now and the most ever held at once.
func (b *byteBudget) usage() (held, peak int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held, b.peak
}
