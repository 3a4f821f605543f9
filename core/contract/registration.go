package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Protocol versions and well-known ids of the v2 registration (spec §3.1).
const (
	// ContractVersion is supervaizer_contract_version: always 2.
	ContractVersion = 2
	// A2AVersion is the A2A protocol version this SDK announces by default.
	A2AVersion = "0.2.6"
	// A2UIVersion is the A2UI document version this SDK emits by default.
	A2UIVersion = "v0.8"
	// DefaultControllerURL is the controller url of a registration that names none.
	DefaultControllerURL = "/a2a"

	WorkspaceBindingOptionsAction = "workspace_binding.options"
	WorkspaceBindingCreateAction  = "workspace_binding.create"
	WorkspaceBindingCreateSurface = "workspace_binding.create"
	AgentRefreshAction            = "agent.refresh"
	AgentRefreshEffect            = "agent.refreshed"
	AgentCustomActionPrefix       = "agent.custom."
	RuleCheckpointResumeAction    = "rule.checkpoint.resume"
	ContextAssignAction           = "context.assign"

	JobStartAction           = "job.start"
	JobStartPreviewAction    = "job.start.preview"
	JobSyncAction            = "job.sync"
	StepAwaitingSubmitAction = "step.awaiting.submit"

	// DefaultDashboardSurface is the surface of a dashboard that names none.
	DefaultDashboardSurface = "mission.analytics"
)

// Scopes of actions, resources and datasets (workspace, mission or job; setup action_scopes also
// know case and step).
const (
	ScopeWorkspace = "workspace"
	ScopeMission   = "mission"
	ScopeJob       = "job"
	ScopeCase      = "case"
	ScopeStep      = "step"
)

// Action kinds. A help action proposes or checks a draft for a setup field; it never mutates.
const (
	KindCommand = "command"
	KindHelp    = "help"
)

// Registration is the supervaizer.v2 block of the Agent Card
// (SupervaizerV2AgentRegistrationContract). json.Marshal gives the reference's wire JSON in the
// newest (≥1.6 / seeds) shape: actions as objects, job_policy.setup always present, unset optional
// members written as null, surface_definitions / rule_checkpoints / scheduled_start omitted when
// empty. Decoding accepts the older shapes too (actions as strings) and keeps unknown members.
//
// Build one with BuildRegistration; Validate checks a hand-built or decoded one.
type Registration struct {
	ContractVersion  int                   `json:"supervaizer_contract_version"` // 0 is written as 2
	Agent            AgentIdentity         `json:"agent"`
	Versions         ProtocolVersions      `json:"versions"`
	A2A              A2AController         `json:"a2a"`
	Capabilities     Capabilities          `json:"capabilities"`
	JobPolicy        JobPolicy             `json:"job_policy"`
	Resources        []ResourceDefinition  `json:"resources"`
	Datasets         []DatasetDefinition   `json:"datasets"`
	Dashboards       []DashboardDefinition `json:"dashboards"`
	WorkspaceBinding *WorkspaceBinding     `json:"workspace_binding"`
	Extra            Extra                 `json:"-"`
}

// AgentIdentity names the agent in the registration (V2AgentIdentity). ID is whatever the builder
// got (the slug by default), not the deterministic Agent.id.
type AgentIdentity struct {
	ID          string `json:"id"`
	Slug        string `json:"slug"`
	DisplayName string `json:"display_name"`
	Extra       Extra  `json:"-"`
}

// ProtocolVersions pins the protocol versions the agent speaks (V2ProtocolVersions).
// A2UICatalogVersion is the agent's own version of its surface documents.
type ProtocolVersions struct {
	A2UIVersion        string  `json:"a2ui_version"`
	A2UICatalogVersion string  `json:"a2ui_catalog_version"`
	A2AVersion         string  `json:"a2a_version"`
	AGUIVersion        *string `json:"ag_ui_version"`
	Extra              Extra   `json:"-"`
}

// A2AController says where Studio finds the card and the JSON-RPC controller (V2A2AController).
type A2AController struct {
	AgentCardURL    string          `json:"agent_card_url"`
	ControllerURL   string          `json:"controller_url"`
	Transport       A2ATransport    `json:"transport"`
	ExternalInterop ExternalInterop `json:"external_interop"`
	Extra           Extra           `json:"-"`
}

// A2ATransport advertises the transports (V2A2ATransport). DefaultTransport gives the reference
// defaults; a decoded transport gets them for absent members.
type A2ATransport struct {
	JSONRPC           bool  `json:"json_rpc"`
	SSE               bool  `json:"sse"`
	PushNotifications bool  `json:"push_notifications"`
	Extra             Extra `json:"-"`
}

// DefaultTransport is JSON-RPC and SSE, no push notifications.
func DefaultTransport() A2ATransport { return A2ATransport{JSONRPC: true, SSE: true} }

// ExternalInterop advertises A2A interop beyond Studio (V2A2AExternalInterop); both false by
// default.
type ExternalInterop struct {
	InboundTasks       bool  `json:"inbound_tasks"`
	OutboundDelegation bool  `json:"outbound_delegation"`
	Extra              Extra `json:"-"`
}

