package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/supervaize/svz/core/a2ui"
	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/jobs"
)

// ActionHandler runs one declared action. A returned error (or a panic) answers the caller with
// JSON-RPC -32603 "Action handler failed"; its text is logged, never sent. A business failure is
// a result with Status "error", not an error.
type ActionHandler interface {
	ServeAction(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error)
}

// SurfaceHandler loads one declared surface: an A2UI document for Studio to render.
type SurfaceHandler interface {
	ServeSurface(ctx context.Context, req *contract.SurfaceRequest) (*contract.SurfaceResult, error)
}

// ActionFunc adapts a function to ActionHandler.
type ActionFunc func(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error)

// ServeAction calls f.
func (f ActionFunc) ServeAction(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	return f(ctx, req)
}

// SurfaceFunc adapts a function to SurfaceHandler.
type SurfaceFunc func(ctx context.Context, req *contract.SurfaceRequest) (*contract.SurfaceResult, error)

// ServeSurface calls f.
func (f SurfaceFunc) ServeSurface(ctx context.Context, req *contract.SurfaceRequest) (*contract.SurfaceResult, error) {
	return f(ctx, req)
}

var (
	_ ActionHandler  = ActionFunc(nil)
	_ SurfaceHandler = SurfaceFunc(nil)
)

// AgentConfig describes an agent. Name and Registration are required.
type AgentConfig struct {
	// Name is the agent's display name; its slug (python-slugify) and its deterministic id
	// (shortuuid of the name) derive from it, so renaming an agent changes its routes.
	Name string
	// ID, when set, must equal the deterministic id of Name.
	ID          string
	Version     string
	Description string
	Author      string
	Developer   string
	Tags        []string
	// ReleaseNotesURL, when set, is the Agent Card's version_info.changelog_url.
	ReleaseNotesURL string
	// Registration is the Supervaizer v2 registration (contract.BuildRegistration); its
	// agent.slug must equal the slug of Name.
	Registration *contract.Registration
	// Introduction, FullDescription and BillingCatalog travel in the agent registration payload.
	Introduction    *contract.Introduction
	FullDescription *contract.FullDescription
	BillingCatalog  []contract.BillingCatalogItem
	// Parameters are the settings the operator configures for the agent in Studio (its
	// parameters_setup); handlers read their values with Parameter.
	Parameters []contract.Parameter
}

// Agent is one agent a controller serves: its identity, its v2 registration and its handlers.
// Register handlers before passing the agent to New; New reports every registration mistake.
type Agent struct {
	cfg      AgentConfig
	slug     string
	id       string
	actions  map[string]ActionHandler
	surfaces map[string]SurfaceHandler
	data     []*dataResource
	inputs   map[string]inputSchema // DeclareInput
	steps    *checkpoint.Registry   // guarded steps (checkpoint.Define)
	works    *jobs.Registry         // background work (jobs.Define)
	syncHook JobSyncHook            // ExtendJobSync
	errs     []error
}

