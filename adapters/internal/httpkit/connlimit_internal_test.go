package httpkit

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/adapters/internal/testkit"
)

// capServer serves a health route and an echo of the path behind a cap of max connections, on a
// listener the test watches (stats), through Server.Serve's own wiring.
func capServer(t *testing.T, max int) (*limitListener, string, *testkit.LogBuffer) {
	t.Helper()
	log, logs := testkit.Logger()
	ll := newLimitListener(testkit.Listen(t), max, ReservedConnections, log)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/.well-known/health" {
			_, _ = io.WriteString(w, `{"status":"ok"}`)
			return
		}
		_, _ = io.WriteString(w, "served "+r.URL.Path)
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Server{Name: "test", Listener: ll, Handler: h, Log: log, ReadHeaderTimeout: 10 * time.Minute,
			IdleTimeout: 10 * time.Minute, ShutdownTimeout: time.Second, MaxConnections: max, HealthPath: "/.well-known/health"}.Serve(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return ll, ll.Addr().String(), logs
}

// waitState polls the listener's state (not a clock) until cond holds, for at most 30 s.
func waitState(t *testing.T, ll *limitListener, what string, cond func(active, waiting int) bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		active, waiting := ll.stats()
		if cond(active, waiting) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s, %s: %d connections hold a slot, %d of them waiting", what, active, waiting)
		}
	}
}

// doRequest writes a whole request on c and reads its answer: status, headers (without Date,
// which changes) and body.
func doRequest(t *testing.T, c net.Conn, r *bufio.Reader, method, path string, close bool) (int, http.Header, string) {
	t.Helper()
	req := method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n"
	if close {
		req += "Connection: close\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second)) // only a broken server reaches it
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Header.Del("Date")
	if resp.Close { // ReadResponse takes "Connection: close" out of the headers
		resp.Header.Set("Connection", "close")
	}
	return resp.StatusCode, resp.Header, string(b)
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestCapReclaimsIdleConnections: with SUPERVAIZER_MAX_CONNECTIONS=64, 64 keep-alive connections
// that each made one health check and then idle hold every slot. A new request is still served:
// it takes the slot of the oldest idle connection, which is closed; the others stay usable.
// Nothing is timed: every wait is on the listener's state or on the server's answer.
func TestCapReclaimsIdleConnections(t *testing.T) {
	const capN = 64
	ll, addr, logs := capServer(t, capN)
	idle := make([]net.Conn, capN+1)
	readers := make([]*bufio.Reader, capN+1)
	// keepAlive makes idle[i] a connection that made one health check and idles, the youngest.
	keepAlive := func(i int) {
		t.Helper()
		idle[i] = dial(t, addr)
		readers[i] = bufio.NewReader(idle[i])
		if code, _, body := doRequest(t, idle[i], readers[i], "GET", "/.well-known/health", false); code != 200 || body != `{"status":"ok"}` {
			t.Fatalf("health check %d: %d %q", i, code, body)
		}
	}
	for i := range capN {
		keepAlive(i)
		waitState(t, ll, "connection "+strconv.Itoa(i)+" idle", func(active, waiting int) bool { return waiting == i+1 })
	}

	probe := dial(t, addr)
	if code, _, body := doRequest(t, probe, bufio.NewReader(probe), "POST", "/a2a", true); code != 200 || body != "served /a2a" {
		t.Fatalf("POST /a2a with every slot idle: %d %q, want it served", code, body)
	}
	if !testkit.ClosedByServer(idle[0]) {
		t.Fatal("the oldest idle connection was not closed")
	}
	// The probe gone, a new keep-alive connection fills the cap again; then health gets in, in the
	// slot of the oldest idle connection left.
	waitState(t, ll, "the probe closed", func(active, waiting int) bool { return active == capN-1 && waiting == capN-1 })
	keepAlive(capN)
	waitState(t, ll, "the cap full again", func(active, waiting int) bool { return active == capN && waiting == capN })
	health := dial(t, addr)
	if code, _, body := doRequest(t, health, bufio.NewReader(health), "GET", "/.well-known/health", true); code != 200 || body != `{"status":"ok"}` {
		t.Fatalf("health with every slot idle: %d %q", code, body)
	}
	if !testkit.ClosedByServer(idle[1]) {
		t.Fatal("the second oldest idle connection was not closed next")
	}
	// The younger ones were kept: each still serves its next request.
	for i := 2; i <= capN; i++ {
		if code, _, body := doRequest(t, idle[i], readers[i], "GET", "/again-"+strconv.Itoa(i), false); code != 200 || body != "served /again-"+strconv.Itoa(i) {
			t.Fatalf("kept connection %d: %d %q", i, code, body)
		}
	}
	if !strings.Contains(logs.String(), "connection reclaimed: the connection cap is reached") {
		t.Errorf("no reclaim warning:\n%s", logs)
	}
}

// TestReclaimAccounting drives the listener by hand: a reclaimed connection gives its slot to the
// new one and is never served, even when its headers complete as it is reclaimed; a connection
// closed or reclaimed never waits again; a connection serving a request is not reclaimed (the
// reserve takes the next one).
func TestReclaimAccounting(t *testing.T) {
	log, _ := testkit.Logger()
	ll := newLimitListener(testkit.Listen(t), 2, 1, log)
	accept := func() *limitedConn { t.Helper(); return acceptNext(t, ll) }
	want := func(what string, active, waiting int) {
		t.Helper()
		if a, w := ll.stats(); a != active || w != waiting {
			t.Fatalf("%s: %d active, %d waiting; want %d, %d", what, a, w, active, waiting)
		}
	}
	a, b := accept(), accept()
	want("two accepted", 2, 2)
	ll.connState(a, http.StateActive) // a's headers are read
	c := accept()                     // reclaims b, the oldest waiting, not a
	want("at the cap", 2, 1)
	if !b.wasReclaimed() || a.wasReclaimed() || c.wasReclaimed() {
		t.Fatalf("reclaimed: a %v, b %v, c %v; want b only", a.wasReclaimed(), b.wasReclaimed(), c.wasReclaimed())
	}
	// b's headers completed as it was reclaimed: its request is not served.
	ll.connState(b, http.StateActive)
	ll.connState(b, http.StateIdle)
	want("a reclaimed connection does not wait again", 2, 1)
	served := false
	h := guard(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served = true }), "/health")
	for _, conn := range []*limitedConn{b, a, nil} { // nil: a connection the cap did not accept, served as is
		served = false
		r := httptest.NewRequest(http.MethodPost, "/a2a", nil)
		if conn != nil {
			r = r.WithContext(connContext(r.Context(), conn))
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
		if served != (conn != b) {
			t.Fatalf("served %v on connection %p (a %p, b %p)", served, conn, a, b)
		}
	}
	// a finishes its request and waits again; closed, it waits no more.
	ll.connState(a, http.StateIdle)
	want("a idle", 2, 2)
	ll.connState(c, http.StateActive)
	ll.connState(a, http.StateActive)
	want("both serving", 2, 0)
	r := accept() // nothing to reclaim: the reserve
	if !r.reserved {
		t.Fatal("with every connection serving, the next one did not get the reserve")
	}
	_ = a.Close()
	ll.connState(a, http.StateIdle)
	want("a closed", 1, 0)
	// c waits; closed, it waits no more, before net/http reports it closed.
	ll.connState(c, http.StateIdle)
	want("c idle", 1, 1)
	_ = c.Close()
	want("c closed", 0, 0)
}

// acceptNext dials ll and returns the connection ll accepts, closed when the test ends.
func acceptNext(t *testing.T, ll *limitListener) *limitedConn {
	t.Helper()
	dial(t, ll.Addr().String())
	c, err := ll.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*limitedConn)
}

