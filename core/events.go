package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/idempotency"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
)

// SSE event names of the effect stream (spec §2.8, plus EventLost).
const (
	EventConnected = "supervaizer.connected"
	EventEffect    = "supervaizer.effect"
	EventHeartbeat = "supervaizer.heartbeat"
	// EventLost tells a client that resumed with Last-Event-ID that events after it are gone
	// (older than the retention, or its id belongs to another log); the stream goes on from the
	// oldest event kept.
	EventLost = "supervaizer.events_lost"
)

// The effect stream is a property of the controller, not of an instance. Every dispatched
// action appends its supervaizer.effect event to a log in the store (store.Log), named after
// the server id, before its result is answered; GET /a2a/events on any instance replays the log
// after Last-Event-ID, then follows it. Event ids are "<epoch>-<position>": positions order the
// events of all instances, and the epoch names the log, so an id of another log (a restarted
// memory store, another controller) is recognized, never misread.
//
// Each instance runs at most one follower (while it has streams): it waits on the log
// (store.Log.WaitLog: a notification, a blocking read or a short poll, by backend) and keeps the
// newest events in memory, so its streams share one read per event. A stream that falls behind
// that buffer reads the store itself, within its catch-up budget. Appending never waits for a
// stream.

// Defaults of the effect log and stream settings.
const (
	DefaultEventRetention      = 24 * time.Hour
	DefaultEventRetentionCount = 10000
	// DefaultEventRetentionBytes bounds the effect log's data: the bolt file, the RAM of the
	// memory store and the other stores' space stay within it whatever the events hold.
	DefaultEventRetentionBytes = 32 << 20
	// DefaultEventMaxBytes bounds one event: a larger one is recorded truncated.
	DefaultEventMaxBytes   = 64 << 10
	DefaultMaxEventStreams = 100
	DefaultEventCatchUp    = 1000
)

// appendTimeout bounds the append of an effect event: the action already ran, and its answer
// must not wait long for a store that does not respond.
const appendTimeout = 10 * time.Second

// sseEvent is one server-sent event.
type sseEvent struct {
	id   string
	name string
	data []byte
}

// writeTo writes e in one piece when small; a large event's data is written as is, never copied
// (a stream blocked on a client that does not read holds no copy of it). An event without a name
// is an id alone: it moves the client's last event id without dispatching anything (the
// EventSource processing model sets the last event id even when the data is empty).
func (e sseEvent) writeTo(w io.Writer) error {
	const small = 4 << 10
	b := make([]byte, 0, len(e.id)+len(e.name)+24+min(len(e.data), small))
	if e.id != "" {
		b = append(b, "id: "...)
		b = append(b, e.id...)
		b = append(b, '\n')
	}
	if e.name == "" {
		b = append(b, '\n')
		_, err := w.Write(b)
		return err
	}
	b = append(b, "event: "...)
	b = append(b, e.name...)
	b = append(b, "\ndata: "...)
	if len(e.data) <= small {
		b = append(b, e.data...) // compact JSON: never a newline
		b = append(b, "\n\n"...)
		_, err := w.Write(b)
		return err
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	if _, err := w.Write(e.data); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n\n")
	return err
}

// position is a place in the effect log: every event up to seq of the log epoch was seen. The
// zero position is the beginning of any log.
type position struct {
	epoch string
	seq   uint64
}

// id is the SSE id of p: "<epoch>-<seq>", "0-0" for the beginning.
func (p position) id() string {
	if p.epoch == "" {
		return "0-" + strconv.FormatUint(p.seq, 10)
	}
	return p.epoch + "-" + strconv.FormatUint(p.seq, 10)
}

// errBadEventID is the answer to a Last-Event-ID that no controller of svz sent.
var errBadEventID = errors.New(`the Last-Event-ID header is not an id of this stream (expected "<epoch>-<position>"): reconnect without it, or with the id of the last event received`)

// parsePosition reads a Last-Event-ID. "0-0" is the beginning; an unknown epoch is kept, to be
// recognized as foreign.
func parsePosition(id string) (position, error) {
	epoch, seq, ok := strings.Cut(strings.TrimSpace(id), "-")
	if !ok || epoch == "" || len(epoch) > 64 || seq == "" || len(seq) > 20 {
		return position{}, errBadEventID
	}
	for _, c := range []byte(epoch) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && c != '_' {
			return position{}, errBadEventID
		}
	}
	n, err := strconv.ParseUint(seq, 10, 64)
	if err != nil || (len(seq) > 1 && seq[0] == '0') {
		return position{}, errBadEventID
	}
	if epoch == "0" && n == 0 {
		return position{}, nil
	}
	return position{epoch: epoch, seq: n}, nil
}

