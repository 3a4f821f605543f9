// Package platform is the one entrypoint of a controller binary: it detects where it runs —
// AWS Lambda (AWS_LAMBDA_RUNTIME_API), Cloud Run functions (FUNCTION_TARGET or K_SERVICE) or a
// plain HTTP server — so one binary and one image run anywhere. At start it checks the settings
// it reads, resolves secret references, builds the controller once, and serves it with the
// matching adapter until shutdown.
//
// Local mode (SUPERVAIZER_LOCAL_MODE=true on a plain HTTP server, or WithLocalMode) is the same
// path for every agent, cmd/local included: loopback only, the API key local-dev unless
// SUPERVAIZER_API_KEY is set, SUPERVAIZER_PUBLIC_URL set to the listener, and a banner with the
// endpoints and ready-to-paste curl commands. On a serverless platform local mode is refused
// unless it is a local emulation (package localmode); there, as on the plain server, a request
// whose Host is not loopback is refused (DNS rebinding).
//
// Secret references: SUPERVAIZER_API_KEY, SUPERVAIZER_PRIVATE_KEY and SUPERVAIZE_API_KEY may be
// given directly or as AWS Secrets Manager references (SUPERVAIZER_API_KEY_SECRET_ARN,
// SUPERVAIZER_PRIVATE_KEY_SECRET_ARN, SUPERVAIZE_API_KEY_SECRET_ARN), read once at start with the
// environment's AWS credentials.
// A reference that cannot be read fails the start, naming the variable and the secret, never its
// value; setting both a value and its reference is refused as ambiguous.
package platform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/supervaize/svz/adapters/httpserver"
	"github.com/supervaize/svz/adapters/lambda"
	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/config"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/telemetry"
	"github.com/supervaize/svz/internal/buildinfo"
	"github.com/supervaize/svz/internal/envvar"
	"github.com/supervaize/svz/internal/localmode"
)

// BuildFunc builds the controller once per process (cold start). getenv is the process
// environment with secret references already resolved (SUPERVAIZER_API_KEY_SECRET_ARN → value
// under SUPERVAIZER_API_KEY, same for SUPERVAIZER_PRIVATE_KEY) and, in local mode, local mode's
// defaults. log is the logger to use. When the handler also implements io.Closer, it is closed
// after shutdown.
type BuildFunc func(ctx context.Context, getenv func(string) string, log *slog.Logger) (http.Handler, error)

// AgentFunc builds one agent: the constructor of an agent package, e.g. agent.New.
type AgentFunc func() (*core.Agent, error)

// Agents is the BuildFunc of the common case: the controller of the agents newAgents build,
// configured from the environment by config.NewController (settings, grant verifier, store,
// idempotency gate; registration with Studio when connected). Write a BuildFunc of your own for
// custom wiring (a store of your own, agents chosen by a setting...).
func Agents(newAgents ...AgentFunc) BuildFunc {
	return func(ctx context.Context, getenv func(string) string, log *slog.Logger) (http.Handler, error) {
		if len(newAgents) == 0 {
			return nil, errors.New("platform: Agents: no agent constructor")
		}
		agents := make([]*core.Agent, len(newAgents))
		for i, newAgent := range newAgents {
			a, err := newAgent()
			if err != nil {
				return nil, fmt.Errorf("build agent %d: %w", i+1, err)
			}
			agents[i] = a
		}
		return config.NewController(ctx, getenv, log, agents...)
	}
}

// MainAgents is the one-line main of the common case, Main(Agents(newAgents...)):
//
//	func main() { platform.MainAgents(agent.New) }
func MainAgents(newAgents ...AgentFunc) { Main(Agents(newAgents...)) }

// Option configures Main and Run.
type Option func(*options)

type options struct {
	getenv         func(string) string
	stdout, stderr io.Writer
	local          bool
	host, port     string
	localHandlers  []func(http.Handler, LocalInfo) http.Handler
}

// WithEnv reads settings through getenv instead of the process environment (tests, wrappers).
func WithEnv(getenv func(string) string) Option { return func(o *options) { o.getenv = getenv } }

// WithOutput sets where local mode prints its banner (stdout) and where logs go (stderr).
func WithOutput(stdout, stderr io.Writer) Option {
	return func(o *options) { o.stdout, o.stderr = stdout, stderr }
}

