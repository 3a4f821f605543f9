package config

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/studio"
	"github.com/supervaize/svz/internal/envvar"
	"github.com/supervaize/svz/internal/localmode"
)

// Settings of the Studio connection read here (the account's are in package studio).
const (
	// EnvStudioRegister chooses whether a long-running server registers with Studio at start:
	// auto (the default) registers on a plain HTTP server and never on Lambda or Cloud Run;
	// off never registers (svz deploy sets it: it registers once per deploy and writes the outcome).
	EnvStudioRegister = "SUPERVAIZER_STUDIO_REGISTER"
	EnvPrivateKey     = studio.EnvPrivateKey
)

// Values of SUPERVAIZER_STUDIO_REGISTER.
const (
	StudioRegisterAuto = "auto"
	StudioRegisterOff  = "off"
)

// StudioConnected reports whether the environment connects the controller to Studio
// (SUPERVAIZE_API_KEY is set) outside local mode. An invalid SUPERVAIZER_LOCAL_MODE counts as not
// connected: Load reports it.
func StudioConnected(getenv func(string) string) bool {
	local, err := LocalMode(getenv)
	return err == nil && !local && strings.TrimSpace(getenv(EnvStudioAPIKey)) != ""
}

// connectStudio links a Studio-connected controller to Studio before it serves. A long-running
// server registers (server.register), validates the handshake and looks its agents'
// parameters up, like the reference, and does not start when any of it fails; a serverless
// instance does neither at cold start: it gets the handshake's outcome from its settings (svz
// deploy or svz studio register writes them) and looks parameters up on first need. It returns
// getenv with the outcome (and any generated API key or server id) laid over it, and the agents'
// parameter source (nil when no agent declares parameters). Local mode never calls Studio.
func connectStudio(ctx context.Context, getenv func(string) string, log *slog.Logger, agents []*core.Agent) (func(string) string, core.ParameterSource, error) {
	// The Studio settings are parsed strictly even where they are not used: a misspelt one is an
	// error, never silently ignored.
	mode, merr := envvar.Enum(getenv, EnvStudioRegister, StudioRegisterAuto, StudioRegisterAuto, StudioRegisterOff)
	ttl, terr := envvar.Duration(getenv, studio.EnvParametersTTL, studio.DefaultParametersTTL, 10*time.Second, 24*time.Hour)
	if err := errors.Join(merr, terr, studio.CheckTuning(getenv)); err != nil {
		return nil, nil, err
	}
	if local, err := LocalMode(getenv); err != nil || local {
		return getenv, nil, err
	}
	settings, connected, err := studio.SettingsFromEnv(getenv)
	if err != nil || !connected {
		return getenv, nil, err
	}
	// Read only by a Studio-connected controller, the one that uses it (parsing an RSA key costs
	// a fraction of a millisecond of cold start).
	var key *rsa.PrivateKey
	if v := getenv(EnvPrivateKey); strings.TrimSpace(v) != "" {
		k, err := studio.ParsePrivateKey(v)
		if err != nil {
			return nil, nil, err
		}
		key = k
	}
	auth, err := grant.SettingsFromEnv(getenv)
	if err != nil {
		return nil, nil, err
	}
	if !auth.Required || auth.Issuer == "" || !auth.HasKeySource() {
		// Checked here too so that Studio is not called by a controller that cannot start.
		return nil, nil, fmt.Errorf("%s", grant.StudioRequiresAuthMessage)
	}
	client, err := studio.New(settings, studio.WithLogger(log))
	if err != nil {
		return nil, nil, err
	}
	overlay := map[string]string{}
	env := func(k string) string {
		if v, ok := overlay[k]; ok {
			return v
		}
		return getenv(k)
	}
	register := mode == StudioRegisterAuto && localmode.ServerlessPlatform(getenv) == ""
	if register {
		if err := registerAtStart(ctx, env, overlay, log, client, key, agents); err != nil {
			return nil, nil, err
		}
	}
	var declaring []studio.AgentParameters
	ids, err := grant.ParseStudioAgentIDs(env(EnvStudioAgentIDs))
	if err != nil {
		return nil, nil, err
	}
	for _, a := range agents {
		if a != nil && len(a.Config().Parameters) > 0 {
			declaring = append(declaring, studio.AgentParameters{Slug: a.Slug(), StudioID: ids[a.Slug()], Declared: a.Config().Parameters})
		}
	}
	if len(declaring) == 0 {
		return env, nil, nil
	}
	if key == nil {
		return nil, nil, fmt.Errorf("%s is required: agent %q declares parameters, which Studio sends encrypted to this controller's public key", EnvPrivateKey, declaring[0].Slug)
	}
	params, err := studio.NewParameters(studio.ParametersConfig{Client: client, Key: key, Agents: declaring, TTL: ttl, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	if register {
		if err := params.Prefetch(ctx); err != nil {
			return nil, nil, fmt.Errorf("agent parameters from Studio: %w", err)
		}
	}
	return env, params, nil
}