func connectedEvent(id string) sseEvent {
	return sseEvent{id: id, name: EventConnected, data: []byte(`{"status":"connected"}`)}
}

func heartbeatEvent() sseEvent {
	return sseEvent{name: EventHeartbeat, data: []byte(`{"status":"ok"}`)}
}

// Reasons of EventLost.
const (
	lostExpired = "expired" // older than the retention
	lostUnknown = "unknown" // another log's id: a reset store, another controller, a restarted instance
)

func lostEvent(asked string, resume position, reason string) sseEvent {
	data, _ := json.Marshal(struct {
		Status       string `json:"status"`
		Reason       string `json:"reason"`
		LastEventID  string `json:"last_event_id"`
		ResumedAfter string `json:"resumed_after"`
	}{"events_lost", reason, asked, resume.id()})
	return sseEvent{id: resume.id(), name: EventLost, data: data}
}

// effectEvent is the event of the log entry e and the workspace it names (see splitEntry); ok is
// false for an entry no stream is sent.
func effectEvent(epoch string, e store.LogEntry) (ev sseEvent, workspace []byte, ok bool) {
	workspace, data, ok := splitEntry(e.Data)
	return sseEvent{id: position{epoch, e.Seq}.id(), name: EventEffect, data: data}, workspace, ok
}

// effectLog is a controller's effect log and the follower shared by its streams.
type effectLog struct {
	log       store.Log
	inProcess bool // log is a memory store
	name      string
	keep      store.Retention
	maxBytes  int64 // of one event: a larger one is truncated
	buffer    int
	closing   <-chan struct{}
	logger    *slog.Logger

	streams atomic.Int64 // open GET /a2a/events requests

	// Memory bounds (eventbudget.go): the catch-up pages of all streams share replay; a stream
	// reads pageBytes at a time, sized with the largest event seen (maxEvent); recent holds at
	// most bufferBytes; a write blocks at most writeTimeout.
	replay       *byteBudget
	pageBytes    int64
	bufferBytes  int64
	writeTimeout time.Duration
	maxEvent     atomic.Int64

	mu        sync.Mutex
	ready     bool   // the follower has a position
	epoch     string // of the follower's position
	from, to  uint64 // recent holds every event in (from, to]
	recent    []store.LogEntry
	recentLen int64         // bytes of recent's data
	changed   chan struct{} // closed and replaced when recent, epoch or ready change
	followers int
	stop      context.CancelFunc
}

// newEffectLog returns the effect log of the controller cfg describes: in cfg.Store when it
// keeps logs, else in this process only.
func newEffectLog(cfg Config, logger *slog.Logger, closing <-chan struct{}) *effectLog {
	l, ok := cfg.Store.(store.Log)
	if !ok {
		if cfg.Store != nil {
			logger.Warn("the store keeps no logs (store.Log): effect events reach only the streams of this instance", "store", fmt.Sprintf("%T", cfg.Store))
		}
		l = memory.New()
	}
	name := "effects"
	if cfg.ServerID != "" {
		name += "/" + cfg.ServerID
	}
	_, inProcess := l.(*memory.Store)
	return &effectLog{
		log:       l,
		inProcess: inProcess,
		name:      name,
		keep:      store.Retention{MaxAge: cfg.EventRetention, MaxCount: cfg.EventRetentionCount, MaxBytes: cfg.EventRetentionBytes},
		maxBytes:  cfg.EventMaxBytes,
		buffer:    cfg.EventBuffer,
		closing:   closing,
		logger:    logger,
		changed:   make(chan struct{}),

		replay:       newByteBudget(cfg.EventReplayBytes),
		pageBytes:    cfg.EventPageBytes,
		bufferBytes:  cfg.EventBufferBytes,
		writeTimeout: cfg.EventWriteTimeout,
	}
}

