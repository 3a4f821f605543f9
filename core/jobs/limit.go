package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/supervaize/svz/core/store"
)

// Limit bounds background work across every instance of the controller, through the store: at
// most MaxRunning units running at once, and at most Rate units started per period, per key: the
// workspace by default (each workspace its own allowance), or one key for all of the agent's
// workspaces (Shared: e.g. a provider account's quota). A unit is a job while a delivery runs it
// (Limited, on Define), or a step or fan-out item while it runs (Under). Work over a limit waits
// its turn, shown in job.sync, and never fails for it: a job waits without running (the unit
// that frees a slot hands it to the next waiting job, in turns between workspaces), a step or an
// item waits in its delivery when its turn is near, else hands the task on to a later delivery.
// A slot is held under a lease renewed with the task's, so a crashed holder's slot frees itself.
type Limit struct {
	name    string
	running int
	rate    int
	per     time.Duration
	shared  bool
}

// LimitOption configures a Limit.
type LimitOption func(*Limit)

// MaxRunning allows at most n units running at once per key.
func MaxRunning(n int) LimitOption { return func(l *Limit) { l.running = n } }

// Rate allows at most n units started per period, per key (a token bucket: up to n at once after
// a quiet period, then one every per/n).
func Rate(n int, per time.Duration) LimitOption {
	return func(l *Limit) { l.rate, l.per = n, per }
}

// Shared keys the limit on the agent alone, one allowance for all workspaces, instead of one per
// workspace.
func Shared() LimitOption { return func(l *Limit) { l.shared = true } }

// NewLimit returns the limit name (stable: instances share a limit by name) with its bounds.
func NewLimit(name string, opts ...LimitOption) *Limit {
	l := &Limit{name: name}
	for _, o := range opts {
		o(l)
	}
	return l
}

func (l *Limit) check() error {
	switch {
	case l == nil:
		return errors.New("jobs: a nil limit")
	case strings.TrimSpace(l.name) == "" || len(l.name) > maxNameLen:
		return fmt.Errorf("jobs: a limit name is 1 to %d characters, got %q", maxNameLen, l.name)
	case l.running < 0 || l.rate < 0 || l.running == 0 && l.rate == 0:
		return fmt.Errorf("jobs: limit %q needs MaxRunning(n) or Rate(n, per) with n at least 1", l.name)
	case l.rate > 0 && l.per <= 0:
		return fmt.Errorf("jobs: limit %q: the period of Rate must be positive", l.name)
	}
	return nil
}

// Limited holds a slot of each limit for every job of the work while a delivery runs it.
func Limited(limits ...*Limit) Option {
	return func(s *settings) { s.limits = append(s.limits, limits...) }
}

// Under holds a slot of each limit while the step (each item of a Map) runs.
func Under(limits ...*Limit) StepOption {
	return func(o *stepOpts) { o.limits = append(o.limits, limits...) }
}

const (
	// limitWaitInDelivery: a step or item whose turn comes sooner waits in its delivery; a later
	// one hands the task on.
	limitWaitInDelivery = 30 * time.Second
	// limitPoll is how often a unit waiting for a slot of unknown release looks again.
	limitPoll = time.Second
	// maxWaiters bounds the jobs a limit record keeps in line; the others look again later.
	maxWaiters = 500
)

// limitRecord is the state of a limit for one key.
type limitRecord struct {
	Slots   []limitSlot `json:"slots,omitempty"`
	Tokens  float64     `json:"tokens"`
	Filled  time.Time   `json:"filled,omitzero"`
	Waiters []Message   `json:"waiters,omitempty"`
	// Served is the workspace of the last job a slot was handed to: the next goes to another.
	Served string `json:"served,omitempty"`
}

type limitSlot struct {
	Holder    string    `json:"holder"`
	Workspace string    `json:"workspace,omitempty"`
	Until     time.Time `json:"until"`
}

func (l *Limit) key(agent, workspace string) string {
	scope := url.PathEscape(workspace)
	if l.shared {
		scope = "~shared"
	}
	return TaskKeyPrefix + "~l/" + url.PathEscape(agent) + "/" + url.PathEscape(l.name) + "/" + scope
}

// reservedFor is the holder of a slot handed to a waiting job, until its delivery takes it.
func reservedFor(m Message) string { return "job:" + m.Key() }

