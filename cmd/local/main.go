// Command local runs a controller in local mode, without Studio: the Hello World agent on
// 127.0.0.1:8000, API key local-dev, an embedded store under ./.svz, and workspace authorization
// bypassed for /a2a. It prints two curl commands that exercise it.
//
//	go run ./cmd/local [--host H] [--port P]
//
// Local mode's key is public knowledge, so a wildcard host (0.0.0.0, ::, empty) binds 127.0.0.1;
// any other host is kept. Setting any SUPERVAIZER_WORKSPACE_AUTH_* trust setting switches the
// bypass off and every call then needs a real token (see `svz dev token`).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/supervaize/svz/adapters/httpserver"
	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/config"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/examples/helloworld/hello"
	"github.com/supervaize/svz/internal/fingerprint"
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

// run parses the flags, builds the local-mode controller and serves it until ctx ends.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("local", flag.ContinueOnError)
	fs.SetOutput(stderr)
	host := fs.String("host", envOr(getenv, "SUPERVAIZER_HOST", "127.0.0.1"), "host to bind; 0.0.0.0, :: and empty bind 127.0.0.1")
	port := fs.Int("port", envPort(getenv), "port to listen on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *port < 1 || *port > 65535 {
		return fmt.Errorf("--port must be between 1 and 65535, got %d", *port)
	}
	h := bindHost(*host)
	addr := net.JoinHostPort(h, strconv.Itoa(*port))
	public := "http://" + addr

	env := localEnv(getenv, public)
	log := slog.New(slog.NewTextHandler(stderr, nil))
	agents, err := localAgents(env)
	if err != nil {
		return err
	}
	cfg, err := config.Load(ctx, env, log)
	if err != nil {
		return err
	}
	ctrl, err := core.New(cfg, agents...)
	if err != nil {
		if cfg.OnClose != nil {
			err = errors.Join(err, cfg.OnClose())
		}
		return err
	}
	// Bind before printing anything: the commands printed must work.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return errors.Join(fmt.Errorf("listen on %s: %w", addr, err), ctrl.Close())
	}
	_, bypass := cfg.Authorizer.(grant.LocalBypass)
	printWelcome(stdout, public, env(config.EnvAPIKey), bypass, ctrl)
	serveErr := httpserver.Serve(ctx, ctrl, httpserver.WithListener(ln), httpserver.WithLogger(log))
	return errors.Join(serveErr, ctrl.Close())
}

// localEnv is the process environment with local mode switched on: SUPERVAIZER_LOCAL_MODE=true,
// the API key local-dev unless SUPERVAIZER_API_KEY is set, and the public URL of the listener
// unless SUPERVAIZER_PUBLIC_URL is set.
func localEnv(getenv func(string) string, public string) func(string) string {
	return func(k string) string {
		v := getenv(k)
		switch k {
		case config.EnvLocalMode:
			return "true"
		case config.EnvAPIKey:
			if v == "" {
				return config.LocalAPIKey
			}
		case config.EnvPublicURL:
			if v == "" {
				return public
			}
		}
		return v
	}
}

// localAgents are the agents local mode serves: Hello World, unless
// SUPERVAIZER_DISABLE_HELLO_WORLD=true.
func localAgents(getenv func(string) string) ([]*core.Agent, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("SUPERVAIZER_DISABLE_HELLO_WORLD")), "true") {
		return nil, errors.New("SUPERVAIZER_DISABLE_HELLO_WORLD=true leaves no agent to serve: local mode serves the example agents only")
	}
	a, err := hello.NewAgent()
	if err != nil {
		return nil, err
	}
	return []*core.Agent{a}, nil
}

func bindHost(h string) string {
	switch strings.TrimSpace(h) {
	case "", "0.0.0.0", "::", "[::]":
		return "127.0.0.1"
	}
	return strings.Trim(strings.TrimSpace(h), "[]")
}

func envOr(getenv func(string) string, k, def string) string {
	if v := strings.TrimSpace(getenv(k)); v != "" {
		return v
	}
	return def
}

// envPort is PORT, then SUPERVAIZER_PORT (as on every platform), then 8000; a non-numeric value
// gives 0, which the flag check then refuses with a clear message.
func envPort(getenv func(string) string) int {
	v := envOr(getenv, "PORT", envOr(getenv, "SUPERVAIZER_PORT", "8000"))
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0
	}
	return n
}

// printWelcome prints the endpoints and two ready-to-paste curl commands (the seeds' examples).
// A key the user chose is a secret: the commands then read it from the shell's environment and
// only its fingerprint is shown. When a trust setting switched the bypass off, the commands carry
// the token header and say how to mint one.
func printWelcome(w io.Writer, public, key string, bypass bool, ctrl *core.Controller) {
	header, shown := config.LocalAPIKey, "API key "+config.LocalAPIKey
	if key != config.LocalAPIKey {
		header, shown = "$"+config.EnvAPIKey, "API key from "+config.EnvAPIKey+", fingerprint "+fingerprint.Of(key)
	}
	slug := hello.Slug
	if agents := ctrl.Agents(); len(agents) > 0 {
		slug = agents[0].Slug()
	}
	fmt.Fprintf(w, "\nsvz local mode: %s (%s)\n", public, shown)
	tokenLine := ""
	if bypass {
		fmt.Fprintln(w, "WARNING: workspace authorization is bypassed for /a2a: anyone who reaches this port can run the agents. Never expose it.")
	} else {
		fmt.Fprintln(w, "Workspace authorization is ON (a SUPERVAIZER_WORKSPACE_AUTH_* setting or a Studio account is present):")
		fmt.Fprintf(w, "every /a2a call needs a token, e.g. TOKEN=$(go run ./cmd/svz dev token --agent %s --workspace local --scopes supervaizer/action.invoke,job.start)\n", slug)
		tokenLine = "  -H \"X-Supervaize-Workspace-Authorization: Bearer $TOKEN\" \\\n"
	}
	fmt.Fprintf(w, "\n  discovery  %s/.well-known/agents.json\n  health     %s/.well-known/health\n  JSON-RPC   POST %s/a2a\n  events     GET  %s/a2a/events\n", public, public, public, public)
	fmt.Fprintf(w, `
Start a job:

curl -s %[1]s/a2a \
  -H "X-API-Key: %[2]s" -H "Content-Type: application/json" \
%[4]s  -d '{"jsonrpc": "2.0", "id": 1, "method": "supervaizer/action.invoke",
       "params": {"request_id": "r1", "actor": {"user_id": "me"},
                  "workspace": {"id": "local"}, "mission_id": "m1",
                  "agent_slug": "%[3]s", "surface": "job.start",
                  "action": "job.start", "input": {"count": 1}, "job_id": "job-1"}}'

Load the job.start surface:

curl -s %[1]s/a2a \
  -H "X-API-Key: %[2]s" -H "Content-Type: application/json" \
%[4]s  -d '{"jsonrpc": "2.0", "id": 1, "method": "supervaizer/surface.load",
       "params": {"request_id": "r1", "actor": {"user_id": "me"},
                  "workspace": {"id": "local"}, "mission_id": "m1",
                  "agent_slug": "%[3]s", "surface": "job.start"}}'

`, public, header, slug, tokenLine)
}
