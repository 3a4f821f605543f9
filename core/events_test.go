package core_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
)

type sse struct{ id, event, data string }

// readEvent reads one server-sent event (an id alone included).
func readEvent(t *testing.T, r *bufio.Reader) sse {
	t.Helper()
	var ev sse
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended while reading an event: %v (partial %+v)", err, ev)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if ev != (sse{}) { // an id alone is an event too: it moves the client's position
				return ev
			}
			continue
		}
		k, v, _ := strings.Cut(line, ": ")
		switch k {
		case "id":
			ev.id = v
		case "event":
			ev.event = v
		case "data":
			ev.data = v
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
}

func openStream(t *testing.T, ctx context.Context, url string, hdr map[string]string) *bufio.Reader {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/a2a/events", nil)
	req.Header.Set("X-API-Key", testKey)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" || resp.Header.Get("Cache-Control") != "no-store" ||
		resp.Header.Get("X-Accel-Buffering") != "no" {
		t.Fatalf("stream answer: %d %v", resp.StatusCode, resp.Header)
	}
	return bufio.NewReader(resp.Body)
}

func effectController(t *testing.T, cfg core.Config) *core.Controller {
	return newController(t, cfg, handlers{actions: map[string]core.ActionFunc{
		"job.start": func(_ context.Context, r *contract.ActionRequest) (*contract.ActionResult, error) {
			return &contract.ActionResult{Status: "ok", Effects: []contract.Effect{{Type: "job.started", JobID: "job-123"}}}, nil
		},
		"job.stop": okAction(&contract.ActionResult{Status: "error"}),
		// An invalid result (a handler failure, -32603): its effects are never published.
		"workspace_binding.delete": okAction(&contract.ActionResult{Status: "maybe", Effects: []contract.Effect{{Type: "never.published"}}}),
	}, surfaces: map[string]core.SurfaceFunc{
		"job.start": func(_ context.Context, r *contract.SurfaceRequest) (*contract.SurfaceResult, error) {
			return &contract.SurfaceResult{Surface: r.Surface}, nil
		},
	}})
}

// TestEffectStream is spec §12.2 case 17, plus heartbeats and what publishes nothing.
func TestEffectStream(t *testing.T) {
	c := effectController(t, core.Config{HeartbeatInterval: 150 * time.Millisecond})
	srv := httptest.NewServer(c)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := openStream(t, ctx, srv.URL, nil)
	if ev := readEvent(t, r); ev.event != "supervaizer.connected" || ev.data != `{"status":"connected"}` || !strings.HasSuffix(ev.id, "-0") {
		t.Fatalf("first event %+v, want connected at position <instance>-0", ev)
	}
	// A surface load and a failed dispatch (refused, invalid result, no handler) publish nothing;
	// an action (even status "error") does.
	post(t, c, rpcBody(t, 1, surfaceLoad, params(nil)), nil)
	post(t, c, rpcBody(t, 2, actionInvoke, params(map[string]any{"agent_slug": "nope"})), nil)
	post(t, c, rpcBody(t, 2, actionInvoke, params(map[string]any{"action": "workspace_binding.delete"})), nil)
	post(t, c, rpcBody(t, 2, actionInvoke, params(map[string]any{"action": "job.start.preview"})), nil) // no handler: -32010
	post(t, c, rpcBody(t, 3, actionInvoke, params(nil)), nil)
	post(t, c, rpcBody(t, 4, actionInvoke, params(map[string]any{"action": "job.stop", "request_id": "request-2"})), nil)
	ev := readEvent(t, r)
	if ev.event != "supervaizer.effect" || ev.data != `{"agent_slug":"s","action":"job.start","request_id":"request-1","effects":[{"type":"job.started","job_id":"job-123"}]}` {
		t.Fatalf("effect event %+v", ev)
	}
	if !strings.HasSuffix(ev.id, "-1") {
		t.Errorf("first effect id %q, want <instance>-1", ev.id)
	}
	ev = readEvent(t, r)
	if ev.data != `{"agent_slug":"s","action":"job.stop","request_id":"request-2","effects":[]}` {
		t.Fatalf("second effect %+v", ev)
	}
	if ev := readEvent(t, r); ev != (sse{event: "supervaizer.heartbeat", data: `{"status":"ok"}`}) {
		t.Fatalf("after an idle interval got %+v, want a heartbeat", ev)
	}
}