// take tries to take a slot (and a token) of l for holder: ok, or how long until a token comes
// (0 when a slot must free itself first). A waiting job (m non-nil) gets in line.
func (s *Service) take(ctx context.Context, l *Limit, agent, workspace, holder string, m *Message) (ok bool, retryIn time.Duration, err error) {
	key := l.key(agent, workspace)
	for range maxWriteRounds {
		// Each round decides afresh: a round whose write conflicted must not leave its grant to a
		// round that found the limit full (the job would run without a slot).
		ok, retryIn = false, 0
		var rec limitRecord
		var version uint64
		got, err := s.cfg.Store.Get(ctx, key)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return false, 0, fmt.Errorf("jobs: read limit %q: %w", l.name, err)
		default:
			if err := decodeJSON(got.Value, &rec); err != nil {
				return false, 0, fmt.Errorf("jobs: limit record %s is unreadable: %w", key, err)
			}
			version = got.Version
		}
		now := s.now()
		rec.expire(now)
		if l.rate > 0 {
			rec.refill(l, now)
		}
		mine := -1
		for i, sl := range rec.Slots {
			if sl.Holder == holder || m != nil && sl.Holder == reservedFor(*m) {
				mine = i
			}
		}
		full := l.running > 0 && mine < 0 && len(rec.Slots) >= l.running
		noToken := l.rate > 0 && rec.Tokens < 1
		// A job does not pass the jobs in line before it: only the one whose turn it is takes
		// a free slot (a slot handed to a job is reserved for it: mine).
		passing := m != nil && mine < 0 && len(rec.Waiters) > 0 && rec.Waiters[rec.nextWaiter()].Key() != m.Key()
		inLine := m != nil && slices.ContainsFunc(rec.Waiters, func(w Message) bool { return w.Key() == m.Key() })
		switch {
		case !full && !noToken && !passing:
			if l.running > 0 {
				sl := limitSlot{Holder: holder, Workspace: workspace, Until: now.Add(s.cfg.Lease)}
				if mine >= 0 {
					rec.Slots[mine] = sl
				} else {
					rec.Slots = append(rec.Slots, sl)
				}
			}
			if l.rate > 0 {
				rec.Tokens--
			}
			if inLine {
				rec.Waiters = slices.DeleteFunc(rec.Waiters, func(w Message) bool { return w.Key() == m.Key() })
				rec.Served = workspace
			}
			ok = true
		case noToken && !full && !passing:
			retryIn = time.Duration((1 - rec.Tokens) * float64(l.per) / float64(l.rate))
			return false, max(retryIn, time.Millisecond), nil
		case m != nil && !inLine && len(rec.Waiters) < maxWaiters:
			rec.Waiters = append(rec.Waiters, *m) // in line: a freed slot is handed to it
		default:
			return false, 0, nil
		}
		if werr := s.writeLimit(ctx, key, version, &rec); errors.Is(werr, store.ErrConflict) || errors.Is(werr, store.ErrExists) || errors.Is(werr, store.ErrNotFound) {
			continue
		} else if werr != nil {
			return false, 0, fmt.Errorf("jobs: write limit %q: %w", l.name, werr)
		}
		return ok, retryIn, nil
	}
	return false, 0, fmt.Errorf("jobs: limit %q keeps changing under concurrent writes", l.name)
}

// release frees holder's slot of l and hands it to the next job in line, whose message it
// returns (nil when none waits).
func (s *Service) release(ctx context.Context, l *Limit, agent, workspace, holder string) (*Message, error) {
	if l.running == 0 {
		return nil, nil // a rate alone holds no slot
	}
	key := l.key(agent, workspace)
	for range maxWriteRounds {
		got, err := s.cfg.Store.Get(ctx, key)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("jobs: read limit %q: %w", l.name, err)
		}
		var rec limitRecord
		if err := decodeJSON(got.Value, &rec); err != nil {
			return nil, fmt.Errorf("jobs: limit record %s is unreadable: %w", key, err)
		}
		now := s.now()
		rec.expire(now)
		n := len(rec.Slots)
		rec.Slots = slices.DeleteFunc(rec.Slots, func(sl limitSlot) bool { return sl.Holder == holder })
		var next *Message
		if len(rec.Slots) < l.running {
			if i := rec.nextWaiter(); i >= 0 {
				w := rec.Waiters[i]
				next = &w
				rec.Waiters = slices.Delete(rec.Waiters, i, i+1)
				rec.Slots = append(rec.Slots, limitSlot{Holder: reservedFor(w), Workspace: w.Workspace, Until: now.Add(s.cfg.Lease + SkewMargin)})
				rec.Served = w.Workspace
			}
		}
		if len(rec.Slots) == n && next == nil {
			return nil, nil // not held (expired and taken, or released already)
		}
		if werr := s.writeLimit(ctx, key, got.Version, &rec); errors.Is(werr, store.ErrConflict) || errors.Is(werr, store.ErrNotFound) {
			continue
		} else if werr != nil {
			return nil, fmt.Errorf("jobs: write limit %q: %w", l.name, werr)
		}
		return next, nil
	}
	return nil, fmt.Errorf("jobs: limit %q keeps changing under concurrent writes", l.name)
}