// Capabilities lists what Studio may render and invoke (V2AgentCapabilities).
// SurfaceDefinitions only adds display text to ids of Surfaces; definitions without text are not
// written, and the list is omitted when empty. RuleCheckpoints is omitted when nil (and then no
// rule.checkpoint.resume action is implied); ScheduledStart is omitted when false.
type Capabilities struct {
	Surfaces           []string            `json:"surfaces"`
	SurfaceDefinitions []SurfaceDefinition `json:"surface_definitions,omitzero"`
	Actions            []ActionDefinition  `json:"actions"`
	CaseLanes          []CaseLane          `json:"case_lanes"`
	ArtifactTypes      []ArtifactType      `json:"artifact_types"`
	RuleCheckpoints    *RuleCheckpoints    `json:"rule_checkpoints,omitzero"`
	ScheduledStart     bool                `json:"scheduled_start,omitzero"`
	Extra              Extra               `json:"-"`
}

// ActionDefinition is one entry of capabilities.actions (V2ActionDefinition). Consumers authorize
// and group actions from this metadata, never from the id string.
//
// Actions mutate agent state unless they say otherwise, as in the reference (mutating=true by
// default): the Go field is ReadOnly so that its zero value is that safe default, and an explicit
// definition that only adds a label keeps its action mutating (and idempotent when retried).
//
// On the wire: id, mutating (= !ReadOnly) and scope are always written (an empty Scope as "job");
// label and description (trimmed, blank = absent), kind (when "help"), target_field and dry_run
// only when set. A bare JSON string decodes as {"id": s, "mutating": true, "scope": "job"}, and an
// object's absent mutating/scope take those defaults.
type ActionDefinition struct {
	ID       string
	ReadOnly bool // mutating=false on the wire: the action changes no agent-side state
	// Scope is workspace, mission or job. In BuildRegistration, "" means the scope the id is
	// derived with (a resource operation takes its resource's scope, a dataset query its
	// dataset's), and job for an id that is not derived.
	Scope       string
	Label       string
	Description string
	Kind        string // command (default) or help
	TargetField string
	DryRun      bool
	Extra       Extra
}

// Mutating reports whether the action changes agent-side state (the wire's "mutating").
func (a ActionDefinition) Mutating() bool { return !a.ReadOnly }

// actionWire is the wire form of ActionDefinition.
type actionWire struct {
	ID          string `json:"id"`
	Mutating    bool   `json:"mutating"`
	Scope       string `json:"scope"`
	Label       string `json:"label,omitzero"`
	Description string `json:"description,omitzero"`
	Kind        string `json:"kind,omitzero"`
	TargetField string `json:"target_field,omitzero"`
	DryRun      bool   `json:"dry_run,omitzero"`
}

// SurfaceDefinition adds display text to a declared surface (V2SurfaceDefinition).
type SurfaceDefinition struct {
	ID          string `json:"id"`
	Label       string `json:"label,omitzero"`
	Description string `json:"description,omitzero"`
	Extra       Extra  `json:"-"`
}

// CaseLane declares a lane cases may use (V2CaseLaneDefinition): setup, work, deliverable or a
// custom one that Studio renders generically.
type CaseLane struct {
	ID      string `json:"id"`
	Label   string `json:"label"`
	Default bool   `json:"default"`
	Extra   Extra  `json:"-"`
}

// ArtifactType declares an artifact type (V2ArtifactTypeDefinition); RendererSurface is written as
// null when empty.
type ArtifactType struct {
	Type            string `json:"type"`
	Label           string `json:"label"`
	RendererSurface string `json:"renderer_surface"`
	Extra           Extra  `json:"-"`
}

// Rule checkpoint phases.
const (
	PhaseBefore = "before"
	PhaseAfter  = "after"
)

// RuleCheckpoints declares rule-checkpoint support (V2RuleCheckpointCapability). Declaring it
// adds the rule.checkpoint.resume action. SecretRefs are paths under job.fields., case.metadata.,
// step.payload. or context. whose values Studio keeps out of checkpoint contexts.
type RuleCheckpoints struct {
	Version    int      `json:"version"` // 0 is written as 1
	Phases     []string `json:"phases"`
	SecretRefs []string `json:"secret_refs"`
	Extra      Extra    `json:"-"`
}

// Offline policies, the only values the reference accepts.
const (
	OfflineStartBlock          = "block"
	OfflineRunningFailInStudio = "fail_in_studio"
)

// JobPolicy is the agent's job policy (V2JobPolicy). Empty offline policies are written as their
// only legal values; Sync and Setup are written as null when nil.
type JobPolicy struct {
	DefaultTimeoutSeconds *int            `json:"default_timeout_seconds"`
	OfflineStartPolicy    string          `json:"offline_start_policy"`
	OfflineRunningPolicy  string          `json:"offline_running_policy"`
	Sync                  *JobSyncPolicy  `json:"sync"`
	Setup                 *JobSetupPolicy `json:"setup"`
	Extra                 Extra           `json:"-"`
}

// JobSyncPolicy names the job.sync action (V2JobSyncPolicy). BuildRegistration fills an empty
// Action with "job.sync"; in a decoded registration an absent action is "job.sync" and a blank
// one is an error.
type JobSyncPolicy struct {
	Action            string   `json:"action"`
	SupportedStatuses []string `json:"supported_statuses"`
	Extra             Extra    `json:"-"`
}