// NewAgent validates cfg and returns the agent.
func NewAgent(cfg AgentConfig) (*Agent, error) {
	if strings.TrimSpace(cfg.Name) == "" {
		return nil, errors.New("agent name is required")
	}
	slug := contract.Slugify(cfg.Name)
	if slug == "" {
		return nil, fmt.Errorf("agent name %q has no slug: use letters or digits", cfg.Name)
	}
	id := contract.DeterministicAgentID(cfg.Name)
	if cfg.ID != "" && cfg.ID != id {
		return nil, fmt.Errorf("Agent id '%s' does not match deterministic id for name '%s' ('%s'); omit id or use the expected value", cfg.ID, cfg.Name, id)
	}
	if cfg.Registration == nil {
		return nil, fmt.Errorf("agent %q has no Supervaizer v2 registration: build one with contract.BuildRegistration", cfg.Name)
	}
	if got := cfg.Registration.Agent.Slug; got != slug {
		//lint:ignore ST1005 the reference SDK's exact message
		return nil, fmt.Errorf("Supervaizer v2 registration agent.slug must match Agent.slug: '%s' != '%s'", got, slug)
	}
	var errs []error
	if err := cfg.Registration.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("registration: %w", err))
	}
	if cfg.Introduction != nil {
		if err := cfg.Introduction.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("introduction: %w", err))
		}
	}
	if cfg.FullDescription != nil {
		if err := cfg.FullDescription.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("full_description: %w", err))
		}
	}
	if err := contract.ValidateBillingCatalog(cfg.BillingCatalog); err != nil {
		errs = append(errs, fmt.Errorf("billing_catalog: %w", err))
	}
	if err := contract.ValidateParameters(cfg.Parameters); err != nil {
		errs = append(errs, fmt.Errorf("parameters: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("agent %q: %w", cfg.Name, err)
	}
	return &Agent{
		cfg:      cfg,
		slug:     slug,
		id:       id,
		actions:  map[string]ActionHandler{},
		surfaces: map[string]SurfaceHandler{},
		steps:    checkpoint.NewRegistry(cfg.Registration.Capabilities.RuleCheckpoints),
		works:    jobs.NewRegistry(),
	}, nil
}

// GuardedSteps is the registry of the agent's rule-checkpoint guarded steps: define them with
// checkpoint.Define(agent, name, funcs) before passing the agent to New.
func (a *Agent) GuardedSteps() *checkpoint.Registry { return a.steps }

// Slug is the agent's slug, the agent_slug of its requests and the key of its routes.
func (a *Agent) Slug() string { return a.slug }

// ID is the agent's deterministic id (Agent.id of the reference SDK).
func (a *Agent) ID() string { return a.id }

// Name is the agent's display name.
func (a *Agent) Name() string { return a.cfg.Name }

// Config returns the agent's configuration.
func (a *Agent) Config() AgentConfig { return a.cfg }

// HandleAction registers the handler of a declared action. An undeclared id, a second handler
// for the same id or a nil handler is reported by New.
func (a *Agent) HandleAction(id string, h ActionHandler) {
	switch {
	case h == nil:
		a.errs = append(a.errs, fmt.Errorf("agent %q: nil handler for action %q", a.slug, id))
	case !a.declaresAction(id):
		a.errs = append(a.errs, fmt.Errorf("agent %q: handler for undeclared action %q: declare it in the registration's actions", a.slug, id))
	case a.actions[id] != nil:
		a.errs = append(a.errs, fmt.Errorf("agent %q: two handlers for action %q", a.slug, id))
	default:
		a.actions[id] = h
	}
}

// HandleSurface registers the handler of a declared surface, like HandleAction.
func (a *Agent) HandleSurface(id string, h SurfaceHandler) {
	switch {
	case h == nil:
		a.errs = append(a.errs, fmt.Errorf("agent %q: nil handler for surface %q", a.slug, id))
	case !a.cfg.Registration.HasSurface(id):
		a.errs = append(a.errs, fmt.Errorf("agent %q: handler for undeclared surface %q: declare it in the registration's surfaces", a.slug, id))
	case a.surfaces[id] != nil:
		a.errs = append(a.errs, fmt.Errorf("agent %q: two handlers for surface %q", a.slug, id))
	default:
		a.surfaces[id] = h
	}
}

func (a *Agent) declaresAction(id string) bool {
	_, ok := a.cfg.Registration.Action(id)
	return ok
}

// boundAgent is an agent as a controller serves it: an immutable copy of its handlers, taken by
// New, plus what the deployment says about it.
type boundAgent struct {
	*Agent
	studioID string
	actions  map[string]ActionHandler
	surfaces map[string]SurfaceHandler
	data     []*dataResource
	// gated are the actions a retry must not run twice: the mutating ones, except the setup
	// preview (Studio previews with the confirm's idempotency key, as often as the operator edits)
	// and help actions (which only propose drafts).
	gated map[string]bool
	// inputSchemas are the fields each action's input is checked against before its handler.
	inputSchemas map[string]inputSchema
	// versions are the registration's A2UI versions, for a2ui.Result.
	versions *a2ui.Versions
	grant    grant.Agent // what the authorizer is told about the agent
	// ruleCheckpoints: the agent declares rule checkpoints; its handlers get the checkpoint scope.
	ruleCheckpoints bool
}

func gatedActions(reg *contract.Registration) map[string]bool {
	preview, start := contract.JobStartPreviewAction, contract.JobStartAction
	if s := reg.JobPolicy.Setup; s != nil {
		if s.PreviewAction != "" {
			preview = s.PreviewAction
		}
		if s.StartAction != "" {
			start = s.StartAction
		}
	}
	gated := map[string]bool{}
	for _, def := range reg.Capabilities.Actions {
		switch {
		case def.ID == start || def.ID == contract.JobStartAction:
			gated[def.ID] = true // the confirm is always protected, whatever its metadata says
		case def.ReadOnly || def.Kind == contract.KindHelp || def.ID == preview || def.ID == contract.JobStartPreviewAction:
		default:
			gated[def.ID] = true
		}
	}
	return gated
}

// registrationContract is the agent's entry of Studio's server.register payload
// (AgentRegistrationContract): identity, the v2 registration and the introduction, full
// description and billing catalog Studio shows. studioID is the Studio agent id, "" when the
// agent is not linked (written as "None", as the reference does).
func (a *Agent) registrationContract(studioID string) contract.AgentRegistrationContract {
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	instructions := "supervaize_instructions.html"
	var params json.RawMessage
	if len(a.cfg.Parameters) > 0 {
		// A []contract.Parameter always encodes: its members are strings and booleans.
		params, _ = json.Marshal(a.cfg.Parameters)
	}
	return contract.AgentRegistrationContract{
		Name:             a.cfg.Name,
		ID:               a.id,
		Author:           opt(a.cfg.Author),
		Developer:        opt(a.cfg.Developer),
		Version:          a.cfg.Version,
		ReleaseNotesURL:  opt(a.cfg.ReleaseNotesURL),
		Description:      a.cfg.Description,
		APIPath:          "/agents/" + a.slug,
		Slug:             a.slug,
		Tags:             a.cfg.Tags,
		ParametersSetup:  params,
		ServerAgentID:    studioID,
		InstructionsPath: &instructions,
		DataResources:    a.dataResourcesJSON(),
		SupervaizerV2:    a.cfg.Registration,
		Introduction:     a.cfg.Introduction,
		FullDescription:  a.cfg.FullDescription,
		BillingCatalog:   a.cfg.BillingCatalog,
	}
}

// RegistrationPayload is the agent's entry of Studio's server.register payload, with studioID as
// its Studio agent id ("" when the agent is not linked to Studio yet).
func (a *Agent) RegistrationPayload(studioID string) contract.AgentRegistrationContract {
	return a.registrationContract(studioID)
}