// WithLocalMode runs in local mode whatever SUPERVAIZER_LOCAL_MODE says (cmd/local uses it).
func WithLocalMode() Option { return func(o *options) { o.local = true } }

// WithListen sets the plain HTTP server's host and port, over SUPERVAIZER_HOST and PORT /
// SUPERVAIZER_PORT; an empty value keeps the setting (cmd/local's --host and --port).
func WithListen(host, port string) Option {
	return func(o *options) { o.host, o.port = host, port }
}

// LocalInfo is what a local-mode handler wrapper knows of the controller it wraps.
type LocalInfo struct {
	// URL is the controller's base URL, e.g. http://127.0.0.1:8000.
	URL string
	// APIKey is the controller's write key (local-dev unless SUPERVAIZER_API_KEY is set).
	APIKey string
	// Controller is the built controller, nil when the BuildFunc returned another handler.
	Controller *core.Controller
	Log        *slog.Logger
}

// WithLocalHandler wraps the handler served in local mode, and only there: wrap gets the
// controller's handler and returns the one served (e.g. to mount a workbench beside it). Wrappers
// run in the order given.
func WithLocalHandler(wrap func(next http.Handler, info LocalInfo) http.Handler) Option {
	return func(o *options) { o.localHandlers = append(o.localHandlers, wrap) }
}

// platformKind is a platform the entrypoint serves on.
type platformKind string

const (
	onLambda   platformKind = "lambda"
	onCloudRun platformKind = "cloudrun"
	onHTTP     platformKind = "http"
)

// detect tells the platform from the environment: Lambda sets AWS_LAMBDA_RUNTIME_API, Cloud Run
// sets K_SERVICE (and FUNCTION_TARGET for functions); anything else is a plain HTTP server.
func detect(getenv func(string) string) platformKind {
	switch {
	case getenv("AWS_LAMBDA_RUNTIME_API") != "":
		return onLambda
	case getenv("FUNCTION_TARGET") != "" || getenv("K_SERVICE") != "":
		return onCloudRun
	}
	return onHTTP
}

// Main runs the controller built by build until SIGTERM or SIGINT (the servers shut down
// gracefully; on Lambda the runtime owns the process), then exits; it exits 1 with the reason on
// stderr when the controller cannot start or serve.
func Main(build BuildFunc, opts ...Option) {
	if err := Run(context.Background(), build, opts...); err != nil {
		fmt.Fprintln(os.Stderr, "svz:", err)
		os.Exit(1)
	}
}