// ResourceDefinition declares an agent-owned business object Studio manages generically
// (V2ResourceDefinition). Each operation derives the action resource.<id>.<operation>; with
// AutoSurface, Studio generates the surface mission.agent.resource.<id>. An empty Scope is
// "workspace"; a nil RequiresContext is ["workspace.id"] (an empty non-nil one is written []).
type ResourceDefinition struct {
	ID              string                    `json:"id"`
	Label           string                    `json:"label"`
	AutoSurface     bool                      `json:"auto_surface"`
	Scope           string                    `json:"scope"`
	RequiresContext []string                  `json:"requires_context"`
	Operations      []string                  `json:"operations"`
	Display         *ResourceDisplay          `json:"display"`
	Fields          []ResourceFieldDefinition `json:"fields"`
	MountedViews    []MountedView             `json:"mounted_views"`
	// ReadOnlyOperations lists the operations that change nothing on the agent's side (typically
	// "list" and "get"): their derived actions resource.<id>.<op> are declared mutating=false,
	// keeping the resource's scope. Other operations stay mutating, as in the reference. It is
	// not a wire member: the actions carry it.
	ReadOnlyOperations []string `json:"-"`
	Extra              Extra    `json:"-"`
}

// ResourceDisplay is the display metadata of a resource or dataset
// (V2ResourceDisplayDefinition); TitleField is written as null when empty.
type ResourceDisplay struct {
	TitleField   string   `json:"title_field"`
	Columns      []string `json:"columns"`
	SearchFields []string `json:"search_fields"`
	Extra        Extra    `json:"-"`
}

// MountedView replaces a generated resource view (edit, import...) with an agent surface
// (V2MountedResourceViewDefinition).
type MountedView struct {
	View    string `json:"view"`
	Surface string `json:"surface"`
	Extra   Extra  `json:"-"`
}

// DatasetDefinition declares a read-oriented table Studio queries through dataset.<id>.query
// (V2DatasetDefinition). An empty Scope is "workspace".
type DatasetDefinition struct {
	ID          string           `json:"id"`
	Label       string           `json:"label"`
	AutoSurface bool             `json:"auto_surface"`
	Scope       string           `json:"scope"`
	Display     *ResourceDisplay `json:"display"`
	Extra       Extra            `json:"-"`
}

// DashboardDefinition is declarative metadata for a Studio-rendered dashboard
// (V2DashboardDefinition). An empty Surface is "mission.analytics".
type DashboardDefinition struct {
	ID      string            `json:"id"`
	Label   string            `json:"label"`
	Surface string            `json:"surface"`
	Widgets []DashboardWidget `json:"widgets"`
	Extra   Extra             `json:"-"`
}

// DashboardWidget is one widget of a dashboard (V2DashboardWidgetDefinition).
type DashboardWidget struct {
	ID            string              `json:"id"`
	Title         string              `json:"title"`
	Data          *WidgetData         `json:"data"`
	Layout        map[string]any      `json:"layout"`
	Visualization WidgetVisualization `json:"visualization"`
	Extra         Extra               `json:"-"`
}

// Widget data modes.
const (
	WidgetDataRef    = "ref"
	WidgetDataAction = "action"
	WidgetDataInline = "inline"
)

// WidgetData says where a widget's data comes from (V2DashboardWidgetDataRef): a dataset (ref,
// the default), a typed action, or inline values (a list of objects or an object). Note the
// reference's camelCase "datasetId".
type WidgetData struct {
	Mode      string         `json:"mode"` // "" means ref
	DatasetID string         `json:"datasetId"`
	Action    string         `json:"action"`
	Input     map[string]any `json:"input"`
	Values    any            `json:"values"`
	Extra     Extra          `json:"-"`
}

// Visualization types.
const (
	VisualizationTable    = "table"
	VisualizationMetric   = "metric"
	VisualizationVegaLite = "vega-lite"
	VisualizationCustom   = "custom"
)

// WidgetVisualization is how Studio draws a widget (V2DashboardWidgetVisualization); a vega-lite
// widget carries its Vega-Lite JSON in Spec. An empty Type is "table".
type WidgetVisualization struct {
	Type  string         `json:"type"`
	Spec  map[string]any `json:"spec"`
	Extra Extra          `json:"-"`
}

// Workspace binding modes.
const (
	BindExisting  = "bind_existing"
	CreateAndBind = "create_and_bind"
)

// Workspace binding default texts.
const (
	DefaultReferenceLabel       = "Agent workspace reference"
	DefaultReferenceHelp        = "Select or create the agent-side record this Studio workspace may access."
	DefaultReferencePlaceholder = "Example: workspace-prod"
)

// WorkspaceBinding declares that the agent needs an agent-side record before it accepts a
// workspace (V2WorkspaceBindingDefinition). A mode without its block gets the default block;
// empty texts are written as their defaults.
type WorkspaceBinding struct {
	Required             bool                      `json:"required"`
	Modes                []string                  `json:"modes"`
	ReferenceLabel       string                    `json:"reference_label"`
	ReferenceHelp        string                    `json:"reference_help"`
	ReferencePlaceholder string                    `json:"reference_placeholder"`
	Existing             *WorkspaceBindingExisting `json:"existing"`
	Create               *WorkspaceBindingCreate   `json:"create"`
	Extra                Extra                     `json:"-"`
}

