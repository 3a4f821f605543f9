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
	"strconv"
	"strings"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/internal/fingerprint"
)

// Environment variables read here (the workspace-authorization ones are in package grant, the
// store ones in package storeenv).
const (
	EnvAPIKey          = "SUPERVAIZER_API_KEY"
	EnvReadAPIKeys     = "SUPERVAIZER_READ_API_KEYS"
	EnvServerID        = "SUPERVAIZER_SERVER_ID"
	EnvPublicURL       = "SUPERVAIZER_PUBLIC_URL"
	EnvLocalMode       = "SUPERVAIZER_LOCAL_MODE"
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

// LocalMode reports whether SUPERVAIZER_LOCAL_MODE is "true" (case-insensitive; as in the
// reference, no other spelling counts).
func LocalMode(getenv func(string) string) bool {
	return strings.EqualFold(strings.TrimSpace(getenv(EnvLocalMode)), "true")
}

// Load reads the controller settings. The caller owns the returned Config's OnClose (it closes
// the store): call it if the controller is never built.
func Load(ctx context.Context, getenv func(string) string, log *slog.Logger) (core.Config, error) {
	if log == nil {
		log = slog.Default()
	}
	local := LocalMode(getenv)
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
		id, err := newUUID()
		if err != nil {
			return core.Config{}, fmt.Errorf("%s is unset and an id could not be generated: %w", EnvServerID, err)
		}
		cfg.ServerID = id
		log.Warn(EnvServerID+" is not set: generated an id for this process only; set it in every deployed environment so workspace grants stay valid across restarts and instances",
			"server_id", id)
	case len(cfg.ServerID) <= 5:
		errs = append(errs, fmt.Errorf("%s must be longer than 5 characters, got %q", EnvServerID, cfg.ServerID))
	}

	if v := strings.TrimSpace(getenv(EnvPublicURL)); v != "" {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			errs = append(errs, fmt.Errorf("%s must be an absolute http(s) URL without credentials, query or fragment, got %q", EnvPublicURL, v))
		} else {
			cfg.PublicURL = strings.TrimRight(v, "/")
		}
	}

	if v := strings.TrimSpace(getenv(EnvMaxRequestBytes)); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < minRequestBytes || n > maxRequestBytes {
			errs = append(errs, fmt.Errorf("%s must be a number of bytes between %d and %d, got %q", EnvMaxRequestBytes, minRequestBytes, maxRequestBytes, v))
		} else {
			cfg.MaxBodyBytes = n
		}
	}

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
	if _, ok := authz.(grant.LocalBypass); ok {
		if getenv("AWS_LAMBDA_RUNTIME_API") != "" || getenv("K_SERVICE") != "" || getenv("FUNCTION_TARGET") != "" {
			// Allowed (emulators and sam local use it), but a deployed function in local mode is
			// open to anyone who knows the well-known key.
			log.Error("SUPERVAIZER_LOCAL_MODE=true on a serverless platform: workspace authorization is bypassed; remove it from any deployed environment")
		}
		log.Warn("local mode: workspace authorization is BYPASSED for /a2a; anyone who reaches this port can run the agents with the API key. Never expose it.",
			"api_key_fingerprint", fingerprint.Of(cfg.APIKey))
	}
	if err := attachStore(ctx, getenv, log, &cfg); err != nil {
		return core.Config{}, err
	}
	return cfg, nil
}

// NewController loads the settings and builds the controller for agents.
func NewController(ctx context.Context, getenv func(string) string, log *slog.Logger, agents ...*core.Agent) (*core.Controller, error) {
	cfg, err := Load(ctx, getenv, log)
	if err != nil {
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

// randomKey returns 32 random bytes in URL-safe base64, like Python's secrets.token_urlsafe(32).
func randomKey() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// newUUID returns a random (version 4) UUID.
func newUUID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}
