package httpkit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os/signal"
	"syscall"
	"time"
)

// MaxHeaderBytes bounds the request line and headers of every server svz starts. net/http's
// default (1 MiB) lets a few hundred unauthenticated connections that never finish their headers
// hold hundreds of MiB; a controller's requests carry a few KiB of headers (a grant token is at
// most 16 KiB).
const MaxHeaderBytes = 64 << 10

// Server is one serve-and-drain loop: what httpserver and cloudrun run around the controller.
type Server struct {
	// Name prefixes errors ("httpserver", "cloudrun").
	Name string
	// Listener is served; Serve closes it.
	Listener net.Listener
	Handler  http.Handler
	Log      *slog.Logger
	// RequestTimeout is the deadline of every request context (see NewTracker); 0 is none.
	RequestTimeout time.Duration
	// Connection timeouts of the http.Server (0 is none, except ReadHeader, always bounded).
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// ShutdownTimeout is how long in-flight requests may run once shutdown begins.
	ShutdownTimeout time.Duration
	// MaxConnections caps the connections open at once (0: no cap). At the cap, a new connection
	// takes the slot of the oldest one waiting for a request (idle, or sending its headers);
	// when every connection serves a request, ReservedConnections more are accepted for
	// HealthPath only, and any other is closed as soon as accepted.
	MaxConnections int
	HealthPath     string
	// Started is logged once serving, with the listen address as "addr" after StartedAttrs.
	Started      string
	StartedAttrs []any
}

// Serve serves s until ctx ends or the process receives SIGTERM or SIGINT, then drains (Drain)
// and returns nil; or the error that stopped it, or what the drain had to cut.
func (s Server) Serve(ctx context.Context) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	tracker := NewTracker(s.Log, s.RequestTimeout)
	h := s.Handler
	var connState func(net.Conn, http.ConnState)
	if s.MaxConnections > 0 {
		ll, ok := s.Listener.(*limitListener) // capped already (a test watching its state)
		if !ok {
			ll = newLimitListener(s.Listener, s.MaxConnections, ReservedConnections, s.Log)
		}
		s.Listener, connState = ll, ll.connState
		h = guard(h, s.HealthPath)
	}
	srv := &http.Server{
		Handler:           tracker.Handler(h),
		ConnContext:       connContext,
		ConnState:         connState,
		ReadHeaderTimeout: s.readHeaderTimeout(),
		ReadTimeout:       s.ReadTimeout,
		WriteTimeout:      s.WriteTimeout,
		IdleTimeout:       s.IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.Log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(s.Listener) }()
	s.Log.Info(s.Started, append(s.StartedAttrs, "addr", s.Listener.Addr().String())...)

	select {
	case err := <-errc:
		return fmt.Errorf("%s: serve %s: %w", s.Name, s.Listener.Addr(), err)
	case <-ctx.Done():
	}
	s.Log.Info("shutting down", "drain", s.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), s.ShutdownTimeout)
	defer cancel()
	drainErr := Drain(sctx, srv, tracker)
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) { // never nil: http.Server.Serve always returns an error
		return fmt.Errorf("%s: serve: %w", s.Name, err)
	}
	if drainErr != nil {
		return fmt.Errorf("%s: shutdown: %w", s.Name, drainErr)
	}
	return nil
}

// readHeaderTimeout is ReadHeaderTimeout, or 10 s when it is 0 or less: headers are always bounded.
func (s Server) readHeaderTimeout() time.Duration {
	if s.ReadHeaderTimeout <= 0 {
		return 10 * time.Second
	}
	return s.ReadHeaderTimeout
}

// Listen listens on addr (TCP). An address in use gets the fix in the error: another process
// holds the port, and portHint says how to choose another one.
func Listen(addr, portHint string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("listen on %s: %w: another process is using this port; %s", addr, err, portHint)
	}
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}