// WorkspaceBindingExisting lists existing agent-side records (V2WorkspaceBindingExistingDefinition);
// empty members are written as their defaults.
type WorkspaceBindingExisting struct {
	Action     string `json:"action"`      // workspace_binding.options
	ValueField string `json:"value_field"` // agent_workspace_ref
	LabelField string `json:"label_field"` // display_name
	Extra      Extra  `json:"-"`
}

// WorkspaceBindingCreate creates an agent-side record (V2WorkspaceBindingCreateDefinition); empty
// surface and action are written as workspace_binding.create.
type WorkspaceBindingCreate struct {
	Surface string                    `json:"surface"`
	Action  string                    `json:"action"`
	Fields  []ResourceFieldDefinition `json:"fields"`
	Extra   Extra                     `json:"-"`
}

// AgentMethods declares agent-level methods (V2AgentMethods): agent.refresh and
// agent.custom.<key>. They only derive actions; the registration does not carry them.
type AgentMethods struct {
	Refresh *AgentMethod           `json:"refresh"`
	Custom  map[string]AgentMethod `json:"custom"`
	Extra   Extra                  `json:"-"`
}

// AgentMethod is one agent-level method (V2AgentMethod). Method names the Go handler the agent
// registers (a dotted import path in the reference). A nil Timeout is 600 seconds.
type AgentMethod struct {
	Method      string         `json:"method"`
	Params      map[string]any `json:"params"`
	Description *string        `json:"description"`
	IsAsync     bool           `json:"is_async"`
	Timeout     *int           `json:"timeout"`
	Extra       Extra          `json:"-"`
}

// ActionIDs lists the derived action ids: agent.refresh first, then agent.custom.<key> in key
// order (Go maps have no insertion order).
func (m *AgentMethods) ActionIDs() []string {
	if m == nil {
		return nil
	}
	var ids []string
	if m.Refresh != nil {
		ids = append(ids, AgentRefreshAction)
	}
	keys := make([]string, 0, len(m.Custom))
	for k := range m.Custom {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		ids = append(ids, AgentCustomActionPrefix+k)
	}
	return ids
}

// MethodFor returns the method behind an agent.refresh or agent.custom.<key> action.
func (m *AgentMethods) MethodFor(action string) (AgentMethod, bool) {
	if m == nil {
		return AgentMethod{}, false
	}
	if action == AgentRefreshAction {
		if m.Refresh == nil {
			return AgentMethod{}, false
		}
		return *m.Refresh, true
	}
	if key, ok := strings.CutPrefix(action, AgentCustomActionPrefix); ok {
		am, ok := m.Custom[key]
		return am, ok
	}
	return AgentMethod{}, false
}

// Action returns the definition of the declared action id. A registration declaring rule
// checkpoints always has rule.checkpoint.resume.
func (r *Registration) Action(id string) (ActionDefinition, bool) {
	for _, a := range r.Capabilities.Actions {
		if a.ID == id {
			if a.Scope == "" {
				a.Scope = ScopeJob
			}
			return a, true
		}
	}
	if id == RuleCheckpointResumeAction && r.Capabilities.RuleCheckpoints != nil {
		return resumeAction(), true
	}
	return ActionDefinition{}, false
}

// HasSurface reports whether the registration declares the surface id.
func (r *Registration) HasSurface(id string) bool {
	return slices.Contains(r.Capabilities.Surfaces, id)
}

func resumeAction() ActionDefinition {
	return ActionDefinition{ID: RuleCheckpointResumeAction, Scope: ScopeJob}
}

// nonNil returns s, or an empty slice when s is nil, so that it encodes as [].
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// orDefault returns s, or def when s is empty.
func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// nullString encodes "" as null.
type nullString string

func (s nullString) MarshalJSON() ([]byte, error) {
	if s == "" {
		return []byte("null"), nil
	}
	return json.Marshal(string(s))
}

func (s *nullString) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == "null" {
		*s = ""
		return nil
	}
	var v string
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*s = nullString(v)
	return nil
}

// displayText trims a label or description; blank means absent.
func displayText(s string) string { return strings.TrimSpace(s) }

// ---- JSON ----

// MarshalJSON writes the registration block.
func (r Registration) MarshalJSON() ([]byte, error) {
	type plain Registration
	p := plain(r)
	if p.ContractVersion == 0 {
		p.ContractVersion = ContractVersion
	}
	p.Resources = nonNil(p.Resources)
	p.Datasets = nonNil(p.Datasets)
	p.Dashboards = nonNil(p.Dashboards)
	return encodeObject(p, r.Extra)
}

// UnmarshalJSON decodes a registration block, keeping unknown members.
func (r *Registration) UnmarshalJSON(data []byte) error {
	type plain Registration
	p := plain{JobPolicy: JobPolicy{OfflineStartPolicy: OfflineStartBlock, OfflineRunningPolicy: OfflineRunningFailInStudio}}
	if err := decodeInto(data, "registration", &p, &p.Extra); err != nil {
		return err
	}
	*r = Registration(p)
	return nil
}

// MarshalJSON writes the identity.
func (a AgentIdentity) MarshalJSON() ([]byte, error) {
	type plain AgentIdentity
	return encodeObject(plain(a), a.Extra)
}

// UnmarshalJSON decodes the identity, keeping unknown members.
func (a *AgentIdentity) UnmarshalJSON(data []byte) error {
	type plain AgentIdentity
	return decodeInto(data, "agent identity", (*plain)(a), &a.Extra)
}

