//go:build !svz_nolocal

package platform

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/supervaize/svz/adapters/httpserver"
	"github.com/supervaize/svz/adapters/internal/httpkit"
	"github.com/supervaize/svz/adapters/platform/workbench"
	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/internal/fingerprint"
)

// Local mode's defaults (the reference SDK's).
const (
	localAPIKey = "local-dev"
	envAPIKey   = "SUPERVAIZER_API_KEY"
	envPublic   = "SUPERVAIZER_PUBLIC_URL"
)

// serveLocal serves the controller in local mode on a plain HTTP server: it binds loopback (a
// wildcard host becomes 127.0.0.1; any other host that is not loopback is refused), builds the
// controller with local mode's defaults, prints the banner and serves until ctx ends. Every
// setting is checked (the controller built) before a chosen port is bound, so that a bad setting
// is reported as such even when the port is busy; a port the kernel picks (0) cannot be busy, and
// is bound first for the default public URL to name it. This file is left out of the Lambda
// bootstrap (build tag svz_nolocal), with everything it links: the place to mount what only local
// mode serves is here, after the controller is built: the workbench at /manage
// (workbench_local.go), then the WithLocalHandler wrappers.
func serveLocal(ctx context.Context, build BuildFunc, getenv func(string) string, log *slog.Logger, o *options, began time.Time) error {
	host, port, err := listenSettings(getenv, o, "127.0.0.1")
	if err != nil {
		return err
	}
	if host, err = loopbackHost(host); err != nil {
		return err
	}
	maxConns, err := maxConnections(getenv)
	if err != nil {
		return err
	}
	addr := net.JoinHostPort(host, port)
	var ln net.Listener
	if n, _ := strconv.Atoi(port); n == 0 {
		if ln, err = listenLoopback(addr); err != nil {
			return err
		}
		addr = ln.Addr().String()
	}
	info := LocalInfo{URL: "http://" + addr, Log: log}
	defaults := map[string]string{}
	if getenv(envAPIKey) == "" {
		defaults[envAPIKey] = localAPIKey
	}
	if strings.TrimSpace(getenv(envPublic)) == "" {
		defaults[envPublic] = info.URL
	}
	env := overlay(getenv, defaults)
	h, closeHandler, err := start(ctx, build, env, log)
	if err != nil {
		if ln != nil {
			_ = ln.Close()
		}
		return err
	}
	if ln == nil {
		if ln, err = listenLoopback(addr); err != nil {
			return closeHandler(err)
		}
	}
	info.APIKey = env(envAPIKey)
	info.Controller, _ = h.(*core.Controller)
	h = mountWorkbench(h, info)
	for _, wrap := range o.localHandlers {
		h = wrap(h, info)
	}
	logReady(log, "local", began)
	printBanner(o.stdout, info)
	return closeHandler(httpserver.Serve(ctx, h, httpserver.WithListener(ln), httpserver.WithLoopbackOnly(), httpserver.WithLogger(log), maxConns))
}

// listenLoopback binds addr, refusing a host name that resolved to an address that is not
// loopback.
func listenLoopback(addr string) (net.Listener, error) {
	ln, err := httpkit.Listen(addr, httpserver.PortHint)
	if err != nil {
		return nil, fmt.Errorf("platform: %w", err)
	}
	if err := httpserver.CheckLoopback(ln); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("platform: %w", err)
	}
	return ln, nil
}

// loopbackHost returns the host local mode listens on: 127.0.0.1 for an empty or unspecified one
// (0.0.0.0, ::, ::0…), the host itself when it is a loopback address or a name (checked once
// bound), and an error for any other address.
func loopbackHost(host string) (string, error) {
	h := strings.Trim(host, "[]")
	ip := net.ParseIP(h)
	switch {
	case h == "" || ip != nil && ip.IsUnspecified():
		return "127.0.0.1", nil
	case ip == nil || ip.IsLoopback():
		return h, nil
	}
	return "", fmt.Errorf("platform: local mode listens on loopback only (its API key is public knowledge), but the host is %s: "+
		"use 127.0.0.1, ::1 or localhost (SUPERVAIZER_HOST, or --host with cmd/local), or run without local mode to serve other interfaces", h)
}