// noteSize records the size of an event read or appended.
func (e *effectLog) noteSize(n int) {
	for m := e.maxEvent.Load(); int64(n) > m && !e.maxEvent.CompareAndSwap(m, int64(n)); m = e.maxEvent.Load() {
	}
}

// pageLimit is how many events fit pageBytes, given the largest event seen (one when none was:
// the first read learns the size), within max.
func (e *effectLog) pageLimit(bytes int64, most int) int {
	m := e.maxEvent.Load()
	if m <= 0 {
		return min(most, 1)
	}
	return int(min(int64(most), max(1, bytes/m)))
}

// appendEffects appends the effect event of a dispatched action, with the verified workspace it
// ran in ("" for none: a bootstrap action). The action ran: a failure is logged, and the caller
// answers the result anyway (failing it would invite a retry that runs the action again). ctx's
// cancellation (a client gone) does not stop the append.
func (e *effectLog) appendEffects(ctx context.Context, req *contract.ActionRequest, workspace string, effects []contract.Effect) {
	data, err := e.encode(ctx, req, workspace, effects)
	e.noteSize(len(data))
	switch {
	case err != nil:
	case e.inProcess:
		// The memory store neither waits nor fails on a canceled context: no context to build
		// (four allocations per action).
		_, err = e.log.AppendLog(context.Background(), e.name, data, e.keep)
	default:
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), appendTimeout)
		_, err = e.log.AppendLog(actx, e.name, data, e.keep)
		cancel()
	}
	if err != nil {
		e.logger.ErrorContext(ctx, "effect event not recorded: GET /a2a/events will not show it (the action ran and its result is answered)",
			"agent_slug", req.AgentSlug, "action", req.Action, "request_id", req.RequestID, "error", err)
	}
}

// gateEvent is the effect event of req for a gate that appends it with the run's record.
func (e *effectLog) gateEvent(ctx context.Context, req *contract.ActionRequest) idempotency.Event {
	return idempotency.Event{Log: e.log, Name: e.name, Keep: e.keep, Data: func(res *contract.ActionResult) ([]byte, error) {
		return e.encode(ctx, req, verifiedWorkspace(req), res.Effects)
	}}
}

// encode encodes the event of effects within the event size limit, saying when it was truncated.
func (e *effectLog) encode(ctx context.Context, req *contract.ActionRequest, workspace string, effects []contract.Effect) ([]byte, error) {
	data, t, err := encodeEffectEvent(req, workspace, effects, e.maxBytes)
	if t != nil {
		e.logger.WarnContext(ctx, "effect event truncated: larger than SUPERVAIZER_EVENT_MAX_BYTES, its effects keep their type, ids, status and count (the action's result has the rest)",
			"agent_slug", req.AgentSlug, "action", req.Action, "request_id", req.RequestID,
			"event_bytes", t.bytes, "max_bytes", e.maxBytes, "effects", t.effects, "effects_kept", t.kept)
	}
	return data, err
}

// verifiedWorkspace is the workspace req's grant was verified for, "" when it has none.
func verifiedWorkspace(req *contract.ActionRequest) string {
	if req.WorkspaceAuthorization == nil {
		return ""
	}
	return req.WorkspaceAuthorization.WorkspaceID
}

// follow registers a stream with the follower, starting it if needed; the returned func
// unregisters it.
func (e *effectLog) follow() func() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.followers++
	if e.stop == nil {
		ctx, stop := context.WithCancel(context.Background())
		e.stop = stop
		go func() {
			select {
			case <-e.closing:
				stop()
			case <-ctx.Done():
			}
		}()
		go e.run(ctx)
	}
	return func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.followers--; e.followers == 0 {
			e.stop()
			e.stop = nil
			e.ready, e.recent, e.recentLen = false, nil, 0
			e.broadcast()
		}
	}
}