// renewSlot extends holder's slot of l (a unit that runs longer than the lease).
func (s *Service) renewSlot(ctx context.Context, l *Limit, agent, workspace, holder string) error {
	if l.running == 0 {
		return nil
	}
	key := l.key(agent, workspace)
	for range maxWriteRounds {
		got, err := s.cfg.Store.Get(ctx, key)
		if err != nil {
			return err
		}
		var rec limitRecord
		if err := decodeJSON(got.Value, &rec); err != nil {
			return err
		}
		i := slices.IndexFunc(rec.Slots, func(sl limitSlot) bool { return sl.Holder == holder })
		if i < 0 {
			return nil
		}
		rec.Slots[i].Until = s.now().Add(s.cfg.Lease)
		if werr := s.writeLimit(ctx, key, got.Version, &rec); errors.Is(werr, store.ErrConflict) {
			continue
		} else if werr != nil {
			return werr
		}
		return nil
	}
	return errors.New("jobs: a limit record keeps changing under concurrent writes")
}

func (s *Service) writeLimit(ctx context.Context, key string, version uint64, rec *limitRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if version == 0 {
		_, err = s.cfg.Store.Create(ctx, key, b, store.Never)
		return err
	}
	_, err = s.cfg.Store.Update(ctx, key, version, b, store.Never)
	return err
}

// expire drops the slots whose holder stopped renewing them.
func (r *limitRecord) expire(now time.Time) {
	r.Slots = slices.DeleteFunc(r.Slots, func(sl limitSlot) bool { return !now.Before(sl.Until.Add(SkewMargin)) })
}

// refill adds the tokens the time since the last refill brought, up to the rate.
func (r *limitRecord) refill(l *Limit, now time.Time) {
	if r.Filled.IsZero() {
		r.Tokens, r.Filled = float64(l.rate), now
		return
	}
	if el := now.Sub(r.Filled); el > 0 {
		r.Tokens = min(float64(l.rate), r.Tokens+float64(el)*float64(l.rate)/float64(l.per))
		r.Filled = now
	}
}

// nextWaiter picks the job whose turn it is: the oldest of the first workspace after the one
// served last (in order of first appearance in line), so that no workspace starves the others.
func (r *limitRecord) nextWaiter() int {
	if len(r.Waiters) == 0 {
		return -1
	}
	var order []string
	first := map[string]int{}
	for i, w := range r.Waiters {
		if _, ok := first[w.Workspace]; !ok {
			first[w.Workspace] = i
			order = append(order, w.Workspace)
		}
	}
	slices.Sort(order)
	for _, ws := range order {
		if ws > r.Served {
			return first[ws]
		}
	}
	return first[order[0]]
}

// heldSlot is a slot this delivery holds.
type heldSlot struct {
	limit  *Limit
	holder string
}

// acquire takes a slot and a token of each limit for unit name, waiting in the delivery for a
// turn that comes soon, else handing the task on (errHalted).
func (t *task) acquire(ctx context.Context, unit string, limits []*Limit) error {
	if len(limits) == 0 {
		return nil
	}
	s := t.svc
	holder := t.holder + "/" + unit
	for i, l := range limits {
		if err := l.check(); err != nil {
			t.releaseN(ctx, limits[:i], holder)
			return Permanent(err)
		}
		waited := time.Duration(0)
		for {
			ok, retryIn, err := s.take(ctx, l, t.msg.Agent, t.msg.Workspace, holder, nil)
			if err != nil {
				t.releaseN(ctx, limits[:i], holder)
				return t.storeFailed(err)
			}
			if ok {
				t.hold(l, holder)
				break
			}
			d := retryIn
			if d <= 0 {
				d = limitPoll
			}
			if waited+d >= limitWaitInDelivery || t.boundary(ctx) {
				t.releaseN(ctx, limits[:i], holder)
				t.handOn(d, &waitRecord{Reason: waitLimit, Step: unit, Limit: l.name, Until: s.now().Add(d)})
				return errHalted
			}
			select {
			case <-ctx.Done():
				t.releaseN(ctx, limits[:i], holder)
				t.ended(ctx, ctx.Err())
				return errHalted
			case <-s.cfg.After(d):
				waited += d
			}
		}
	}
	return nil
}

// releaseLimits frees the slots unit name holds.
func (t *task) releaseLimits(ctx context.Context, unit string, limits []*Limit) {
	t.releaseN(ctx, limits, t.holder+"/"+unit)
}

