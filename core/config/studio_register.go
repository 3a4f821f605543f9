//go:build !svz_nostudioregister

package config

import (
	"context"
	"crypto/rsa"
	"fmt"
	"log/slog"
	"strings"

	"github.com/google/uuid"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/studio"
	"github.com/supervaize/svz/internal/fingerprint"
)

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
		id, err := uuid.NewRandom()
		if err != nil {
			return fmt.Errorf("%s is unset and an id could not be generated: %w", EnvServerID, err)
		}
		serverID, overlay[EnvServerID] = id.String(), id.String()
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