// svzModule is svz's module path.
const svzModule = "github.com/supervaize/svz"

// svzInstall says how to install the svz CLI for a binary built as info says: the version of svz
// the binary requires when that is a published one (not replaced by a checkout); else from a
// checkout, since "@latest" exists only once svz is released. The CLI lands in
// $(go env GOPATH)/bin, which must be on PATH for "svz" to be found.
func svzInstall(info *debug.BuildInfo) string {
	const onPath = " puts it in $(go env GOPATH)/bin, which must be on your PATH"
	if info != nil && info.Main.Path == svzModule {
		return "svz, the CLI: in this svz repository, go install ./cmd/svz" + onPath + " (or go run ./cmd/svz)"
	}
	if info != nil {
		for _, d := range info.Deps {
			if d.Path == svzModule && d.Replace == nil && d.Version != "" && d.Version != "(devel)" {
				return "svz, the CLI: go install " + svzModule + "/cmd/svz@" + d.Version + onPath
			}
		}
	}
	return "svz, the CLI: in your svz checkout, go install ./cmd/svz" + onPath
}

// printBanner prints the endpoints and ready-to-paste curl commands. A key the user chose is a
// secret: the commands then read it from the shell's environment and only its fingerprint is
// shown. When trust settings switched the bypass off, the commands carry a token header and the
// banner says how to mint one that covers both. It is written in one piece, so that whoever reads
// the output (a user's terminal, a test waiting for the banner) never sees half of it.
func printBanner(out io.Writer, info LocalInfo) {
	var w bytes.Buffer
	defer func() { _, _ = out.Write(w.Bytes()) }()
	header, shown := localAPIKey, "API key "+localAPIKey
	if info.APIKey != localAPIKey {
		header, shown = "$"+envAPIKey, "API key from "+envAPIKey+", fingerprint "+fingerprint.Of(info.APIKey)
	}
	base := info.URL
	fmt.Fprintf(&w, "\nsvz local mode: %s (%s)\n", base, shown)
	var agents []*core.Agent
	var authz grant.Authorizer
	if info.Controller != nil {
		agents, authz = info.Controller.Agents(), info.Controller.Authorizer()
	}
	sample := sampleCall(agents)
	tokenLine := ""
	switch authz.(type) {
	case grant.LocalBypass:
		fmt.Fprintln(&w, "WARNING: workspace authorization is bypassed for /a2a: anyone who reaches this port can run the agents. Never expose it.")
	case grant.NotConfigured:
		fmt.Fprintln(&w, "WARNING: every /a2a call is refused (workspace_authorization_not_configured): SUPERVAIZE_API_KEY connects this controller to Studio,")
		fmt.Fprintln(&w, "which requires token verification. Set "+grant.EnvRequired+"=true, "+grant.EnvIssuer+" and a key (svz dev keygen), or unset SUPERVAIZE_API_KEY.")
	case nil:
	default:
		fmt.Fprintln(&w, "Workspace authorization is ON (SUPERVAIZER_WORKSPACE_AUTH_* settings): every /a2a call needs a token. One for both commands below:")
		fmt.Fprintf(&w, "  TOKEN=$(svz dev token --agent %s --workspace local --scopes supervaizer/action.invoke,supervaizer/surface.load,%s)\n",
			sample.slug, strings.Join(sample.targets(), ","))
		info, _ := debug.ReadBuildInfo()
		fmt.Fprintln(&w, "  ("+svzInstall(info)+")")
		tokenLine = "  -H \"X-Supervaize-Workspace-Authorization: Bearer $TOKEN\" \\\n"
	}
	fmt.Fprintf(&w, "\n  workbench  %s%s (open it in a browser)\n", base, workbench.Path)
	fmt.Fprintf(&w, "  discovery  %s/.well-known/agents.json\n  health     %s/.well-known/health\n  JSON-RPC   POST %s/a2a\n  events     GET  %s/a2a/events\n", base, base, base, base)
	for _, a := range agents {
		fmt.Fprintf(&w, "  agent      %s%s\n", base, "/.well-known/agents/v"+a.Config().Version+"/"+a.Slug()+"_agent.json")
	}
	if sample.slug == "" {
		fmt.Fprintln(&w)
		return
	}
	if sample.action != "" {
		fmt.Fprintf(&w, `
Run the %[5]s action:

curl -s %[1]s/a2a \
  -H "X-API-Key: %[2]s" -H "Content-Type: application/json" \
%[4]s  -d '{"jsonrpc": "2.0", "id": 1, "method": "supervaizer/action.invoke",
       "params": {"request_id": "r1", "actor": {"user_id": "me"},
                  "workspace": {"id": "local"}, "mission_id": "m1",
                  "agent_slug": "%[3]s", "surface": "%[6]s",
                  "action": "%[5]s", "input": %[7]s, "job_id": "job-1"}}'
`, base, header, sample.slug, tokenLine, sample.action, sample.actionSurface(), sample.inputJSON())
	}
	if sample.surface != "" {
		fmt.Fprintf(&w, `
Load the %[5]s surface:

curl -s %[1]s/a2a \
  -H "X-API-Key: %[2]s" -H "Content-Type: application/json" \
%[4]s  -d '{"jsonrpc": "2.0", "id": 1, "method": "supervaizer/surface.load",
       "params": {"request_id": "r1", "actor": {"user_id": "me"},
                  "workspace": {"id": "local"}, "mission_id": "m1",
                  "agent_slug": "%[3]s", "surface": "%[5]s"}}'
`, base, header, sample.slug, tokenLine, sample.surface)
	}
	fmt.Fprintf(&w, "\nFollow the effects: curl -N -H \"X-API-Key: %s\" %s/a2a/events\n\n", header, base)
}

