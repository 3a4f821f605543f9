package jobs

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"time"

	"github.com/supervaize/svz/core/store"
)

// Defaults of a Pool.
const (
	DefaultWorkers = 4
	// DefaultScan is how often a pool looks in the store for tasks nobody runs (their instance
	// died, or a delayed dispatch was lost with its process).
	DefaultScan = 10 * time.Second
)

// PoolOption configures a Pool.
type PoolOption func(*Pool)

// Workers is how many tasks a pool runs at once (DefaultWorkers).
func Workers(n int) PoolOption { return func(p *Pool) { p.workers = max(n, 1) } }

// ScanEvery is how often the pool looks for tasks nobody runs (DefaultScan); 0 or less turns the
// periodic scan off (Scan still works).
func ScanEvery(d time.Duration) PoolOption { return func(p *Pool) { p.every = d } }

// Slice bounds one delivery (0: no bound): a longer work hands itself on at a step boundary, as
// on a serverless platform.
func Slice(d time.Duration) PoolOption { return func(p *Pool) { p.slice = d } }

// Identity names this process among those that share the store, stable across its restarts
// (SUPERVAIZER_INSTANCE_ID; none by default): the leases it takes carry the name, and when the
// process restarts, its first scan takes back the tasks its previous run held at once, instead of
// waiting their lease out as other instances do. Two live processes must never share a name.
func Identity(name string) PoolOption { return func(p *Pool) { p.identity = name } }

// Pool is the Dispatcher of a plain server and local mode: deliveries run in this process, on a
// few goroutines, and a store index of the tasks not finished lets any process on the same store
// take over the tasks of one that died, once their lease lapsed (by its periodic scan, and at
// start). Give it to the controller (core.Config.Jobs); the controller's Close stops it.
type Pool struct {
	workers  int
	every    time.Duration
	slice    time.Duration
	identity string

	svc    *Service
	queue  chan Message
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	queued map[string]int // task key → queued or running here (1), and to queue again when done (2)
	// orphans: tasks the first scan found held by an ended process (of an exclusive store, or of
	// this instance's name): true for the former, false for the latter.
	orphans map[string]bool
	timers  map[*time.Timer]bool
	traces  traceMemo // the trace context of each task's latest dispatch (trace.go)
}

var _ Dispatcher = (*Pool)(nil)

