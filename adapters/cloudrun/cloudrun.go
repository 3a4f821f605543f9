// Package cloudrun serves an http.Handler on Cloud Run, as a Cloud Run function or service.
//
// Serve (what platform.Main runs when FUNCTION_TARGET or K_SERVICE is set) serves the handler
// the way the Functions Framework serves the function named by FUNCTION_TARGET: every path
// reaches it, Cloud Run's request timeout (CLOUD_RUN_TIMEOUT_SECONDS) is the request context
// deadline, and flushes go straight to the client, so event streams stream. It runs its own
// net/http server rather than the framework's, which can be neither given a listener nor shut
// down: on SIGTERM (Cloud Run sends SIGKILL 10 seconds later) or when ctx ends, Serve stops
// accepting, ends the event streams, and returns only once every other response has been
// written to the end.
//
// Register is for a source deployment, whose main the buildpack generates: it registers the
// handler with the framework (functions.HTTP), which then serves it under FUNCTION_TARGET. That
// main does not drain on SIGTERM: deploy an image whose main calls platform.Main to have it.
package cloudrun

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/GoogleCloudPlatform/functions-framework-go/functions"
	"github.com/supervaize/svz/adapters/internal/httpkit"
	"github.com/supervaize/svz/internal/envvar"
)

// DefaultPort is served when PORT is unset (Cloud Run always sets it).
const DefaultPort = "8080"

// DefaultShutdownTimeout is how long Serve waits for in-flight requests: within the 10 seconds
// Cloud Run leaves between SIGTERM and SIGKILL.
const DefaultShutdownTimeout = 8 * time.Second

// readHeaderTimeout bounds the request headers.
const readHeaderTimeout = 10 * time.Second

type config struct {
	host, port string
	ln         net.Listener
	log        *slog.Logger
	shutdown   time.Duration
}

// Option configures Serve.
type Option func(*config)

// WithHost sets the host to listen on; the default, "", is every interface, as a container needs.
func WithHost(host string) Option { return func(c *config) { c.host = host } }

// WithPort sets the port; the default is $PORT, or DefaultPort.
func WithPort(port string) Option { return func(c *config) { c.port = port } }

// WithListener serves on ln instead of listening on the host and port.
func WithListener(ln net.Listener) Option { return func(c *config) { c.ln = ln } }

// WithLogger sets the logger (slog.Default() otherwise).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithShutdownTimeout sets how long in-flight requests may run after shutdown begins.
func WithShutdownTimeout(d time.Duration) Option { return func(c *config) { c.shutdown = d } }

// Register registers h with the Functions Framework as the HTTP function name (functions.HTTP),
// wrapped as Serve wraps it (a panic answers a 500 JSON body). It is the hook for a source
// deployment, whose generated main serves FUNCTION_TARGET=name: call it from an init function of a
// non-main package. A name may be registered once per process. That main serves through a
// ServeMux, which redirects a path that is not clean (//, /../) before h sees it.
func Register(name string, h http.Handler) {
	functions.HTTP(name, frameworkFunc(httpkit.NewTracker(slog.Default(), 0).Handler(h)))
}

// Serve serves h on every path until ctx ends or the process receives SIGTERM or SIGINT. It then
// stops accepting connections, answers 503 to requests already read, ends event streams, waits
// for the other requests and for their responses to be written, and returns nil; or an error
// when requests were still running at the shutdown deadline (they are cancelled and their
// connections closed), or when it cannot listen or serve.
func Serve(ctx context.Context, h http.Handler, opts ...Option) error {
	cfg := config{log: slog.Default(), port: os.Getenv("PORT"), shutdown: DefaultShutdownTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	timeout, err := requestTimeout(os.Getenv)
	if err != nil {
		return err
	}
	ln := cfg.ln
	if ln == nil {
		if cfg.port == "" {
			cfg.port = DefaultPort
		}
		if n, err := strconv.Atoi(cfg.port); err != nil || n < 0 || n > 65535 {
			return fmt.Errorf("cloudrun: port %q must be a number from 0 to 65535", cfg.port)
		}
		if ln, err = httpkit.Listen(net.JoinHostPort(cfg.host, cfg.port), "choose a free port with PORT"); err != nil {
			return fmt.Errorf("cloudrun: %w", err)
		}
	}
	// Cloud Run's front end enforces the request timeout (which the request deadline reflects)
	// and owns the keep-alive of its connections to the instance: only headers are bounded here.
	return httpkit.Server{
		Name:              "cloudrun",
		Listener:          ln,
		Handler:           h,
		Log:               cfg.log,
		RequestTimeout:    timeout,
		ReadHeaderTimeout: readHeaderTimeout,
		ShutdownTimeout:   cfg.shutdown,
		Started:           "serving Cloud Run function",
		StartedAttrs:      []any{"target", os.Getenv("FUNCTION_TARGET")},
	}.Serve(ctx)
}

// requestTimeout reads CLOUD_RUN_TIMEOUT_SECONDS, which Cloud Run sets to the service's request
// timeout (at most an hour today); unset, requests have no deadline.
func requestTimeout(getenv func(string) string) (time.Duration, error) {
	n, err := envvar.Int(getenv, "CLOUD_RUN_TIMEOUT_SECONDS", 0, 1, 86400)
	if err != nil {
		return 0, fmt.Errorf("cloudrun: %w seconds", err)
	}
	return time.Duration(n) * time.Second, nil
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
