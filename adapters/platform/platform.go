// Package platform is the one entrypoint of a controller binary: it detects where it runs —
// AWS Lambda (AWS_LAMBDA_RUNTIME_API), Cloud Run functions (FUNCTION_TARGET or K_SERVICE) or a
// plain HTTP server — so one binary and one image run anywhere. At start it resolves secret
// references, builds the controller once, and serves it with the matching adapter until
// shutdown.
//
// Secret references: SUPERVAIZER_API_KEY and SUPERVAIZER_PRIVATE_KEY may be given directly or as
// AWS Secrets Manager references (SUPERVAIZER_API_KEY_SECRET_ARN,
// SUPERVAIZER_PRIVATE_KEY_SECRET_ARN), read once at start with the environment's AWS credentials.
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
)

// BuildFunc builds the controller once per process (cold start). getenv is the process
// environment with secret references already resolved (SUPERVAIZER_API_KEY_SECRET_ARN → value
// under SUPERVAIZER_API_KEY, same for SUPERVAIZER_PRIVATE_KEY). log is the logger to use.
// When the handler also implements io.Closer, it is closed after shutdown.
type BuildFunc func(ctx context.Context, getenv func(string) string, log *slog.Logger) (http.Handler, error)

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
func Main(build BuildFunc) {
	if err := Run(context.Background(), build); err != nil {
		fmt.Fprintln(os.Stderr, "svz:", err)
		os.Exit(1)
	}
}

// Run is Main without the exit: it returns when ctx ends and the server has shut down, or with
// the error that stopped it. On Lambda it returns only on a failed start (reported to the
// Runtime API first): afterwards the Lambda runtime owns the process.
func Run(ctx context.Context, build BuildFunc) error {
	return run(ctx, build, os.Getenv, os.Stderr)
}

func run(ctx context.Context, build BuildFunc, getenv func(string) string, stderr io.Writer) error {
	kind := detect(getenv)
	err := serve(ctx, kind, build, getenv, stderr)
	if err != nil && kind == onLambda {
		// Without this the invocation fails with an anonymous "Runtime exited" error.
		if rerr := lambda.ReportInitError(ctx, getenv("AWS_LAMBDA_RUNTIME_API"), err); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	return err
}

func serve(ctx context.Context, kind platformKind, build BuildFunc, getenv func(string) string, stderr io.Writer) (err error) {
	start := time.Now()
	log, err := newLogger(kind, getenv("SUPERVAIZER_LOG_LEVEL"), stderr)
	if err != nil {
		return err
	}
	// Settings are checked before anything slow happens.
	var lambdaOpts []lambda.Option
	var httpOpts []httpserver.Option
	var serveCloudRun func(context.Context, http.Handler) error
	switch kind {
	case onLambda:
		if lambdaOpts, err = lambdaOptions(getenv); err != nil {
			return err
		}
	case onCloudRun:
		if serveCloudRun, err = cloudRunServer(getenv, log); err != nil {
			return err
		}
	case onHTTP:
		if httpOpts, err = httpOptions(getenv); err != nil {
			return err
		}
	}
	env, err := resolveSecrets(ctx, getenv, log)
	if err != nil {
		return err
	}
	h, err := build(ctx, env, log)
	if err != nil {
		return fmt.Errorf("platform: build the controller: %w", err)
	}
	if c, ok := h.(io.Closer); ok {
		defer func() {
			if cerr := c.Close(); cerr != nil {
				err = errors.Join(err, fmt.Errorf("platform: close the controller: %w", cerr))
			}
		}()
	}
	log.Info("controller ready", "platform", string(kind), "init_ms", time.Since(start).Milliseconds())
	switch kind {
	case onLambda:
		lambda.Start(h, append(lambdaOpts, lambda.WithLogger(log))...)
		return nil // unreachable: the runtime exits the process
	case onCloudRun:
		return serveCloudRun(ctx, h)
	}
	return httpserver.Serve(ctx, h, append(httpOpts, httpserver.WithLogger(log))...)
}

// lambdaOptions reads SUPERVAIZER_LAMBDA_INVOKE_MODE, the InvokeMode of the Function URL.
func lambdaOptions(getenv func(string) string) ([]lambda.Option, error) {
	switch mode := getenv("SUPERVAIZER_LAMBDA_INVOKE_MODE"); mode {
	case "", "BUFFERED":
		return nil, nil
	case "RESPONSE_STREAM":
		return []lambda.Option{lambda.WithStreaming()}, nil
	default:
		return nil, fmt.Errorf("platform: SUPERVAIZER_LAMBDA_INVOKE_MODE=%q: must be BUFFERED or RESPONSE_STREAM (the Function URL's InvokeMode)", mode)
	}
}

// httpOptions reads the listen address: SUPERVAIZER_HOST (default every interface), and PORT,
// set by platforms, else SUPERVAIZER_PORT, else 8000. Local mode binds loopback only.
func httpOptions(getenv func(string) string) ([]httpserver.Option, error) {
	name, port := "PORT", getenv("PORT")
	if port == "" {
		name, port = "SUPERVAIZER_PORT", getenv("SUPERVAIZER_PORT")
	}
	if port == "" {
		port = httpserver.DefaultPort
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return nil, fmt.Errorf("platform: %s=%q: must be a port number from 0 to 65535", name, port)
	}
	opts := []httpserver.Option{httpserver.WithAddr(net.JoinHostPort(getenv("SUPERVAIZER_HOST"), port))}
	if strings.EqualFold(getenv("SUPERVAIZER_LOCAL_MODE"), "true") {
		opts = append(opts, httpserver.WithLoopbackOnly())
	}
	return opts, nil
}