// sample is what the banner's commands call: the first agent's job.start action and surface, or
// its first declared ones, and an input the action's declared fields accept (their defaults and
// examples: contract.ExampleInput).
type sample struct {
	slug, action, surface string
	input                 map[string]any
}

// inputJSON is the sample input as it goes between the single quotes of a shell command.
func (s sample) inputJSON() string {
	b, err := json.Marshal(s.input)
	if err != nil || len(s.input) == 0 {
		return "{}"
	}
	return strings.ReplaceAll(string(b), "'", `'\''`)
}

func sampleCall(agents []*core.Agent) sample {
	if len(agents) == 0 {
		return sample{}
	}
	a := agents[0]
	s := sample{slug: a.Slug()}
	reg := a.Config().Registration
	if reg == nil {
		return s
	}
	caps := reg.Capabilities
	for _, def := range caps.Actions {
		if s.action == "" || def.ID == "job.start" {
			s.action = def.ID
		}
	}
	s.input = contract.ExampleInput(a.InputFields(s.action))
	if slices.Contains(caps.Surfaces, "job.start") {
		s.surface = "job.start"
	} else if len(caps.Surfaces) > 0 {
		s.surface = caps.Surfaces[0]
	}
	return s
}

// actionSurface is the surface the action is submitted from: the sample surface, else the action.
func (s sample) actionSurface() string {
	if s.surface != "" {
		return s.surface
	}
	return s.action
}

// targets are the ids the sample's token must grant.
func (s sample) targets() []string {
	var t []string
	for _, id := range []string{s.action, s.surface} {
		if id != "" && !slices.Contains(t, id) {
			t = append(t, id)
		}
	}
	return t
}