// NewPool returns an in-process pool; it starts when the controller's job service attaches it.
func NewPool(opts ...PoolOption) *Pool {
	p := &Pool{workers: DefaultWorkers, every: DefaultScan, queued: map[string]int{}, orphans: map[string]bool{}, timers: map[*time.Timer]bool{}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func indexKey(m Message) string {
	return keyPrefix + "p/" + url.PathEscape(m.Agent) + "/" + url.PathEscape(m.Workspace) + "/" + url.PathEscape(m.Job)
}

// Dispatch records the task in the pool's index (so that another process finds it if this one
// dies), then queues it, after delay. The entry is written first, a task due at once included: a
// delivery that ran ahead of it, killed inside a step, left a task no scan finds and no retried
// job.start dispatches again (the task was delivered). The index entry of a delayed message says
// when it is due, so that a scan after a restart skips it without reading the task until then.
func (p *Pool) Dispatch(ctx context.Context, m Message, delay time.Duration) error {
	if p.svc == nil {
		return errors.New("jobs: the pool is not attached to a controller")
	}
	entry := Message{Agent: m.Agent, Workspace: m.Workspace, Job: m.Job, Work: m.Work, At: m.At}
	p.traces.keep(m.Key(), p.svc.tel.p.Inject(ctx), true)
	if err := indexTask(ctx, p.svc.cfg.Store, m, p.svc.tel.indexEntry(ctx, entry)); err != nil {
		return err
	}
	if delay <= 0 {
		p.enqueue(m)
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx.Err() != nil {
		return nil // closing: the next process's scan runs it
	}
	var t *time.Timer
	t = time.AfterFunc(delay, func() {
		p.mu.Lock()
		delete(p.timers, t)
		p.mu.Unlock()
		p.enqueue(m)
	})
	p.timers[t] = true
	return nil
}

// indexTask writes m's entry in the pool's index, due at m.At (0: at once).
func indexTask(ctx context.Context, s store.Store, m Message, entry []byte) error {
	rec, err := s.Create(ctx, indexKey(m), entry, store.Never)
	switch {
	case errors.Is(err, store.ErrExists):
		if old, _, derr := decodeIndexEntry(rec.Value); derr != nil || old.At != m.At {
			// A conflict means another dispatch wrote the entry meanwhile: the scan reads the task.
			if _, err := s.Update(ctx, indexKey(m), rec.Version, entry, store.Never); err != nil && !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
	case err != nil:
		return err
	}
	return nil
}

// enqueue queues m unless its task is queued here already; a task running here is queued again
// when its delivery ends (an answer may arrive while the delivery that waited for it finishes). A
// full queue drops m: the scan finds the task later.
func (p *Pool) enqueue(m Message) {
	key := m.Key()
	p.mu.Lock()
	if p.queued[key] > 0 || p.ctx.Err() != nil {
		if p.queued[key] == 1 {
			p.queued[key] = 2
		}
		p.mu.Unlock()
		return
	}
	p.queued[key] = 1
	p.mu.Unlock()
	select {
	case p.queue <- m:
	default:
		p.mu.Lock()
		delete(p.queued, key)
		p.mu.Unlock()
	}
}

func (p *Pool) attach(s *Service) {
	p.svc = s
	s.instance = p.identity
	p.queue = make(chan Message, 1024)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	for range p.workers {
		p.wg.Add(1)
		go p.work()
	}
	p.wg.Add(1)
	go p.scanLoop()
}

func (p *Pool) work() {
	defer p.wg.Done()
	for {
		select {
		case <-p.ctx.Done():
			return
		case m := <-p.queue:
			ctx, d := p.traces.take(p.ctx, m.Key(), p.svc.tel), Delivery{}
			cancel := context.CancelFunc(func() {})
			p.mu.Lock()
			exclusive, orphan := p.orphans[m.Key()]
			d.takeOver, d.takeOverOwn = orphan && exclusive, orphan && !exclusive
			delete(p.orphans, m.Key())
			p.mu.Unlock()
			if p.slice > 0 {
				d.Deadline = p.svc.now().Add(p.slice)
			}
			if err := p.svc.Deliver(ctx, m, d); err != nil && !errors.Is(err, ErrBusy) && ctx.Err() == nil {
				p.svc.log.Warn("background delivery failed: the pool's scan delivers the task again", "agent_slug", m.Agent, "job_id", m.Job, "error", err)
			}
			cancel()
			p.mu.Lock()
			again := p.queued[m.Key()] == 2
			delete(p.queued, m.Key())
			p.mu.Unlock()
			if again {
				p.enqueue(m)
			}
		}
	}
}

func (p *Pool) scanLoop() {
	defer p.wg.Done()
	var tick <-chan time.Time
	// The first scan takes over at once the tasks an ended process held: any on a store no other
	// process can have open, those of this instance's name (Identity) on any store.
	first := true
	for {
		if err := p.scan(p.ctx, first); err != nil && p.ctx.Err() == nil {
			p.svc.log.Warn("background task scan failed", "error", err)
		}
		if p.every <= 0 {
			return
		}
		first = false
		tick = p.svc.cfg.After(p.every)
		select {
		case <-p.ctx.Done():
			return
		case <-tick:
		}
	}
}

// Scan looks once through the index for tasks nobody runs and queues them; it drops the index
// entries of tasks that finished or wait for an answer.
func (p *Pool) Scan(ctx context.Context) error { return p.scan(ctx, false) }

func (p *Pool) scan(ctx context.Context, first bool) error {
	ex, _ := p.svc.cfg.Store.(store.Exclusive)
	exclusive := first && ex != nil && ex.Exclusive()
	lister, ok := p.svc.cfg.Store.(store.Lister)
	if !ok {
		return errors.New("jobs: the store cannot list records, so the pool cannot take over the tasks of a process that died")
	}
	prefix := keyPrefix + "p/"
	after := ""
	for {
		page, err := lister.List(ctx, prefix, after, 100)
		if err != nil {
			return err
		}
		for _, it := range page.Items {
			m, tc, err := decodeIndexEntry(it.Value)
			if err != nil {
				continue
			}
			now := p.svc.now()
			if m.At > 0 && now.Before(time.UnixMilli(m.At)) {
				continue // a delayed message not due yet (its timer runs in the process that set it)
			}
			r, _, err := p.svc.load(ctx, m.Key())
			own := first && r != nil && p.svc.own(r.Holder, Delivery{takeOverOwn: true})
			switch {
			case errors.Is(err, store.ErrNotFound) || (err == nil && (terminal(r.Status) || r.Status == taskAwaiting && now.Before(r.Deadline))):
				_ = p.svc.cfg.Store.Delete(ctx, it.Key, it.Version)
			case err != nil:
				return err
			case r.Holder != "" && now.Before(r.LeaseUntil.Add(SkewMargin)) && !exclusive && !own:
			case r.NotBefore.After(now) && (r.Wait == nil || r.Wait.Reason != waitLimit):
			case r.Holder != "" && (exclusive || own):
				p.mu.Lock()
				p.orphans[m.Key()] = exclusive
				p.mu.Unlock()
				p.traces.keep(m.Key(), tc, false)
				p.enqueue(m)
			default:
				m.At = 0
				if !r.NotBefore.IsZero() {
					m.At = r.NotBefore.UnixMilli()
				}
				p.traces.keep(m.Key(), tc, false)
				p.enqueue(m)
			}
		}
		if page.Next == "" {
			return nil
		}
		after = page.Next
	}
}

func (p *Pool) close() {
	if p.cancel == nil {
		return
	}
	p.mu.Lock()
	p.cancel()
	for t := range p.timers {
		t.Stop()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