// MarshalJSON writes the versions; an absent ag_ui_version is null.
func (v ProtocolVersions) MarshalJSON() ([]byte, error) {
	type plain ProtocolVersions
	return encodeObject(plain(v), v.Extra)
}

// UnmarshalJSON decodes the versions, keeping unknown members.
func (v *ProtocolVersions) UnmarshalJSON(data []byte) error {
	type plain ProtocolVersions
	return decodeInto(data, "versions", (*plain)(v), &v.Extra)
}

// MarshalJSON writes the controller block.
func (c A2AController) MarshalJSON() ([]byte, error) {
	type plain A2AController
	return encodeObject(plain(c), c.Extra)
}

// UnmarshalJSON decodes the controller block; absent transport and interop take their defaults.
func (c *A2AController) UnmarshalJSON(data []byte) error {
	type plain A2AController
	p := plain{Transport: DefaultTransport()}
	if err := decodeInto(data, "a2a", &p, &p.Extra); err != nil {
		return err
	}
	*c = A2AController(p)
	return nil
}

// MarshalJSON writes the transport.
func (t A2ATransport) MarshalJSON() ([]byte, error) {
	type plain A2ATransport
	return encodeObject(plain(t), t.Extra)
}

// UnmarshalJSON decodes the transport; absent members take the reference defaults.
func (t *A2ATransport) UnmarshalJSON(data []byte) error {
	type plain A2ATransport
	p := plain(DefaultTransport())
	if err := decodeInto(data, "transport", &p, &p.Extra); err != nil {
		return err
	}
	*t = A2ATransport(p)
	return nil
}

// MarshalJSON writes the interop block.
func (e ExternalInterop) MarshalJSON() ([]byte, error) {
	type plain ExternalInterop
	return encodeObject(plain(e), e.Extra)
}

// UnmarshalJSON decodes the interop block, keeping unknown members.
func (e *ExternalInterop) UnmarshalJSON(data []byte) error {
	type plain ExternalInterop
	return decodeInto(data, "external_interop", (*plain)(e), &e.Extra)
}

// MarshalJSON writes the capabilities: surface definitions without text are left out (and the
// list when nothing is left), and rule.checkpoint.resume is added when rule checkpoints are
// declared without it.
func (c Capabilities) MarshalJSON() ([]byte, error) {
	type plain Capabilities
	p := plain(c)
	p.Surfaces = nonNil(p.Surfaces)
	var defs []SurfaceDefinition
	for _, d := range c.SurfaceDefinitions {
		if displayText(d.Label) != "" || displayText(d.Description) != "" {
			defs = append(defs, d)
		}
	}
	p.SurfaceDefinitions = defs
	p.Actions = nonNil(p.Actions)
	if c.RuleCheckpoints != nil && !slices.ContainsFunc(c.Actions, func(a ActionDefinition) bool { return a.ID == RuleCheckpointResumeAction }) {
		p.Actions = append(slices.Clip(p.Actions), resumeAction())
	}
	p.CaseLanes = nonNil(p.CaseLanes)
	p.ArtifactTypes = nonNil(p.ArtifactTypes)
	return encodeObject(p, c.Extra)
}

// UnmarshalJSON decodes the capabilities, accepting actions as strings or objects, and adds
// rule.checkpoint.resume when rule checkpoints are declared without it (as the reference model
// does on validation).
func (c *Capabilities) UnmarshalJSON(data []byte) error {
	type plain Capabilities
	var p plain
	if err := decodeInto(data, "capabilities", &p, &p.Extra); err != nil {
		return err
	}
	if p.RuleCheckpoints != nil && !slices.ContainsFunc(p.Actions, func(a ActionDefinition) bool { return a.ID == RuleCheckpointResumeAction }) {
		p.Actions = append(p.Actions, resumeAction())
	}
	*c = Capabilities(p)
	return nil
}

// MarshalJSON writes the action object: id, mutating, scope, then the optional members that are
// set.
func (a ActionDefinition) MarshalJSON() ([]byte, error) {
	w := actionWire{
		ID: a.ID, Mutating: !a.ReadOnly, Scope: orDefault(a.Scope, ScopeJob),
		Label: displayText(a.Label), Description: displayText(a.Description),
		Kind: a.Kind, TargetField: a.TargetField, DryRun: a.DryRun,
	}
	if w.Kind == KindCommand {
		w.Kind = ""
	}
	return encodeObject(w, a.Extra)
}

// UnmarshalJSON decodes an action given as a bare id string (≤1.5 agents) or as an object.
func (a *ActionDefinition) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		var id string
		if err := json.Unmarshal(data, &id); err != nil {
			return fmt.Errorf("decode action: %w", err)
		}
		*a = ActionDefinition{ID: id, Scope: ScopeJob}
		return nil
	}
	w := actionWire{Mutating: true, Scope: ScopeJob}
	var extra Extra
	if err := decodeInto(data, "action (a string or an object)", &w, &extra); err != nil {
		return err
	}
	*a = ActionDefinition{
		ID: w.ID, ReadOnly: !w.Mutating, Scope: w.Scope, Label: displayText(w.Label),
		Description: displayText(w.Description), Kind: w.Kind, TargetField: w.TargetField, DryRun: w.DryRun,
		Extra: extra,
	}
	return nil
}

