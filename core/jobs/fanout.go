package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/supervaize/svz/core/store"
)

// DefaultConcurrency is how many items of a fan-out (Map) run at once unless Concurrency says.
const DefaultConcurrency = 8

// Concurrency is how many items of a Map run at once in a delivery (DefaultConcurrency).
func Concurrency(n int) StepOption { return func(o *stepOpts) { o.concurrency = n } }

type (
	groupKey struct{}
	itemCtx  struct{}
)

func inGroup(ctx context.Context) bool { return ctx.Value(groupKey{}) != nil }
func inItem(ctx context.Context) bool  { return ctx.Value(itemCtx{}) != nil }

// Map runs fn once per item, as one durable unit each, at most Concurrency(n) at once, and
// returns the results in the items' order. Each item's result is recorded (a record of its own,
// one write) when fn returns, so a crash, a continuation or a take-over runs again only the items
// that had not finished, each at most once more per interruption; the fan-out is recorded as the
// step name once every item has a result. A failing item is retried in a later delivery with the
// work's backoff and MaxAttempts (Permanent fails the job at once), the other items' results
// kept. The items must be the same at every delivery (take them from a recorded step): an item
// that changed since its result was recorded fails the job. Inside fn, the item is one unit: it
// runs no Step, Await or Sleep of its own. Items run in one delivery, on goroutines (on Lambda,
// in the invocation that reaches the fan-out, handing on to a fresh one when its time is nearly
// up); job.sync shows the fan-out as one step with its counts.
func Map[In, Out any](ctx context.Context, name string, items []In, fn func(ctx context.Context, item In) (Out, error), opts ...StepOption) ([]Out, error) {
	t := taskOf(ctx)
	if t == nil {
		return nil, ErrNotInWork
	}
	hashes := make([]string, len(items))
	for i, it := range items {
		b, err := json.Marshal(it)
		if err != nil {
			return nil, Permanent(fmt.Errorf("jobs: encode item %d of fan-out %q: %w", i, name, err))
		}
		sum := sha256.Sum256(b)
		hashes[i] = hex.EncodeToString(sum[:8])
	}
	raws, err := t.fanout(ctx, name, hashes, func(ctx context.Context, i int) (json.RawMessage, error) {
		v, err := fn(ctx, items[i])
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, Permanent(fmt.Errorf("encode the result of item %d of fan-out %q: %w", i, name, err))
		}
		return b, nil
	}, opts)
	if err != nil {
		return nil, err
	}
	out := make([]Out, len(raws))
	for i, raw := range raws {
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			return nil, t.decodeFailure(name, fmt.Sprintf("the recorded result of item %d of fan-out %q", i, name), err)
		}
	}
	return out, nil
}

