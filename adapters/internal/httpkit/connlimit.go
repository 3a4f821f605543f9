package httpkit

import (
	"container/list"
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// Connection cap. Every open connection holds a file descriptor; without a cap, idle or
// slow-header connections exhaust the process's (accept4: too many open files), and then nothing
// is served, health included.
const (
	// DefaultMaxConnections bounds the default cap; DefaultMaxConnectionsFor lowers it under the
	// file limit.
	DefaultMaxConnections = 4096
	// ReservedConnections are accepted beyond the cap for the health route only, so that a probe
	// still gets an answer while the cap is reached.
	ReservedConnections = 8
	// reservedReadBound bounds how long a reserved connection may take to send its request: a
	// slow-header client in the reserve gives its slot back quickly.
	reservedReadBound = 2 * time.Second
	// refusedLogEvery spaces the warnings about refused connections.
	refusedLogEvery = 10 * time.Second
)

// DefaultMaxConnectionsFor is the default cap under a soft RLIMIT_NOFILE of nofile: three
// quarters of it (the rest is for the store's connections, files and the reserve), at most
// DefaultMaxConnections, at least 1.
func DefaultMaxConnectionsFor(nofile uint64) int {
	n := min(nofile/4*3, DefaultMaxConnections)
	return int(max(n, 1))
}

// DefaultMaxConnectionsHere is DefaultMaxConnectionsFor this process's soft file limit (Go raises
// it to the hard limit at start), or DefaultMaxConnections when it cannot be read.
func DefaultMaxConnectionsHere() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return DefaultMaxConnections
	}
	return DefaultMaxConnectionsFor(lim.Cur)
}

// limitListener accepts at most max connections at once. At the cap, a new connection takes the
// slot of the oldest one that waits for a request (idle between requests, or still sending its
// headers), which is closed: idle keep-alive connections and slow-header floods cannot hold the
// cap while new requests and health are refused (nginx reclaims keep-alive connections the same
// way). When every slot serves a request, at most reserve more connections are accepted for the
// health route only (each with reservedReadBound to send its request), and any other is closed at
// once after accepting it: refused early, without a descriptor held or a backlog left to grow.
//
// A connection waits from its accept, and again from the end of each response (ConnState
// StateIdle), until its next request's headers are read (StateActive): the window in which
// closing it loses no request. A connection reclaimed just as its headers complete never has
// its request served (guard): it is closed, as if it had been closed a moment sooner.
type limitListener struct {
	net.Listener
	max, reserve int
	log          *slog.Logger

	mu               sync.Mutex
	active, reserved int
	waiting          list.List // of *limitedConn holding a slot and waiting for a request, oldest first
	refused          logCount
	reclaimed        logCount
}

// logCount counts an event whose warning is logged at most once per refusedLogEvery.
type logCount struct {
	total, unlogged int
	last            time.Time
}

// note counts one event and says whether to log it now.
func (n *logCount) note(now time.Time) bool {
	n.total++
	n.unlogged++
	if now.Sub(n.last) < refusedLogEvery {
		return false
	}
	n.last = now
	return true
}