func (t *task) releaseN(ctx context.Context, limits []*Limit, holder string) {
	for _, l := range limits {
		t.unhold(l, holder)
		next, err := t.svc.release(context.WithoutCancel(ctx), l, t.msg.Agent, t.msg.Workspace, holder)
		if err != nil {
			t.log.WarnContext(ctx, "a limit's slot was not released: it frees itself after the lease", "limit", l.name, "error", err)
		}
		t.svc.handTurn(ctx, next)
	}
}

// handTurn dispatches the job a freed slot was handed to.
func (s *Service) handTurn(ctx context.Context, next *Message) {
	if next == nil {
		return
	}
	if err := s.dispatch(context.WithoutCancel(ctx), *next, 0); err != nil {
		s.log.WarnContext(ctx, "the job whose turn came under a limit was not dispatched: it looks again later", "job_id", next.Job, "error", err)
	}
}

func (t *task) hold(l *Limit, holder string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.held = append(t.held, heldSlot{l, holder})
}

func (t *task) unhold(l *Limit, holder string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.held = slices.DeleteFunc(t.held, func(h heldSlot) bool { return h.limit == l && h.holder == holder })
}

// renewHeld extends the slots this delivery holds (with its lease).
func (t *task) renewHeld(ctx context.Context) {
	t.mu.Lock()
	held := slices.Clone(t.held)
	t.mu.Unlock()
	for _, h := range held {
		if err := t.svc.renewSlot(ctx, h.limit, t.msg.Agent, t.msg.Workspace, h.holder); err != nil && ctx.Err() == nil {
			t.log.WarnContext(ctx, "a limit's slot was not renewed: retrying at the next tick", "limit", h.limit.name, "error", err)
		}
	}
}

// acquireJob takes a slot of each of the work's limits (Limited) for the job this delivery runs:
// false when one is full, the task then handed back to wait for its turn (a freed slot is handed
// to it, or it looks again later).
func (t *task) acquireJob(ctx context.Context) (bool, error) {
	lims := t.settings.limits
	if len(lims) == 0 {
		return true, nil
	}
	s := t.svc
	holder := t.holder + "/job"
	m := t.msg
	m.At, m.Attempt = 0, 0
	for i, l := range lims {
		ok, retryIn, err := s.take(ctx, l, t.msg.Agent, t.msg.Workspace, holder, &m)
		if err == nil && ok {
			t.hold(l, holder)
			continue
		}
		t.releaseN(ctx, lims[:i], holder)
		d := retryIn
		if d <= 0 {
			d = 2 * (s.cfg.Lease + SkewMargin) // a slot is handed on when freed; this looks again if that was lost
		}
		until := s.now().Add(d)
		werr := t.durableWrite(ctx, func(r *record) bool {
			r.Holder, r.LeaseUntil = "", time.Time{}
			r.NotBefore, r.Wait = until, &waitRecord{Reason: waitLimit, Limit: l.name, Until: until}
			return true
		})
		switch {
		case err != nil:
			return false, fmt.Errorf("jobs: take a slot of limit %q for job %q: %w", l.name, t.msg.Job, err)
		case werr != nil && !errors.Is(werr, errLeaseNow):
			return false, fmt.Errorf("jobs: record that job %q waits for limit %q: %w", t.msg.Job, l.name, werr)
		case werr != nil:
			return false, nil
		}
		next := t.msg
		next.Attempt++
		next.At = until.UnixMilli()
		if s.handed(ctx, l, t.msg.Agent, t.msg.Workspace, m) {
			// A slot was handed to this job while it got in line: the delivery of that hand-over
			// found the task still held here (busy), so this one dispatches it, at once.
			d = 0
		}
		return false, s.dispatch(context.WithoutCancel(ctx), next, d)
	}
	return true, nil
}

// handed reports whether a slot of l is reserved for the job of m (handed to it, not taken yet).
// A failed read says no: the job looks again later.
func (s *Service) handed(ctx context.Context, l *Limit, agent, workspace string, m Message) bool {
	got, err := s.cfg.Store.Get(ctx, l.key(agent, workspace))
	if err != nil {
		return false
	}
	var rec limitRecord
	if decodeJSON(got.Value, &rec) != nil {
		return false
	}
	return slices.ContainsFunc(rec.Slots, func(sl limitSlot) bool { return sl.Holder == reservedFor(m) })
}

// releaseJob frees the slots the job holds for this delivery (acquireJob).
func (t *task) releaseJob(ctx context.Context) {
	holder := t.holder + "/job"
	var lims []*Limit
	t.mu.Lock()
	for _, h := range t.held {
		if h.holder == holder {
			lims = append(lims, h.limit)
		}
	}
	t.mu.Unlock()
	t.releaseN(ctx, lims, holder)
}