// Parallel runs the branches at once, each with its own steps (Step, Await, Sleep, Map), and
// returns when all have: the first branch error in order, or the error that ended the delivery.
// Each branch's steps are recorded as they complete, as anywhere in a work.
func Parallel(ctx context.Context, branches ...func(ctx context.Context) error) error {
	t := taskOf(ctx)
	if t == nil {
		return ErrNotInWork
	}
	gctx := context.WithValue(ctx, groupKey{}, true)
	errs := make([]error, len(branches))
	var wg sync.WaitGroup
	for i, b := range branches {
		wg.Go(func() {
			defer func() {
				if p := recover(); p != nil {
					errs[i] = Permanent(fmt.Errorf("jobs: branch %d of a Parallel panicked: %v", i, p))
				}
			}()
			errs[i] = b(gctx)
		})
	}
	wg.Wait()
	if t.halted() {
		return errHalted
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// itemRecord is a fan-out item's result, with the hash of the item it ran on.
type itemRecord struct {
	Hash   string          `json:"h"`
	Result json.RawMessage `json:"r"`
}

// fanout is a Map running in this delivery: which items have results.
type fanout struct {
	opts  stepOpts
	mu    sync.Mutex
	total int
	done  []bool
	tries map[int]int // failed attempts, by item, in this delivery and before
}

func (f *fanout) triesOf(i int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tries[i]
}

func (f *fanout) doneCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, d := range f.done {
		if d {
			n++
		}
	}
	return n
}

func (t *task) fanout(ctx context.Context, name string, hashes []string, run func(ctx context.Context, i int) (json.RawMessage, error), opts []StepOption) ([]json.RawMessage, error) {
	if err := t.open(name); err != nil {
		return nil, err
	}
	if inItem(ctx) {
		return nil, Permanent(fmt.Errorf("jobs: fan-out %q runs inside a fan-out item", name))
	}
	o := applyOpts(opts)
	if o.concurrency < 0 {
		return nil, Permanent(fmt.Errorf("jobs: fan-out %q: Concurrency must be at least 1", name))
	}
	conc := o.concurrency
	if conc == 0 {
		conc = DefaultConcurrency
	}
	n := len(hashes)
	prev, recorded := t.recorded(name)
	switch {
	case !recorded:
	case prev.Status != stepCompleted || prev.Awaiting != nil || !prev.Until.IsZero() || prev.Items == 0 && n > 0:
		// A step, an answer or a timer of that name (a fan-out of no items records none either).
		return nil, Permanent(fmt.Errorf("jobs: %q is not a fan-out: step names are unique within a work", name))
	case prev.Items != n:
		return nil, Permanent(fmt.Errorf("jobs: fan-out %q had %d items when it completed, %d now: its items must be the same at every delivery", name, prev.Items, n))
	}
	results, err := t.loadItems(ctx, name, hashes)
	if err != nil {
		return nil, err
	}
	if recorded {
		for i, r := range results {
			if r == nil {
				return nil, Permanent(fmt.Errorf("jobs: fan-out %q completed, but the result of its item %d is gone (expired?)", name, i))
			}
		}
		return results, nil
	}
	t.mu.Lock()
	openStep := t.rec.open(name)
	t.mu.Unlock()
	if openStep != nil && (openStep.Status != stepActive || openStep.Items == 0 && (n > 0 || openStep.Tries > 0)) {
		// A Step retried, an Await or a Sleep of that name is open (an open fan-out is active,
		// with its item count; one of no items has no tries either).
		return nil, Permanent(fmt.Errorf("jobs: %q is not a fan-out: step names are unique within a work", name))
	}
	if openStep == nil {
		if err := t.diverged(ctx, name); err != nil {
			return nil, err
		}
	}
	if t.boundary(ctx) {
		return nil, errHalted
	}
	f := &fanout{opts: o, total: n, done: make([]bool, n), tries: map[int]int{}}
	if openStep != nil {
		for i, k := range openStep.ItemTries {
			f.tries[i] = k
		}
	}
	for i, r := range results {
		f.done[i] = r != nil
	}
	t.mu.Lock()
	if t.items == nil {
		t.items = map[string]*fanout{}
	}
	t.items[name] = f // what the task's writes record of the fan-out while it runs (apply)
	t.mu.Unlock()

	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	var resMu sync.Mutex
	var acqErr error // why an item could not take its limits: a halt (checked first), or an invalid limit
	for i := range n {
		if results[i] != nil {
			continue
		}
		sem <- struct{}{} // a token left taken by a break blocks nothing: the loop alone takes them
		if t.boundary(ctx) {
			break
		}
		unit := fmt.Sprintf("%s/%d", name, i)
		if err := t.acquire(ctx, unit, o.limits); err != nil {
			acqErr = err
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			defer t.releaseLimits(ctx, unit, o.limits)
			ictx, itemDone := t.svc.tel.stepStarted(context.WithValue(context.WithValue(ctx, itemCtx{}, true), unitKey{}, unit), t.msg.Work, unit, f.triesOf(i))
			res, err := runStep(ictx, func(ctx context.Context) (json.RawMessage, error) { return run(ctx, i) })
			itemDone(err)
			if err != nil {
				if !t.ended(ctx, err) {
					t.itemFailed(ctx, name, o, f, i, err)
				}
				return
			}
			res, err = t.recordItem(ctx, name, i, hashes[i], res)
			if err != nil {
				return
			}
			resMu.Lock()
			results[i] = res
			resMu.Unlock()
			f.mu.Lock()
			f.done[i] = true
			delete(f.tries, i)
			f.mu.Unlock()
			t.mu.Lock()
			t.done++
			t.mu.Unlock()
		})
	}
	wg.Wait()
	if t.halted() {
		return nil, errHalted
	}
	if acqErr != nil {
		return nil, acqErr
	}
	st := &stepRecord{Name: name, Status: stepCompleted, Items: n, Outputs: artifactRecords(o.outputs)}
	o.place(t.msg.Work, st, t.svc.laneOf(t.msg.Agent))
	if _, err := t.record(ctx, st); err != nil {
		return nil, err
	}
	t.mu.Lock()
	delete(t.items, name)
	t.mu.Unlock()
	return results, nil
}