// MarshalJSON writes the surface definition; blank texts are absent.
func (s SurfaceDefinition) MarshalJSON() ([]byte, error) {
	type plain SurfaceDefinition
	p := plain(s)
	p.Label = displayText(p.Label)
	p.Description = displayText(p.Description)
	return encodeObject(p, s.Extra)
}

// UnmarshalJSON decodes the surface definition, keeping unknown members.
func (s *SurfaceDefinition) UnmarshalJSON(data []byte) error {
	type plain SurfaceDefinition
	if err := decodeInto(data, "surface definition", (*plain)(s), &s.Extra); err != nil {
		return err
	}
	s.Label = displayText(s.Label)
	s.Description = displayText(s.Description)
	return nil
}

// MarshalJSON writes the lane.
func (l CaseLane) MarshalJSON() ([]byte, error) {
	type plain CaseLane
	return encodeObject(plain(l), l.Extra)
}

// UnmarshalJSON decodes the lane, keeping unknown members.
func (l *CaseLane) UnmarshalJSON(data []byte) error {
	type plain CaseLane
	return decodeInto(data, "case lane", (*plain)(l), &l.Extra)
}

type artifactTypeWire struct {
	Type            string     `json:"type"`
	Label           string     `json:"label"`
	RendererSurface nullString `json:"renderer_surface"`
}

// MarshalJSON writes the artifact type; an empty renderer surface is null.
func (t ArtifactType) MarshalJSON() ([]byte, error) {
	return encodeObject(artifactTypeWire{t.Type, t.Label, nullString(t.RendererSurface)}, t.Extra)
}

// UnmarshalJSON decodes the artifact type, keeping unknown members.
func (t *ArtifactType) UnmarshalJSON(data []byte) error {
	var w artifactTypeWire
	var extra Extra
	if err := decodeInto(data, "artifact type", &w, &extra); err != nil {
		return err
	}
	*t = ArtifactType{Type: w.Type, Label: w.Label, RendererSurface: string(w.RendererSurface), Extra: extra}
	return nil
}

// MarshalJSON writes the capability; version 1 when unset, lists as [] when empty.
func (c RuleCheckpoints) MarshalJSON() ([]byte, error) {
	type plain RuleCheckpoints
	p := plain(c)
	if p.Version == 0 {
		p.Version = 1
	}
	p.Phases = nonNil(p.Phases)
	p.SecretRefs = nonNil(p.SecretRefs)
	return encodeObject(p, c.Extra)
}

// UnmarshalJSON decodes the capability; an absent version is 1.
func (c *RuleCheckpoints) UnmarshalJSON(data []byte) error {
	type plain RuleCheckpoints
	p := plain{Version: 1}
	if err := decodeInto(data, "rule_checkpoints", &p, &p.Extra); err != nil {
		return err
	}
	*c = RuleCheckpoints(p)
	return nil
}

// MarshalJSON writes the policy with its nulls.
func (j JobPolicy) MarshalJSON() ([]byte, error) {
	type plain JobPolicy
	p := plain(j)
	p.OfflineStartPolicy = orDefault(p.OfflineStartPolicy, OfflineStartBlock)
	p.OfflineRunningPolicy = orDefault(p.OfflineRunningPolicy, OfflineRunningFailInStudio)
	return encodeObject(p, j.Extra)
}

// UnmarshalJSON decodes the policy; absent offline policies take their only legal values.
func (j *JobPolicy) UnmarshalJSON(data []byte) error {
	type plain JobPolicy
	p := plain{OfflineStartPolicy: OfflineStartBlock, OfflineRunningPolicy: OfflineRunningFailInStudio}
	if err := decodeInto(data, "job_policy", &p, &p.Extra); err != nil {
		return err
	}
	*j = JobPolicy(p)
	return nil
}

// MarshalJSON writes the sync policy.
func (s JobSyncPolicy) MarshalJSON() ([]byte, error) {
	type plain JobSyncPolicy
	p := plain(s)
	p.SupportedStatuses = nonNil(p.SupportedStatuses)
	return encodeObject(p, s.Extra)
}

// UnmarshalJSON decodes the sync policy; an absent action is job.sync.
func (s *JobSyncPolicy) UnmarshalJSON(data []byte) error {
	type plain JobSyncPolicy
	p := plain{Action: JobSyncAction}
	if err := decodeInto(data, "job_policy.sync", &p, &p.Extra); err != nil {
		return err
	}
	*s = JobSyncPolicy(p)
	return nil
}

// MarshalJSON writes the resource with its defaults.
func (d ResourceDefinition) MarshalJSON() ([]byte, error) {
	type plain ResourceDefinition
	p := plain(d)
	p.Scope = orDefault(p.Scope, ScopeWorkspace)
	if p.RequiresContext == nil {
		p.RequiresContext = []string{"workspace.id"}
	}
	p.Operations = nonNil(p.Operations)
	p.Fields = nonNil(p.Fields)
	p.MountedViews = nonNil(p.MountedViews)
	return encodeObject(p, d.Extra)
}

// UnmarshalJSON decodes the resource; absent members take the reference defaults.
func (d *ResourceDefinition) UnmarshalJSON(data []byte) error {
	type plain ResourceDefinition
	p := plain{Scope: ScopeWorkspace, RequiresContext: []string{"workspace.id"}}
	if err := decodeInto(data, "resource", &p, &p.Extra); err != nil {
		return err
	}
	*d = ResourceDefinition(p)
	return nil
}