// TestReclaimLogSpacing: the first reclaim is logged; the next ones within refusedLogEvery are
// counted only, and the first after it is logged with them.
func TestReclaimLogSpacing(t *testing.T) {
	log, logs := testkit.Logger()
	ll := newLimitListener(testkit.Listen(t), 1, 0, log)
	for i := range 4 {
		if i == 3 {
			ll.reclaimed.last = ll.reclaimed.last.Add(-refusedLogEvery) // as if that long had passed
		}
		acceptNext(t, ll) // from the second on, reclaims the one before
	}
	const msg = `"msg":"connection reclaimed: the connection cap is reached (SUPERVAIZER_MAX_CONNECTIONS): the oldest connection waiting for a request was closed for a new one","max_connections":1,`
	s := logs.String()
	if strings.Count(s, "connection reclaimed") != 2 || !strings.Contains(s, msg+`"reclaimed_since_last_warning":1,"reclaimed_total":1}`) ||
		!strings.Contains(s, msg+`"reclaimed_since_last_warning":2,"reclaimed_total":3}`) {
		t.Fatalf("want 2 reclaim warnings, of 1 reclaim then of 2 more (3 in all):\n%s", s)
	}
}

// TestLogCountNote: the first event is logged, the next ones within refusedLogEvery of the last
// logged one are counted only, and the first at refusedLogEvery or later is logged again; every
// event counts in total and in unlogged (which the caller resets when it logs).
func TestLogCountNote(t *testing.T) {
	start := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	var n logCount
	for i, c := range []struct {
		at             time.Duration
		log            bool
		total, pending int
	}{
		{0, true, 1, 1},
		{time.Second, false, 2, 2},
		{refusedLogEvery - time.Nanosecond, false, 3, 3},
		{refusedLogEvery, true, 4, 4},
		{refusedLogEvery + time.Second, false, 5, 5},
	} {
		if got := n.note(start.Add(c.at)); got != c.log || n.total != c.total || n.unlogged != c.pending {
			t.Fatalf("event %d at +%s: logged %v, total %d, unlogged %d; want %v, %d, %d", i, c.at, got, n.total, n.unlogged, c.log, c.total, c.pending)
		}
	}
}

// TestConnCloseFreesItsSlot: closing a connection gives back the slot it held (a reserved one to
// the reserve, another to the cap), once however often it is closed.
func TestConnCloseFreesItsSlot(t *testing.T) {
	l := &limitListener{max: 2, reserve: 1, active: 2, reserved: 1}
	for _, reserved := range []bool{true, false} {
		a, b := net.Pipe()
		defer b.Close()
		c := &limitedConn{Conn: a, l: l, reserved: reserved}
		for range 2 {
			_ = c.Close()
		}
	}
	if l.active != 1 || l.reserved != 0 {
		t.Fatalf("active %d, reserved %d after closing one of each twice: want 1 and 0", l.active, l.reserved)
	}
}
