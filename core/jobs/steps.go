package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/supervaize/svz/core/store"
)

// readConcurrency bounds the store reads one delivery (or job.sync) sends at once.
const readConcurrency = 16

// errPermanentWrite marks a write that trying again cannot help (a record too large, a number
// taken): retryWrite returns it at once.
var errPermanentWrite = errors.New("jobs: write refused")

// getAll reads the records under keys, readConcurrency at a time: found[i] is false where no
// live record is; the first other error ends the reads.
func getAll(ctx context.Context, s store.Store, keys []string) (vals [][]byte, found []bool, err error) {
	vals, found = make([][]byte, len(keys)), make([]bool, len(keys))
	err = concurrently(ctx, len(keys), func(ctx context.Context, i int) error {
		rec, err := s.Get(ctx, keys[i])
		switch {
		case err == nil:
			vals[i], found[i] = rec.Value, true
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return vals, found, nil
}

// concurrently runs fn for 0 to n-1, readConcurrency at a time; the first error cancels the
// context of the others, stops starting new ones, and is returned.
func concurrently(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, readConcurrency)
	var wg sync.WaitGroup
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := fn(ctx, i); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// stepsOf reads the step records of the task r (under key). A task no delivery ran has none;
// a finished one has as many as it says (its last write counted them); a running one may have a
// few more than its last write counted, which are looked for.
func stepsOf(ctx context.Context, s store.Store, key string, r *record) ([]*stepRecord, error) {
	switch {
	case r.Deliveries == 0:
		return nil, nil
	case terminal(r.Status):
		return loadSteps(ctx, s, key, r.Seq, false)
	}
	return loadSteps(ctx, s, key, r.Seq, true)
}

// loadSteps reads the step records of the task under key: records 1 to hint at once, then, when
// probe says, on, a few at a time, until one is missing. The records come in number order.
func loadSteps(ctx context.Context, s store.Store, key string, hint int, probe bool) ([]*stepRecord, error) {
	var out []*stepRecord
	from, n := 1, max(hint, 0)
	for {
		if n == 0 {
			if !probe {
				return out, nil
			}
			n = 4 // past the hint: usually none, or the few written since the task's last write
		}
		keys := make([]string, n)
		for i := range keys {
			keys[i] = stepKey(key, from+i)
		}
		vals, found, err := getAll(ctx, s, keys)
		if err != nil {
			return nil, fmt.Errorf("jobs: read the step records of %s: %w", key, err)
		}
		for i := range keys {
			if !found[i] {
				return out, nil
			}
			st, err := decodeStep(keys[i], vals[i])
			if err != nil {
				return nil, err
			}
			st.seq = from + i
			out = append(out, st)
		}
		from, n = from+n, 0
	}
}

func decodeStep(key string, value []byte) (*stepRecord, error) {
	var st stepRecord
	if err := decodeJSON(value, &st); err != nil {
		return nil, fmt.Errorf("jobs: step record %s is unreadable: %w", key, err)
	}
	return &st, nil
}

// loadRecorded reads the task's step records into the delivery: the steps it replays.
func (t *task) loadRecorded(ctx context.Context) error {
	var steps []*stepRecord
	var err error
	if t.rec.Deliveries > 1 || t.rec.Seq > 0 { // the first delivery finds none
		steps, err = loadSteps(ctx, t.svc.cfg.Store, t.key, t.rec.Seq, true)
	}
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.steps, t.replay = map[string]*stepRecord{}, map[string]bool{}
	for _, st := range steps {
		t.seq = st.seq
		for _, p := range st.Progress {
			t.progVer = max(t.progVer, p.Ver)
		}
		if _, dup := t.steps[st.Name]; dup {
			continue // a second record of a step (two instances ran it): the first counts
		}
		t.steps[st.Name] = st
		if !st.Hidden {
			t.replay[st.Name] = true
		}
	}
	for _, c := range t.rec.Cases {
		t.progVer = max(t.progVer, c.Ver)
	}
	return nil
}

// stepExpiry is when the task's step and item records expire: with the task record at the
// latest (the task record's retention starts when the job ends, before its deadline).
func (t *task) stepExpiry() time.Time {
	s := t.svc
	r := t.recNow()
	end := r.Deadline
	if f := r.Failure; f != nil && f.Deadline.After(end) {
		end = f.Deadline
	}
	if now := s.now(); now.After(end) {
		end = now
	}
	return end.Add(s.cfg.Retention)
}

// record writes st as the next step record, once: the step completed. It returns the record that
// holds the step (another instance's, when one recorded it first). A lapsed lease is confirmed
// first; a result the store cannot hold fails the job at once; a failing store ends the
// delivery (the step runs again in the next one).
func (t *task) record(ctx context.Context, st *stepRecord) (*stepRecord, error) {
	s := t.svc
	t.seqMu.Lock()
	defer t.seqMu.Unlock()
	if t.lapsed() && t.confirmLease(ctx) != nil {
		t.setHalt(lostHalt)
		return nil, errHalted
	}
	t.mu.Lock()
	st.Build = t.build
	st.Progress = nil
	for _, p := range t.progress {
		st.Progress = append(st.Progress, p)
	}
	t.mu.Unlock()
	raw, err := json.Marshal(st)
	if err != nil {
		return nil, Permanent(fmt.Errorf("jobs: encode the record of step %q: %w", st.Name, err))
	}
	value := s.packer.Pack(raw)
	if limit := s.cfg.Store.MaxValueSize(); len(value) > limit {
		return nil, t.tooLarge(st.Name, len(raw), limit)
	}
	for {
		n := t.seq + 1
		var existing store.Record
		err := retryWrite(ctx, func(ctx context.Context) error {
			rec, err := s.cfg.Store.Create(ctx, stepKey(t.key, n), value, t.stepExpiry())
			if errors.Is(err, store.ErrExists) || errors.Is(err, store.ErrTooLarge) || errors.Is(err, store.ErrInvalid) {
				existing = rec
				return fmt.Errorf("%w: %w", errPermanentWrite, err)
			}
			return err
		})
		switch {
		case err == nil:
			st.seq = n
			t.mu.Lock()
			t.seq, t.done = n, t.done+1
			t.steps[st.Name] = st
			t.mu.Unlock()
			return st, nil
		case errors.Is(err, store.ErrExists):
			// Another instance (one whose lease lapsed, or the one that took over) wrote this
			// number: take its step in, and try the next number.
			other, derr := decodeStep(stepKey(t.key, n), existing.Value)
			if derr != nil {
				return nil, t.storeFailed(derr)
			}
			other.seq = n
			t.mu.Lock()
			t.seq = n
			prev, known := t.steps[other.Name]
			if !known {
				t.steps[other.Name] = other
			}
			t.mu.Unlock()
			if other.Name == st.Name {
				if known {
					return prev, nil
				}
				return other, nil
			}
		case errors.Is(err, store.ErrTooLarge):
			return nil, t.tooLarge(st.Name, len(raw), s.cfg.Store.MaxValueSize())
		default:
			return nil, t.storeFailed(err)
		}
	}
}

// storeFailed ends the delivery on a store fault while recording: the queue delivers the task
// again and the unrecorded unit runs once more there.
func (t *task) storeFailed(err error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.halt == running {
		t.halt, t.failErr = storeHalt, err
	}
	return errHalted
}

// tooLarge fails the job at once: a result the store cannot hold would fail at every retry.
func (t *task) tooLarge(name string, size, limit int) error {
	msg := fmt.Sprintf("step %q returned %s, more than the store holds in a record (%s, deflated): keep large data in your own state (core/state) and return a reference",
		name, byteSize(size), byteSize(limit))
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.halt == running || t.halt == handOn {
		t.halt, t.fail = failHalt, failureRecord{Cause: CauseStep, Reason: msg, Step: name}
	}
	return errHalted
}

// byteSize writes n bytes for a message: "512 B", "400 KB", "1.5 MB".
func byteSize(n int) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1000*1000:
		return fmt.Sprintf("%.4g KB", float64(n)/1000)
	}
	return fmt.Sprintf("%.4g MB", float64(n)/1000/1000)
}
