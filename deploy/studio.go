package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/studio"
)

// StepStudio is the Studio registration step of up: server.register with the service's URL, then
// the outcome written into the service's configuration.
const StepStudio = "studio"

// Variables of the Studio registration.
const (
	EnvStudioRegister  = "SUPERVAIZER_STUDIO_REGISTER"
	EnvStudioWorkspace = studio.EnvWorkspaceID
)

// StudioOutcome is what the registration gave the service, as up reports it.
type StudioOutcome struct {
	Workspace string            `json:"workspace"`
	Audience  string            `json:"audience"`
	AgentIDs  map[string]string `json:"agent_ids"`
	// Changed is true when the service's configuration was updated with this outcome.
	Changed bool `json:"changed"`
}

// StudioRegistration is what RegisterWithStudio needs: the controller serving at URL and its
// secrets, and the Studio account.
type StudioRegistration struct {
	// URL is the controller's public URL.
	URL string
	// APIKey is the controller's SUPERVAIZER_API_KEY: it reads the agents' registration payloads
	// from the controller and is the key Studio stores.
	APIKey Secret
	// PrivateKey is the controller's SUPERVAIZER_PRIVATE_KEY (its public half is registered).
	PrivateKey Secret
	// ServerID is the controller's SUPERVAIZER_SERVER_ID.
	ServerID string
	// Environment is sent as the server's environment ("dev" when empty).
	Environment string
	// Studio is the account registering.
	Studio studio.Settings
	// Expect is what the handshake must agree with (configured audience and agent ids).
	Expect studio.Expect
	// Controller reaches the controller (nil: a client with a 30 s timeout).
	Controller *http.Client
	// StudioClient reaches Studio (nil: the default client).
	StudioClient *http.Client
	Logger       *slog.Logger
}

// RegisterWithStudio performs the server.register handshake on behalf of the controller serving
// at r.URL, with the agents it serves (read from its discovery routes with its API key, which
// proves that key is the controller's), and returns the outcome. Nothing is written anywhere.
func RegisterWithStudio(ctx context.Context, r StudioRegistration) (*studio.Outcome, error) {
	if r.PrivateKey.IsZero() {
		return nil, fmt.Errorf("%s is required: Studio encrypts the agents' parameters to the controller's public key", EnvPrivateKey)
	}
	key, err := studio.ParsePrivateKey(r.PrivateKey.Reveal())
	if err != nil {
		return nil, err
	}
	hc := r.Controller
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	agents, err := ControllerAgents(ctx, hc, r.URL, r.APIKey)
	if err != nil {
		return nil, err
	}
	reg, err := studio.NewServerRegistration(studio.Server{ServerID: r.ServerID, URL: r.URL, PublicKey: &key.PublicKey,
		APIKey: r.APIKey.Reveal(), Environment: r.Environment, Agents: agents})
	if err != nil {
		return nil, err
	}
	var opts []studio.Option
	if r.StudioClient != nil {
		opts = append(opts, studio.WithHTTPClient(r.StudioClient))
	}
	if r.Logger != nil {
		opts = append(opts, studio.WithLogger(r.Logger))
	}
	c, err := studio.New(r.Studio, opts...)
	if err != nil {
		return nil, err
	}
	return c.Register(ctx, reg, r.Expect)
}

