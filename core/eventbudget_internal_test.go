package core

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
)

// bigEventController serves a controller whose effect log holds n events of about size bytes
// each (a resource list of thousands of items, as in the trial that found the bound missing).
func bigEventController(t *testing.T, cfg Config, n, size int) (*Controller, string) {
	c, addr, _ := bigEventServer(t, cfg, n, size)
	return c, addr
}

// bigEventServer is bigEventController, with the count of connections the server has closed.
func bigEventServer(t *testing.T, cfg Config, n, size int) (*Controller, string, *atomic.Int64) {
	t.Helper()
	reg, err := contract.BuildRegistration(contract.RegistrationSpec{AgentSlug: "s", DisplayName: "S", A2UICatalogVersion: "c.1",
		Surfaces: []contract.SurfaceSpec{contract.SurfaceID("job.start")}, Actions: []contract.ActionSpec{contract.ActionID("job.start")}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAgent(AgentConfig{Name: "S", Registration: reg})
	if err != nil {
		t.Fatal(err)
	}
	a.HandleAction("job.start", ActionFunc(func(context.Context, *contract.ActionRequest) (*contract.ActionResult, error) {
		return &contract.ActionResult{Status: contract.StatusOK}, nil
	}))
	a.HandleSurface("job.start", SurfaceFunc(func(_ context.Context, r *contract.SurfaceRequest) (*contract.SurfaceResult, error) {
		return &contract.SurfaceResult{Surface: r.Surface}, nil
	}))
	cfg.APIKey, cfg.Authorizer, cfg.Logger = "k", grant.LocalBypass{ServerID: "SRV"}, slog.New(slog.DiscardHandler)
	// Events this large are what the stream's memory bounds are for: the log keeps them whole.
	cfg.EventMaxBytes, cfg.EventRetentionBytes = 1<<20, 1<<30
	c, err := New(cfg, a)
	if err != nil {
		t.Fatal(err)
	}
	req := &contract.ActionRequest{AgentSlug: "s", Action: "job.start", RequestID: "r"}
	effect := contract.Effect{Type: "resource.contacts.list", Message: strings.Repeat("x", size)}
	for range n {
		c.events.appendEffects(context.Background(), req, "", []contract.Effect{effect})
	}
	closed := new(atomic.Int64)
	srv := httptest.NewUnstartedServer(c)
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			closed.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		_ = c.Close()
	})
	return c, strings.TrimPrefix(srv.URL, "http://"), closed
}

// openStream sends GET /a2a/events resuming from the beginning and never reads the answer.
func openStream(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, "GET /a2a/events HTTP/1.1\r\nHost: x\r\nX-API-Key: k\r\nLast-Event-ID: 0-0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	return conn
}

// waitBound fails a wait for something that must happen: a failure bound only (a passing test
// never waits for it), generous because 300 events of 130 KB per stream take long to replay on a
// loaded machine under -race.
const waitBound = 5 * time.Minute

// waitFor polls cond (a counter of the controller, not a clock) for at most waitBound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(waitBound); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", waitBound, what)
		}
	}
}

// TestReplayMemoryBounded: 100 clients resume from the beginning of a log of 300 events of
// 130 KB (39 MB each to replay) and never read. What the streams hold, counted by the replay
// budget, never exceeds it: the streams that got a page are blocked writing it, the others wait
// holding nothing. Before the bound each stream loaded up to 1,000 events (tens of MB) at once.
func TestReplayMemoryBounded(t *testing.T) {
	const budget, page = 8 << 20, 1 << 20
	c, addr := bigEventController(t, Config{EventReplayBytes: budget, EventPageBytes: page, EventWriteTimeout: time.Hour}, 300, 130_000)
	conns := make([]net.Conn, 100)
	for i := range conns {
		conns[i] = openStream(t, addr)
	}
	waitFor(t, "100 streams open", func() bool { return c.events.streams.Load() == 100 })
	// The budget fills up: every page taken is stuck in a write to a client that does not read.
	waitFor(t, "the replay budget in use", func() bool {
		held, _ := c.events.replay.usage()
		return held > budget-page
	})
	held, peak := c.events.replay.usage()
	if held > budget || peak > budget {
		t.Fatalf("streams hold %d bytes (peak %d), beyond the budget of %d", held, peak, budget)
	}
	if m := c.events.maxEvent.Load(); m < 130_000 || m > page {
		t.Fatalf("largest event %d", m)
	}
	// The clients leaving ends their streams and gives every byte back.
	for _, conn := range conns {
		conn.Close()
	}
	waitFor(t, "the streams ended", func() bool { return c.events.streams.Load() == 0 })
	if held, _ := c.events.replay.usage(); held != 0 {
		t.Fatalf("%d bytes still held after every stream ended", held)
	}
}

// TestStalledClientCut: a client that stops reading is cut once one write has blocked for the
// write timeout, not at the request deadline (5 minutes; the test server has none: nothing else
// ends these streams), and its connection is closed.
func TestStalledClientCut(t *testing.T) {
	c, addr, closed := bigEventServer(t, Config{EventWriteTimeout: 50 * time.Millisecond}, 300, 130_000)
	conns := make([]net.Conn, 10)
	for i := range conns {
		conns[i] = openStream(t, addr)
	}
	// The signal: the server closed every connection, with no client reading, and no stream is
	// left. (Not "10 streams open, then none": on a loaded machine the first streams may be cut
	// before the last one opens.)
	waitFor(t, "the stalled streams cut", func() bool { return closed.Load() == 10 && c.events.streams.Load() == 0 })
	if held, _ := c.events.replay.usage(); held != 0 {
		t.Fatalf("%d bytes still held", held)
	}
	for i, conn := range conns {
		_ = conn.SetReadDeadline(time.Now().Add(waitBound))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		_, err = io.Copy(io.Discard, resp.Body) // what the kernel buffered, then the cut
		if ne, ok := err.(net.Error); ok && ne.Timeout() || err == nil {
			t.Fatalf("client %d: the response ended cleanly or not at all (%v): it was not cut", i, err)
		}
	}
}
