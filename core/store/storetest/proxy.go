package storetest

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP proxy between a store and its server, for the two faults a network brings: an
// answer lost after the server applied the request (LoseAnswerTo), and a server that stops
// answering (Blackhole). It knows no protocol: it spots a request by bytes it carries (a record's
// key appears as is in a Redis command, a PostgreSQL Bind message and a DynamoDB JSON request).
type Proxy struct {
	target string
	ln     net.Listener

	mu        sync.Mutex
	marker    []byte // lose the answer to the next request that carries it
	lost      int
	blackhole bool
	conns     map[*proxyConn]bool
	accepted  int
	trips     int // round trips: requests sent after an answer (or first) on a connection
}

// proxyConn is one client connection and its connection to the server.
type proxyConn struct {
	client, server net.Conn
	// lose: the answer to the request just forwarded is to be lost. dead: a blackhole swallowed
	// this connection: nothing it carries reaches the other side any more.
	lose, dead bool
	// answered: the server sent something since the client last did, so the client's next
	// bytes start a new round trip.
	answered bool
	sent     bool
}

// NewProxy listens on a free loopback port and forwards every connection to target (host:port)
// until the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p := &Proxy{target: target, ln: ln, conns: make(map[*proxyConn]bool)}
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the host:port clients connect to instead of the server's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// LoseAnswerTo arms the proxy: the next request that carries marker reaches the server, but its
// answer is dropped and its connection cut, as when a network fails after the server applied a
// write. The client sees a broken connection and may send the request again.
func (p *Proxy) LoseAnswerTo(marker string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.marker = []byte(marker)
}

// Lost is the number of answers lost so far.
func (p *Proxy) Lost() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lost
}

// Blackhole, on, makes the server unreachable without refusing anything, as a hung or
// partitioned server does: bytes on every open connection and on the connections accepted
// meanwhile are swallowed. Off, as a restarted server would, it cuts those connections and lets
// new ones reach the server again.
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blackhole = on
	for c := range p.conns {
		switch {
		case on:
			c.dead = true
		case c.dead:
			c.client.Close()
			if c.server != nil {
				c.server.Close()
			}
		}
	}
}

// RoundTrips is the number of round trips clients made so far: on each connection, bytes a
// client sends after the server answered (or first) start one. Pipelined requests count once,
// as they cost one wait. (The bill meter counts PostgreSQL and Redis calls with it.)
func (p *Proxy) RoundTrips() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.trips
}

// Open is the number of client connections open now.
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Accepted is the number of client connections accepted so far.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		c := &proxyConn{client: client}
		p.mu.Lock()
		p.accepted++
		p.conns[c] = true
		c.dead = p.blackhole
		p.mu.Unlock()
		go p.serve(c)
	}
}

func (p *Proxy) serve(c *proxyConn) {
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		c.client.Close()
		if c.server != nil {
			c.server.Close()
		}
	}()
	if p.isDead(c) {
		_, _ = io.Copy(io.Discard, c.client) // until the client gives up
		return
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.mu.Lock()
	c.server = server
	p.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.answers(c)
	}()
	p.requests(c)
	server.Close()
	c.client.Close()
	<-done
}

func (p *Proxy) isDead(c *proxyConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return c.dead
}

// requests forwards what the client sends, watching for the armed marker (also across reads).
func (p *Proxy) requests(c *proxyConn) {
	buf := make([]byte, 64<<10)
	var tail []byte
	for {
		n, err := c.client.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			p.mu.Lock()
			dead := c.dead
			if !c.sent || c.answered {
				p.trips++
				c.sent, c.answered = true, false
			}
			if !dead && p.marker != nil && bytes.Contains(append(tail, chunk...), p.marker) {
				c.lose, p.marker = true, nil
			}
			keep := 0
			if p.marker != nil {
				keep = len(p.marker) - 1
			}
			p.mu.Unlock()
			tail = append(tail, chunk...)
			if len(tail) > keep {
				tail = append(tail[:0], tail[len(tail)-keep:]...)
			}
			if !dead {
				if _, err := c.server.Write(chunk); err != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// answers forwards what the server sends, unless the answer is to be lost or the connection is
// swallowed.
func (p *Proxy) answers(c *proxyConn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := c.server.Read(buf)
		if n > 0 {
			p.mu.Lock()
			lose, dead := c.lose, c.dead
			c.answered = true
			if lose {
				p.lost++
			}
			p.mu.Unlock()
			if lose {
				c.client.Close() // the client reads a cut connection, never this answer
				return
			}
			if !dead {
				if _, err := c.client.Write(buf[:n]); err != nil {
					return
				}
			}
		}
		if err != nil {
			if !p.isDead(c) {
				c.client.Close() // the server hung up: so does the proxy
			}
			return
		}
	}
}

// Close stops the proxy and cuts every connection; the test's end does it too.
func (p *Proxy) Close() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.client.Close()
		if c.server != nil {
			c.server.Close()
		}
	}
}
