package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/studio"
	"github.com/supervaize/svz/deploy"
)

// newStudioCmd is `svz studio register`.
func newStudioCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "studio",
		Short: "Connect a controller to Supervaize Studio",
	}
	cmd.AddCommand(newStudioRegisterCmd(os.Getenv))
	return cmd
}

type studioRegisterFlags struct {
	url, output string
	timeout     time.Duration
}

func newStudioRegisterCmd(getenv func(string) string) *cobra.Command {
	f := &studioRegisterFlags{}
	cmd := &cobra.Command{
		Use:   "register --url URL",
		Short: "Register the controller serving at URL with Studio and print the settings its instances need",
		Long: `Perform Studio's server.register handshake for the controller that serves at --url, as a long-running
server does at start, and print its outcome as the two settings an instance that does not register
itself needs (serverless instances never register at cold start):

  SUPERVAIZER_WORKSPACE_AUTH_AUDIENCE   the audience of the tokens Studio signs for this server
  SUPERVAIZER_STUDIO_AGENT_IDS          the Studio agent id of each agent

The agents are read from the controller (/.well-known/agents.json, then each agent's registration
with its API key). The settings are those of the controller, from this environment:
SUPERVAIZE_API_URL, SUPERVAIZE_WORKSPACE_ID, SUPERVAIZE_API_KEY (the Studio account),
SUPERVAIZER_API_KEY, SUPERVAIZER_PRIVATE_KEY, SUPERVAIZER_SERVER_ID (the controller's own), and, when
set, SUPERVAIZER_WORKSPACE_AUTH_AUDIENCE and SUPERVAIZER_STUDIO_AGENT_IDS, which Studio's answer
must agree with. Nothing is printed when the handshake fails. svz deploy up does this by itself.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return studioRegister(cmd, f, getenv)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.url, "url", "", "the controller's public URL (required)")
	fl.StringVarP(&f.output, "output", "o", "text", "text (export lines) or json")
	fl.DurationVar(&f.timeout, "timeout", 2*time.Minute, "overall time limit")
	return cmd
}

func studioRegister(cmd *cobra.Command, f *studioRegisterFlags, getenv func(string) string) error {
	if f.output != "text" && f.output != "json" {
		return fmt.Errorf("--output %q: want text or json", f.output)
	}
	out, err := studioRegisterOutcome(cmd, f, getenv)
	if f.output == "json" {
		doc := map[string]any{"ok": err == nil}
		if err != nil {
			doc["error"] = err.Error()
		} else {
			doc["url"], doc["workspace"], doc["server_id"] = strings.TrimRight(f.url, "/"), strings.TrimSpace(getenv(studio.EnvWorkspaceID)), out.ServerID
			doc["audience"], doc["studio_server_id"], doc["agent_ids"], doc["env"] = out.Audience, out.StudioServerID, out.AgentIDs, out.Env()
		}
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		if eerr := enc.Encode(doc); eerr != nil {
			return errors.Join(err, eerr)
		}
		return err
	}
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "# Registered %s with Studio workspace %s (server_id %s). Give every instance these settings:\n",
		strings.TrimRight(f.url, "/"), strings.TrimSpace(getenv(studio.EnvWorkspaceID)), out.ServerID)
	env := out.Env()
	for _, k := range []string{grant.EnvAudience, grant.EnvStudioAgentIDs} {
		fmt.Fprintf(w, "export %s=%s\n", k, shellQuote(env[k]))
	}
	return nil
}

func studioRegisterOutcome(cmd *cobra.Command, f *studioRegisterFlags, getenv func(string) string) (*studio.Outcome, error) {
	if strings.TrimSpace(f.url) == "" {
		return nil, errors.New("--url is required: the public URL of the controller to register")
	}
	if strings.EqualFold(strings.TrimSpace(getenv("SUPERVAIZER_LOCAL_MODE")), "true") {
		return nil, errors.New("SUPERVAIZER_LOCAL_MODE=true: a local-mode controller never registers with Studio")
	}
	settings, connected, err := studio.SettingsFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	if !connected {
		return nil, fmt.Errorf("%s is required: the Studio account's key (Developer → Environment variables in Studio)", studio.EnvAPIKey)
	}
	var errs []error
	apiKey := deploy.NewSecret(getenv(deploy.EnvAPIKey))
	if apiKey.IsZero() {
		errs = append(errs, fmt.Errorf("%s is required: the key the controller at --url uses, which Studio stores", deploy.EnvAPIKey))
	}
	privateKey := deploy.NewSecret(getenv(deploy.EnvPrivateKey))
	if privateKey.IsZero() {
		errs = append(errs, fmt.Errorf("%s is required: the controller's RSA key (its public half is registered)", deploy.EnvPrivateKey))
	}
	serverID := strings.TrimSpace(getenv(deploy.EnvServerID))
	if serverID == "" {
		errs = append(errs, fmt.Errorf("%s is required: the server id of the controller at --url", deploy.EnvServerID))
	}
	ids, err := grant.ParseStudioAgentIDs(getenv(grant.EnvStudioAgentIDs))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	ctx := cmd.Context()
	if f.timeout > 0 {
		var cancel func()
		ctx, cancel = context.WithTimeout(ctx, f.timeout)
		defer cancel()
	}
	return deploy.RegisterWithStudio(ctx, deploy.StudioRegistration{
		URL: strings.TrimRight(strings.TrimSpace(f.url), "/"), APIKey: apiKey, PrivateKey: privateKey, ServerID: serverID,
		Environment: strings.TrimSpace(getenv(studio.EnvEnvironment)), Studio: settings,
		Expect:     studio.Expect{Audience: strings.TrimSpace(getenv(grant.EnvAudience)), AgentIDs: ids},
		Controller: &http.Client{Timeout: 30 * time.Second},
	})
}