// TestEffectReplay resumes after Last-Event-ID from the effect log, and tells a client whose
// position is gone (older than the retention, or of another log) before going on from the oldest
// event kept.
func TestEffectReplay(t *testing.T) {
	c := effectController(t, core.Config{EventRetentionCount: 2})
	srv := httptest.NewServer(c)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	live := openStream(t, ctx, srv.URL, nil)
	readEvent(t, live)
	var ids []string
	for i := range 3 {
		post(t, c, rpcBody(t, i, actionInvoke, params(map[string]any{"request_id": "req-" + string(rune('a'+i))})), nil)
		ids = append(ids, readEvent(t, live).id)
	}
	epoch, _, _ := strings.Cut(ids[0], "-")
	if ids[0] != epoch+"-1" || ids[1] != epoch+"-2" || ids[2] != epoch+"-3" {
		t.Fatalf("ids %v, want <epoch>-1, -2, -3", ids)
	}

	resumed := openStream(t, ctx, srv.URL, map[string]string{"Last-Event-ID": ids[1]})
	if ev := readEvent(t, resumed); ev.event != "supervaizer.connected" || ev.id != ids[1] {
		t.Fatalf("connected %+v, want the position resumed from", ev)
	}
	if ev := readEvent(t, resumed); ev.id != ids[2] || !strings.Contains(ev.data, `"request_id":"req-c"`) {
		t.Fatalf("replay after %s gave %+v, want %s", ids[1], ev, ids[2])
	}
	// The log keeps two events: resuming after the first loses nothing.
	gap := openStream(t, ctx, srv.URL, map[string]string{"Last-Event-ID": ids[0]})
	readEvent(t, gap)
	if a, b := readEvent(t, gap), readEvent(t, gap); a.id != ids[1] || b.id != ids[2] {
		t.Fatalf("replay after %s gave %s, %s", ids[0], a.id, b.id)
	}
	// From the beginning, the first event is gone: the client is told, then gets the two kept.
	for _, tc := range []struct{ asked, reason string }{
		{"0-0", "expired"},
		{epoch + "-0", "expired"},
		{"ffffffffffff-1", "unknown"}, // another log's id
		{epoch + "-99", "unknown"},    // ahead of the log
	} {
		r := openStream(t, ctx, srv.URL, map[string]string{"Last-Event-ID": tc.asked})
		if ev := readEvent(t, r); ev.event != "supervaizer.connected" || ev.id != tc.asked {
			t.Fatalf("Last-Event-ID %s: connected %+v", tc.asked, ev)
		}
		want := sse{id: epoch + "-1", event: "supervaizer.events_lost",
			data: `{"status":"events_lost","reason":"` + tc.reason + `","last_event_id":"` + tc.asked + `","resumed_after":"` + epoch + `-1"}`}
		if ev := readEvent(t, r); ev != want {
			t.Fatalf("Last-Event-ID %s: got %+v, want %+v", tc.asked, ev, want)
		}
		if a, b := readEvent(t, r), readEvent(t, r); a.id != ids[1] || b.id != ids[2] {
			t.Fatalf("Last-Event-ID %s: then %s, %s; want %s, %s", tc.asked, a.id, b.id, ids[1], ids[2])
		}
	}
	post(t, c, rpcBody(t, 9, actionInvoke, params(map[string]any{"request_id": "req-live"})), nil)
	if ev := readEvent(t, gap); !strings.Contains(ev.data, `"req-live"`) || ev.id != epoch+"-4" {
		t.Fatalf("after the replay: got %+v, want the live event at position 4", ev)
	}
}

// plainWriter is a ResponseWriter that cannot flush, like a buffering serverless adapter.
type plainWriter struct {
	hdr    http.Header
	status int
	body   bytes.Buffer
}

func (w *plainWriter) Header() http.Header         { return w.hdr }
func (w *plainWriter) Write(b []byte) (int, error) { return w.body.Write(b) }
func (w *plainWriter) WriteHeader(s int)           { w.status = s }

