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

// Pool is the Dispatcher of a plain server and local mode: deliveries run in this process, on a
// few goroutines, and a store index of the tasks not finished lets any process on the same store
// take over the tasks of one that died, once their lease lapsed (by its periodic scan, and at
// start). Give it to the controller (core.Config.Jobs); the controller's Close stops it.
type Pool struct {
	workers int
	every   time.Duration
	slice   time.Duration

	svc    *Service
	queue  chan Message
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	queued map[string]int // task key → queued or running here (1), and to queue again when done (2)
	// orphans: tasks the first scan of an exclusive store found held by an ended process.
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
// dies) and queues it, after delay.
func (p *Pool) Dispatch(ctx context.Context, m Message, delay time.Duration) error {
	if p.svc == nil {
		return errors.New("jobs: the pool is not attached to a controller")
	}
	if _, err := p.svc.cfg.Store.Create(ctx, indexKey(m), p.svc.tel.indexEntry(ctx, m), store.Never); err != nil && !errors.Is(err, store.ErrExists) {
		return err
	}
	p.traces.keep(m.Key(), p.svc.tel.p.Inject(ctx), true)
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
			d.takeOver = p.orphans[m.Key()]
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
	// The first scan of a store no other process can have open takes over the tasks a previous
	// process held at once: that process has ended.
	ex, _ := p.svc.cfg.Store.(store.Exclusive)
	takeOver := ex != nil && ex.Exclusive()
	for {
		if err := p.scan(p.ctx, takeOver); err != nil && p.ctx.Err() == nil {
			p.svc.log.Warn("background task scan failed", "error", err)
		}
		if p.every <= 0 {
			return
		}
		takeOver = false
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

func (p *Pool) scan(ctx context.Context, takeOver bool) error {
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
			r, _, err := p.svc.load(ctx, m.Key())
			now := p.svc.now()
			switch {
			case errors.Is(err, store.ErrNotFound) || (err == nil && (terminal(r.Status) || r.Status == taskAwaiting)):
				_ = p.svc.cfg.Store.Delete(ctx, it.Key, it.Version)
			case err != nil:
				return err
			case r.Holder != "" && now.Before(r.LeaseUntil.Add(SkewMargin)) && !takeOver:
			case r.NotBefore.After(now):
			case r.Holder != "" && takeOver:
				p.mu.Lock()
				p.orphans[m.Key()] = true
				p.mu.Unlock()
				p.traces.keep(m.Key(), tc, false)
				p.enqueue(m)
			default:
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
