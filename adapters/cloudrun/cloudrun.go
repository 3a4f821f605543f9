// Package cloudrun serves an http.Handler as a Cloud Run function through the Functions Framework
// for Go: the handler is registered with functions.HTTP under FUNCTION_TARGET, so the framework
// serves it at "/" (every path reaches the handler), applies Cloud Run's request timeout
// (CLOUD_RUN_TIMEOUT_SECONDS) as the request context deadline, and flushes pass straight through,
// so event streams stream.
//
// On SIGTERM (Cloud Run gives 10 seconds) or when ctx ends, Serve refuses new requests, ends the
// event streams and waits for the other requests before returning.
package cloudrun

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"
	"github.com/GoogleCloudPlatform/functions-framework-go/functions"
	"github.com/supervaize/svz/adapters/internal/httpkit"
)

// DefaultPort is served when PORT is unset (Cloud Run always sets it).
const DefaultPort = "8080"

// DefaultShutdownTimeout is how long Serve waits for in-flight requests: within the 10 seconds
// Cloud Run leaves between SIGTERM and SIGKILL.
const DefaultShutdownTimeout = 8 * time.Second

type config struct {
	host, port string
	log        *slog.Logger
	shutdown   time.Duration
}

// Option configures Serve.
type Option func(*config)

// WithHost sets the host to listen on; the default, "", is every interface, as a container needs.
func WithHost(host string) Option { return func(c *config) { c.host = host } }

// WithPort sets the port; the default is $PORT, or DefaultPort.
func WithPort(port string) Option { return func(c *config) { c.port = port } }

// WithLogger sets the logger (slog.Default() otherwise).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithShutdownTimeout sets how long in-flight requests may run after shutdown begins.
func WithShutdownTimeout(d time.Duration) Option { return func(c *config) { c.shutdown = d } }

// Register registers h with the Functions Framework as the HTTP function name (functions.HTTP),
// wrapped as Serve wraps it (a panic answers a 500 JSON body). It is the hook for a source
// deployment, whose generated main serves FUNCTION_TARGET=name: call it from an init function of a
// non-main package. A name may be registered once per process.
func Register(name string, h http.Handler) {
	functions.HTTP(name, frameworkFunc(httpkit.NewTracker(slog.Default(), 0).Handler(h)))
}

// Serve registers h as the function named by FUNCTION_TARGET (or, without it, at "/" as Cloud Run
// services without a target expect) and serves it with the Functions Framework until ctx ends or
// the process receives SIGTERM or SIGINT. It then refuses new requests (503), ends event streams,
// waits for the other requests, and returns nil; or an error when requests were still running at
// the shutdown deadline (they are cancelled), or when the framework cannot serve.
//
// The framework owns its listener and never closes it: Serve is meant to run once per process,
// which exits after it returns.
func Serve(ctx context.Context, h http.Handler, opts ...Option) error {
	cfg := config{log: slog.Default(), port: os.Getenv("PORT"), shutdown: DefaultShutdownTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.port == "" {
		cfg.port = DefaultPort
	}
	if n, err := strconv.Atoi(cfg.port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("cloudrun: port %q must be a number from 1 to 65535", cfg.port)
	}
	tracker := httpkit.NewTracker(cfg.log, 0)
	fn := frameworkFunc(tracker.Handler(h))
	target := os.Getenv("FUNCTION_TARGET")
	if target != "" {
		functions.HTTP(target, fn)
	} else if err := funcframework.RegisterHTTPFunctionContext(ctx, "/", fn); err != nil {
		return fmt.Errorf("cloudrun: register the function: %w", err)
	}

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- funcframework.StartHostPort(cfg.host, cfg.port) }()
	cfg.log.Info("serving Cloud Run function", "target", target, "addr", cfg.host+":"+cfg.port)
	select {
	case err := <-errc:
		return fmt.Errorf("cloudrun: serve %s:%s: %w", cfg.host, cfg.port, err)
	case <-ctx.Done():
	}
	cfg.log.Info("shutting down", "drain", cfg.shutdown.String())
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdown)
	defer cancel()
	if err := tracker.Shutdown(sctx); err != nil {
		return fmt.Errorf("cloudrun: shutdown: %w", err)
	}
	return nil
}

// frameworkFunc adapts h to the framework. A response aborted after it started (a handler panic,
// http.ErrAbortHandler) must reach the client broken, not completed by the framework's own panic
// text: the connection is hijacked and closed.
func frameworkFunc(h http.Handler) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v != http.ErrAbortHandler { // a sentinel panic value, as net/http compares it
				panic(v)
			}
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = conn.Close()
			}
		}()
		h.ServeHTTP(w, r)
	}
}
