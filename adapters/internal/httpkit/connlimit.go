package httpkit

import (
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

// limitListener accepts at most max connections at once, then at most reserve more for the
// health route (each with reservedReadBound to send its request), and closes any other at once
// after accepting it: refused early, without a descriptor held or a backlog left to grow.
type limitListener struct {
	net.Listener
	max, reserve int
	log          *slog.Logger

	mu                sync.Mutex
	active, reserved  int
	refused, unlogged int
	lastLog           time.Time
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		switch {
		case l.active < l.max:
			l.active++
			l.mu.Unlock()
			return &limitedConn{Conn: c, l: l}, nil
		case l.reserved < l.reserve:
			l.reserved++
			l.mu.Unlock()
			rc := &limitedConn{Conn: c, l: l, reserved: true, bound: time.Now().Add(reservedReadBound)}
			_ = c.SetReadDeadline(rc.bound)
			return rc, nil
		}
		l.refused++
		l.unlogged++
		if now := time.Now(); now.Sub(l.lastLog) >= refusedLogEvery {
			l.log.Warn("connection refused: the connection cap is reached (SUPERVAIZER_MAX_CONNECTIONS)",
				"max_connections", l.max, "refused_since_last_warning", l.unlogged, "refused_total", l.refused)
			l.lastLog, l.unlogged = now, 0
		}
		l.mu.Unlock()
		_ = c.Close()
	}
}

// limitedConn gives its slot back when closed.
type limitedConn struct {
	net.Conn
	l        *limitListener
	reserved bool
	bound    time.Time // reserved: reads never wait past it
	once     sync.Once
}

func (c *limitedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		if c.reserved {
			c.l.reserved--
		} else {
			c.l.active--
		}
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
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

type reservedKey struct{}

// connContext marks the requests of a reserved connection.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if lc, ok := c.(*limitedConn); ok && lc.reserved {
		return context.WithValue(ctx, reservedKey{}, true)
	}
	return ctx
}

// CapFullBody answers a request other than health on a reserved connection.
const CapFullBody = `{"detail":"This server is at its connection limit: retry later"}`

// reservedOnly serves path on a reserved connection and answers 503 to anything else; the
// connection then closes, giving its slot back.
func reservedOnly(h http.Handler, path string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Context().Value(reservedKey{}) == nil {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Connection", "close")
		if r.URL.Path == path {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(CapFullBody))
	})
}