// broadcast wakes the streams. The caller holds mu.
func (e *effectLog) broadcast() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// run is the follower: it waits on the log and keeps its newest events in recent.
func (e *effectLog) run(ctx context.Context) {
	var (
		at      position
		started bool
		pause   time.Duration
	)
	for ctx.Err() == nil {
		if started {
			if pause > 0 {
				if !sleep(ctx, pause) {
					return
				}
			} else if err := e.log.WaitLog(ctx, e.name, at.seq); err != nil {
				if ctx.Err() != nil {
					return
				}
				e.logger.Warn("effect stream: waiting on the log failed; retrying", "error", err)
				pause = time.Second
				continue
			}
		}
		limit := e.pageLimit(e.bufferBytes, e.buffer)
		if !started {
			limit = 0 // start from the newest position
		}
		r, err := e.log.ReadLog(ctx, e.name, at.seq, limit)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			e.logger.Warn("effect stream: reading the log failed; retrying", "error", err)
			pause = min(max(2*pause, 100*time.Millisecond), 5*time.Second)
			continue
		}
		e.mu.Lock()
		switch {
		case !started || r.Epoch != at.epoch:
			// The first read, or a new log (the store was reset): start at its newest position.
			// Streams notice the new epoch and tell their clients.
			at = position{r.Epoch, r.Last}
			if started {
				at.seq = 0
			}
			e.epoch, e.from, e.to, e.recent, e.recentLen, e.ready = at.epoch, at.seq, at.seq, nil, 0, true
			e.broadcast()
			pause = 0
		case r.Through > at.seq:
			e.recent = append(e.recent, r.Entries...)
			for _, ev := range r.Entries {
				e.recentLen += int64(len(ev.Data))
				e.noteSize(len(ev.Data))
			}
			// Keep at most buffer events and bufferBytes of them (the newest one always).
			n := max(len(e.recent)-e.buffer, 0)
			size := e.recentLen
			for _, ev := range e.recent[:n] {
				size -= int64(len(ev.Data))
			}
			for ; size > e.bufferBytes && n < len(e.recent)-1; n++ {
				size -= int64(len(e.recent[n].Data))
			}
			if n > 0 {
				e.from = e.recent[n-1].Seq
				e.recent = append(e.recent[:0:0], e.recent[n:]...)
				e.recentLen = size
			}
			if r.First > e.from+1 { // retention passed the follower: it cannot vouch for the gap
				e.from = max(e.from, r.First-1)
			}
			e.to = r.Through
			at.seq = r.Through
			e.broadcast()
			pause = 0
		case r.Through < r.Last:
			pause = min(max(2*pause, 50*time.Millisecond), time.Second) // an append is being written
		default:
			pause = 0
		}
		started = true
		e.mu.Unlock()
	}
}