// TestEffectStreamPollMode: without Flush each request ends at once with what it has, and a client
// that polls with the last id it saw receives every effect exactly once.
func TestEffectStreamPollMode(t *testing.T) {
	c := effectController(t, core.Config{})
	poll := func(lastID string) []sse {
		t.Helper()
		done := make(chan *plainWriter, 1)
		go func() {
			w := &plainWriter{hdr: http.Header{}}
			req := httptest.NewRequest(http.MethodGet, "/a2a/events", nil)
			req.Header.Set("X-API-Key", testKey)
			if lastID != "" {
				req.Header.Set("Last-Event-ID", lastID)
			}
			c.ServeHTTP(w, req)
			done <- w
		}()
		select {
		case w := <-done:
			if w.status != 200 {
				t.Fatalf("poll status %d", w.status)
			}
			var evs []sse
			r := bufio.NewReader(&w.body)
			for w.body.Len() > 0 || r.Buffered() > 0 {
				evs = append(evs, readEvent(t, r))
			}
			return evs
		case <-time.After(30 * time.Second): // generous: a loaded machine
			t.Fatal("the stream did not end on a writer that cannot flush")
			return nil
		}
	}
	first := poll("")
	if len(first) != 1 || first[0].event != "supervaizer.connected" || first[0].id == "" {
		t.Fatalf("first poll %+v, want only the connected event, with an id", first)
	}
	post(t, c, rpcBody(t, 1, actionInvoke, params(nil)), nil)
	second := poll(first[0].id)
	if len(second) != 2 || second[0].id != first[0].id || second[1].event != "supervaizer.effect" ||
		second[1].data != `{"agent_slug":"s","action":"job.start","request_id":"request-1","effects":[{"type":"job.started","job_id":"job-123"}]}` {
		t.Fatalf("second poll %+v, want connected then the effect", second)
	}
	if third := poll(second[1].id); len(third) != 1 || third[0].id != second[1].id {
		t.Fatalf("third poll %+v, want only connected at the effect's position", third)
	}
}

// TestEffectStreamEnds: a request deadline and Close both end a stream cleanly.
func TestEffectStreamEnds(t *testing.T) {
	c := effectController(t, core.Config{})
	srv := httptest.NewServer(c)
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := openStream(t, ctx, srv.URL, nil)
	readEvent(t, r)
	ended := make(chan error, 1)
	go func() { _, err := io.ReadAll(r); ended <- err }()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		if err != nil {
			t.Errorf("stream ended with %v, want a clean end", err)
		}
	case <-time.After(30 * time.Second): // generous: a loaded machine
		t.Fatal("Close did not end the stream")
	}

	// A request whose context has a deadline but is never cancelled: the stream must end by
	// itself, before the deadline (half-way, when it is nearer than twice the margin), whatever
	// the machine's load.
	c2 := effectController(t, core.Config{})
	req := httptest.NewRequest(http.MethodGet, "/a2a/events", nil).WithContext(deadlineOnly{context.Background(), time.Now().Add(400 * time.Millisecond)})
	req.Header.Set("X-API-Key", testKey)
	rec := httptest.NewRecorder()
	served := make(chan struct{})
	go func() { c2.ServeHTTP(rec, req); close(served) }()
	select {
	case <-served:
	case <-time.After(30 * time.Second): // only a stream that ignores its deadline waits this long
		t.Fatal("a stream with a 400ms deadline did not end by itself")
	}
	if !strings.HasPrefix(rec.Body.String(), "id: ") || !strings.Contains(rec.Body.String(), "event: supervaizer.connected\n") {
		t.Errorf("stream body %q", rec.Body)
	}
}

// deadlineOnly is a context with a deadline that never ends by itself: what the handler does
// before the deadline is its own doing.
type deadlineOnly struct {
	context.Context
	dl time.Time
}

func (d deadlineOnly) Deadline() (time.Time, bool) { return d.dl, true }

// TestEffectStreamGoesOnAfterHeartbeats: a heartbeat written and flushed keeps the stream open:
// more heartbeats follow, then the next effect.
func TestEffectStreamGoesOnAfterHeartbeats(t *testing.T) {
	c := effectController(t, core.Config{HeartbeatInterval: time.Millisecond})
	srv := httptest.NewServer(c)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := openStream(t, ctx, srv.URL, nil)
	if ev := readEvent(t, r); ev.event != "supervaizer.connected" {
		t.Fatalf("first event %+v", ev)
	}
	for range 2 {
		if ev := readEvent(t, r); ev.event != "supervaizer.heartbeat" {
			t.Fatalf("idle stream sent %+v, want a heartbeat", ev)
		}
	}
	post(t, c, rpcBody(t, 1, actionInvoke, params(nil)), nil)
	for {
		ev := readEvent(t, r)
		if ev.event == "supervaizer.effect" {
			break
		}
		if ev.event != "supervaizer.heartbeat" {
			t.Fatalf("got %+v, want heartbeats, then the effect", ev)
		}
	}
}

