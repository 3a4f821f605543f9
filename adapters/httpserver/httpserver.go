// Package httpserver serves an http.Handler as a plain HTTP server: a timeout on every phase of a
// connection, bounded headers, PORT honoured, and a graceful shutdown on SIGTERM, SIGINT or the
// end of ctx, in which in-flight requests finish and event streams end. In local mode it binds
// loopback only.
//
// Every request context carries the write deadline: a handler (an SSE stream in particular) sees
// when the server will stop writing its response and can end it cleanly before.
package httpserver

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/supervaize/svz/adapters/internal/httpkit"
)

// DefaultPort is the port served when neither WithAddr nor PORT says otherwise (the reference
// SDK's default).
const DefaultPort = "8000"

// PortHint is how to choose another port, said when the one asked for is in use.
const PortHint = "choose a free port with SUPERVAIZER_PORT, e.g. SUPERVAIZER_PORT=8001 (PORT, set by platforms, wins when both are set)"

// Timeouts bounds the phases of a connection and the shutdown. A zero field takes its default.
// The write timeout matches Cloud Run's default request timeout; an event stream ends before it
// and its client reconnects.
type Timeouts struct {
	ReadHeader time.Duration // request line and headers (default 10s)
	Read       time.Duration // whole request, body included (default 1m)
	Write      time.Duration // from the end of the headers to the end of the response (default 5m)
	Idle       time.Duration // keep-alive wait for the next request (default 2m)
	Shutdown   time.Duration // drain time before remaining requests are cancelled (default 10s)
}

func defaultTimeouts() Timeouts {
	return Timeouts{
		ReadHeader: 10 * time.Second,
		Read:       time.Minute,
		Write:      5 * time.Minute,
		Idle:       2 * time.Minute,
		Shutdown:   10 * time.Second,
	}
}

type config struct {
	addr     string
	ln       net.Listener
	loopback bool
	log      *slog.Logger
	timeouts Timeouts
	maxConns int
}

// HealthPath is the route a probe still reaches when the connection cap is reached.
const HealthPath = "/.well-known/health"

// WithMaxConnections caps the connections open at once at n (n <= 0: the default,
// httpkit.DefaultMaxConnectionsFor the process's file limit: min(4096, 3/4 of RLIMIT_NOFILE)).
// At the cap, a new connection takes the slot of the oldest one waiting for a request (idle
// between requests, or still sending its headers), which is closed. When every connection serves
// a request, httpkit.ReservedConnections more are accepted for HealthPath only (another request
// gets 503, and a reserved connection has 2 s to send its request); any other connection is
// closed as soon as it is accepted.
func WithMaxConnections(n int) Option { return func(c *config) { c.maxConns = n } }

// Option configures Serve.
type Option func(*config)

// WithAddr sets the listen address, host:port. The default is ":$PORT", or ":8000" without PORT.
func WithAddr(addr string) Option { return func(c *config) { c.addr = addr } }

// WithListener serves on ln instead of listening on an address.
func WithListener(ln net.Listener) Option { return func(c *config) { c.ln = ln } }

// WithLoopbackOnly binds 127.0.0.1 when the address names no host or a wildcard one (0.0.0.0,
// ::, ::0…), refuses to serve on any address that is not loopback (CheckLoopback), and answers 403
// on every route to a request whose Host is not a loopback address or localhost (DNS rebinding:
// a web page whose name now resolves to 127.0.0.1), as local mode requires: its API key is public
// knowledge.
func WithLoopbackOnly() Option { return func(c *config) { c.loopback = true } }

// WithLogger sets the logger (slog.Default() otherwise).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithTimeouts overrides the defaults with the non-zero fields of t.
func WithTimeouts(t Timeouts) Option {
	return func(c *config) {
		for _, f := range []struct{ dst, src *time.Duration }{
			{&c.timeouts.ReadHeader, &t.ReadHeader}, {&c.timeouts.Read, &t.Read}, {&c.timeouts.Write, &t.Write},
			{&c.timeouts.Idle, &t.Idle}, {&c.timeouts.Shutdown, &t.Shutdown},
		} {
			if *f.src > 0 {
				*f.dst = *f.src
			}
		}
	}
}

// Serve serves h until ctx ends or the process receives SIGTERM or SIGINT, then shuts down
// gracefully and returns nil. It returns an error when it cannot listen or serve, or when
// requests were still running at the shutdown deadline (they are cancelled).
func Serve(ctx context.Context, h http.Handler, opts ...Option) error {
	cfg := config{log: slog.Default(), timeouts: defaultTimeouts()}
	for _, o := range opts {
		o(&cfg)
	}
	ln := cfg.ln
	if ln == nil {
		addr, err := listenAddr(cfg.addr, os.Getenv("PORT"), cfg.loopback)
		if err != nil {
			return err
		}
		if ln, err = httpkit.Listen(addr, PortHint); err != nil {
			return fmt.Errorf("httpserver: %w", err)
		}
	}
	if cfg.loopback {
		if err := CheckLoopback(ln); err != nil {
			_ = ln.Close()
			return err
		}
		h = httpkit.LoopbackOnly(h, cfg.log)
	}
	t := cfg.timeouts
	if cfg.maxConns <= 0 {
		cfg.maxConns = httpkit.DefaultMaxConnectionsHere()
	}
	return httpkit.Server{
		Name:              "httpserver",
		Listener:          ln,
		Handler:           h,
		Log:               cfg.log,
		RequestTimeout:    t.Write,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		ShutdownTimeout:   t.Shutdown,
		MaxConnections:    cfg.maxConns,
		HealthPath:        HealthPath,
		Started:           "serving HTTP",
		StartedAttrs:      []any{"max_connections", cfg.maxConns},
	}.Serve(ctx)
}

// CheckLoopback refuses a listener bound to anything but a loopback address: local mode's API
// key is public knowledge, so what it serves must stay on this machine whatever the host setting
// resolved to.
func CheckLoopback(ln net.Listener) error {
	if a, ok := ln.Addr().(*net.TCPAddr); ok && a.IP.IsLoopback() {
		return nil
	}
	return fmt.Errorf("httpserver: local mode listens on loopback only, but the host setting bound %s: use 127.0.0.1, ::1 or localhost", ln.Addr())
}

// listenAddr resolves the listen address from WithAddr, then PORT, then DefaultPort. With
// loopback, an empty or unspecified host (0.0.0.0, ::, ::0…) becomes 127.0.0.1.
func listenAddr(addr, envPort string, loopback bool) (string, error) {
	if addr == "" {
		port := envPort
		if port == "" {
			port = DefaultPort
		}
		addr = ":" + port
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("httpserver: listen address %q: %w", addr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("httpserver: listen address %q: port must be a number from 0 to 65535", addr)
	}
	if loopback && (host == "" || isUnspecified(host)) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

func isUnspecified(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}