// since returns the events after p the follower holds, the position they reach, and whether it
// could answer: false when p is behind what it holds, or in another epoch, or it has no
// position yet. changed is closed when that answer may change.
func (e *effectLog) since(p position) (events []store.LogEntry, through uint64, ok bool, epochChanged bool, changed <-chan struct{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	changed = e.changed
	switch {
	case !e.ready:
		return nil, p.seq, false, false, changed
	case e.epoch != p.epoch:
		return nil, p.seq, false, true, changed
	case p.seq >= e.to:
		return nil, p.seq, true, false, changed
	case p.seq < e.from:
		return nil, p.seq, false, false, changed
	}
	for i, ev := range e.recent {
		if ev.Seq > p.seq {
			events = e.recent[i:]
			break
		}
	}
	return events, e.to, true, false, changed
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// streamMargin is how long before the request deadline a stream ends, so the platform sees a
// clean end of response rather than a timeout.
const streamMargin = 2 * time.Second

// eventStream is one GET /a2a/events response.
type eventStream struct {
	e          *effectLog
	w          http.ResponseWriter
	rc         *http.ResponseController
	at         position
	asked      string   // the Last-Event-ID received, "" for none
	budget     int      // events this request may still replay from the store
	filtered   bool     // the request carried a workspace token: only workspace's events are sent
	workspace  string   // the token's verified workspace
	told       position // the last id the client was sent
	held       int64    // bytes of the replay budget the current page holds
	noDeadline bool     // the writer has no write deadline (a buffering platform)
}

// readPage reads the events after s.at into a page the stream holds until its next read,
// releasePage or its end: first its bytes are taken from the instance's replay budget (waiting
// for them when other streams hold it all), then at most pageBytes of events are kept (a single
// larger event alone, with the bytes it needs).
func (s *eventStream) readPage(ctx context.Context) (store.LogRange, error) {
	s.releasePage()
	e := s.e
	want := e.pageBytes
	for attempt := 0; ; attempt++ {
		got, err := e.replay.Acquire(ctx, e.closing, want)
		if err != nil {
			return store.LogRange{}, err
		}
		s.held = got
		limit := min(s.budget, store.MaxLogRead)
		if attempt == 0 {
			limit = e.pageLimit(e.pageBytes, limit)
		} else {
			limit = min(limit, 1)
		}
		r, err := e.log.ReadLog(ctx, e.name, s.at.seq, limit)
		if err != nil {
			return r, err
		}
		var size int64
		for i, ev := range r.Entries {
			n := int64(len(ev.Data))
			e.noteSize(int(n))
			if i > 0 && size+n > s.held { // the rest is for the next page
				r.Entries, r.Through = r.Entries[:i:i], r.Entries[i-1].Seq
				break
			}
			size += n
		}
		if size <= s.held {
			return r, nil
		}
		// One event larger than what is held: take the rest of its bytes, or give the page up and
		// read it again once the budget has them (nothing is held while waiting).
		if e.replay.TryAcquire(size - s.held) {
			s.held = size
			return r, nil
		}
		if attempt > 0 {
			return r, nil // held beyond the budget once: the budget never had room for it
		}
		s.releasePage()
		want = size
	}
}

// releasePage gives the page's bytes back to the replay budget.
func (s *eventStream) releasePage() {
	s.e.replay.Release(s.held)
	s.held = 0
}

// send writes ev within the write timeout: a client that stops reading is cut then.
func (s *eventStream) send(ev sseEvent) error {
	s.deadline()
	return ev.writeTo(s.w)
}

// sendEntry sends the event of a log entry when the stream shows it: an unfiltered stream every
// event, a filtered one only its workspace's (an entry of no workspace, written by a bootstrap
// action or before workspaces were kept, goes to unfiltered streams only).
func (s *eventStream) sendEntry(epoch string, entry store.LogEntry) (bool, error) {
	ev, ws, ok := effectEvent(epoch, entry)
	if !ok || (s.filtered && (len(ws) == 0 || string(ws) != s.workspace)) {
		return false, nil
	}
	if err := s.send(ev); err != nil {
		return false, err
	}
	s.told = position{epoch, entry.Seq}
	return true, nil
}

// mark sends a filtered stream's position when it passed events it did not send: an id alone,
// which moves the client's Last-Event-ID without dispatching an event, so that its reconnect
// does not read them again. It reports whether it wrote.
func (s *eventStream) mark() (bool, error) {
	if !s.filtered || s.at == s.told {
		return false, nil
	}
	s.told = s.at
	return true, s.send(sseEvent{id: s.at.id()})
}

// flush sends what was written, within the write timeout.
func (s *eventStream) flush() error {
	s.deadline()
	return s.rc.Flush()
}

// deadline bounds the next write to the stream's write timeout from now (New makes it positive).
func (s *eventStream) deadline() {
	if s.noDeadline {
		return
	}
	if err := s.rc.SetWriteDeadline(time.Now().Add(s.e.writeTimeout)); errors.Is(err, http.ErrNotSupported) {
		s.noDeadline = true
	}
}

// serveEvents streams effect events. When the response writer cannot flush (a buffering
// platform), the response ends after the connected event and the events after Last-Event-ID:
// the client polls again with the last id it received (poll mode).
func (c *Controller) serveEvents(w http.ResponseWriter, r *http.Request) {
	if !c.authorize(w, r, scopeRead) {
		return
	}
	// With a workspace token, only its workspace's events; without, every event (the reference).
	var workspace string
	filtered := len(r.Header.Values(GrantHeader)) > 0
	if filtered {
		var ok bool
		if workspace, ok = c.authorizeStream(w, r); !ok {
			return
		}
	}
	e := c.events
	if n := e.streams.Add(1); n > int64(c.cfg.MaxEventStreams) {
		e.streams.Add(-1)
		w.Header().Set("Retry-After", "5")
		writeDetail(w, http.StatusServiceUnavailable, fmt.Sprintf(
			"This instance serves %d event streams, its limit (SUPERVAIZER_EVENT_STREAMS_MAX): retry later", c.cfg.MaxEventStreams))
		return
	}
	defer e.streams.Add(-1)
	defer c.tel.streamOpened(r.Context())()
	s := &eventStream{e: e, w: w, rc: http.NewResponseController(w), budget: c.cfg.EventCatchUp, filtered: filtered, workspace: workspace}
	defer s.releasePage()
	// The end of the response is written after the handler returns, within this deadline; net/http
	// then clears it for the connection's next request.
	defer s.deadline()
	ctx := r.Context()
	if s.asked = strings.TrimSpace(r.Header.Get("Last-Event-ID")); s.asked != "" {
		p, err := parsePosition(s.asked)
		if err != nil {
			writeDetail(w, http.StatusBadRequest, err.Error())
			return
		}
		s.at = p
	}
	var first store.LogRange
	var err error
	if s.asked == "" {
		first, err = e.log.ReadLog(ctx, e.name, s.at.seq, 0) // a new client starts at the newest position
	} else {
		first, err = s.readPage(ctx)
	}
	if ctx.Err() != nil {
		return // the client left while waiting for the replay budget
	}
	if err != nil {
		c.log.ErrorContext(ctx, "effect stream: cannot read the log", "error", err)
		w.Header().Set("Retry-After", "5")
		writeDetail(w, http.StatusServiceUnavailable, "The effect log cannot be read now: retry later")
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream; charset=utf-8")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	connected := s.asked
	if connected == "" {
		s.at = position{first.Epoch, first.Last}
		connected = s.at.id()
	}
	if s.send(connectedEvent(connected)) != nil {
		return
	}
	s.told = s.at
	more, err := s.replay(ctx, first)
	s.releasePage()
	if err != nil {
		return
	}
	if s.flush() != nil || !more {
		// http.ErrNotSupported: a buffering writer delivers the response only when it ends
		// (poll mode). Any other error: the client is gone. !more: the catch-up budget is spent,
		// the client resumes from the last id it got.
		return
	}
	c.followStream(ctx, s)
}

// HeaderAgentSlug names the agent whose workspace token a GET /a2a/events request carries.
const HeaderAgentSlug = "X-Supervaize-Agent-Slug"

// authorizeStream verifies the workspace token of a stream request (scope "supervaizer/events",
// for the agent X-Supervaize-Agent-Slug names, in the workspace X-Supervaize-Workspace-Id names)
// and returns its verified workspace. On refusal it writes the 403 with the authorizer's message
// (or, for an authorizer failure, a 500 that leaks nothing), as the DataResource routes do.
func (c *Controller) authorizeStream(w http.ResponseWriter, r *http.Request) (string, bool) {
	ctx := r.Context()
	call := grant.Call{
		Token:     r.Header.Get(GrantHeader),
		Method:    grant.MethodEvents,
		AgentSlug: r.Header.Get(HeaderAgentSlug),
		Workspace: contract.WorkspaceRef{ID: r.Header.Get(HeaderWorkspaceID)},
	}
	if vs := r.Header.Values(HeaderWorkspaceSlug); len(vs) > 0 {
		call.Workspace.Slug = &vs[0]
	}
	if a := c.bySlug[call.AgentSlug]; a != nil {
		call.Agent = &a.grant
	}
	vctx, err := c.cfg.Authorizer.Authorize(ctx, call)
	if err == nil && vctx == nil {
		err = errors.New("authorizer returned neither a context nor an error")
	}
	if err != nil {
		if ge, ok := errors.AsType[*grant.Error](err); ok {
			c.log.InfoContext(ctx, "effect stream refused", "agent_slug", call.AgentSlug, "code", ge.Code)
			writeDetail(w, http.StatusForbidden, ge.Message)
			return "", false
		}
		c.log.ErrorContext(ctx, "workspace authorization failed unexpectedly", "agent_slug", call.AgentSlug, "target", grant.MethodEvents, "error", err)
		writeDetail(w, http.StatusInternalServerError, "Internal Server Error")
		return "", false
	}
	return vctx.WorkspaceID, true
}

// replay writes the events of r (read after s.at), first telling the client when its position
// was lost, then reads and writes on until the newest position. It reports false when the
// catch-up budget is spent before: the response should end, the client resumes from the last id
// it got.
func (s *eventStream) replay(ctx context.Context, r store.LogRange) (bool, error) {
	for {
		reread := false
		if lost, reason := s.resolve(r); lost {
			if err := s.send(lostEvent(s.asked, s.at, reason)); err != nil {
				return false, err
			}
			s.told = s.at
			// An expired position moved forward within the same read; any other was read from
			// the wrong place.
			reread = reason != lostExpired
		}
		before := s.at.seq
		if !reread {
			// A page holds at most the budget's events (readPage's limit), each after the stream's
			// position (ReadLog's contract; resolve moves a position only to before the oldest
			// kept), none after Through.
			for _, ev := range r.Entries {
				if _, err := s.sendEntry(r.Epoch, ev); err != nil {
					return false, err
				}
				s.budget--
			}
			s.at.seq = max(s.at.seq, r.Through)
			if s.at.seq >= r.Last || (s.at.seq == before && s.budget > 0) {
				// Caught up, or the next event is still being written: the follower (or the
				// client's next poll) will bring it. With the budget spent, no read moves the
				// stream: it ends below.
				_, err := s.mark()
				return true, err
			}
		}
		if s.budget == 0 {
			_, err := s.mark()
			return false, err
		}
		var err error
		if r, err = s.readPage(ctx); err != nil {
			return false, err
		}
	}
}

// resolve places the stream in r's log: a position of another log, ahead of it, or older than
// its retention is lost; the stream then goes on from the oldest event kept.
func (s *eventStream) resolve(r store.LogRange) (lost bool, reason string) {
	switch {
	case r.Epoch == "": // nothing was ever appended
		if s.at != (position{}) {
			s.at = position{}
			return true, lostUnknown
		}
	case s.at == (position{}):
		s.at.epoch = r.Epoch
		if r.First > 1 {
			s.at.seq = r.First - 1
			return true, lostExpired
		}
	case s.at.epoch != r.Epoch || s.at.seq > r.Last:
		s.at = position{r.Epoch, r.First - 1}
		return true, lostUnknown
	case s.at.seq+1 < r.First:
		s.at.seq = r.First - 1
		return true, lostExpired
	}
	return false, ""
}

// followStream sends the events the follower brings, heartbeats when idle, until the client
// leaves, the controller closes, the request deadline nears or the catch-up budget is spent.
func (c *Controller) followStream(ctx context.Context, s *eventStream) {
	defer s.e.follow()()
	var deadline <-chan time.Time
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		margin := streamMargin
		if left < 2*margin {
			margin = left / 2
		}
		t := time.NewTimer(left - margin)
		defer t.Stop()
		deadline = t.C
	}
	idle := time.NewTimer(c.cfg.HeartbeatInterval)
	defer idle.Stop()
	// wait blocks until the follower may hold more (changed) or a heartbeat is due; false when
	// the stream must end.
	wait := func(changed <-chan struct{}) bool {
		select {
		case <-ctx.Done():
			return false
		case <-c.closing:
			return false
		case <-deadline:
			return false
		case <-changed:
		case <-idle.C:
			if s.send(heartbeatEvent()) != nil || s.flush() != nil {
				return false
			}
			idle.Reset(c.cfg.HeartbeatInterval)
		}
		return true
	}
	for {
		events, through, ok, reset, changed := s.e.since(s.at)
		wrote := false
		switch {
		case ok:
			for _, ev := range events {
				sent, err := s.sendEntry(s.at.epoch, ev)
				if err != nil {
					return
				}
				wrote = wrote || sent
			}
			s.at.seq = through
			marked, err := s.mark()
			if err != nil {
				return
			}
			wrote = wrote || marked
		case reset || s.behind():
			// Behind the follower's events, or the log changed: read the store. A loss found
			// now is reported against the position the stream had reached.
			s.asked = s.at.id()
			r, err := s.readPage(ctx)
			if err != nil {
				return
			}
			before := s.at
			more, err := s.replay(ctx, r)
			s.releasePage()
			if err != nil || !more {
				_ = s.flush()
				return
			}
			// Unmoved, the store is where the stream is: wait for the follower.
			wrote = before != s.at
		}
		if wrote {
			if s.flush() != nil {
				return
			}
			idle.Reset(c.cfg.HeartbeatInterval)
			continue
		}
		if !wait(changed) {
			return
		}
	}
}

// behind reports whether the follower is ready but holds no longer the events after the stream.
func (s *eventStream) behind() bool {
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	return s.e.ready && s.e.epoch == s.at.epoch && s.at.seq < s.e.from
}
