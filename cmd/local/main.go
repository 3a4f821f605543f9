// Command local runs the Hello World agent in local mode, without Studio: on 127.0.0.1:8000, API
// key local-dev, an embedded store under ./.svz, and workspace authorization bypassed for /a2a.
// It prints the endpoints and curl commands that exercise it.
//
//	go run ./cmd/local [--host H] [--port P]
//
// It is adapters/platform's local mode over Hello World, the same path as
// `SUPERVAIZER_LOCAL_MODE=true go run ./cmd/myagent` for any agent whose main calls platform.Main.
// Local mode's key is public knowledge, so it listens on loopback only: a wildcard host (0.0.0.0,
// ::, empty) binds 127.0.0.1 and any other address that is not loopback is refused. Trust settings
// (SUPERVAIZER_WORKSPACE_AUTH_REQUIRED=true, an issuer and a key) switch the bypass off and every
// call then needs a real token (see `svz dev keygen` and `svz dev token`).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/supervaize/svz/adapters/platform"
	"github.com/supervaize/svz/examples/helloworld/hello"
	"github.com/supervaize/svz/internal/envvar"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "local:", err)
		os.Exit(1)
	}
}

const usage = `Usage: go run ./cmd/local [--host H] [--port P]

Serves the Hello World agent in local mode (SUPERVAIZER_LOCAL_MODE=true) and prints the endpoints
and curl commands that exercise it. Settings: docs/settings.md.

`

// run parses the flags and serves Hello World in local mode until ctx ends. -h prints the usage
// and returns nil.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("local", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // usage goes to stdout for -h, errors are returned
	host := fs.String("host", "", "host to listen on, loopback only; 0.0.0.0, :: and empty bind 127.0.0.1 (default $SUPERVAIZER_HOST, else 127.0.0.1)")
	port := fs.String("port", "", "port to listen on (default $PORT, else $SUPERVAIZER_PORT, else 8000)")
	printUsage := func(w io.Writer) {
		fmt.Fprint(w, usage)
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout)
			return nil
		}
		printUsage(stderr)
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (see --help)", fs.Args())
	}
	err := platform.Run(ctx, build, platform.WithEnv(getenv), platform.WithOutput(stdout, stderr),
		platform.WithLocalMode(), platform.WithListen(*host, *port))
	if errors.Is(err, syscall.EADDRINUSE) {
		err = fmt.Errorf("%w, or pass --port", err)
	}
	return err
}

// build is Hello World, unless SUPERVAIZER_DISABLE_HELLO_WORLD=true leaves local mode nothing to
// serve.
func build(ctx context.Context, getenv func(string) string, log *slog.Logger) (http.Handler, error) {
	disabled, err := envvar.Bool(getenv, "SUPERVAIZER_DISABLE_HELLO_WORLD", false)
	if err != nil {
		return nil, err
	}
	if disabled {
		return nil, errors.New("SUPERVAIZER_DISABLE_HELLO_WORLD=true leaves no agent to serve: cmd/local serves Hello World only; " +
			"run your own agent in local mode with SUPERVAIZER_LOCAL_MODE=true go run ./cmd/youragent")
	}
	return hello.Build(ctx, getenv, log)
}
