package contract

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// RegistrationSpec holds the arguments of BuildRegistration, the keyword arguments of the
// reference's build_v2_agent_registration. Only AgentSlug, DisplayName and A2UICatalogVersion are
// required; a zero value elsewhere means the reference default:
//
//   - AgentID: the slug; ControllerURL: "/a2a"; AgentCardURL: the unversioned card route
//     "/.well-known/agents/<slug>_agent.json";
//   - A2UIVersion "v0.8", A2AVersion "0.2.6", AGUIVersion "" (null);
//   - Transport: json_rpc and sse; ExternalInterop: none;
//   - JobPolicy nil: no sync, no setup; an empty sync action is job.sync, empty setup actions
//     are job.start.preview, job.start and step.awaiting.submit.
//
// AgentSlug must equal the slug of the agent's name (Slugify), or the agent is refused.
type RegistrationSpec struct {
	AgentID            string
	AgentSlug          string
	DisplayName        string
	AgentCardURL       string
	ControllerURL      string
	A2UICatalogVersion string

	// Surfaces lists SurfaceID or SurfaceDefinition values. A definition also declares its id;
	// its label and description go to capabilities.surface_definitions.
	Surfaces []SurfaceSpec
	// Actions lists ActionID or ActionDefinition values, in the order Studio will see them
	// (derived actions follow). A bare ActionID takes the metadata of the same id when it is
	// derived, else mutating=true scope=job; an ActionDefinition always wins, wherever it is.
	Actions []ActionSpec

	Resources        []ResourceDefinition
	Datasets         []DatasetDefinition
	Dashboards       []DashboardDefinition
	WorkspaceBinding *WorkspaceBinding
	AgentMethods     *AgentMethods
	CaseLanes        []CaseLane
	ArtifactTypes    []ArtifactType
	JobPolicy        *JobPolicy
	RuleCheckpoints  *RuleCheckpoints

	A2UIVersion     string
	A2AVersion      string
	AGUIVersion     string
	Transport       *A2ATransport
	ExternalInterop *ExternalInterop

	// ScheduledStart announces capabilities.scheduled_start: Studio schedules and calls job.start,
	// which must then be among the actions.
	ScheduledStart bool
}

// ActionSpec is one entry of RegistrationSpec.Actions: an ActionID or an ActionDefinition.
type ActionSpec interface{ actionSpec() }

// ActionID is a bare action id: mutating=true scope=job, unless the same id is derived (from a
// resource, dataset, job policy, workspace binding or agent method), whose metadata it then takes.
type ActionID string

func (ActionID) actionSpec()         {}
func (ActionDefinition) actionSpec() {}

// SurfaceSpec is one entry of RegistrationSpec.Surfaces: a SurfaceID or a SurfaceDefinition.
type SurfaceSpec interface{ surfaceSpec() }

// SurfaceID is a bare surface id.
type SurfaceID string

func (SurfaceID) surfaceSpec()         {}
func (SurfaceDefinition) surfaceSpec() {}