// ControllerAgents reads the registration payload of every agent the controller at base serves:
// the agent list (/.well-known/agents.json), then each agent's GET /api/supervaizer/agents/{slug}/
// with apiKey.
func ControllerAgents(ctx context.Context, hc *http.Client, base string, apiKey Secret) ([]contract.AgentRegistrationContract, error) {
	base = strings.TrimRight(base, "/")
	get := func(target string, key bool) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+target, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "application/json")
		if key {
			req.Header.Set("X-API-Key", apiKey.Reveal())
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, fmt.Errorf("the controller: GET %s: %w", target, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		switch {
		case err != nil:
			return nil, fmt.Errorf("the controller: GET %s: %w", target, err)
		case resp.StatusCode == http.StatusUnauthorized:
			return nil, fmt.Errorf("the controller: GET %s: HTTP 401: it does not accept %s %s: give the key the controller at %s uses", target, EnvAPIKey, apiKey.Fingerprint(), base)
		case resp.StatusCode != http.StatusOK:
			return nil, fmt.Errorf("the controller: GET %s: HTTP %d", target, resp.StatusCode)
		}
		return b, nil
	}
	body, err := get("/.well-known/agents.json", false)
	if err != nil {
		return nil, err
	}
	var list struct {
		Agents []struct {
			AgentCardURL string `json:"agent_card_url"`
		} `json:"agents"`
	}
	if err := json.Unmarshal(body, &list); err != nil || len(list.Agents) == 0 {
		return nil, fmt.Errorf("the controller at %s lists no agent in /.well-known/agents.json", base)
	}
	var out []contract.AgentRegistrationContract
	for _, a := range list.Agents {
		u, err := url.Parse(a.AgentCardURL)
		slug, ok := strings.CutSuffix(path.Base(u.Path), "_agent.json")
		if err != nil || !ok || slug == "" {
			return nil, fmt.Errorf("the controller lists an Agent Card URL svz cannot read a slug from: %q", a.AgentCardURL)
		}
		b, err := get("/api/supervaizer/agents/"+url.PathEscape(slug)+"/", true)
		if err != nil {
			return nil, err
		}
		var p contract.AgentRegistrationContract
		if err := json.Unmarshal(b, &p); err != nil {
			return nil, fmt.Errorf("the controller: agent %q: not a registration payload: %w", slug, err)
		}
		if p.Slug != slug {
			return nil, fmt.Errorf("the controller: agent %q answered for slug %q", slug, p.Slug)
		}
		out = append(out, p)
	}
	return out, nil
}

// studioOn reports whether the service is connected to Studio: it gets the Studio key.
func studioOn(refs map[string]SecretRef) bool {
	_, ok := refs[EnvStudioAPIKey]
	return ok
}

// studioEnv adds what a Studio-connected service needs to its environment: instances never
// register (svz registers once per up), and keep the outcome of the last registration unless
// the host configures it.
func (d *Deployer) studioEnv(env map[string]string, live *Live, refs map[string]SecretRef) {
	if !studioOn(refs) {
		return
	}
	env[EnvStudioRegister] = "off"
	if live == nil {
		return
	}
	for _, k := range [...]string{grant.EnvAudience, grant.EnvStudioAgentIDs} {
		if _, set := env[k]; !set && live.Env[k] != "" {
			env[k] = live.Env[k]
		}
	}
}

// studioPlanned reports whether the plan gives the service the Studio key.
func studioPlanned(plans []secretPlan) bool {
	for _, p := range plans {
		if !p.skip && p.spec.Var == EnvStudioAPIKey {
			return true
		}
	}
	return false
}

// planStudio (a planning stage) lists the registration step of up.
func (d *Deployer) planStudio(_ context.Context, r *run) error {
	if !studioPlanned(r.plans) {
		return nil
	}
	res, live := &r.res, r.live
	c := Change{Resource: "studio-registration", Name: strings.TrimSpace(d.getenv(EnvStudioWorkspace)), Action: Create,
		Detail: "up registers the service with Studio (server.register) and writes " + grant.EnvAudience + " and " + grant.EnvStudioAgentIDs}
	if live != nil && live.Env[grant.EnvStudioAgentIDs] != "" {
		c.Action = NoOp
		c.Detail = "up registers again; the configuration changes only if Studio's answer does"
	}
	res.Changes = append(res.Changes, c)
	return nil
}

