// Package config builds a controller from the SUPERVAIZER_* environment, the one place where
// settings are read, checked and defaulted. Every bad or missing setting is reported at start,
// naming the variable, before anything is served; secrets appear only as fingerprints.
package config

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/telemetry"
	"github.com/supervaize/svz/internal/envvar"
	"github.com/supervaize/svz/internal/fingerprint"
	"github.com/supervaize/svz/internal/localmode"
	"github.com/supervaize/svz/internal/redact"
)

// Environment variables read here (the workspace-authorization ones are in package grant, the
// store ones in package storeenv).
const (
	EnvAPIKey          = "SUPERVAIZER_API_KEY"
	EnvReadAPIKeys     = "SUPERVAIZER_READ_API_KEYS"
	EnvServerID        = "SUPERVAIZER_SERVER_ID"
	EnvPublicURL       = "SUPERVAIZER_PUBLIC_URL"
	EnvLocalMode       = localmode.Env
	EnvLocalEmulator   = localmode.EnvEmulator
	EnvMaxRequestBytes = "SUPERVAIZER_MAX_REQUEST_BYTES"
	EnvStudioAgentIDs  = "SUPERVAIZER_STUDIO_AGENT_IDS"
	EnvStudioAPIKey    = "SUPERVAIZE_API_KEY"
)

// LocalAPIKey is the well-known API key of local mode.
const LocalAPIKey = "local-dev"

// Bounds of SUPERVAIZER_MAX_REQUEST_BYTES.
const (
	minRequestBytes = 1 << 10
	maxRequestBytes = 32 << 20
)

// LocalMode reads SUPERVAIZER_LOCAL_MODE with the one parser every binary uses: true/false
// (1/0, yes/no, on/off), anything else an error, and refused on a serverless platform unless it
// is a local emulation (AWS_SAM_LOCAL=true or SUPERVAIZER_LOCAL_EMULATOR=true); see package
// localmode.
func LocalMode(getenv func(string) string) (bool, error) { return localmode.FromEnv(getenv) }

// Load reads the controller settings. The caller owns the returned Config's OnClose (it closes
// the store): call it if the controller is never built.
func Load(ctx context.Context, getenv func(string) string, log *slog.Logger) (core.Config, error) {
	if log == nil {
		log = slog.Default()
	}
	local, err := LocalMode(getenv)
	if err != nil {
		return core.Config{}, err
	}
	cfg := core.Config{Logger: log}
	var errs []error

	cfg.APIKey = getenv(EnvAPIKey)
	switch {
	case cfg.APIKey != "":
	case local:
		cfg.APIKey = LocalAPIKey
	default:
		key, err := randomKey()
		if err != nil {
			return core.Config{}, fmt.Errorf("%s is unset and a key could not be generated: %w", EnvAPIKey, err)
		}
		cfg.APIKey = key
		log.Warn(EnvAPIKey+" is not set: generated a key for this process only; set it so Studio can call this controller",
			"api_key_fingerprint", fingerprint.Of(key))
	}
	for _, k := range strings.Split(getenv(EnvReadAPIKeys), ",") {
		if k = strings.TrimSpace(k); k != "" {
			cfg.ReadAPIKeys = append(cfg.ReadAPIKeys, k)
		}
	}

	cfg.ServerID = strings.TrimSpace(getenv(EnvServerID))
	generatedServerID := cfg.ServerID == ""
	switch {
	case generatedServerID:
		id, err := contract.RandomUUID()
		if err != nil {
			return core.Config{}, fmt.Errorf("%s is unset and an id could not be generated: %w", EnvServerID, err)
		}
		cfg.ServerID = id
		if !local { // a local controller is one process: only deployments need a stable id
			log.Warn(EnvServerID+" is not set: generated an id for this process only; set it in every deployed environment so workspace grants stay valid across restarts and instances",
				"server_id", cfg.ServerID)
		}
	case len(cfg.ServerID) <= 5:
		errs = append(errs, fmt.Errorf("%s must be longer than 5 characters, got %q", EnvServerID, cfg.ServerID))
	}

	if v := strings.TrimSpace(getenv(EnvPublicURL)); v != "" {
		if u, err := publicURL(v); err != nil {
			errs = append(errs, err)
		} else {
			cfg.PublicURL = u
		}
	}

	n, err := envvar.Int(getenv, EnvMaxRequestBytes, core.DefaultMaxBodyBytes, minRequestBytes, maxRequestBytes)
	if err != nil {
		errs = append(errs, fmt.Errorf("%w bytes", err))
	}
	cfg.MaxBodyBytes = n

	if err := eventSettings(getenv, &cfg); err != nil {
		errs = append(errs, err)
	}

	settings, err := grant.SettingsFromEnv(getenv)
	if err != nil {
		errs = append(errs, err)
	}
	ids, err := grant.ParseStudioAgentIDs(getenv(EnvStudioAgentIDs))
	if err != nil {
		errs = append(errs, err)
	}
	cfg.StudioAgentIDs = ids
	if settings.Required && generatedServerID && settings.Audience == "" {
		errs = append(errs, fmt.Errorf("%s is required when %s is on: tokens name this server and a generated id changes at every start (or set %s)",
			EnvServerID, grant.EnvRequired, grant.EnvAudience))
	}
	if err := errors.Join(errs...); err != nil {
		return core.Config{}, err
	}

	studio := strings.TrimSpace(getenv(EnvStudioAPIKey)) != ""
	authz, err := grant.New(ctx, grant.Config{Settings: settings, ServerID: cfg.ServerID, LocalMode: local, StudioConnected: studio,
		Options: []grant.Option{grant.WithLogger(log)}})
	if err != nil {
		return core.Config{}, err
	}
	cfg.Authorizer = authz
	switch authz.(type) {
	case grant.NotConfigured:
		log.Warn("workspace authorization is not configured: every /a2a call is refused (workspace_authorization_not_configured) until "+
			grant.EnvRequired+"=true, "+grant.EnvIssuer+" and "+grant.EnvPublicKey+" or "+grant.EnvJWKSURL+" are set", "studio_connected", studio)
	case grant.LocalBypass:
		log.Warn("local mode: workspace authorization is BYPASSED for /a2a; anyone who reaches this port can run the agents with the API key. Never expose it.",
			"api_key_fingerprint", fingerprint.Of(cfg.APIKey))
	}
	if err := attachStore(ctx, getenv, log, &cfg); err != nil {
		return core.Config{}, err
	}
	return cfg, nil
}