// Run is Main without the exit: it returns when ctx ends and the server has shut down, or with
// the error that stopped it. On Lambda it returns only on a failed start (reported to the
// Runtime API first): afterwards the Lambda runtime owns the process.
func Run(ctx context.Context, build BuildFunc, opts ...Option) error {
	o := &options{getenv: os.Getenv, stdout: os.Stdout, stderr: os.Stderr}
	for _, opt := range opts {
		opt(o)
	}
	getenv := o.getenv
	if o.local {
		getenv = overlay(getenv, map[string]string{localmode.Env: "true"})
	}
	kind := detect(getenv)
	err := serve(ctx, kind, build, getenv, o)
	if err != nil && kind == onLambda {
		// Without this the invocation fails with an anonymous "Runtime exited" error.
		if rerr := lambda.ReportInitError(ctx, getenv("AWS_LAMBDA_RUNTIME_API"), err); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	return err
}

func serve(ctx context.Context, kind platformKind, build BuildFunc, getenv func(string) string, o *options) error {
	began := time.Now()
	log, err := newLogger(kind, getenv, o.stderr)
	if err != nil {
		return err
	}
	// Settings are checked before anything slow happens.
	local, err := localmode.FromEnv(getenv)
	if err != nil {
		return fmt.Errorf("platform: %w", err)
	}
	tel, err := setupTelemetry(ctx, kind, getenv, log)
	if err != nil {
		return err
	}
	defer stopTelemetry(tel, log)
	ctx = telemetry.WithProviders(ctx, tel.providers)
	var lambdaOpts []lambda.Option
	var httpOpts []httpserver.Option
	var serveCloudRun func(context.Context, http.Handler) error
	var maxReceives int
	var deadLetters string
	wrap := func(h http.Handler) http.Handler { return h }
	switch kind {
	case onLambda:
		if lambdaOpts, err = lambdaOptions(getenv); err != nil {
			return err
		}
		if local { // sam local start-api: refuse a Host that is not loopback, as local mode's server does
			lambdaOpts = append(lambdaOpts, lambda.WithLoopbackOnly())
		}
		if ctx, maxReceives, err = lambdaJobs(ctx, getenv); err != nil {
			return err
		}
		if deadLetters, err = lambda.DeadLetterARN(getenv); err != nil {
			return fmt.Errorf("platform: %w", err)
		}
	case onCloudRun:
		if serveCloudRun, err = cloudRunServer(getenv, log, local); err != nil {
			return err
		}
		ctx, wrap = cloudRunJobs(ctx, getenv, log)
	case onHTTP:
		if local {
			return serveLocal(ctx, build, getenv, log, o, began)
		}
		if httpOpts, err = httpOptions(getenv, o); err != nil {
			return err
		}
		if ctx, err = appRunnerJobs(ctx, getenv); err != nil {
			return err
		}
	}
	h, closeHandler, err := start(ctx, build, getenv, log)
	if err != nil {
		return err
	}
	h = wrap(h)
	logReady(log, string(kind), began)
	switch kind {
	case onLambda:
		// SQS events (the jobs queue's event source mapping) run the controller's background work:
		// the handler is the *core.Controller, or a wrapper that says which is (JobsHandler).
		if c, ok := h.(JobsHandler); ok && c.Jobs() != nil {
			lambdaOpts = append(lambdaOpts, lambda.WithJobs(c.Jobs().Deliver, maxReceives))
			if deadLetters != "" { // the dead-letter queue's records fail their jobs, saying why
				lambdaOpts = append(lambdaOpts, lambda.WithDeadLetters(c.Jobs().DeadLettered, deadLetters))
			}
		}
		lambdaOpts = append(lambdaOpts, lambda.WithTelemetry(tel.providers))
		if tel.flush != nil {
			lambdaOpts = append(lambdaOpts, lambda.WithFlush(tel.flush))
		}
		lambda.Start(h, append(lambdaOpts, lambda.WithLogger(log))...)
		return closeHandler(nil) // unreachable: the runtime exits the process
	case onCloudRun:
		return closeHandler(serveCloudRun(ctx, h))
	}
	return closeHandler(httpserver.Serve(ctx, h, append(httpOpts, httpserver.WithLogger(log))...))
}

// stopTelemetry flushes and stops the exporters, for at most 5 seconds.
func stopTelemetry(tel telemetrySetup, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tel.shutdown(ctx); err != nil {
		log.Warn("telemetry not flushed on shutdown", "error", err)
	}
}

// logReady logs that the controller serves, with the version and revision the build stamped
// (package buildinfo), if any.
func logReady(log *slog.Logger, platform string, began time.Time) {
	attrs := []any{"platform", platform, "init_ms", time.Since(began).Milliseconds()}
	if v := buildinfo.Version(); v != "" {
		attrs = append(attrs, "version", v)
	}
	if r := buildinfo.Revision(); r != "" {
		attrs = append(attrs, "revision", r)
	}
	log.Info("controller ready", attrs...)
}

// start resolves the secret references and builds the controller. closeHandler joins err (what
// serving returned) with the handler's Close, when it has one.
func start(ctx context.Context, build BuildFunc, getenv func(string) string, log *slog.Logger) (h http.Handler, closeHandler func(err error) error, err error) {
	env, err := resolveSecrets(ctx, getenv, log)
	if err != nil {
		return nil, nil, err
	}
	if h, err = build(ctx, env, log); err != nil {
		return nil, nil, fmt.Errorf("platform: build the controller: %w", err)
	}
	return h, func(err error) error {
		if c, ok := h.(io.Closer); ok {
			if cerr := c.Close(); cerr != nil {
				err = errors.Join(err, fmt.Errorf("platform: close the controller: %w", cerr))
			}
		}
		return err
	}, nil
}

// EnvPlatform names the platform when the environment alone does not tell it: svz deploy sets
// app-runner on App Runner, whose containers look like any plain HTTP server.
const EnvPlatform = "SUPERVAIZER_PLATFORM"

// ErrAppRunnerJobs refuses background work on App Runner: its CPU is throttled outside requests
// and it has no queue that pushes to the service which svz supports.
var ErrAppRunnerJobs = errors.New("background work needs a queue that pushes to the service: App Runner has none svz supports; deploy with --platform lambda or --platform cloud-run")

// appRunnerJobs reads SUPERVAIZER_PLATFORM; on App Runner the queue maker the controller's build
// calls when an agent defines background work refuses it, so the controller does not start.
func appRunnerJobs(ctx context.Context, getenv func(string) string) (context.Context, error) {
	p, err := envvar.Enum(getenv, EnvPlatform, "", "app-runner")
	if err != nil {
		return ctx, fmt.Errorf("platform: %w (set by svz deploy; leave it unset elsewhere)", err)
	}
	if p != "app-runner" {
		return ctx, nil
	}
	return jobs.WithQueue(ctx, func() (jobs.Dispatcher, error) { return nil, ErrAppRunnerJobs }), nil
}

// lambdaOptions reads SUPERVAIZER_LAMBDA_INVOKE_MODE, the InvokeMode of the Function URL.
func lambdaOptions(getenv func(string) string) ([]lambda.Option, error) {
	mode, err := envvar.Enum(getenv, "SUPERVAIZER_LAMBDA_INVOKE_MODE", "BUFFERED", "BUFFERED", "RESPONSE_STREAM")
	if err != nil {
		return nil, fmt.Errorf("platform: %w (the Function URL's InvokeMode)", err)
	}
	if mode == "RESPONSE_STREAM" {
		return []lambda.Option{lambda.WithStreaming()}, nil
	}
	return nil, nil
}

// httpOptions reads the listen address: SUPERVAIZER_HOST (default every interface), and PORT,
// set by platforms, else SUPERVAIZER_PORT, else 8000; WithListen wins over both.
func httpOptions(getenv func(string) string, o *options) ([]httpserver.Option, error) {
	host, port, err := listenSettings(getenv, o, "")
	if err != nil {
		return nil, err
	}
	maxConns, err := maxConnections(getenv)
	if err != nil {
		return nil, err
	}
	return []httpserver.Option{httpserver.WithAddr(net.JoinHostPort(host, port)), maxConns}, nil
}

// EnvMaxConnections caps the plain HTTP server's open connections.
const EnvMaxConnections = "SUPERVAIZER_MAX_CONNECTIONS"

// maxConnections reads SUPERVAIZER_MAX_CONNECTIONS (unset: httpserver's default, under the file
// limit).
func maxConnections(getenv func(string) string) (httpserver.Option, error) {
	n, err := envvar.Int(getenv, EnvMaxConnections, 0, 1, 1<<20)
	if err != nil {
		return nil, fmt.Errorf("platform: %w (connections open at once)", err)
	}
	return httpserver.WithMaxConnections(int(n)), nil
}

// listenSettings returns the host and port to listen on (see httpOptions); defHost is the host
// when none is set.
func listenSettings(getenv func(string) string, o *options, defHost string) (host, port string, err error) {
	host = strings.TrimSpace(o.host)
	if host == "" {
		host = strings.TrimSpace(getenv("SUPERVAIZER_HOST"))
	}
	if host == "" {
		host = defHost
	}
	if port = strings.TrimSpace(o.port); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			return "", "", fmt.Errorf("platform: port %q: must be a whole number from 0 to 65535", port)
		}
		return host, port, nil
	}
	name := "PORT"
	if strings.TrimSpace(getenv(name)) == "" {
		name = "SUPERVAIZER_PORT"
	}
	def, _ := strconv.ParseInt(httpserver.DefaultPort, 10, 64)
	n, err := envvar.Int(getenv, name, def, 0, 65535)
	if err != nil {
		return "", "", fmt.Errorf("platform: %w (the port to listen on)", err)
	}
	return host, strconv.FormatInt(n, 10), nil
}

// overlay returns getenv with values replaced by set.
func overlay(getenv func(string) string, set map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := set[k]; ok {
			return v
		}
		return getenv(k)
	}
}