// isAgentMethodKey reports whether k may name an agent custom method: letters, digits,
// underscores and hyphens, at least one ([A-Za-z0-9_-]+; a loop rather than a regexp, which
// would link the regexp engine into every binary for this one check).
func isAgentMethodKey(k string) bool {
	for i := 0; i < len(k); i++ {
		if c := k[i]; !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return k != ""
}

// DefaultAgentCardURL is the unversioned, relative Agent Card route of the slug.
func DefaultAgentCardURL(slug string) string {
	return "/.well-known/agents/" + slug + "_agent.json"
}

// BuildRegistration builds and validates a registration (build_v2_agent_registration).
//
// Surfaces are the declared ones followed by the derived ones — mission.agent.resource.<id> for
// auto-surface resources, mission.agent.dataset.<id> for auto-surface datasets, each dashboard's
// surface, the workspace binding's create surface — deduplicated, first mention first, empty ids
// dropped. Actions are the declared ones followed by the derived ones: resource.<id>.<op>
// (mutating, the resource's scope), dataset.<id>.query (read-only, the dataset's scope), the sync
// action, the setup actions (preview read-only), the workspace binding actions (scope workspace),
// agent.refresh and agent.custom.<key>; then rule.checkpoint.resume when rule checkpoints are
// declared. Metadata precedence: explicit definition > derived > bare id.
//
// The registration owns copies of the spec's slices and blocks, with the defaults written in (an
// empty resource scope reads "workspace" in Go too); Extra maps and field definitions are shared
// with the spec, so do not modify those afterwards.
//
// Every problem is reported at once: the error joins *ValidationError values, in order.
func BuildRegistration(spec RegistrationSpec) (*Registration, error) {
	var p problems
	// A missing argument is reported under its own name, not again under the registration path
	// it fills.
	missing := map[string]bool{}
	for _, req := range []struct{ name, path, v string }{
		{"agent_slug", "agent.slug", spec.AgentSlug},
		{"display_name", "agent.display_name", spec.DisplayName},
		{"a2ui_catalog_version", "versions.a2ui_catalog_version", spec.A2UICatalogVersion},
	} {
		if strings.TrimSpace(req.v) == "" {
			p.add(req.name, "Field required")
			missing[req.path] = true
			if req.path == "agent.slug" && spec.AgentID == "" {
				missing["agent.id"] = true
			}
		}
	}

	r := &Registration{
		ContractVersion: ContractVersion,
		Agent: AgentIdentity{
			ID:          orDefault(spec.AgentID, spec.AgentSlug),
			Slug:        spec.AgentSlug,
			DisplayName: spec.DisplayName,
		},
		Versions: ProtocolVersions{
			A2UIVersion:        orDefault(spec.A2UIVersion, A2UIVersion),
			A2UICatalogVersion: spec.A2UICatalogVersion,
			A2AVersion:         orDefault(spec.A2AVersion, A2AVersion),
		},
		A2A: A2AController{
			AgentCardURL:  orDefault(spec.AgentCardURL, DefaultAgentCardURL(spec.AgentSlug)),
			ControllerURL: orDefault(spec.ControllerURL, DefaultControllerURL),
			Transport:     DefaultTransport(),
		},
	}
	if spec.AGUIVersion != "" {
		v := spec.AGUIVersion
		r.Versions.AGUIVersion = &v
	}
	if spec.Transport != nil {
		r.A2A.Transport = *spec.Transport
	}
	if spec.ExternalInterop != nil {
		r.A2A.ExternalInterop = *spec.ExternalInterop
	}

	// Copy everything the registration keeps, so that the caller's values are never changed,
	// and write the defaults in, so that the Go value reads like its JSON.
	r.Resources = cloneResources(spec.Resources)
	r.Datasets = cloneDatasets(spec.Datasets)
	r.Dashboards = cloneDashboards(spec.Dashboards)
	r.Capabilities.CaseLanes = slices.Clone(spec.CaseLanes)
	r.Capabilities.ArtifactTypes = slices.Clone(spec.ArtifactTypes)
	r.Capabilities.ScheduledStart = spec.ScheduledStart
	if rc := spec.RuleCheckpoints; rc != nil {
		c := *rc
		if c.Version == 0 {
			c.Version = 1
		}
		c.Phases = nonNil(slices.Clone(c.Phases))
		c.SecretRefs = nonNil(slices.Clone(c.SecretRefs))
		r.Capabilities.RuleCheckpoints = &c
	}
	if jp := spec.JobPolicy; jp != nil {
		r.JobPolicy = cloneJobPolicy(*jp)
		if t := jp.DefaultTimeoutSeconds; t != nil && *t < 1 {
			// The reference takes any integer; a job cannot time out in zero or fewer seconds.
			p.add("job_policy.default_timeout_seconds", "must be a whole number of seconds from 1 up, or unset (background work then times out after 24 h); got %d", *t)
		}
	}
	r.JobPolicy.OfflineStartPolicy = orDefault(r.JobPolicy.OfflineStartPolicy, OfflineStartBlock)
	r.JobPolicy.OfflineRunningPolicy = orDefault(r.JobPolicy.OfflineRunningPolicy, OfflineRunningFailInStudio)
	if wb := spec.WorkspaceBinding; wb != nil {
		r.WorkspaceBinding = cloneWorkspaceBinding(*wb)
	}
	if m := spec.AgentMethods; m != nil {
		keys := make([]string, 0, len(m.Custom))
		for k := range m.Custom {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if !isAgentMethodKey(k) {
				p.add("agent_methods.custom", "agent custom method keys may only contain letters, numbers, underscores, and hyphens")
				break
			}
		}
	}

	r.Capabilities.Surfaces, r.Capabilities.SurfaceDefinitions = buildSurfaces(&p, spec.Surfaces, r)
	r.Capabilities.Actions = buildActions(&p, spec.Actions, r, spec.AgentMethods)

	if err := r.Validate(); err != nil {
		for _, e := range splitJoined(err) {
			var ve *ValidationError
			if errors.As(e, &ve) && missing[ve.Path] {
				continue
			}
			p = append(p, e)
		}
	}
	if len(p) > 0 {
		return nil, errors.Join(p...)
	}
	return r, nil
}

// buildSurfaces returns the capability surfaces and surface definitions of r.
func buildSurfaces(p *problems, declared []SurfaceSpec, r *Registration) ([]string, []SurfaceDefinition) {
	var ids []string
	var defs []SurfaceDefinition
	for i, s := range declared {
		at := fmt.Sprintf("surfaces[%d]", i)
		switch v := s.(type) {
		case SurfaceID:
			ids = append(ids, string(v))
		case SurfaceDefinition:
			ids, defs = addSurfaceDefinition(p, at, v, ids, defs)
		case *SurfaceDefinition:
			if v == nil {
				p.add(at, "a surface must be a SurfaceID or a SurfaceDefinition, not nil")
				continue
			}
			ids, defs = addSurfaceDefinition(p, at, *v, ids, defs)
		default:
			p.add(at, "a surface must be a SurfaceID or a SurfaceDefinition, not %T", s)
		}
	}
	for _, res := range r.Resources {
		if res.AutoSurface {
			ids = append(ids, "mission.agent.resource."+res.ID)
		}
	}
	for _, d := range r.Datasets {
		if d.AutoSurface {
			ids = append(ids, "mission.agent.dataset."+d.ID)
		}
	}
	for _, d := range r.Dashboards {
		ids = append(ids, d.Surface)
	}
	if b := r.WorkspaceBinding; b != nil && b.Create != nil {
		ids = append(ids, b.Create.Surface)
	}
	return uniqueStrings(ids), defs
}

func addSurfaceDefinition(p *problems, at string, d SurfaceDefinition, ids []string, defs []SurfaceDefinition) ([]string, []SurfaceDefinition) {
	if strings.TrimSpace(d.ID) == "" {
		p.add(at, "surface definitions must have a non-empty id")
		return ids, defs
	}
	d.Label = displayText(d.Label)
	d.Description = displayText(d.Description)
	ids = append(ids, d.ID)
	if d.Label != "" || d.Description != "" {
		defs = append(defs, d)
	}
	return ids, defs
}

// uniqueStrings drops empty and repeated values, keeping first mentions in order.
func uniqueStrings(values []string) []string {
	seen := make(map[string]bool, len(values))
	out := make([]string, 0, len(values))
	for _, v := range values {
		if v == "" || seen[v] {
			continue
		}
		seen[v] = true
		out = append(out, v)
	}
	return out
}

// buildActions merges the declared actions with the ones derived from r.
func buildActions(p *problems, declared []ActionSpec, r *Registration, methods *AgentMethods) []ActionDefinition {
	var order []string
	explicit := map[string]ActionDefinition{}
	inheritScope := map[string]bool{} // explicit definitions without a scope: they take the derived one
	for i, s := range declared {
		at := fmt.Sprintf("actions[%d]", i)
		var def ActionDefinition
		isDef := false
		switch v := s.(type) {
		case ActionID:
			if strings.TrimSpace(string(v)) == "" {
				p.add(at, "action definitions must have a non-empty id")
				continue
			}
			order = append(order, string(v))
			continue
		case ActionDefinition:
			def, isDef = v, true
		case *ActionDefinition:
			if v == nil {
				p.add(at, "an action must be an ActionID or an ActionDefinition, not nil")
				continue
			}
			def, isDef = *v, true
		default:
			p.add(at, "an action must be an ActionID or an ActionDefinition, not %T", s)
			continue
		}
		if !isDef {
			continue
		}
		if strings.TrimSpace(def.ID) == "" {
			p.add(at, "action definitions must have a non-empty id")
			continue
		}
		if _, dup := explicit[def.ID]; dup {
			p.add(at, "action '%s' is defined twice", def.ID)
			continue
		}
		if def.Scope == "" {
			inheritScope[def.ID] = true
			def.Scope = ScopeJob
		}
		def.Label = displayText(def.Label)
		def.Description = displayText(def.Description)
		def.Extra = cloneExtra(def.Extra)
		explicit[def.ID] = def
		order = append(order, def.ID)
	}

	derived := map[string]ActionDefinition{}
	derive := func(id string, mutating bool, scope string) {
		if id == "" {
			return
		}
		if !validScope(scope) {
			scope = ScopeJob // the source's scope is reported; do not report it again here
		}
		order = append(order, id)
		if _, ok := derived[id]; !ok {
			derived[id] = ActionDefinition{ID: id, ReadOnly: !mutating, Scope: scope}
		}
	}
	for _, res := range r.Resources {
		for _, op := range res.Operations {
			derive("resource."+res.ID+"."+op, !slices.Contains(res.ReadOnlyOperations, op), res.Scope)
		}
	}
	for _, d := range r.Datasets {
		derive("dataset."+d.ID+".query", false, d.Scope)
	}
	if s := r.JobPolicy.Sync; s != nil {
		derive(s.Action, true, ScopeJob)
	}
	if s := r.JobPolicy.Setup; s != nil {
		derive(s.PreviewAction, false, ScopeJob)
		derive(s.StartAction, true, ScopeJob)
		derive(s.SubmitAction, true, ScopeJob)
	}
	if b := r.WorkspaceBinding; b != nil {
		if b.Existing != nil {
			derive(b.Existing.Action, true, ScopeWorkspace)
		}
		if b.Create != nil {
			derive(b.Create.Action, true, ScopeWorkspace)
		}
	}
	for _, id := range methods.ActionIDs() {
		derive(id, true, ScopeJob)
	}
	if r.Capabilities.RuleCheckpoints != nil {
		derive(RuleCheckpointResumeAction, true, ScopeJob)
	}

	out := make([]ActionDefinition, 0, len(order))
	for _, id := range uniqueStrings(order) {
		if d, ok := explicit[id]; ok {
			if dd, isDerived := derived[id]; isDerived && inheritScope[id] {
				d.Scope = dd.Scope
			}
			out = append(out, d)
		} else if d, ok := derived[id]; ok {
			out = append(out, d)
		} else {
			out = append(out, ActionDefinition{ID: id, Scope: ScopeJob})
		}
	}
	return out
}

func validScope(s string) bool {
	return s == ScopeWorkspace || s == ScopeMission || s == ScopeJob
}

func cloneExtra(e Extra) Extra {
	if e == nil {
		return nil
	}
	out := make(Extra, len(e))
	for k, v := range e {
		out[k] = slices.Clone(v)
	}
	return out
}

func cloneResources(in []ResourceDefinition) []ResourceDefinition {
	out := slices.Clone(in)
	for i := range out {
		d := &out[i]
		d.Scope = orDefault(d.Scope, ScopeWorkspace)
		if d.RequiresContext == nil {
			d.RequiresContext = []string{"workspace.id"}
		} else {
			d.RequiresContext = slices.Clone(d.RequiresContext)
		}
		d.Operations = nonNil(slices.Clone(d.Operations))
		d.Fields = nonNil(slices.Clone(d.Fields))
		d.MountedViews = nonNil(slices.Clone(d.MountedViews))
		d.ReadOnlyOperations = slices.Clone(d.ReadOnlyOperations)
		if d.Display != nil {
			disp := *d.Display
			d.Display = &disp
		}
	}
	return out
}

func cloneDatasets(in []DatasetDefinition) []DatasetDefinition {
	out := slices.Clone(in)
	for i := range out {
		out[i].Scope = orDefault(out[i].Scope, ScopeWorkspace)
		if out[i].Display != nil {
			disp := *out[i].Display
			out[i].Display = &disp
		}
	}
	return out
}

func cloneDashboards(in []DashboardDefinition) []DashboardDefinition {
	out := slices.Clone(in)
	for i := range out {
		d := &out[i]
		d.Surface = orDefault(d.Surface, DefaultDashboardSurface)
		d.Widgets = nonNil(slices.Clone(d.Widgets))
		for k := range d.Widgets {
			w := &d.Widgets[k]
			w.Visualization.Type = orDefault(w.Visualization.Type, VisualizationTable)
			if w.Data != nil {
				dt := *w.Data
				dt.Mode = orDefault(dt.Mode, WidgetDataRef)
				w.Data = &dt
			}
		}
	}
	return out
}

func cloneJobPolicy(in JobPolicy) JobPolicy {
	out := in
	if in.DefaultTimeoutSeconds != nil {
		t := *in.DefaultTimeoutSeconds
		out.DefaultTimeoutSeconds = &t
	}
	if in.Sync != nil {
		s := *in.Sync
		s.Action = orDefault(s.Action, JobSyncAction)
		s.SupportedStatuses = nonNil(slices.Clone(s.SupportedStatuses))
		out.Sync = &s
	}
	if in.Setup != nil {
		s := in.Setup.withDefaults()
		s.ActionScopes = nonNil(slices.Clone(s.ActionScopes))
		out.Setup = &s
	}
	return out
}

func cloneWorkspaceBinding(in WorkspaceBinding) *WorkspaceBinding {
	b := in.withModeBlocks()
	b.Modes = nonNil(slices.Clone(b.Modes))
	b.ReferenceLabel = orDefault(b.ReferenceLabel, DefaultReferenceLabel)
	b.ReferenceHelp = orDefault(b.ReferenceHelp, DefaultReferenceHelp)
	b.ReferencePlaceholder = orDefault(b.ReferencePlaceholder, DefaultReferencePlaceholder)
	if b.Existing != nil {
		e := *b.Existing
		e.Action = orDefault(e.Action, WorkspaceBindingOptionsAction)
		e.ValueField = orDefault(e.ValueField, "agent_workspace_ref")
		e.LabelField = orDefault(e.LabelField, "display_name")
		b.Existing = &e
	}
	if b.Create != nil {
		c := *b.Create
		c.Surface = orDefault(c.Surface, WorkspaceBindingCreateSurface)
		c.Action = orDefault(c.Action, WorkspaceBindingCreateAction)
		c.Fields = nonNil(slices.Clone(c.Fields))
		b.Create = &c
	}
	return &b
}