// NewController loads the settings and builds the controller for agents. A Studio-connected
// long-running server registers with Studio first (see connectStudio).
func NewController(ctx context.Context, getenv func(string) string, log *slog.Logger, agents ...*core.Agent) (*core.Controller, error) {
	if log == nil {
		log = slog.Default()
	}
	getenv, params, checkpoints, err := connectStudio(ctx, getenv, log, agents)
	if err != nil {
		return nil, err
	}
	cfg, err := Load(ctx, getenv, log)
	if err != nil {
		return nil, err
	}
	cfg.Parameters = params
	cfg.RuleCheckpoints = checkpoints
	cfg.Telemetry = telemetry.FromContext(ctx)
	if cfg.Jobs, err = queue(ctx, getenv, agents); err != nil {
		if cfg.OnClose != nil {
			err = errors.Join(err, cfg.OnClose())
		}
		return nil, err
	}
	c, err := core.New(cfg, agents...)
	if err != nil {
		if cfg.OnClose != nil {
			err = errors.Join(err, cfg.OnClose())
		}
		return nil, err
	}
	return c, nil
}

// queue is the dispatcher of background work when an agent defines any: the platform's (its
// entrypoint puts it in ctx), else an in-process pool (a plain server, local mode).
//
// On a serverless platform (not a local emulation of it) an in-process pool would run nothing
// between requests, so a build that did not get the platform's queue maker (a main of its own, a
// source deployment's cloudrun.Register) is refused, saying what serves it.
func queue(ctx context.Context, getenv func(string) string, agents []*core.Agent) (jobs.Dispatcher, error) {
	if !slices.ContainsFunc(agents, func(a *core.Agent) bool { return a != nil && a.Works().Len() > 0 }) {
		return nil, nil
	}
	if f := jobs.QueueFrom(ctx); f != nil {
		return f()
	}
	if p := localmode.ServerlessPlatform(getenv); p != "" {
		emulated, _ := envvar.Bool(getenv, EnvLocalEmulator, false)
		sam, _ := envvar.Bool(getenv, "AWS_SAM_LOCAL", false)
		if !emulated && !sam {
			return nil, fmt.Errorf("background work on %s needs the platform's queue, which platform.Main gives the controller: "+
				"serve it with platform.Main (an image built by svz deploy does); a main of your own or a source deployment's cloudrun.Register "+
				"would run nothing between requests", p)
		}
	}
	id, err := instanceID(getenv)
	if err != nil {
		return nil, err
	}
	return jobs.NewPool(jobs.Identity(id)), nil
}

// EnvInstanceID names this process among those that share the store (jobs.Identity).
const EnvInstanceID = "SUPERVAIZER_INSTANCE_ID"

// instanceID reads SUPERVAIZER_INSTANCE_ID: empty, or 1 to 100 letters, digits, '.', '_', ':'
// and '-'.
func instanceID(getenv func(string) string) (string, error) {
	v := getenv(EnvInstanceID)
	if v == "" {
		return "", nil
	}
	ok := len(v) <= 100
	for _, c := range v {
		ok = ok && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._:-", c))
	}
	if !ok {
		return "", fmt.Errorf("%s=%q: must be 1 to 100 letters, digits, '.', '_', ':' or '-' (a name stable across restarts that no other live process on the store uses, e.g. a StatefulSet pod's name)", EnvInstanceID, v)
	}
	return v, nil
}

// randomKey returns 32 random bytes in URL-safe base64, like Python's secrets.token_urlsafe(32).
func randomKey() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// publicURL checks SUPERVAIZER_PUBLIC_URL: an absolute http(s) URL without credentials, query or
// fragment, returned without its trailing slash. Errors never quote the value, which may hold a
// password; they show it masked (package redact) when it parses as a URL at all.
func publicURL(v string) (string, error) {
	u, err := url.Parse(v)
	if err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.User == nil && u.RawQuery == "" && u.Fragment == "" {
		return strings.TrimRight(v, "/"), nil
	}
	shown := "value not shown: it may hold a credential"
	if m := redact.URL(v); m != "" {
		shown = "got " + m
	}
	return "", fmt.Errorf("%s must be an absolute http(s) URL without credentials, query or fragment, such as https://agent.example.com (%s)", EnvPublicURL, shown)
}
