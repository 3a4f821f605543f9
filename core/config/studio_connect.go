//go:build !svz_nostudio

package config

import (
	"context"
	"crypto/rsa"
	"fmt"
	"log/slog"
	"strings"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/studio"
	"github.com/supervaize/svz/core/telemetry"
	"github.com/supervaize/svz/internal/fingerprint"
	"github.com/supervaize/svz/internal/localmode"
)

// connectStudio links a Studio-connected controller to Studio before it serves. A long-running
// server registers (server.register), validates the handshake and looks its agents'
// parameters up, like the reference, and does not start when any of it fails; a serverless
// instance does neither at cold start: it gets the handshake's outcome from its settings (svz
// deploy or svz studio register writes them) and looks parameters up on first need. It returns
// getenv with the outcome (and any generated API key or server id) laid over it, the agents'
// parameter source (nil when no agent declares parameters) and the rule-checkpoint call (nil when
// no agent declares rule checkpoints). Local mode never calls Studio.
func connectStudio(ctx context.Context, getenv func(string) string, log *slog.Logger, agents []*core.Agent) (func(string) string, core.ParameterSource, checkpoint.Studio, error) {
	env, params, client, err := connectStudioClient(ctx, getenv, log, agents)
	if err != nil || client == nil {
		return env, params, nil, err
	}
	for _, a := range agents {
		if a != nil && a.Config().Registration.Capabilities.RuleCheckpoints != nil {
			return env, params, client.RuleCheckpoints(), nil
		}
	}
	return env, params, nil, nil
}

// connectStudioClient is connectStudio, returning the client it made (nil when not connected).
func connectStudioClient(ctx context.Context, getenv func(string) string, log *slog.Logger, agents []*core.Agent) (func(string) string, core.ParameterSource, *studio.Client, error) {
	mode, ttl, err := studioSettings(getenv)
	if err != nil {
		return nil, nil, nil, err
	}
	if local, err := LocalMode(getenv); err != nil || local {
		return getenv, nil, nil, err
	}
	settings, connected, err := studio.SettingsFromEnv(getenv)
	if err != nil || !connected {
		return getenv, nil, nil, err
	}
	// Read only by a Studio-connected controller, the one that uses it (parsing an RSA key costs
	// a fraction of a millisecond of cold start).
	var key *rsa.PrivateKey
	if v := getenv(EnvPrivateKey); strings.TrimSpace(v) != "" {
		k, err := studio.ParsePrivateKey(v)
		if err != nil {
			return nil, nil, nil, err
		}
		key = k
	}
	auth, err := grant.SettingsFromEnv(getenv)
	if err != nil {
		return nil, nil, nil, err
	}
	if !auth.Required || auth.Issuer == "" || !auth.HasKeySource() {
		// Checked here too so that Studio is not called by a controller that cannot start.
		return nil, nil, nil, fmt.Errorf("%s", grant.StudioRequiresAuthMessage)
	}
	client, err := studio.New(settings, studio.WithLogger(log), studio.WithTelemetry(telemetry.FromContext(ctx)))
	if err != nil {
		return nil, nil, nil, err
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
			return nil, nil, nil, err
		}
	}
	var declaring []studio.AgentParameters
	ids, err := grant.ParseStudioAgentIDs(env(EnvStudioAgentIDs))
	if err != nil {
		return nil, nil, nil, err
	}
	for _, a := range agents {
		if a != nil && len(a.Config().Parameters) > 0 {
			declaring = append(declaring, studio.AgentParameters{Slug: a.Slug(), StudioID: ids[a.Slug()], Declared: a.Config().Parameters})
		}
	}
	if len(declaring) == 0 {
		return env, nil, client, nil
	}
	if key == nil {
		return nil, nil, nil, fmt.Errorf("%s is required: agent %q declares parameters, which Studio sends encrypted to this controller's public key", EnvPrivateKey, declaring[0].Slug)
	}
	params, err := studio.NewParameters(studio.ParametersConfig{Client: client, Key: key, Agents: declaring, TTL: ttl, Logger: log})
	if err != nil {
		return nil, nil, nil, err
	}
	if register {
		if err := params.Prefetch(ctx); err != nil {
			return nil, nil, nil, fmt.Errorf("agent parameters from Studio: %w", err)
		}
	}
	return env, params, client, nil
}

// registerAtStart performs the server.register handshake of a long-running server and lays its
// outcome over the settings.
func registerAtStart(ctx context.Context, env func(string) string, overlay map[string]string, log *slog.Logger, client *studio.Client, key *rsa.PrivateKey, agents []*core.Agent) error {
	if key == nil {
		return fmt.Errorf("%s is required to register with Studio: Studio encrypts the agents' parameters to its public key (generate one with svz dev rsakey, or let svz deploy --generate-private-key store one); set %s=%s on an instance that must not register",
			EnvPrivateKey, EnvStudioRegister, StudioRegisterOff)
	}
	publicURL := strings.TrimRight(strings.TrimSpace(env(EnvPublicURL)), "/")
	if publicURL == "" {
		return fmt.Errorf("%s is required to register with Studio: it is the URL Studio calls (or set %s=%s)", EnvPublicURL, EnvStudioRegister, StudioRegisterOff)
	}
	apiKey := env(EnvAPIKey)
	if apiKey == "" {
		k, err := randomKey()
		if err != nil {
			return fmt.Errorf("%s is unset and a key could not be generated: %w", EnvAPIKey, err)
		}
		apiKey, overlay[EnvAPIKey] = k, k
		log.Warn(EnvAPIKey+" is not set: generated a key for this process and registered it with Studio; set it so the key survives restarts",
			"api_key_fingerprint", fingerprint.Of(k))
	}
	serverID := strings.TrimSpace(env(EnvServerID))
	if serverID == "" {
		id, err := contract.RandomUUID()
		if err != nil {
			return fmt.Errorf("%s is unset and an id could not be generated: %w", EnvServerID, err)
		}
		serverID, overlay[EnvServerID] = id, id
		log.Warn(EnvServerID+" is not set: generated an id for this process; Studio registers a new server at every start until you set it",
			"server_id", serverID)
	}
	ids, err := grant.ParseStudioAgentIDs(env(EnvStudioAgentIDs))
	if err != nil {
		return err
	}
	payloads := make([]contract.AgentRegistrationContract, 0, len(agents))
	for _, a := range agents {
		if a != nil {
			payloads = append(payloads, a.RegistrationPayload(ids[a.Slug()]))
		}
	}
	reg, err := studio.NewServerRegistration(studio.Server{
		ServerID: serverID, URL: publicURL, PublicKey: &key.PublicKey, APIKey: apiKey,
		Environment: strings.TrimSpace(env(studio.EnvEnvironment)), Agents: payloads,
	})
	if err != nil {
		return err
	}
	out, err := client.Register(ctx, reg, studio.Expect{Audience: strings.TrimSpace(env(grant.EnvAudience)), AgentIDs: ids})
	if err != nil {
		return err
	}
	for k, v := range out.Env() {
		overlay[k] = v
	}
	log.Info("registered with Studio", "workspace", client.Settings().WorkspaceID, "server_id", serverID,
		"audience", out.Audience, "studio_agent_ids", out.AgentIDsValue())
	return nil
}