type resourceDisplayWire struct {
	TitleField   nullString `json:"title_field"`
	Columns      []string   `json:"columns"`
	SearchFields []string   `json:"search_fields"`
}

// MarshalJSON writes the display block; an empty title field is null.
func (d ResourceDisplay) MarshalJSON() ([]byte, error) {
	return encodeObject(resourceDisplayWire{nullString(d.TitleField), nonNil(d.Columns), nonNil(d.SearchFields)}, d.Extra)
}

// UnmarshalJSON decodes the display block, keeping unknown members.
func (d *ResourceDisplay) UnmarshalJSON(data []byte) error {
	var w resourceDisplayWire
	var extra Extra
	if err := decodeInto(data, "display", &w, &extra); err != nil {
		return err
	}
	*d = ResourceDisplay{TitleField: string(w.TitleField), Columns: w.Columns, SearchFields: w.SearchFields, Extra: extra}
	return nil
}

// MarshalJSON writes the mounted view.
func (v MountedView) MarshalJSON() ([]byte, error) {
	type plain MountedView
	return encodeObject(plain(v), v.Extra)
}

// UnmarshalJSON decodes the mounted view, keeping unknown members.
func (v *MountedView) UnmarshalJSON(data []byte) error {
	type plain MountedView
	return decodeInto(data, "mounted view", (*plain)(v), &v.Extra)
}

// MarshalJSON writes the dataset; an empty scope is workspace.
func (d DatasetDefinition) MarshalJSON() ([]byte, error) {
	type plain DatasetDefinition
	p := plain(d)
	p.Scope = orDefault(p.Scope, ScopeWorkspace)
	return encodeObject(p, d.Extra)
}

// UnmarshalJSON decodes the dataset; an absent scope is workspace (≤1.5 datasets have none).
func (d *DatasetDefinition) UnmarshalJSON(data []byte) error {
	type plain DatasetDefinition
	p := plain{Scope: ScopeWorkspace}
	if err := decodeInto(data, "dataset", &p, &p.Extra); err != nil {
		return err
	}
	*d = DatasetDefinition(p)
	return nil
}

// MarshalJSON writes the dashboard; an empty surface is mission.analytics.
func (d DashboardDefinition) MarshalJSON() ([]byte, error) {
	type plain DashboardDefinition
	p := plain(d)
	p.Surface = orDefault(p.Surface, DefaultDashboardSurface)
	p.Widgets = nonNil(p.Widgets)
	return encodeObject(p, d.Extra)
}

// UnmarshalJSON decodes the dashboard; an absent surface is mission.analytics.
func (d *DashboardDefinition) UnmarshalJSON(data []byte) error {
	type plain DashboardDefinition
	p := plain{Surface: DefaultDashboardSurface}
	if err := decodeInto(data, "dashboard", &p, &p.Extra); err != nil {
		return err
	}
	*d = DashboardDefinition(p)
	return nil
}

// MarshalJSON writes the widget; layout {} when empty.
func (w DashboardWidget) MarshalJSON() ([]byte, error) {
	type plain DashboardWidget
	p := plain(w)
	if p.Layout == nil {
		p.Layout = map[string]any{}
	}
	return encodeObject(p, w.Extra)
}

// UnmarshalJSON decodes the widget, keeping unknown members.
func (w *DashboardWidget) UnmarshalJSON(data []byte) error {
	type plain DashboardWidget
	p := plain{Visualization: WidgetVisualization{Type: VisualizationTable}}
	if err := decodeInto(data, "widget", &p, &p.Extra); err != nil {
		return err
	}
	*w = DashboardWidget(p)
	return nil
}

type widgetDataWire struct {
	Mode      string         `json:"mode"`
	DatasetID nullString     `json:"datasetId"`
	Action    nullString     `json:"action"`
	Input     map[string]any `json:"input"`
	Values    any            `json:"values"`
}

// MarshalJSON writes the data reference: mode ref when empty, empty ids as null, input {}.
func (d WidgetData) MarshalJSON() ([]byte, error) {
	in := d.Input
	if in == nil {
		in = map[string]any{}
	}
	return encodeObject(widgetDataWire{orDefault(d.Mode, WidgetDataRef), nullString(d.DatasetID), nullString(d.Action), in, d.Values}, d.Extra)
}

// UnmarshalJSON decodes the data reference; an absent mode is ref.
func (d *WidgetData) UnmarshalJSON(data []byte) error {
	w := widgetDataWire{Mode: WidgetDataRef}
	var extra Extra
	if err := decodeInto(data, "widget data", &w, &extra); err != nil {
		return err
	}
	*d = WidgetData{Mode: w.Mode, DatasetID: string(w.DatasetID), Action: string(w.Action), Input: w.Input, Values: w.Values, Extra: extra}
	return nil
}

// MarshalJSON writes the visualization; type table when empty, spec null when unset.
func (v WidgetVisualization) MarshalJSON() ([]byte, error) {
	type plain WidgetVisualization
	p := plain(v)
	p.Type = orDefault(p.Type, VisualizationTable)
	return encodeObject(p, v.Extra)
}

