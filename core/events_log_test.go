package core_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/idempotency"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
)

// pollEvents answers GET /a2a/events on a writer that cannot flush (poll mode) and returns the
// status, headers and events.
func pollEvents(t *testing.T, h http.Handler, lastID string) (int, http.Header, []sse) {
	t.Helper()
	return pollEventsWith(t, h, lastID, nil)
}

// pollEventsWith is pollEvents with more request headers.
func pollEventsWith(t *testing.T, h http.Handler, lastID string, hdr map[string]string) (int, http.Header, []sse) {
	t.Helper()
	done := make(chan *plainWriter, 1)
	go func() {
		w := &plainWriter{hdr: http.Header{}}
		req := httptest.NewRequest(http.MethodGet, "/a2a/events", nil)
		req.Header.Set("X-API-Key", testKey)
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		h.ServeHTTP(w, req)
		done <- w
	}()
	select {
	case w := <-done:
		var evs []sse
		if w.status == http.StatusOK {
			r := bufio.NewReader(&w.body)
			for w.body.Len() > 0 || r.Buffered() > 0 {
				evs = append(evs, readEvent(t, r))
			}
		}
		return w.status, w.hdr, evs
	case <-time.After(30 * time.Second):
		t.Fatal("a poll did not end")
		return 0, nil, nil
	}
}

func names(evs []sse) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.event+" "+e.id)
	}
	return out
}

func invokeN(t *testing.T, c http.Handler, n int, prefix string) {
	t.Helper()
	for i := range n {
		status, body := post(t, c, rpcBody(t, i, actionInvoke, params(map[string]any{"request_id": fmt.Sprintf("%s-%d", prefix, i)})), nil)
		if status != 200 || !bytes.Contains(body, []byte(`"result"`)) {
			t.Fatalf("action %d: %d %s", i, status, body)
		}
	}
}

// TestEffectStreamAcrossInstances: two controllers of one server id on one store are one
// stream. An action on A appears on B's stream, in order; B's ids resume on A with nothing
// missed and nothing repeated. Another server id has a log of its own.
func TestEffectStreamAcrossInstances(t *testing.T) {
	st := memory.New()
	a := effectController(t, core.Config{Store: st, ServerID: "server-one"})
	b := effectController(t, core.Config{Store: st, ServerID: "server-one"})
	other := effectController(t, core.Config{Store: st, ServerID: "server-two"})
	srvB := httptest.NewServer(b)
	defer srvB.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	onB := openStream(t, ctx, srvB.URL, nil)
	readEvent(t, onB)
	invokeN(t, a, 3, "on-a")
	invokeN(t, other, 1, "elsewhere")
	var got []sse
	for range 3 {
		got = append(got, readEvent(t, onB))
	}
	epoch, _, _ := strings.Cut(got[0].id, "-")
	for i, ev := range got {
		if ev.event != "supervaizer.effect" || ev.id != fmt.Sprintf("%s-%d", epoch, i+1) || !strings.Contains(ev.data, fmt.Sprintf(`"request_id":"on-a-%d"`, i)) {
			t.Fatalf("event %d on B: %+v", i, ev)
		}
	}
	invokeN(t, b, 1, "on-b")
	// Reconnect to A with B's second id: exactly the third event, then B's own.
	_, _, evs := pollEvents(t, a, got[1].id)
	if len(evs) != 3 || evs[1].id != got[2].id || evs[2].id != epoch+"-4" || !strings.Contains(evs[2].data, `"on-b-0"`) {
		t.Fatalf("poll on A after %s: %v", got[1].id, names(evs))
	}
	// The other server id's log holds only its own event.
	_, _, evs = pollEvents(t, other, "0-0")
	if len(evs) != 2 || !strings.Contains(evs[1].data, `"elsewhere-0"`) || strings.HasPrefix(evs[1].id, epoch) {
		t.Fatalf("the other controller's log: %v", names(evs))
	}
}

// TestEffectStreamBadLastEventID: an id no controller sent is refused with a message naming the
// fix; ids of the right shape are accepted, even foreign ones.
func TestEffectStreamBadLastEventID(t *testing.T) {
	c := effectController(t, core.Config{})
	for _, bad := range []string{"garbage", "abc-", "-5", "a-b", "e-01", "e-1-2", "é-1", strings.Repeat("a", 65) + "-1", "a-99999999999999999999999"} {
		status, _, _ := pollEvents(t, c, bad)
		w := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/a2a/events", nil)
		req.Header.Set("X-API-Key", testKey)
		req.Header.Set("Last-Event-ID", bad)
		c.ServeHTTP(w, req)
		if status != http.StatusBadRequest || w.Code != http.StatusBadRequest ||
			w.Body.String() != `{"detail":"the Last-Event-ID header is not an id of this stream (expected \"\u003cepoch\u003e-\u003cposition\u003e\"): reconnect without it, or with the id of the last event received"}` {
			t.Errorf("Last-Event-ID %q: %d %s", bad, w.Code, w.Body)
		}
	}
	for _, ok := range []string{"0-0", "deadbeef-0", "x_Y9-18446744073709551615", " abc-3 "} {
		if status, _, evs := pollEvents(t, c, ok); status != http.StatusOK || evs[0].event != "supervaizer.connected" {
			t.Errorf("Last-Event-ID %q: %d %v", ok, status, names(evs))
		}
	}
}