func newLimitListener(ln net.Listener, max, reserve int, log *slog.Logger) *limitListener {
	return &limitListener{Listener: ln, max: max, reserve: reserve, log: log}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		if l.active < l.max {
			l.active++
			lc := &limitedConn{Conn: c, l: l}
			lc.wait = l.waiting.PushBack(lc)
			l.mu.Unlock()
			return lc, nil
		}
		if front := l.waiting.Front(); front != nil {
			// The slot of the oldest waiting connection: it counts as given back once closed.
			old := l.waiting.Remove(front).(*limitedConn)
			old.wait, old.reclaimed = nil, true
			l.active++
			lc := &limitedConn{Conn: c, l: l}
			lc.wait = l.waiting.PushBack(lc)
			logNow := l.reclaimed.note(time.Now())
			n, total := l.reclaimed.unlogged, l.reclaimed.total
			if logNow {
				l.reclaimed.unlogged = 0
			}
			l.mu.Unlock()
			_ = old.Close()
			if logNow {
				l.log.Warn("connection reclaimed: the connection cap is reached (SUPERVAIZER_MAX_CONNECTIONS): the oldest connection waiting for a request was closed for a new one",
					"max_connections", l.max, "reclaimed_since_last_warning", n, "reclaimed_total", total)
			}
			return lc, nil
		}
		if l.reserved < l.reserve {
			l.reserved++
			l.mu.Unlock()
			rc := &limitedConn{Conn: c, l: l, reserved: true, bound: time.Now().Add(reservedReadBound)}
			_ = c.SetReadDeadline(rc.bound)
			return rc, nil
		}
		logNow := l.refused.note(time.Now())
		n, total := l.refused.unlogged, l.refused.total
		if logNow {
			l.refused.unlogged = 0
		}
		l.mu.Unlock()
		_ = c.Close()
		if logNow {
			l.log.Warn("connection refused: the connection cap is reached (SUPERVAIZER_MAX_CONNECTIONS) and every connection is serving a request",
				"max_connections", l.max, "refused_since_last_warning", n, "refused_total", total)
		}
	}
}

// connState follows a connection through net/http: waiting for a request (from its accept, and
// from the end of each response) or not (reading a request's body, serving it, hijacked, closed).
func (l *limitListener) connState(c net.Conn, st http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok || lc.reserved {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch st {
	case http.StateIdle:
		if lc.wait == nil && !lc.reclaimed && !lc.closed {
			lc.wait = l.waiting.PushBack(lc)
		}
	case http.StateActive, http.StateHijacked, http.StateClosed:
		lc.stopWaiting()
	}
}

// stats returns the connections holding a slot and, of them, those waiting for a request.
func (l *limitListener) stats() (active, waiting int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.active, l.waiting.Len()
}

// limitedConn gives its slot back when closed.
type limitedConn struct {
	net.Conn
	l        *limitListener
	reserved bool
	bound    time.Time // reserved: reads never wait past it
	once     sync.Once

	// Under l.mu.
	wait      *list.Element // in l.waiting while the connection waits for a request
	reclaimed bool          // closed to give its slot to a new connection
	closed    bool
}

// stopWaiting takes c out of the waiting list, under l.mu.
func (c *limitedConn) stopWaiting() {
	if c.wait != nil {
		c.l.waiting.Remove(c.wait)
		c.wait = nil
	}
}

func (c *limitedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		c.closed = true
		c.stopWaiting()
		if c.reserved {
			c.l.reserved--
		} else {
			c.l.active--
		}
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// wasReclaimed reports whether c was closed for a new connection.
func (c *limitedConn) wasReclaimed() bool {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	return c.reclaimed
}

// SetReadDeadline keeps a reserved connection's reads within its bound, whatever net/http asks.
func (c *limitedConn) SetReadDeadline(t time.Time) error {
	if c.reserved && (t.IsZero() || t.After(c.bound)) {
		t = c.bound
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *limitedConn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.SetReadDeadline(t)
}

type connKey struct{}

// connContext gives the requests of a capped connection their connection.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if lc, ok := c.(*limitedConn); ok {
		return context.WithValue(ctx, connKey{}, lc)
	}
	return ctx
}

// CapFullBody answers a request other than health on a reserved connection.
const CapFullBody = `{"detail":"This server is at its connection limit: retry later"}`

// guard serves h on a capped connection's requests: nothing on a connection reclaimed before its
// request was marked served (its answer could not be written anyway), path only on a reserved
// connection (503 to anything else; the connection then closes, giving its slot back).
func guard(h http.Handler, path string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lc, _ := r.Context().Value(connKey{}).(*limitedConn)
		switch {
		case lc == nil:
			h.ServeHTTP(w, r)
		case !lc.reserved:
			if !lc.wasReclaimed() {
				h.ServeHTTP(w, r)
			}
		case r.URL.Path == path:
			w.Header().Set("Connection", "close")
			h.ServeHTTP(w, r)
		default:
			w.Header().Set("Connection", "close")
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(CapFullBody))
		}
	})
}