// loadItems reads the recorded results of a fan-out's items (nil where none is recorded),
// checking that each was recorded for the same item.
func (t *task) loadItems(ctx context.Context, name string, hashes []string) ([]json.RawMessage, error) {
	if t.recNow().Deliveries == 1 { // the task's first delivery: none was recorded before it
		return make([]json.RawMessage, len(hashes)), nil
	}
	keys := make([]string, len(hashes))
	for i := range keys {
		keys[i] = itemKey(t.key, name, i)
	}
	vals, found, err := getAll(ctx, t.svc.cfg.Store, keys)
	if err != nil {
		return nil, t.storeFailed(fmt.Errorf("jobs: read the items of fan-out %q: %w", name, err))
	}
	out := make([]json.RawMessage, len(keys))
	for i := range keys {
		if !found[i] {
			continue
		}
		var it itemRecord
		if err := decodeJSON(vals[i], &it); err != nil {
			return nil, fmt.Errorf("jobs: item record %s is unreadable: %w", keys[i], err)
		}
		if it.Hash != hashes[i] {
			return nil, Permanent(fmt.Errorf("jobs: item %d of fan-out %q changed since its result was recorded: the items must be the same at every delivery (take them from a recorded step)", i, name))
		}
		out[i] = it.Result
	}
	return out, nil
}

// recordItem writes item i's result, once; another instance's, when it recorded the item first.
func (t *task) recordItem(ctx context.Context, name string, i int, hash string, res json.RawMessage) (json.RawMessage, error) {
	s := t.svc
	if t.lapsed() && t.confirmLease(ctx) != nil {
		t.setHalt(lostHalt)
		return nil, errHalted
	}
	raw, _ := json.Marshal(itemRecord{Hash: hash, Result: res}) // a string and valid JSON always encode
	value := s.packer.Pack(raw)
	label := fmt.Sprintf("%s (item %d)", name, i)
	if limit := s.cfg.Store.MaxValueSize(); len(value) > limit {
		return nil, t.tooLarge(label, len(raw), limit)
	}
	key := itemKey(t.key, name, i)
	var existing store.Record
	err := retryWrite(ctx, func(ctx context.Context) error {
		rec, err := s.cfg.Store.Create(ctx, key, value, t.stepExpiry())
		if errors.Is(err, store.ErrExists) || errors.Is(err, store.ErrTooLarge) || errors.Is(err, store.ErrInvalid) {
			existing = rec
			return fmt.Errorf("%w: %w", errPermanentWrite, err)
		}
		return err
	})
	switch {
	case err == nil:
		return res, nil
	case errors.Is(err, store.ErrExists):
		var it itemRecord
		if derr := decodeJSON(existing.Value, &it); derr != nil {
			return nil, t.storeFailed(derr)
		}
		return it.Result, nil
	case errors.Is(err, store.ErrTooLarge):
		return nil, t.tooLarge(label, len(raw), s.cfg.Store.MaxValueSize())
	}
	return nil, t.storeFailed(err)
}

// itemFailed records a failed attempt of item i: a retry in a later delivery, or the job's failure.
func (t *task) itemFailed(ctx context.Context, name string, o stepOpts, f *fanout, i int, err error) {
	f.mu.Lock()
	f.tries[i]++
	tries := f.tries[i]
	f.mu.Unlock()
	var perm *permanentError
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.halt != running && t.halt != handOn {
		return
	}
	if errors.As(err, &perm) || tries >= t.settings.maxAttempts {
		msg := fmt.Sprintf("item %d of fan-out %q failed: %v", i, name, err)
		if !errors.As(err, &perm) {
			msg = fmt.Sprintf("item %d of fan-out %q failed %d times; last error: %v", i, name, tries, err)
		}
		t.halt, t.fail = failHalt, failureRecord{Cause: CauseStep, Reason: msg, Step: name}
		return
	}
	d := backoff(t.settings.backoff, tries)
	if t.halt == running || d < t.delay {
		t.halt, t.delay = handOn, d
		t.wait = &waitRecord{Reason: waitRetry, Step: name, Until: t.svc.now().Add(d)}
	}
	t.log.WarnContext(ctx, "fan-out item failed: retried in a later delivery", "step", name, "item", i, "tries", tries, "error", err)
}