// TestEffectStreamLimit: an instance serves at most MaxEventStreams streams; the next gets 503
// with Retry-After, and a freed place is served again. No step waits on an endless body or a
// timeout: the first stream is served in the test and ends when its request's context does, and
// the others are polls (a writer that cannot flush), which end at once even when let in.
func TestEffectStreamLimit(t *testing.T) {
	c := effectController(t, core.Config{MaxEventStreams: 1})
	request := func(ctx context.Context) *http.Request {
		req := httptest.NewRequest(http.MethodGet, "/a2a/events", nil).WithContext(ctx)
		req.Header.Set("X-API-Key", testKey)
		return req
	}
	ctx, leave := context.WithCancel(context.Background())
	defer leave()
	open := make(chan struct{})
	close(open) // the writer never blocks
	first := &blockedWriter{hdr: http.Header{}, release: open, wrote: make(chan struct{}, 1)}
	served := make(chan struct{})
	go func() { c.ServeHTTP(first, request(ctx)); close(served) }()
	select {
	case <-first.wrote: // connected: the stream holds the place
	case <-time.After(30 * time.Second):
		t.Fatal("the first stream never started")
	}
	// Refused twice: a refusal frees what it counted.
	for range 2 {
		w := &plainWriter{hdr: http.Header{}}
		c.ServeHTTP(w, request(context.Background()))
		if w.status != http.StatusServiceUnavailable || w.hdr.Get("Retry-After") != "5" ||
			w.body.String() != `{"detail":"This instance serves 1 event streams, its limit (SUPERVAIZER_EVENT_STREAMS_MAX): retry later"}` {
			t.Fatalf("a stream over a limit of 1: %d %v %s", w.status, w.hdr, w.body.String())
		}
	}
	leave() // the first client leaves; its place is free once its handler has returned
	select {
	case <-served:
	case <-time.After(30 * time.Second):
		t.Fatal("the first stream did not end with its request")
	}
	for range 2 { // a poll ends at once and frees its place
		if status, _, evs := pollEvents(t, c, ""); status != http.StatusOK || len(evs) != 1 {
			t.Fatalf("a poll with the place free: %d %v", status, names(evs))
		}
	}
	// Over HTTP: one stream is let in, the next refused on its status.
	srv := httptest.NewServer(c)
	defer srv.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	readEvent(t, openStream(t, sctx, srv.URL, nil))
	req, _ := http.NewRequestWithContext(sctx, http.MethodGet, srv.URL+"/a2a/events", nil)
	req.Header.Set("X-API-Key", testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // never read: a stream let in would not end
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a second stream over HTTP: %d, want 503", resp.StatusCode)
	}
}

// gatedLog is a memory store whose WaitLog waits for the test: the follower of a stream reads
// the log only when the test lets it (each WaitLog call is announced on waiting, and returns
// when the test sends on release).
type gatedLog struct {
	*memory.Store
	waiting chan struct{}
	release chan struct{}
	reads   atomic.Int64 // ReadLog calls
}

func (g *gatedLog) ReadLog(ctx context.Context, name string, after uint64, limit int) (store.LogRange, error) {
	g.reads.Add(1)
	return g.Store.ReadLog(ctx, name, after, limit)
}