// UnmarshalJSON decodes the visualization; an absent type is table.
func (v *WidgetVisualization) UnmarshalJSON(data []byte) error {
	type plain WidgetVisualization
	p := plain{Type: VisualizationTable}
	if err := decodeInto(data, "visualization", &p, &p.Extra); err != nil {
		return err
	}
	*v = WidgetVisualization(p)
	return nil
}

// withModeBlocks returns b with the default block of each declared mode filled in, as the
// reference model does on validation.
func (b WorkspaceBinding) withModeBlocks() WorkspaceBinding {
	if slices.Contains(b.Modes, BindExisting) && b.Existing == nil {
		b.Existing = &WorkspaceBindingExisting{Action: WorkspaceBindingOptionsAction, ValueField: "agent_workspace_ref", LabelField: "display_name"}
	}
	if slices.Contains(b.Modes, CreateAndBind) && b.Create == nil {
		b.Create = &WorkspaceBindingCreate{Surface: WorkspaceBindingCreateSurface, Action: WorkspaceBindingCreateAction, Fields: []ResourceFieldDefinition{}}
	}
	return b
}

// MarshalJSON writes the binding with its default texts and mode blocks.
func (b WorkspaceBinding) MarshalJSON() ([]byte, error) {
	type plain WorkspaceBinding
	p := plain(b.withModeBlocks())
	p.Modes = nonNil(p.Modes)
	p.ReferenceLabel = orDefault(p.ReferenceLabel, DefaultReferenceLabel)
	p.ReferenceHelp = orDefault(p.ReferenceHelp, DefaultReferenceHelp)
	p.ReferencePlaceholder = orDefault(p.ReferencePlaceholder, DefaultReferencePlaceholder)
	return encodeObject(p, b.Extra)
}

// UnmarshalJSON decodes the binding; absent texts take their defaults and each declared mode gets
// its block.
func (b *WorkspaceBinding) UnmarshalJSON(data []byte) error {
	type plain WorkspaceBinding
	p := plain{ReferenceLabel: DefaultReferenceLabel, ReferenceHelp: DefaultReferenceHelp, ReferencePlaceholder: DefaultReferencePlaceholder}
	if err := decodeInto(data, "workspace_binding", &p, &p.Extra); err != nil {
		return err
	}
	*b = WorkspaceBinding(p).withModeBlocks()
	return nil
}

// MarshalJSON writes the block with its defaults.
func (e WorkspaceBindingExisting) MarshalJSON() ([]byte, error) {
	type plain WorkspaceBindingExisting
	p := plain(e)
	p.Action = orDefault(p.Action, WorkspaceBindingOptionsAction)
	p.ValueField = orDefault(p.ValueField, "agent_workspace_ref")
	p.LabelField = orDefault(p.LabelField, "display_name")
	return encodeObject(p, e.Extra)
}

// UnmarshalJSON decodes the block; absent members take their defaults.
func (e *WorkspaceBindingExisting) UnmarshalJSON(data []byte) error {
	type plain WorkspaceBindingExisting
	p := plain{Action: WorkspaceBindingOptionsAction, ValueField: "agent_workspace_ref", LabelField: "display_name"}
	if err := decodeInto(data, "workspace_binding.existing", &p, &p.Extra); err != nil {
		return err
	}
	*e = WorkspaceBindingExisting(p)
	return nil
}

// MarshalJSON writes the block with its defaults.
func (c WorkspaceBindingCreate) MarshalJSON() ([]byte, error) {
	type plain WorkspaceBindingCreate
	p := plain(c)
	p.Surface = orDefault(p.Surface, WorkspaceBindingCreateSurface)
	p.Action = orDefault(p.Action, WorkspaceBindingCreateAction)
	p.Fields = nonNil(p.Fields)
	return encodeObject(p, c.Extra)
}

// UnmarshalJSON decodes the block; absent members take their defaults.
func (c *WorkspaceBindingCreate) UnmarshalJSON(data []byte) error {
	type plain WorkspaceBindingCreate
	p := plain{Surface: WorkspaceBindingCreateSurface, Action: WorkspaceBindingCreateAction}
	if err := decodeInto(data, "workspace_binding.create", &p, &p.Extra); err != nil {
		return err
	}
	*c = WorkspaceBindingCreate(p)
	return nil
}

// MarshalJSON writes the methods.
func (m AgentMethods) MarshalJSON() ([]byte, error) {
	type plain AgentMethods
	p := plain(m)
	if p.Custom == nil {
		p.Custom = map[string]AgentMethod{}
	}
	return encodeObject(p, m.Extra)
}

// UnmarshalJSON decodes the methods, keeping unknown members.
func (m *AgentMethods) UnmarshalJSON(data []byte) error {
	type plain AgentMethods
	return decodeInto(data, "agent_methods", (*plain)(m), &m.Extra)
}

// MarshalJSON writes the method; params {} and timeout 600 when unset.
func (m AgentMethod) MarshalJSON() ([]byte, error) {
	type plain AgentMethod
	p := plain(m)
	if p.Params == nil {
		p.Params = map[string]any{}
	}
	if p.Timeout == nil {
		t := 600
		p.Timeout = &t
	}
	return encodeObject(p, m.Extra)
}

// UnmarshalJSON decodes the method, keeping unknown members.
func (m *AgentMethod) UnmarshalJSON(data []byte) error {
	type plain AgentMethod
	return decodeInto(data, "agent method", (*plain)(m), &m.Extra)
}
