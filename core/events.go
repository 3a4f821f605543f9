package core

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/supervaize/svz/core/contract"
)

// SSE event names of the effect stream (spec §2.8).
const (
	EventConnected = "supervaizer.connected"
	EventEffect    = "supervaizer.effect"
	EventHeartbeat = "supervaizer.heartbeat"
)

// sseEvent is one server-sent event. Only effect events carry an id: they are the ones a client
// resumes after with Last-Event-ID.
type sseEvent struct {
	id   string
	seq  uint64
	name string
	data []byte
}

// connectedEvent opens a stream. Its id is the position the stream starts from, so a client that
// reconnects (or polls, on a platform that cannot stream) resumes exactly there.
func connectedEvent(id string) sseEvent {
	return sseEvent{id: id, name: EventConnected, data: []byte(`{"status":"connected"}`)}
}

func heartbeatEvent() sseEvent {
	return sseEvent{name: EventHeartbeat, data: []byte(`{"status":"ok"}`)}
}

func (e sseEvent) writeTo(w io.Writer) error {
	var b strings.Builder
	b.Grow(len(e.data) + len(e.name) + len(e.id) + 24)
	if e.id != "" {
		b.WriteString("id: ")
		b.WriteString(e.id)
		b.WriteByte('\n')
	}
	b.WriteString("event: ")
	b.WriteString(e.name)
	b.WriteString("\ndata: ")
	b.Write(e.data) // compact JSON: never a newline
	b.WriteString("\n\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// eventHub fans effect events out to stream subscribers and keeps the last few for replay.
// Event ids are "<instance>-<sequence>": an id minted by another instance (or before a restart)
// is recognized as foreign and replays nothing rather than the wrong events.
type eventHub struct {
	instance string
	queue    int

	mu   sync.Mutex
	seq  uint64
	ring []sseEvent // the last len(ring) events, oldest first once full
	next int        // ring index the next event is written to
	full bool
	subs map[*subscriber]struct{}
}

type subscriber struct {
	ch chan sseEvent
}

func newEventHub(buffer, queue int) *eventHub {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &eventHub{
		instance: hex.EncodeToString(b[:]),
		queue:    queue,
		ring:     make([]sseEvent, buffer),
		subs:     map[*subscriber]struct{}{},
	}
}

// publishEffects announces the effects of a dispatched action.
func (h *eventHub) publishEffects(req *contract.ActionRequest, effects []contract.Effect) {
	if effects == nil {
		effects = []contract.Effect{}
	}
	data, err := json.Marshal(struct {
		AgentSlug string            `json:"agent_slug"`
		Action    string            `json:"action"`
		RequestID string            `json:"request_id"`
		Effects   []contract.Effect `json:"effects"`
	}{req.AgentSlug, req.Action, req.RequestID, effects})
	if err != nil {
		return // effects were validated and encoded once already; unreachable in practice
	}
	h.publish(EventEffect, data)
}

func (h *eventHub) publish(name string, data []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	ev := sseEvent{id: h.id(h.seq), seq: h.seq, name: name, data: data}
	if len(h.ring) > 0 {
		h.ring[h.next] = ev
		h.next = (h.next + 1) % len(h.ring)
		if h.next == 0 {
			h.full = true
		}
	}
	for s := range h.subs {
		s.offer(ev)
	}
}

// offer queues ev, dropping the oldest queued event when the reader is behind. Only the hub
// (under its lock) sends, so the retry after a drop cannot lose to another sender.
func (s *subscriber) offer(ev sseEvent) {
	select {
	case s.ch <- ev:
		return
	default:
	}
	select {
	case <-s.ch:
	default:
	}
	select {
	case s.ch <- ev:
	default:
	}
}

// subscribe registers a subscriber and returns the buffered events after lastEventID (none when
// the id is empty, foreign or unparsable) and the id of the position the stream starts from.
// Registering and snapshotting under one lock means no event falls between the replay and the
// live queue.
func (h *eventHub) subscribe(lastEventID string) (s *subscriber, replay []sseEvent, from string) {
	s = &subscriber{ch: make(chan sseEvent, h.queue)}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subs[s] = struct{}{}
	after, ok := h.parseID(lastEventID)
	if !ok || after > h.seq {
		return s, nil, h.id(h.seq)
	}
	for _, ev := range h.buffered() {
		if ev.seq > after {
			replay = append(replay, ev)
		}
	}
	return s, replay, h.id(after)
}

func (h *eventHub) id(seq uint64) string { return h.instance + "-" + strconv.FormatUint(seq, 10) }

func (h *eventHub) unsubscribe(s *subscriber) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}

// buffered returns the kept events, oldest first. The caller holds mu.
func (h *eventHub) buffered() []sseEvent {
	if !h.full {
		return h.ring[:h.next]
	}
	out := make([]sseEvent, 0, len(h.ring))
	out = append(out, h.ring[h.next:]...)
	return append(out, h.ring[:h.next]...)
}

func (h *eventHub) parseID(id string) (uint64, bool) {
	inst, seq, ok := strings.Cut(strings.TrimSpace(id), "-")
	if !ok || inst != h.instance {
		return 0, false
	}
	n, err := strconv.ParseUint(seq, 10, 64)
	return n, err == nil
}

// streamMargin is how long before the request deadline a stream ends, so the platform sees a
// clean end of response rather than a timeout.
const streamMargin = 2 * time.Second

// serveEvents streams effect events. When the response writer cannot flush (a buffering
// platform), the stream is cut short after the connected event and the replay: the client
// reconnects with Last-Event-ID instead of hanging until the platform times out.
func (c *Controller) serveEvents(w http.ResponseWriter, r *http.Request) {
	if !c.authorize(w, r, scopeRead) {
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream; charset=utf-8")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Accel-Buffering", "no")
	sub, replay, from := c.events.subscribe(r.Header.Get("Last-Event-ID"))
	defer c.events.unsubscribe(sub)
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if connectedEvent(from).writeTo(w) != nil {
		return
	}
	for _, ev := range replay {
		if ev.writeTo(w) != nil {
			return
		}
	}
	if rc.Flush() != nil {
		// http.ErrNotSupported: a buffering writer delivers the response only when it ends
		// (poll mode). Any other error: the client is gone.
		return
	}
	ctx := r.Context()
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
	for {
		var ev sseEvent
		select {
		case <-ctx.Done():
			return
		case <-c.closing:
			return
		case <-deadline:
			return
		case ev = <-sub.ch:
		case <-idle.C:
			ev = heartbeatEvent()
		}
		if ev.writeTo(w) != nil || rc.Flush() != nil {
			return
		}
		idle.Reset(c.cfg.HeartbeatInterval)
	}
}