func (g *gatedLog) WaitLog(ctx context.Context, name string, after uint64) error {
	select {
	case g.waiting <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-g.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Store.WaitLog(ctx, name, after)
}

// TestEffectStreamBurstPastRetention: a burst of more events than the log keeps lands between
// two reads of the instance's follower; a live stream is told its events were lost (it cannot
// vouch for the ones the retention dropped), then gets the events kept, in order, then live ones.
func TestEffectStreamBurstPastRetention(t *testing.T) {
	st := &gatedLog{Store: memory.New(), waiting: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(func() { _ = st.Close() })
	c := effectController(t, core.Config{Store: st, EventRetentionCount: 2, HeartbeatInterval: time.Hour})
	srv := httptest.NewServer(c)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	invokeN(t, c, 1, "before") // position 1: the stream starts in the log's epoch
	r := openStream(t, ctx, srv.URL, nil)
	connected := readEvent(t, r)
	epoch, _, _ := strings.Cut(connected.id, "-")
	if connected.event != "supervaizer.connected" || epoch == "0" || connected.id != epoch+"-1" {
		t.Fatalf("connected %+v", connected)
	}
	select { // the follower has its position and waits on the log
	case <-st.waiting:
	case <-ctx.Done():
		t.Fatal("the follower never waited on the log")
	}
	invokeN(t, c, 5, "burst") // positions 2 to 6; the log keeps 5 and 6
	select {
	case st.release <- struct{}{}:
	case <-ctx.Done():
		t.Fatal("the follower stopped waiting")
	}
	want := []sse{
		{id: epoch + "-4", event: "supervaizer.events_lost",
			data: `{"status":"events_lost","reason":"expired","last_event_id":"` + epoch + `-1","resumed_after":"` + epoch + `-4"}`},
		{id: epoch + "-5", event: "supervaizer.effect", data: `{"agent_slug":"s","action":"job.start","request_id":"burst-3","effects":[{"type":"job.started","job_id":"job-123"}]}`},
		{id: epoch + "-6", event: "supervaizer.effect", data: `{"agent_slug":"s","action":"job.start","request_id":"burst-4","effects":[{"type":"job.started","job_id":"job-123"}]}`},
	}
	for i, w := range want {
		if ev := readEvent(t, r); ev != w {
			t.Fatalf("event %d after the burst: %+v\nwant %+v", i, ev, w)
		}
	}
	// The stream goes on live.
	select {
	case <-st.waiting:
	case <-ctx.Done():
		t.Fatal("the follower never waited on the log again")
	}
	invokeN(t, c, 1, "live")
	st.release <- struct{}{}
	if ev := readEvent(t, r); ev.id != epoch+"-7" || !strings.Contains(ev.data, `"request_id":"live-0"`) {
		t.Fatalf("the live event after the burst: %+v", ev)
	}
}

// TestEffectStreamCatchUpBudget: one request replays at most EventCatchUp events; the client
// gets the rest with the next request, from the last id it received, nothing missed.
func TestEffectStreamCatchUpBudget(t *testing.T) {
	c := effectController(t, core.Config{EventCatchUp: 2})
	invokeN(t, c, 5, "r")
	var seen []string
	last := "0-0"
	for range 4 {
		_, _, evs := pollEvents(t, c, last)
		if len(evs) > 3 {
			t.Fatalf("a poll replayed %d events with a budget of 2: %v", len(evs)-1, names(evs))
		}
		for _, ev := range evs[1:] {
			seen = append(seen, ev.data)
			last = ev.id
		}
	}
	if len(seen) != 5 {
		t.Fatalf("replayed %d events over 4 polls, want 5", len(seen))
	}
	for i, d := range seen {
		if !strings.Contains(d, fmt.Sprintf(`"r-%d"`, i)) {
			t.Errorf("event %d: %s", i, d)
		}
	}
	// A stream behind by more than its budget ends after the budget, cleanly.
	srv := httptest.NewServer(c)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := openStream(t, ctx, srv.URL, map[string]string{"Last-Event-ID": "0-0"})
	rest, err := io.ReadAll(r)
	if err != nil || strings.Count(string(rest), "event: supervaizer.effect") != 2 {
		t.Fatalf("a stream with a budget of 2, 5 events behind: %v %q", err, rest)
	}
}

// blockedWriter is a stream client that does not read: Write blocks until released.
type blockedWriter struct {
	hdr     http.Header
	release chan struct{}
	mu      sync.Mutex
	body    bytes.Buffer
	wrote   chan struct{}
}

func (w *blockedWriter) Header() http.Header { return w.hdr }
func (w *blockedWriter) WriteHeader(int)     {}
func (w *blockedWriter) Flush()              {}
func (w *blockedWriter) Write(b []byte) (int, error) {
	select {
	case w.wrote <- struct{}{}:
	default:
	}
	if bytes.Contains(b, []byte("supervaizer.effect")) {
		<-w.release
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.body.Write(b)
}

// TestSlowReaderNeverSlowsActions: a stream whose client stops reading holds no action back;
// once it reads again it gets every event, in order, from the log (it fell behind the
// instance's memory).
func TestSlowReaderNeverSlowsActions(t *testing.T) {
	c := effectController(t, core.Config{EventBuffer: 4})
	w := &blockedWriter{hdr: http.Header{}, release: make(chan struct{}), wrote: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := httptest.NewRequest(http.MethodGet, "/a2a/events", nil).WithContext(ctx)
	req.Header.Set("X-API-Key", testKey)
	served := make(chan struct{})
	go func() { c.ServeHTTP(w, req); close(served) }()
	<-w.wrote // connected
	invokeN(t, c, 1, "first")
	invokeN(t, c, 60, "while-blocked") // the stream is stuck writing the first: these must not wait
	close(w.release)
	// Wait for the last event: once it is written, any missing one is a gap, failed at once.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		w.mu.Lock()
		body := w.body.String()
		w.mu.Unlock()
		if n := strings.Count(body, "event: supervaizer.effect"); n >= 61 || strings.Contains(body, `"request_id":"while-blocked-59"`) {
			if n != 61 {
				t.Fatalf("the slow reader got %d events up to the last, want 61", n)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the slow reader never got the last event")
		}
	}
	cancel()
	<-served
	r := bufio.NewReader(&w.body)
	readEvent(t, r) // connected
	for i := 1; i <= 61; i++ {
		ev := readEvent(t, r)
		if !strings.HasSuffix(ev.id, fmt.Sprintf("-%d", i)) {
			t.Fatalf("event %d has id %s", i, ev.id)
		}
	}
}

// TestSlowReaderBehindTheBuffer: the follower reads on (the test lets it, read by read) while a
// stream is stuck writing; the events it dropped from its buffer meanwhile come to the stream
// from the log, every one, in order.
func TestSlowReaderBehindTheBuffer(t *testing.T) {
	body, _ := behindTheBuffer(t, core.Config{}, `"request_id":"behind-19"`)
	r := bufio.NewReader(strings.NewReader(body))
	readEvent(t, r) // connected
	for i := 2; i <= 22; i++ {
		if ev := readEvent(t, r); ev.event != "supervaizer.effect" || !strings.HasSuffix(ev.id, fmt.Sprintf("-%d", i)) {
			t.Fatalf("event at position %d: %+v", i, ev)
		}
	}
}

// TestSlowReaderBehindTheBufferBudget: a live stream that falls behind the follower's buffer
// reads the log within its catch-up budget, and ends, cleanly, once the budget is spent: the
// client resumes from the last id it got.
func TestSlowReaderBehindTheBufferBudget(t *testing.T) {
	body, reads := behindTheBuffer(t, core.Config{EventCatchUp: 3}, "")
	if reads != 1 { // the follower waits at the gate: every read is the stream's
		t.Errorf("the stream read the log %d times, want once", reads)
	}
	r := bufio.NewReader(strings.NewReader(body))
	readEvent(t, r) // connected
	// Position 2 came from the follower, 3 to 5 are the budget's.
	for i := 2; i <= 5; i++ {
		if ev := readEvent(t, r); ev.event != "supervaizer.effect" || !strings.HasSuffix(ev.id, fmt.Sprintf("-%d", i)) {
			t.Fatalf("event at position %d: %+v", i, ev)
		}
	}
	if rest, _ := io.ReadAll(r); len(rest) != 0 {
		t.Fatalf("after the budget: %q", rest)
	}
}

// behindTheBuffer connects a stream at position 1 of a log whose follower keeps 4 events and
// reads only when the test lets it; the stream gets stuck writing position 2 while 20 more
// events are appended and read (the buffer then keeps 19 to 22), then its client reads again.
// It returns the body once it holds until (or, with until empty, once the response ended: it
// must end before the request's deadline), and how many times the log was read since the
// client read again.
func behindTheBuffer(t *testing.T, cfg core.Config, until string) (string, int64) {
	t.Helper()
	st := &gatedLog{Store: memory.New(), waiting: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(func() { _ = st.Close() })
	cfg.Store, cfg.EventBuffer, cfg.HeartbeatInterval = st, 4, time.Hour
	c := effectController(t, cfg)
	invokeN(t, c, 1, "before") // position 1: the stream starts in the log's epoch
	w := &blockedWriter{hdr: http.Header{}, release: make(chan struct{}), wrote: make(chan struct{}, 1)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := httptest.NewRequest(http.MethodGet, "/a2a/events", nil).WithContext(ctx)
	req.Header.Set("X-API-Key", testKey)
	served := make(chan struct{})
	go func() { c.ServeHTTP(w, req); close(served) }()
	step := func(what string, ch chan struct{}, send bool) {
		t.Helper()
		var err error
		if send {
			select {
			case ch <- struct{}{}:
			case <-ctx.Done():
				err = ctx.Err()
			}
		} else {
			select {
			case <-ch:
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	step("the connected event", w.wrote, false)
	step("the follower to wait", st.waiting, false)
	invokeN(t, c, 1, "first") // position 2: the stream gets stuck writing it
	step("release", st.release, true)
	step("the follower to wait", st.waiting, false)
	invokeN(t, c, 20, "behind") // positions 3 to 22, read 4 at a time: the buffer keeps 19 to 22
	for range 5 {
		step("release", st.release, true)
		step("the follower to wait", st.waiting, false)
	}
	reads := st.reads.Load()
	close(w.release)
	body := func() string {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.body.String()
	}
	if until == "" {
		select {
		case <-served:
			return body(), st.reads.Load() - reads
		case <-ctx.Done():
			t.Fatalf("the stream did not end: %q", body())
		}
	}
	for !strings.Contains(body(), until) {
		if ctx.Err() != nil {
			t.Fatalf("the stream never got %s: %q", until, body())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-served
	return body(), st.reads.Load() - reads
}

// failingLog is a store whose appends fail.
type failingLog struct{ *memory.Store }

func (failingLog) AppendLog(context.Context, string, []byte, store.Retention) (store.LogPosition, error) {
	return store.LogPosition{}, errors.New("store unreachable")
}

// TestEffectAppendFailure: the action ran, so its result is answered even when the effect log
// refuses the event; the failure is logged with the request it concerns.
func TestEffectAppendFailure(t *testing.T) {
	var logs bytes.Buffer
	c := effectController(t, core.Config{Store: failingLog{memory.New()}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	status, body := post(t, c, rpcBody(t, 1, actionInvoke, params(nil)), nil)
	if status != 200 || !bytes.Contains(body, []byte(`"result":{"status":"ok"`)) {
		t.Fatalf("answer: %d %s", status, body)
	}
	if !strings.Contains(logs.String(), `level=ERROR msg="effect event not recorded`) || !strings.Contains(logs.String(), "request_id=request-1") ||
		!strings.Contains(logs.String(), `error="store unreachable"`) {
		t.Fatalf("logs: %s", logs.String())
	}
}

// replayGate runs an action the first time and replays its result afterwards, as the
// idempotency gate does for a retried job.start.
type replayGate struct {
	mu   sync.Mutex
	done *contract.ActionResult
}

func (g *replayGate) Do(ctx context.Context, _ *contract.ActionRequest, run func(context.Context) (*contract.ActionResult, error)) (*contract.ActionResult, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done != nil {
		return g.done, nil
	}
	res, err := run(ctx)
	g.done = res
	return res, err
}

// TestReplayAppendsNothing: a replayed answer does not run the action, so it appends no event.
func TestReplayAppendsNothing(t *testing.T) {
	c := effectController(t, core.Config{Gate: &replayGate{}})
	for i := range 3 {
		post(t, c, rpcBody(t, i, actionInvoke, params(map[string]any{"idempotency_key": "idem-1"})), nil)
	}
	if _, _, evs := pollEvents(t, c, "0-0"); len(evs) != 2 || evs[1].event != "supervaizer.effect" {
		t.Fatalf("three calls, one run: %v", names(evs))
	}
}

// TestGateAppendsTheEventOnce: with the idempotency gate on a store that updates and appends at
// once, the event is written with the record (not again by the controller), and replays add none.
func TestGateAppendsTheEventOnce(t *testing.T) {
	s := memory.New()
	c := effectController(t, core.Config{Store: s, Gate: idempotency.New(s)})
	for i := range 3 {
		post(t, c, rpcBody(t, i, actionInvoke, params(map[string]any{"idempotency_key": "idem-1"})), nil)
	}
	if _, _, evs := pollEvents(t, c, "0-0"); len(evs) != 2 || evs[1].event != "supervaizer.effect" {
		t.Fatalf("three calls, one run: %v", names(evs))
	}
	r, err := s.ReadLog(context.Background(), "effects/SRV-test", 0, 10)
	if err != nil || len(r.Entries) != 1 || !strings.Contains(string(r.Entries[0].Data), `"job.started"`) {
		t.Fatalf("the store's log: %+v, %v; want the one event", r, err)
	}
}

// resettable is a store whose log can be replaced by an empty one, as a flushed Redis or a
// recreated table would be.
type resettable struct {
	mu      sync.Mutex
	cur     *memory.Store
	swapped chan struct{}
}

func newResettable() *resettable { return &resettable{cur: memory.New(), swapped: make(chan struct{})} }

func (r *resettable) store() (*memory.Store, chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur, r.swapped
}

func (r *resettable) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cur = memory.New()
	close(r.swapped)
	r.swapped = make(chan struct{})
}

func (r *resettable) Get(ctx context.Context, k string) (store.Record, error) {
	s, _ := r.store()
	return s.Get(ctx, k)
}

func (r *resettable) Create(ctx context.Context, k string, v []byte, e time.Time) (store.Record, error) {
	s, _ := r.store()
	return s.Create(ctx, k, v, e)
}

func (r *resettable) Update(ctx context.Context, k string, ver uint64, v []byte, e time.Time) (store.Record, error) {
	s, _ := r.store()
	return s.Update(ctx, k, ver, v, e)
}

func (r *resettable) Delete(ctx context.Context, k string, ver uint64) error {
	s, _ := r.store()
	return s.Delete(ctx, k, ver)
}
func (r *resettable) MaxValueSize() int { return memory.DefaultMaxValueSize }
func (r *resettable) Close() error      { return nil }

func (r *resettable) AppendLog(ctx context.Context, n string, d []byte, k store.Retention) (store.LogPosition, error) {
	s, _ := r.store()
	return s.AppendLog(ctx, n, d, k)
}

func (r *resettable) ReadLog(ctx context.Context, n string, after uint64, limit int) (store.LogRange, error) {
	s, _ := r.store()
	return s.ReadLog(ctx, n, after, limit)
}

func (r *resettable) WaitLog(ctx context.Context, n string, after uint64) error {
	s, swapped := r.store()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-swapped:
			cancel()
		case <-wctx.Done():
		}
	}()
	if err := s.WaitLog(wctx, n, after); err != nil && ctx.Err() != nil {
		return err
	}
	return nil
}

// TestEffectStreamLogReset: when the log a stream follows is replaced (a flushed store), the
// stream says its events were lost, then goes on with the new log.
func TestEffectStreamLogReset(t *testing.T) {
	st := newResettable()
	c := effectController(t, core.Config{Store: st, ServerID: "server-reset"})
	srv := httptest.NewServer(c)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := openStream(t, ctx, srv.URL, nil)
	readEvent(t, r)
	invokeN(t, c, 1, "before")
	old := readEvent(t, r)
	st.reset()
	invokeN(t, c, 1, "after")
	// The stream may notice the new log before or after its first event: it resumes from the
	// beginning of the new log ("<epoch>-0"), or of any log ("0-0").
	lost := readEvent(t, r)
	oldEpoch, _, _ := strings.Cut(old.id, "-")
	if lost.event != "supervaizer.events_lost" || !strings.HasSuffix(lost.id, "-0") || strings.HasPrefix(lost.id, oldEpoch) ||
		lost.data != `{"status":"events_lost","reason":"unknown","last_event_id":"`+old.id+`","resumed_after":"`+lost.id+`"}` {
		t.Fatalf("after the reset: %+v (last event %s)", lost, old.id)
	}
	ev := readEvent(t, r)
	if epoch, seq, _ := strings.Cut(ev.id, "-"); seq != "1" || epoch == oldEpoch || epoch == "0" || !strings.Contains(ev.data, `"after-0"`) {
		t.Fatalf("then %+v, want the new log's first event", ev)
	}
}

// unreadableLog is a store whose log reads fail.
type unreadableLog struct{ *memory.Store }

func (unreadableLog) ReadLog(context.Context, string, uint64, int) (store.LogRange, error) {
	return store.LogRange{}, errors.New("store unreachable")
}

// serveEventsOnce serves one GET /a2a/events on a writer that cannot flush (the response ends
// after the replay) with ctx, and Last-Event-ID lastID unless "".
func serveEventsOnce(h http.Handler, ctx context.Context, lastID string) *plainWriter {
	w := &plainWriter{hdr: http.Header{}}
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/a2a/events", nil)
	req.Header.Set("X-API-Key", testKey)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	h.ServeHTTP(w, req)
	return w
}

// TestEffectStreamUnreadableLog: a log that cannot be read, for a new client (its newest
// position) or one that resumes (its replay), is answered 503 with Retry-After and logged with
// the cause; no stream starts.
func TestEffectStreamUnreadableLog(t *testing.T) {
	for _, lastID := range []string{"", "0-0"} {
		var logs bytes.Buffer
		c := effectController(t, core.Config{Store: unreadableLog{memory.New()}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		w := serveEventsOnce(c, context.Background(), lastID)
		if w.status != http.StatusServiceUnavailable || w.hdr.Get("Retry-After") != "5" ||
			w.body.String() != `{"detail":"The effect log cannot be read now: retry later"}` {
			t.Errorf("Last-Event-ID %q: %d %v %s", lastID, w.status, w.hdr, w.body.String())
		}
		if !strings.Contains(logs.String(), `level=ERROR msg="effect stream: cannot read the log" error="store unreachable"`) {
			t.Errorf("Last-Event-ID %q: logs %s", lastID, logs.String())
		}
	}
}

// TestEffectStreamClientGoneBeforeTheStream: a request whose client left before its first read
// is answered nothing, and nothing is logged (it is no failure of the log).
func TestEffectStreamClientGoneBeforeTheStream(t *testing.T) {
	for _, lastID := range []string{"", "0-0"} {
		var logs bytes.Buffer
		c := effectController(t, core.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		invokeN(t, c, 1, "g")
		logs.Reset()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if w := serveEventsOnce(c, ctx, lastID); w.status != 0 || w.body.Len() != 0 || w.hdr.Get("Content-Type") != "" || logs.Len() != 0 {
			t.Errorf("Last-Event-ID %q, the client gone: %d %v %q, logs %q", lastID, w.status, w.hdr, w.body.String(), logs.String())
		}
	}
}

// editedLog is a memory store whose read answers pass through edit, with n the read's number
// (from 1): it shows a stream what another backend or another instance would make it read (a
// sealed gap, an append still being written, an append landing just after a read, a read
// failing).
type editedLog struct {
	*memory.Store
	mu   sync.Mutex
	n    int
	edit func(log *memory.Store, n int, r store.LogRange) (store.LogRange, error)
}

func (l *editedLog) ReadLog(ctx context.Context, name string, after uint64, limit int) (store.LogRange, error) {
	r, err := l.Store.ReadLog(ctx, name, after, limit)
	if err != nil {
		return r, err
	}
	l.mu.Lock()
	l.n++
	n := l.n
	l.mu.Unlock()
	return l.edit(l.Store, n, r)
}

// reads is how many reads the log answered.
func (l *editedLog) reads() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// effectsLog is the effect log of effectController's server id.
const effectsLog = "effects/SRV-test"

// inWorkspace is a log entry of the event of rid in workspace ws, as an action there appends it
// (a workspace of 11 bytes).
func inWorkspace(ws, rid string) string { return "\x00\x0b" + ws + effectData(rid) }

// appendEntries appends entries to the effect log of st.
func appendEntries(t *testing.T, st *memory.Store, entries ...string) {
	t.Helper()
	for _, e := range entries {
		if _, err := st.AppendLog(context.Background(), effectsLog, []byte(e), store.Retention{}); err != nil {
			t.Fatal(err)
		}
	}
}

// appendAfterRead is an editedLog's edit that appends entries just after read at: another
// instance's actions, landing between two reads.
func appendAfterRead(t *testing.T, at int, entries ...string) func(*memory.Store, int, store.LogRange) (store.LogRange, error) {
	return func(st *memory.Store, n int, r store.LogRange) (store.LogRange, error) {
		if n == at {
			appendEntries(t, st, entries...)
		}
		return r, nil
	}
}

// TestEffectStreamStops: a stream ends once a write to its client or a read of the store fails,
// writing and flushing nothing after it: a live event's write, a live id alone's, a store read
// behind the follower's events, a replay's second read. One whose catch-up budget is spent behind
// the follower's events ends with what it wrote flushed. The log's reads are numbered: the
// stream's replay (or, for a new client, its newest position) is the first, the follower's start
// the second. failWrite is for a stream that would go on: its client is gone.
func TestEffectStreamStops(t *testing.T) {
	filtered := localStreamHeaders("s", "workspace-1")
	appendAt := func(at int, entries ...string) func(*memory.Store, int, store.LogRange) (store.LogRange, error) {
		return appendAfterRead(t, at, entries...)
	}
	served := []string{"deadline", "write", "deadline", "flush"} // connected, flushed
	for _, tc := range []struct {
		name      string
		hdr       map[string]string
		lastID    string
		budget    int
		edit      func(*memory.Store, int, store.LogRange) (store.LogRange, error)
		failWrite int
		want      []string
	}{
		// Live, after the follower started: workspace-1's event fails; the id alone past
		// workspace-2's is never tried.
		{"a live event's write failing", filtered, "", 0, appendAt(2, inWorkspace("workspace-1", "b"), inWorkspace("workspace-2", "c")), 2,
			append(served, "deadline", "write", "deadline")},
		{"a live id alone's write failing", filtered, "", 0, appendAt(2, inWorkspace("workspace-2", "c")), 2,
			append(served, "deadline", "write", "deadline")},
		// The replay's read, of the first event, is followed by a second: the follower starts
		// past the stream, whose own read then fails. Nothing is written after the replay.
		{"a read behind the follower failing", nil, "0-0", 0, func(st *memory.Store, n int, r store.LogRange) (store.LogRange, error) {
			if n == 3 {
				return store.LogRange{}, errors.New("store unreachable")
			}
			return appendAt(1, inWorkspace("workspace-1", "b"))(st, n, r)
		}, 3, []string{"deadline", "write", "deadline", "write", "deadline", "flush", "deadline"}},
		// The replay's first read finds position 2 still being written; its second fails.
		{"a replay's second read failing", nil, "0-0", 0, func(_ *memory.Store, n int, r store.LogRange) (store.LogRange, error) {
			if n == 2 {
				return store.LogRange{}, errors.New("store unreachable")
			}
			r.Last++
			return r, nil
		}, 0, []string{"deadline", "write", "deadline", "write", "deadline"}},
		// A budget of one: the replay spends it on the first event; behind the follower, the
		// stream can read no more.
		{"the budget spent behind the follower", nil, "0-0", 1, appendAt(1, inWorkspace("workspace-1", "b")), 0,
			[]string{"deadline", "write", "deadline", "write", "deadline", "flush", "deadline", "flush", "deadline"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &editedLog{Store: memory.New(), edit: tc.edit}
			c := effectController(t, core.Config{Store: st, EventCatchUp: tc.budget, HeartbeatInterval: time.Hour, EventWriteTimeout: time.Hour})
			appendEntries(t, st.Store, inWorkspace("workspace-1", "a"))
			w := &opsWriter{hdr: http.Header{}, failWrite: tc.failWrite}
			req := httptest.NewRequest(http.MethodGet, "/a2a/events", nil)
			req.Header.Set("X-API-Key", testKey)
			if tc.lastID != "" {
				req.Header.Set("Last-Event-ID", tc.lastID)
			}
			for k, v := range tc.hdr {
				req.Header.Set(k, v)
			}
			done := make(chan struct{})
			go func() { c.ServeHTTP(w, req); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second): // a failure bound only
				t.Fatal("the stream did not end")
			}
			if !slices.Equal(w.ops, tc.want) {
				t.Fatalf("the stream did %v; want %v", w.ops, tc.want)
			}
		})
	}
}

// TestEffectReplayEnds: a replay ends at the position its reads reached. Past a sealed gap at
// the newest position (a number the store skipped), a filtered stream's id alone says so; at an
// append still being written (Through short of Last), the stream reads once more, finds nothing
// new and ends (the follower, or the client's next poll, brings it); a filtered stream told its
// position was lost, on a log never appended to, is sent no id alone after it (the events-lost
// event's id is the position).
func TestEffectReplayEnds(t *testing.T) {
	connected := func(id string) sse { return sse{id, "supervaizer.connected", `{"status":"connected"}`} }
	for _, tc := range []struct {
		name    string
		hdr     map[string]string
		lastID  string
		entries []string
		edit    func(*memory.Store, int, store.LogRange) (store.LogRange, error)
		want    func(epoch string) []sse
		reads   int
	}{
		{"a sealed gap at the newest position", localStreamHeaders("s", "workspace-1"), "0-0",
			[]string{inWorkspace("workspace-1", "a"), inWorkspace("workspace-1", "b"), inWorkspace("workspace-1", "c")},
			func(_ *memory.Store, _ int, r store.LogRange) (store.LogRange, error) {
				r.Entries = slices.DeleteFunc(r.Entries, func(e store.LogEntry) bool { return e.Seq == 3 })
				return r, nil
			},
			func(epoch string) []sse {
				return []sse{connected("0-0"), {epoch + "-1", "supervaizer.effect", effectData("a")},
					{epoch + "-2", "supervaizer.effect", effectData("b")}, {id: epoch + "-3"}}
			}, 2}, // no size known yet: the first read is of one event
		{"an append still being written", nil, "0-0", []string{inWorkspace("workspace-1", "a")},
			func(_ *memory.Store, n int, r store.LogRange) (store.LogRange, error) {
				if n <= 2 { // the stream's two reads see position 2 claimed
					r.Last++
				}
				return r, nil
			},
			func(epoch string) []sse {
				return []sse{connected("0-0"), {epoch + "-1", "supervaizer.effect", effectData("a")}}
			}, 2},
		{"lost on a log never appended to", localStreamHeaders("s", "workspace-1"), "abc-5", nil,
			func(_ *memory.Store, _ int, r store.LogRange) (store.LogRange, error) { return r, nil },
			func(string) []sse {
				return []sse{connected("abc-5"), {"0-0", "supervaizer.events_lost",
					`{"status":"events_lost","reason":"unknown","last_event_id":"abc-5","resumed_after":"0-0"}`}}
			}, 2},
	} {
		st := &editedLog{Store: memory.New(), edit: tc.edit}
		c := effectController(t, core.Config{Store: st})
		appendEntries(t, st.Store, tc.entries...)
		r, err := st.Store.ReadLog(context.Background(), effectsLog, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		status, _, evs := pollEventsWith(t, c, tc.lastID, tc.hdr)
		if want := tc.want(r.Epoch); status != http.StatusOK || !slices.Equal(evs, want) || st.reads() != tc.reads {
			t.Errorf("%s: %d after %d reads\n got %+v\nwant %+v after %d reads", tc.name, status, st.reads(), evs, want, tc.reads)
		}
	}
}

// TestEffectStreamLiveEventFlushed: a live event is flushed to its client when the follower's batch
// that brought it ends on an entry no stream is sent (a malformed header): the stream flushes
// because it sent something, whatever the batch's last entry was.
func TestEffectStreamLiveEventFlushed(t *testing.T) {
	// The log's second read is the follower's start: the two entries come live, in one batch.
	st := &editedLog{Store: memory.New(), edit: appendAfterRead(t, 2, inWorkspace("workspace-1", "b"), "\x00\x05w")}
	c := effectController(t, core.Config{Store: st, HeartbeatInterval: time.Hour})
	appendEntries(t, st.Store, inWorkspace("workspace-1", "a"))
	srv := httptest.NewServer(c)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a failure bound only
	defer cancel()
	r := openStream(t, ctx, srv.URL, nil)
	connected := readEvent(t, r)
	epoch, _, _ := strings.Cut(connected.id, "-")
	if ev := readEvent(t, r); ev != (sse{epoch + "-2", "supervaizer.effect", effectData("b")}) {
		t.Fatalf("after %+v: %+v; want the live event at position 2", connected, ev)
	}
}