// opsWriter is a response writer that records what the stream does to it: "write", "flush" and
// "deadline" (each write deadline set, kept in deadlines). From its write number failWrite (from
// 1, 0 for none) on, the client is gone: that write and every write and flush after it fail.
// Its flushes and deadlines fail with flushErr and deadlineErr.
type opsWriter struct {
	hdr         http.Header
	ops         []string
	deadlines   []time.Time
	failWrite   int
	writes      int
	flushErr    error
	deadlineErr error
}

func (w *opsWriter) Header() http.Header { return w.hdr }
func (w *opsWriter) WriteHeader(int)     {}
func (w *opsWriter) Write(b []byte) (int, error) {
	w.ops = append(w.ops, "write")
	if w.writes++; w.gone() {
		return 0, errors.New("the client is gone")
	}
	return len(b), nil
}
func (w *opsWriter) gone() bool { return w.failWrite > 0 && w.writes >= w.failWrite }
func (w *opsWriter) FlushError() error {
	w.ops = append(w.ops, "flush")
	if w.gone() {
		return errors.New("the client is gone")
	}
	return w.flushErr
}
func (w *opsWriter) SetWriteDeadline(t time.Time) error {
	w.ops = append(w.ops, "deadline")
	w.deadlines = append(w.deadlines, t)
	return w.deadlineErr
}

// TestEffectStreamWriteDeadlines: every write and flush of a stream is preceded by a write
// deadline of EventWriteTimeout from then, and a last one bounds the end of the response; a
// writer that has no deadlines (http.ErrNotSupported) is asked once only. A write that fails
// ends the stream: nothing is written or flushed after it.
func TestEffectStreamWriteDeadlines(t *testing.T) {
	gone := errors.New("the client is gone")
	for _, tc := range []struct {
		name        string
		lastID      string
		workspace   string // of a filtered stream: invokeN's events are of workspace-1
		budget      int
		failWrite   int
		deadlineErr error
		want        []string
	}{
		{"a new client, its flush failing", "", "", 0, 0, nil, []string{"deadline", "write", "deadline", "flush", "deadline"}},
		{"a writer of no deadlines", "", "", 0, 0, http.ErrNotSupported, []string{"deadline", "write", "flush"}},
		{"the replay's first write failing", "0-0", "", 0, 2, nil, []string{"deadline", "write", "deadline", "write", "deadline"}},
		{"the events-lost write failing", "another_log-5", "", 0, 2, nil, []string{"deadline", "write", "deadline", "write", "deadline"}},
		// A filtered stream's id alone past the other workspace's events, at the newest position
		// or where the catch-up budget is spent.
		{"the replay's id alone failing", "0-0", "workspace-2", 0, 2, nil, []string{"deadline", "write", "deadline", "write", "deadline"}},
		{"the id alone of a spent budget failing", "0-0", "workspace-2", 1, 2, nil, []string{"deadline", "write", "deadline", "write", "deadline"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := effectController(t, core.Config{EventWriteTimeout: time.Hour, EventCatchUp: tc.budget})
			invokeN(t, c, 2, "d")
			w := &opsWriter{hdr: http.Header{}, failWrite: tc.failWrite, flushErr: gone, deadlineErr: tc.deadlineErr}
			req := httptest.NewRequest(http.MethodGet, "/a2a/events", nil)
			req.Header.Set("X-API-Key", testKey)
			if tc.lastID != "" {
				req.Header.Set("Last-Event-ID", tc.lastID)
			}
			if tc.workspace != "" {
				for k, v := range localStreamHeaders("s", tc.workspace) {
					req.Header.Set(k, v)
				}
			}
			start := time.Now()
			c.ServeHTTP(w, req)
			end := time.Now()
			if !slices.Equal(w.ops, tc.want) {
				t.Fatalf("the stream did %v; want %v", w.ops, tc.want)
			}
			for _, d := range w.deadlines {
				if d.Before(start.Add(time.Hour)) || d.After(end.Add(time.Hour)) {
					t.Errorf("a write deadline %v from the start; want the write timeout, an hour", d.Sub(start))
				}
			}
		})
	}
}

// localStreamHeaders are the headers of a stream request for workspace ws's events in local
// mode, where the token is not verified (as for /a2a): the workspace is the one the request names.
func localStreamHeaders(agent, ws string) map[string]string {
	return map[string]string{core.GrantHeader: "unverified in local mode", core.HeaderAgentSlug: agent, core.HeaderWorkspaceID: ws}
}
