package httpkit

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/supervaize/svz/adapters/internal/testkit"
)

// Tests that each kill a mutant the mutation tester left alive in connlimit.go (issue 30).

// TestReserveIsBounded: with every slot serving a request, reserve connections are accepted for
// health and the next one is refused (closed at once, counted, logged); a reserved connection
// closed gives its place back. A reserved connection never waits for a request (it holds no slot
// to reclaim), a connection already waiting is listed once however often net/http reports it idle,
// and a connection the listener did not accept is ignored.
func TestReserveIsBounded(t *testing.T) {
	log, logs := testkit.Logger()
	ln := testkit.Listen(t)
	ll := newLimitListener(ln, 1, 1, log)
	addr := ln.Addr().String()
	accepted := make(chan *limitedConn, 1)
	accept := func() {
		c, err := ll.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c.(*limitedConn)
	}
	next := func(what string) *limitedConn {
		t.Helper()
		c := <-accepted
		if c == nil {
			t.Fatalf("%s: accept failed", what)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	want := func(what string, active, waiting int) {
		t.Helper()
		if a, w := ll.stats(); a != active || w != waiting {
			t.Fatalf("%s: %d active, %d waiting; want %d, %d", what, a, w, active, waiting)
		}
	}

	dial(t, addr)
	go accept()
	a := next("the first connection")
	want("one accepted", 1, 1)
	ll.connState(a, http.StateIdle) // idle again while already waiting: still listed once
	want("a idle twice", 1, 1)
	ll.connState(a, http.StateActive)
	want("a serving", 1, 0)

	dial(t, addr)
	go accept()
	r := next("the reserved connection")
	if !r.reserved {
		t.Fatal("with the slot serving, the next connection did not get the reserve")
	}
	ll.connState(r, http.StateIdle)
	want("a reserved connection idle", 1, 0)
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	ll.connState(server, http.StateIdle) // not one of the listener's: ignored
	want("a foreign connection idle", 1, 0)

	// The reserve is full: the next connection is closed as soon as accepted.
	refused := dial(t, addr)
	go accept()
	closed := make(chan bool, 1)
	go func() { closed <- testkit.ClosedByServer(refused) }()
	select {
	case c := <-accepted:
		if c != nil {
			c.Close()
		}
		t.Fatal("a connection past the reserve was accepted")
	case ok := <-closed:
		if !ok {
			t.Fatal("a connection past the reserve was not closed")
		}
	}

	// The next refusal, within refusedLogEvery, is counted only; the one after refusedLogEvery is
	// logged with it.
	for i := range 2 {
		if i == 1 {
			ll.mu.Lock() // the pending Accept is running
			ll.refused.last = ll.refused.last.Add(-refusedLogEvery)
			ll.mu.Unlock()
		}
		if !testkit.ClosedByServer(dial(t, addr)) {
			t.Fatal("a connection past the reserve was not closed")
		}
	}

	// The reserved connection closed, the next one takes its place (the pending Accept returns it).
	_ = r.Close()
	dial(t, addr)
	if c := next("after the reserved connection closed"); !c.reserved {
		t.Fatal("the reserve freed, the next connection did not get it")
	}
	// The accept that refused logged before it took the next connection.
	const msg = `"msg":"connection refused: the connection cap is reached (SUPERVAIZER_MAX_CONNECTIONS) and every connection is serving a request","max_connections":1,`
	if s := logs.String(); strings.Count(s, "connection refused") != 2 || !strings.Contains(s, msg+`"refused_since_last_warning":1,"refused_total":1}`) ||
		!strings.Contains(s, msg+`"refused_since_last_warning":2,"refused_total":3}`) {
		t.Errorf("want 2 refusal warnings, of 1 refusal then of 2 more (3 in all):\n%s", s)
	}
}

// deadlineConn records the deadlines set on it.
type deadlineConn struct {
	net.Conn
	read, write time.Time
	writeErr    error
}

func (c *deadlineConn) SetReadDeadline(t time.Time) error { c.read = t; return nil }
func (c *deadlineConn) SetWriteDeadline(t time.Time) error {
	c.write = t
	return c.writeErr
}

// TestReservedReadDeadline: a reserved connection's reads never wait past its bound, whatever
// net/http asks (none, or later); an earlier deadline is kept; a connection in the cap keeps the
// deadline asked. SetDeadline sets the write deadline as asked and the read one the same way, and
// fails with the write one's error.
func TestReservedReadDeadline(t *testing.T) {
	bound := time.Date(2026, 12, 5, 10, 0, 2, 0, time.UTC)
	earlier, later := bound.Add(-time.Second), bound.Add(time.Second)
	for _, tc := range []struct {
		reserved bool
		asked    time.Time
		want     time.Time
	}{
		{true, time.Time{}, bound},
		{true, later, bound},
		{true, bound, bound},
		{true, earlier, earlier},
		{false, time.Time{}, time.Time{}},
		{false, later, later},
	} {
		for _, viaSetDeadline := range []bool{false, true} {
			dc := &deadlineConn{}
			c := &limitedConn{Conn: dc, reserved: tc.reserved, bound: bound}
			var err error
			if viaSetDeadline {
				err = c.SetDeadline(tc.asked)
			} else {
				err = c.SetReadDeadline(tc.asked)
			}
			if err != nil || !dc.read.Equal(tc.want) {
				t.Errorf("reserved %v, asked %v (SetDeadline %v): read deadline %v, %v; want %v", tc.reserved, tc.asked, viaSetDeadline, dc.read, err, tc.want)
			}
			if viaSetDeadline && !dc.write.Equal(tc.asked) {
				t.Errorf("reserved %v, asked %v: write deadline %v, want it as asked", tc.reserved, tc.asked, dc.write)
			}
		}
	}
	broken := errors.New("use of closed network connection")
	dc := &deadlineConn{writeErr: broken}
	c := &limitedConn{Conn: dc, reserved: true, bound: bound}
	if err := c.SetDeadline(later); !errors.Is(err, broken) || !dc.read.IsZero() {
		t.Errorf("SetDeadline on a broken connection: %v, read deadline %v; want the write deadline's error and no read deadline", err, dc.read)
	}
}

// deadlineListener accepts deadlineConns.
type deadlineListener struct{ net.Listener }

func (l deadlineListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &deadlineConn{Conn: c}, nil
}

// TestReservedBound: a reserved connection's bound is reservedReadBound after its accept, and
// its reads are bounded from then on, before net/http sets a deadline.
func TestReservedBound(t *testing.T) {
	log, _ := testkit.Logger()
	ln := testkit.Listen(t)
	ll := newLimitListener(deadlineListener{ln}, 1, 1, log)
	ll.active = 1 // the slot serves a request: the next connection gets the reserve
	dial(t, ln.Addr().String())
	before := time.Now()
	c, err := ll.Accept()
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lc := c.(*limitedConn)
	if !lc.reserved || lc.bound.Before(before.Add(reservedReadBound)) || lc.bound.After(after.Add(reservedReadBound)) {
		t.Fatalf("reserved %v, bound %v after the accept began (which took %v): want %v after it", lc.reserved, lc.bound.Sub(before), after.Sub(before), reservedReadBound)
	}
	if read := lc.Conn.(*deadlineConn).read; !read.Equal(lc.bound) {
		t.Fatalf("read deadline %v at the accept, want the bound %v", read, lc.bound)
	}
}

// TestDefaultMaxConnections: three quarters of the file limit, at most DefaultMaxConnections, at
// least 1; DefaultMaxConnectionsHere reads this process's soft limit.
func TestDefaultMaxConnections(t *testing.T) {
	for nofile, want := range map[uint64]int{0: 1, 1: 1, 4: 3, 7: 3, 8: 6, 1024: 768, 5461: 4095, 5464: 4096, 1 << 20: 4096} {
		if got := DefaultMaxConnectionsFor(nofile); got != want {
			t.Errorf("DefaultMaxConnectionsFor(%d) = %d, want %d", nofile, got, want)
		}
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	// A soft limit under the one where the cap reaches its maximum, lowered for this check only.
	low := lim
	low.Cur = min(lim.Max, 1024)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	got := DefaultMaxConnectionsHere()
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if want := DefaultMaxConnectionsFor(low.Cur); got != want {
		t.Errorf("DefaultMaxConnectionsHere with a soft limit of %d: %d, want %d", low.Cur, got, want)
	}
}