// upStudio is the last stage of up for a Studio-connected service: it registers the healthy
// service at its URL and, when the outcome differs from the service's configuration, deploys it
// (a new version or revision through the driver), gates it on health and checks that every agent
// reports its Studio id, restoring the previous configuration on failure. A failed handshake
// changes nothing.
func (d *Deployer) upStudio(ctx context.Context, r *run) error {
	if !studioOn(r.refs) {
		return nil
	}
	res, live, refs, values := &r.res, r.live, r.refs, r.values
	svc := d.desired(res.Image, live, refs, res.URL, r.work)
	var out *studio.Outcome
	err := d.step(StepStudio, "registering "+res.URL+" with Studio", func() (string, error) {
		settings, _, err := studio.SettingsFromEnv(func(k string) string {
			if k == EnvStudioAPIKey {
				return values[EnvStudioAPIKey].Reveal()
			}
			return d.getenv(k)
		})
		if err != nil {
			return "", err
		}
		ids, err := grant.ParseStudioAgentIDs(d.getenv(grant.EnvStudioAgentIDs))
		if err != nil {
			return "", err
		}
		out, err = RegisterWithStudio(ctx, StudioRegistration{
			URL: res.URL, APIKey: values[EnvAPIKey], PrivateKey: values[EnvPrivateKey], ServerID: svc.Env[EnvServerID],
			Environment: d.Config.Env, Studio: settings, Controller: d.gate().Client,
			Expect: studio.Expect{Audience: strings.TrimSpace(d.getenv(grant.EnvAudience)), AgentIDs: ids},
		})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("audience %s, %d agent(s)", out.Audience, len(out.AgentIDs)), nil
	})
	if err != nil {
		return err
	}
	want := maps.Clone(svc.Env)
	maps.Copy(want, out.Env())
	res.Studio = &StudioOutcome{Workspace: strings.TrimSpace(d.getenv(EnvStudioWorkspace)), Audience: out.Audience, AgentIDs: out.AgentIDs}
	change := Change{Resource: "studio-registration", Name: res.Studio.Workspace, Action: NoOp, Detail: "outcome already in the configuration"}
	if maps.Equal(want, svc.Env) {
		res.Changes = append(res.Changes, change)
		return nil
	}
	svc.Env = want
	var rollback func(context.Context) error
	err = d.step(StepStudio, "writing the Studio outcome into "+d.Config.ResourceName(), func() (string, error) {
		dep, err := d.Platform.Driver.Deploy(ctx, svc)
		if err != nil {
			return "", err
		}
		rollback = dep.Rollback
		res.Changes = mergeChanges(res.Changes, dep.Changes)
		rep, err := d.gate().Check(ctx, res.URL, values[EnvAPIKey].Reveal())
		if err != nil {
			return "", fmt.Errorf("health after writing the outcome: %w", err)
		}
		res.Health = &rep
		if err := d.checkStudioIDs(ctx, res.URL, out.AgentIDs); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s=%s", grant.EnvStudioAgentIDs, out.AgentIDsValue()), nil
	})
	if err != nil {
		if rollback != nil {
			if rerr := d.step(StepRollback, "restoring the configuration before the Studio outcome", func() (string, error) {
				return "previous configuration restored", rollback(ctx)
			}); rerr != nil {
				return errors.Join(err, rerr)
			}
			res.RolledBack = true
		}
		return err
	}
	change.Action, change.Detail = Update, grant.EnvAudience+" and "+grant.EnvStudioAgentIDs+" written"
	res.Changes = append(res.Changes, change)
	res.Studio.Changed = true
	return nil
}

// checkStudioIDs reads the controller's health and wants every Studio agent id of the outcome
// reported as an agent's agent_server_id: the instances run with the outcome.
func (d *Deployer) checkStudioIDs(ctx context.Context, base string, ids map[string]string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/.well-known/health", nil)
	if err != nil {
		return err
	}
	hc := d.gate().Client
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("GET /.well-known/health: %w", err)
	}
	defer resp.Body.Close()
	var h struct {
		Agents map[string]struct {
			AgentServerID *string `json:"agent_server_id"`
		} `json:"agents"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&h); err != nil {
		return fmt.Errorf("GET /.well-known/health: %w", err)
	}
	var reported []string
	for _, a := range h.Agents {
		if a.AgentServerID != nil {
			reported = append(reported, *a.AgentServerID)
		}
	}
	for slug, id := range ids {
		if !slices.Contains(reported, id) {
			return fmt.Errorf("the service does not report Studio agent id %s for %s in /.well-known/health", id, slug)
		}
	}
	return nil
}

// checkStudio refuses, before anything changes, a Studio connection that up could not complete
// or that the controller would refuse at start: the account's settings are incomplete, or
// workspace authorization is not configured. (The private key the registration needs is a
// required secret: planSecrets already refuses its absence.)
func (d *Deployer) checkStudio(_ context.Context, r *run) error {
	if !studioPlanned(r.plans) {
		return nil
	}
	_, _, err := studio.SettingsFromEnv(func(k string) string {
		if k == EnvStudioAPIKey {
			return "stored" // the value is the secret's; only the other settings are checked here
		}
		return d.getenv(k)
	})
	errs := []error{err}
	auth, err := grant.SettingsFromEnv(d.getenv)
	errs = append(errs, err)
	if err == nil && (!auth.Required || auth.Issuer == "" || !auth.HasKeySource()) {
		errs = append(errs, fmt.Errorf("%s", grant.StudioRequiresAuthMessage))
	}
	if err := errors.Join(errs...); err != nil {
		return &StepError{Step: StepStudio, Err: err}
	}
	return nil
}
