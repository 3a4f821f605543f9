package kit

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/supervaize/svz/core/store"
)

// CheckLogName rejects log names no backend can hold: empty, longer than store.MaxLogNameLen,
// invalid UTF-8 or with a control character (NUL and newlines separate fields in the backends).
func CheckLogName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty log name", store.ErrInvalid)
	case len(name) > store.MaxLogNameLen:
		return fmt.Errorf("%w: log name is %d bytes, the limit is %d", store.ErrInvalid, len(name), store.MaxLogNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: log name is not valid UTF-8", store.ErrInvalid)
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: log name contains a control character", store.ErrInvalid)
		}
	}
	return nil
}

// CheckAppend validates an AppendLog call against the store's value limit.
func CheckAppend(name string, data []byte, limit int, keep store.Retention) error {
	if err := CheckLogName(name); err != nil {
		return err
	}
	if len(data) > limit {
		return fmt.Errorf("%w: %d bytes, the limit is %d", store.ErrTooLarge, len(data), limit)
	}
	if keep.MaxAge < 0 || keep.MaxCount < 0 || keep.MaxBytes < 0 {
		return fmt.Errorf("%w: negative retention", store.ErrInvalid)
	}
	return nil
}

// CheckRead validates a ReadLog call and returns the limit to use (capped at store.MaxLogRead).
func CheckRead(name string, limit int) (int, error) {
	if err := CheckLogName(name); err != nil {
		return 0, err
	}
	if limit < 0 {
		return 0, fmt.Errorf("%w: read limit %d is negative", store.ErrInvalid, limit)
	}
	return min(limit, store.MaxLogRead), nil
}

// NewEpoch returns the random epoch of a new log: 16 hex digits.
func NewEpoch() string {
	var b [8]byte
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return hex.EncodeToString(b[:])
}

// Through is LogRange.Through when the entries read end at lastRead (0 when none were read): the
// position a reader at after has reached, given the log's bounds.
func Through(after, lastRead, first, last uint64) uint64 {
	t := max(after, lastRead)
	if lastRead == 0 && first > 0 {
		// Nothing kept after after: every position up to first-1 is behind the reader.
		t = max(t, min(first-1, last))
	}
	return t
}

// Cutoff is the oldest append time keep still holds at now, in Unix milliseconds; entries
// appended strictly before it go. math.MinInt64 when keep has no age bound.
func Cutoff(keep store.Retention, now time.Time) int64 {
	if keep.MaxAge <= 0 {
		return -1 << 63
	}
	return now.Add(-keep.MaxAge).UnixMilli()
}

// HeadsLinger is how long a log stays watched after its last waiter left: a reader that waits,
// reads and waits again keeps one watch rather than restarting it each time.
const HeadsLinger = 10 * time.Second

// Heads tracks, in one process, the newest position of the logs someone waits on, and wakes the
// waiters when it changes. A backend feeds it with Observe (from its own appends and reads, and
// from whatever tells it about other processes' appends: a notification, a blocking read, a
// poll); WaitLog is Wait. The zero value is ready to use.
type Heads struct {
	mu sync.Mutex
	m  map[string]*head
}

type head struct {
	epoch   string
	last    uint64
	known   bool
	waiters int
	gen     uint64        // counts idle periods, so a stale linger timer does nothing
	changed chan struct{} // closed (and replaced) when the position changes
}

// Watch starts and stops what keeps a tracked log's position current. Start is called, outside
// any lock, when a log gains its first waiter; stop when it has had none for HeadsLinger.
type Watch struct {
	Start func(name string)
	Stop  func(name string)
}

// Watchers runs one goroutine per tracked log for backends that watch each log on its own (a
// poll, a blocking read): its Watch starts run(ctx, name) when the log gains its first waiter
// and cancels ctx when it has had none for HeadsLinger. The zero value is ready to use.
type Watchers struct {
	mu    sync.Mutex
	stops map[string]context.CancelFunc
}

// Watch returns the Watch that runs run for each tracked log.
func (w *Watchers) Watch(run func(ctx context.Context, name string)) Watch {
	return Watch{
		Start: func(name string) {
			ctx, stop := context.WithCancel(context.Background())
			w.mu.Lock()
			if w.stops == nil {
				w.stops = map[string]context.CancelFunc{}
			}
			w.stops[name] = stop
			w.mu.Unlock()
			go run(ctx, name)
		},
		Stop: func(name string) {
			w.mu.Lock()
			defer w.mu.Unlock()
			if stop := w.stops[name]; stop != nil {
				stop()
				delete(w.stops, name)
			}
		},
	}
}

// Wait blocks until the tracked position of name is known and differs from after, or ctx ends.
func (h *Heads) Wait(ctx context.Context, name string, after uint64, w Watch) error {
	h.mu.Lock()
	if h.m == nil {
		h.m = make(map[string]*head)
	}
	e, ok := h.m[name]
	if !ok {
		e = &head{changed: make(chan struct{})}
		h.m[name] = e
	}
	e.waiters++
	e.gen++
	h.mu.Unlock()
	if !ok && w.Start != nil {
		w.Start(name)
	}
	defer h.release(name, e, w)
	for {
		h.mu.Lock()
		done := e.known && e.last != after
		ch := e.changed
		h.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (h *Heads) release(name string, e *head, w Watch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e.waiters--
	if e.waiters > 0 {
		return
	}
	gen := e.gen
	time.AfterFunc(HeadsLinger, func() {
		h.mu.Lock()
		idle := h.m[name] == e && e.waiters == 0 && e.gen == gen
		if idle {
			delete(h.m, name)
		}
		h.mu.Unlock()
		if idle && w.Stop != nil {
			w.Stop(name)
		}
	})
}

// Observe records that the log name has reached last in epoch. Within an epoch the position
// only moves forward; another epoch replaces it. Untracked logs are ignored.
func (h *Heads) Observe(name, epoch string, last uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.m[name]
	if e == nil {
		return
	}
	switch {
	case e.known && epoch == "" && e.epoch != "":
		return // a read from before the log's first append, answered late
	case !e.known || e.epoch != epoch:
		e.epoch, e.last, e.known = epoch, last, true
	case last > e.last:
		e.last = last
	default:
		return
	}
	close(e.changed)
	e.changed = make(chan struct{})
}

// Wake wakes every waiter of name without changing its position, e.g. after a watch that may
// have missed notifications reconnected. Waiters recheck and go back to sleep.
func (h *Heads) Wake(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.m[name]; e != nil {
		close(e.changed)
		e.changed = make(chan struct{})
	}
}

// Names returns the logs being watched.
func (h *Heads) Names() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.m))
	for n := range h.m {
		out = append(out, n)
	}
	return out
}

// Tracked reports whether name is being watched.
func (h *Heads) Tracked(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m[name] != nil
}
