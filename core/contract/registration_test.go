package contract

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/supervaize/svz/internal/golden"
)

// helloWorldSpec is the Hello World registration of spec §10 / §3.2, built the way the
// reference's local Hello World builds it.
func helloWorldSpec() RegistrationSpec {
	return RegistrationSpec{
		AgentID:            "hello-world-ai-agent",
		AgentSlug:          "hello-world-ai-agent",
		DisplayName:        "Hello World AI Agent",
		AgentCardURL:       "/.well-known/agents/v1.0/hello-world-ai-agent_agent.json",
		ControllerURL:      "/a2a",
		A2UICatalogVersion: "supervaizer-v2-local.0",
		Surfaces:           []SurfaceSpec{SurfaceID("job.start"), SurfaceID("case.step.awaiting")},
		Actions:            []ActionSpec{ActionID("job.start.preview"), ActionID("job.start"), ActionID("step.awaiting.submit")},
		Resources: []ResourceDefinition{{
			ID: "hello_messages", Label: "Hello Messages", AutoSurface: true, Operations: []string{"list"},
		}},
		JobPolicy: &JobPolicy{Sync: &JobSyncPolicy{Action: "job.sync"}},
		CaseLanes: []CaseLane{{ID: "work", Label: "Work", Default: true}},
	}
}

func mustBuild(t *testing.T, spec RegistrationSpec) *Registration {
	t.Helper()
	r, err := BuildRegistration(spec)
	if err != nil {
		t.Fatalf("BuildRegistration: %v", err)
	}
	return r
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return b
}

func TestHelloWorldRegistrationGolden(t *testing.T) {
	r := mustBuild(t, helloWorldSpec())
	b := mustMarshal(t, r)
	golden.JSON(t, "registration_hello_world.json", b)

	// The ≥1.6 shape: actions are objects; the derived resource action has its resource's scope.
	const wantActions = `[{"id":"job.start.preview","mutating":true,"scope":"job"},` +
		`{"id":"job.start","mutating":true,"scope":"job"},` +
		`{"id":"step.awaiting.submit","mutating":true,"scope":"job"},` +
		`{"id":"resource.hello_messages.list","mutating":true,"scope":"workspace"},` +
		`{"id":"job.sync","mutating":true,"scope":"job"}]`
	if got := string(mustMarshal(t, r.Capabilities.Actions)); got != wantActions {
		t.Errorf("actions = %s\nwant %s", got, wantActions)
	}
	// Nulls are kept where the reference keeps them; newer members are omitted when empty.
	s := string(b)
	for _, want := range []string{`"ag_ui_version":null`, `"display":null`, `"workspace_binding":null`, `"default_timeout_seconds":null`, `"setup":null`} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %s", want)
		}
	}
	for _, absent := range []string{"surface_definitions", "rule_checkpoints", "scheduled_start", "kind", "dry_run", "target_field", "description"} {
		if strings.Contains(s, `"`+absent+`"`) {
			t.Errorf("%s should be omitted", absent)
		}
	}
	if !r.HasSurface("mission.agent.resource.hello_messages") || r.HasSurface("mission.analytics") {
		t.Error("HasSurface")
	}
	if a, ok := r.Action("resource.hello_messages.list"); !ok || a.ReadOnly || a.Scope != ScopeWorkspace {
		t.Errorf("Action(resource.hello_messages.list) = %+v, %v", a, ok)
	}
	if _, ok := r.Action("job.stop"); ok {
		t.Error("job.stop is not declared")
	}
}

// The seeds' defaults: only slug, display name and catalog version are required.
func TestBuildRegistrationDefaults(t *testing.T) {
	r := mustBuild(t, RegistrationSpec{
		AgentSlug:          "my-agent",
		DisplayName:        "My Agent",
		A2UICatalogVersion: "my-agent-ui.1",
		Surfaces:           []SurfaceSpec{SurfaceID("job.start")},
		Actions:            []ActionSpec{ActionID("job.start")},
	})
	golden.JSON(t, "registration_minimal.json", mustMarshal(t, r))
	if r.Agent.ID != "my-agent" || r.A2A.ControllerURL != "/a2a" ||
		r.A2A.AgentCardURL != "/.well-known/agents/my-agent_agent.json" ||
		r.Versions.A2UIVersion != "v0.8" || r.Versions.A2AVersion != "0.2.6" || r.Versions.AGUIVersion != nil {
		t.Errorf("defaults: %+v %+v %+v", r.Agent, r.A2A, r.Versions)
	}
}

// fullSpec uses every feature of the registration.
func fullSpec() RegistrationSpec {
	return RegistrationSpec{
		AgentID:            "research-agent-v2",
		AgentSlug:          "research-agent",
		DisplayName:        "Research Agent",
		A2UICatalogVersion: "research-agent.2026-05-16",
		AGUIVersion:        "0.1",
		ExternalInterop:    &ExternalInterop{InboundTasks: true},
		Surfaces: []SurfaceSpec{
			SurfaceID("job.start"),
			SurfaceDefinition{ID: "mission.agent.overview", Label: "Overview", Description: "Summary of what this agent manages for the mission."},
			SurfaceID("case.step.detail"),
			// Describing a derived surface means declaring it; the text is trimmed.
			&SurfaceDefinition{ID: "mission.agent.resource.contacts", Label: "  Contacts  "},
			// No text: only declares the surface.
			SurfaceDefinition{ID: "case.step.awaiting", Label: "   "},
			SurfaceID("mission.agent.surface.contact_import"),
			SurfaceID(""), // dropped, as the reference drops empty surface ids
			SurfaceID("job.start"),
		},
		Actions: []ActionSpec{
			ActionID("job.start"),
			ActionDefinition{ID: "job.stop", Scope: ScopeJob, Label: "Stop", Description: "Stop the job; work already done is kept."},
			ActionID("resource.contacts.list"), // takes the derived metadata (scope mission)
			ActionDefinition{ID: "goal.suggest", ReadOnly: true, Kind: KindHelp, TargetField: "goal"},
			&ActionDefinition{ID: "job.test", DryRun: true, Label: "Test run"},
			// An explicit definition wins over the derived one.
			ActionDefinition{ID: "dataset.progress_metrics.query", ReadOnly: true, Scope: ScopeMission, Label: "Query progress",
				Extra: Extra{"x-ui": json.RawMessage(`{"icon": "chart"}`)}},
			ActionID("context.assign"),
			ActionDefinition{ID: "job.archive", Kind: KindCommand},
			ActionID("job.start"),
		},
		Resources: []ResourceDefinition{
			{
				ID: "contacts", Label: "Contacts", AutoSurface: true, Scope: ScopeMission,
				Operations: []string{"list", "create", "update", "import"},
				Display:    &ResourceDisplay{TitleField: "name", Columns: []string{"name", "email"}, SearchFields: []string{"name"}},
				Fields: []ResourceFieldDefinition{
					{ID: "name", Label: "Name", Required: true},
					{ID: "company", Label: "Company", OptionsSource: &OptionsSource{Type: "resource", Resource: "companies", LabelField: ptr("name")}},
				},
				MountedViews: []MountedView{{View: "import", Surface: "mission.agent.surface.contact_import"}},
				Extra:        Extra{"x-sort": json.RawMessage(`"name"`)},
			},
			{ID: "companies", Label: "Companies", Operations: []string{"list"}, RequiresContext: []string{}},
		},
		Datasets: []DatasetDefinition{
			{ID: "progress_metrics", Label: "Progress Metrics", AutoSurface: true, Display: &ResourceDisplay{Columns: []string{"label", "value"}}},
			{ID: "session_metrics", Label: "Session Metrics", Scope: ScopeJob},
		},
		Dashboards: []DashboardDefinition{
			{ID: "mission_overview", Label: "Mission Overview", Widgets: []DashboardWidget{
				{ID: "progress_chart", Title: "Progress", Data: &WidgetData{Mode: WidgetDataRef, DatasetID: "progress_metrics"},
					Visualization: WidgetVisualization{Type: VisualizationVegaLite, Spec: map[string]any{
						"$schema": "https://vega.github.io/schema/vega-lite/v5.json", "mark": "bar",
						"encoding": map[string]any{"x": map[string]any{"field": "label", "type": "nominal"}, "y": map[string]any{"field": "value", "type": "quantitative"}},
					}}},
				{ID: "sessions", Title: "Sessions", Data: &WidgetData{Mode: WidgetDataAction, Action: "dataset.session_metrics.query", Input: map[string]any{"window": "7d"}},
					Layout: map[string]any{"w": 6}, Visualization: WidgetVisualization{Type: VisualizationMetric}},
				{ID: "sample", Title: "Sample", Data: &WidgetData{Mode: WidgetDataInline, Values: []map[string]any{{"label": "a", "value": 1}}}},
			}},
			{ID: "job_overview", Label: "Job Overview", Surface: "job.analytics"},
		},
		WorkspaceBinding: &WorkspaceBinding{
			Required: true, Modes: []string{BindExisting, CreateAndBind},
			Create: &WorkspaceBindingCreate{Fields: []ResourceFieldDefinition{{ID: "display_name", Label: "Display name", Required: true}}},
		},
		AgentMethods: &AgentMethods{
			Refresh: &AgentMethod{Method: "research.refresh"},
			Custom: map[string]AgentMethod{
				"reindex":    {Method: "research.reindex"},
				"export-all": {Method: "research.export_all", IsAsync: true},
			},
		},
		CaseLanes: []CaseLane{
			{ID: "setup", Label: "Setup"}, {ID: "work", Label: "Work", Default: true},
			{ID: "deliverable", Label: "Deliverables"}, {ID: "verify", Label: "Verify"},
		},
		ArtifactTypes: []ArtifactType{
			{Type: "transcript", Label: "Transcript", RendererSurface: "case.step.detail"},
			{Type: "synthesis", Label: "Synthesis"},
		},
		JobPolicy: &JobPolicy{
			DefaultTimeoutSeconds: ptr(3600),
			Sync:                  &JobSyncPolicy{SupportedStatuses: []string{"active", "awaiting", "failed", "completed"}},
			Setup: &JobSetupPolicy{
				ActionScopes: []string{ScopeJob},
				Plan: &SetupPlan{
					Steps: []SetupStep{{
						ID: "scope", Title: "Scope", Description: "What the research is about.",
						Fields: []FieldDefinition{
							{ID: "goal", Label: "Goal", Type: FieldText, Multiline: true, MinRows: ptr(4), Required: true},
							{ID: "mode", Label: "Mode", Type: FieldSelect, Options: []FieldOption{{Value: "fast", Label: "Fast"}, {Value: "custom", Label: "Custom"}}},
							{ID: "budget", Label: "Budget", Type: FieldNumber, DependsOn: &DependsOn{Field: "mode", In: []string{"custom"}},
								Validation: &FieldValidation{Min: ptr(0.0), Message: "Budget cannot be negative"}},
						},
						HelpActions: []string{"goal.suggest"},
					}, {ID: "review", Title: "Review", Status: SetupAwaiting}},
					CostEstimate: &CostEstimate{Status: CostEstimated, Unit: "credits", Min: ptr(5.0), Max: ptr(20.0), Basis: "for 50 runs"},
				},
			},
		},
		RuleCheckpoints: &RuleCheckpoints{Phases: []string{PhaseBefore, PhaseAfter}, SecretRefs: []string{"case.metadata.customer_reference"}},
		ScheduledStart:  true,
	}
}

func TestFullRegistrationGolden(t *testing.T) {
	spec := fullSpec()
	r := mustBuild(t, spec)
	r.Extra = Extra{"x-vendor": json.RawMessage(`{"team": "ml"}`)}
	b := mustMarshal(t, r)
	golden.JSON(t, "registration_full.json", b)

	var ids []string
	for _, a := range r.Capabilities.Actions {
		ids = append(ids, a.ID)
	}
	wantIDs := []string{
		"job.start", "job.stop", "resource.contacts.list", "goal.suggest", "job.test", "dataset.progress_metrics.query",
		"context.assign", "job.archive",
		"resource.contacts.create", "resource.contacts.update", "resource.contacts.import", "resource.companies.list",
		"dataset.session_metrics.query", "job.sync", "job.start.preview", "step.awaiting.submit",
		"workspace_binding.options", "workspace_binding.create",
		"agent.refresh", "agent.custom.export-all", "agent.custom.reindex", "rule.checkpoint.resume",
	}
	if !reflect.DeepEqual(ids, wantIDs) {
		t.Errorf("action order:\n got %q\nwant %q", ids, wantIDs)
	}
	wantSurfaces := []string{
		"job.start", "mission.agent.overview", "case.step.detail", "mission.agent.resource.contacts", "case.step.awaiting",
		"mission.agent.surface.contact_import", "mission.agent.dataset.progress_metrics", "mission.analytics", "job.analytics",
		"workspace_binding.create",
	}
	if !reflect.DeepEqual(r.Capabilities.Surfaces, wantSurfaces) {
		t.Errorf("surfaces:\n got %q\nwant %q", r.Capabilities.Surfaces, wantSurfaces)
	}
	for _, tc := range []struct {
		id       string
		mutating bool
		scope    string
	}{
		{"job.start", true, ScopeJob},
		{"resource.contacts.list", true, ScopeMission},          // bare id takes the derived metadata
		{"dataset.progress_metrics.query", false, ScopeMission}, // explicit beats derived (derived: workspace)
		{"dataset.session_metrics.query", false, ScopeJob},
		{"job.start.preview", false, ScopeJob},
		{"workspace_binding.options", true, ScopeWorkspace},
		{"context.assign", true, ScopeJob},
		{"rule.checkpoint.resume", true, ScopeJob},
	} {
		a, ok := r.Action(tc.id)
		if !ok || a.ReadOnly == tc.mutating || a.Scope != tc.scope {
			t.Errorf("Action(%s) = %+v, %v; want mutating=%v scope=%s", tc.id, a, ok, tc.mutating, tc.scope)
		}
	}

	// The builder copies what it keeps: the spec is unchanged and later edits of it do not leak.
	if !reflect.DeepEqual(spec, fullSpec()) {
		t.Error("BuildRegistration changed its spec")
	}
	spec.Resources[0].Operations[0] = "changed"
	spec.JobPolicy.Sync.SupportedStatuses[0] = "changed"
	if string(mustMarshal(t, r)) != string(b) {
		t.Error("the registration shares memory with its spec")
	}
}

// Decoding then encoding is stable, for every golden and for the older shapes.
func TestRegistrationRoundTrip(t *testing.T) {
	for _, name := range []string{"registration_hello_world.json", "registration_full.json", "registration_minimal.json"} {
		t.Run(name, func(t *testing.T) {
			in := readTestdata(t, name)
			var r Registration
			if err := json.Unmarshal(in, &r); err != nil {
				t.Fatal(err)
			}
			if err := r.Validate(); err != nil {
				t.Fatalf("decoded golden does not validate: %v", err)
			}
			if got, want := mustMarshal(t, &r), compactJSON(t, in); string(got) != string(want) {
				t.Errorf("round trip changed the registration:\n got %s\nwant %s", got, want)
			}
		})
	}
	// ≤1.5 registrations: actions as strings (mutating=true scope=job), no setup, sparse members.
	for _, tc := range []struct{ in, out string }{
		{"registration_hello_world_1.4.json", "registration_hello_world_1.4.decoded.json"},
		{"registration_sparse_1.4.json", "registration_sparse_1.4.decoded.json"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			var r Registration
			if err := json.Unmarshal(readTestdata(t, tc.in), &r); err != nil {
				t.Fatal(err)
			}
			if err := r.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			first := mustMarshal(t, &r)
			golden.JSON(t, tc.out, first)
			var again Registration
			if err := json.Unmarshal(first, &again); err != nil {
				t.Fatal(err)
			}
			if second := mustMarshal(t, &again); string(second) != string(first) {
				t.Errorf("not stable:\n%s\n%s", first, second)
			}
		})
	}
}

func TestDecodeActionShapes(t *testing.T) {
	var caps Capabilities
	in := `{"surfaces":[],"actions":["job.start",{"id":"dataset.x.query","mutating":false,"scope":"workspace"},` +
		`{"id":"job.stop","label":"  Stop  ","description":"   "},{"id":"goal.suggest","kind":"help","mutating":false,"target_field":"goal","kind_hint":"x"}],` +
		`"case_lanes":[],"artifact_types":[]}`
	if err := json.Unmarshal([]byte(in), &caps); err != nil {
		t.Fatal(err)
	}
	want := []ActionDefinition{
		{ID: "job.start", Scope: ScopeJob},
		{ID: "dataset.x.query", ReadOnly: true, Scope: ScopeWorkspace},
		{ID: "job.stop", Scope: ScopeJob, Label: "Stop"},
		{ID: "goal.suggest", ReadOnly: true, Scope: ScopeJob, Kind: KindHelp, TargetField: "goal", Extra: Extra{"kind_hint": json.RawMessage(`"x"`)}},
	}
	if !reflect.DeepEqual(caps.Actions, want) {
		t.Errorf("got %+v\nwant %+v", caps.Actions, want)
	}
	const wantJSON = `{"surfaces":[],"actions":[{"id":"job.start","mutating":true,"scope":"job"},` +
		`{"id":"dataset.x.query","mutating":false,"scope":"workspace"},{"id":"job.stop","mutating":true,"scope":"job","label":"Stop"},` +
		`{"id":"goal.suggest","mutating":false,"scope":"job","kind":"help","target_field":"goal","kind_hint":"x"}],"case_lanes":[],"artifact_types":[]}`
	if got := string(mustMarshal(t, caps)); got != wantJSON {
		t.Errorf("encode:\n got %s\nwant %s", got, wantJSON)
	}
	for _, bad := range []string{`{"actions":[1]}`, `{"actions":[null, true]}`, `{"actions":"job.start"}`, `{"surfaces":[{"id":"x"}]}`} {
		var c Capabilities
		if err := json.Unmarshal([]byte(bad), &c); err == nil {
			t.Errorf("%s decoded without error: %+v", bad, c)
		}
	}
}

// Rule checkpoints imply the resume action, also in hand-built and decoded registrations.
func TestRuleCheckpointsImplyResumeAction(t *testing.T) {
	r := Registration{Capabilities: Capabilities{RuleCheckpoints: &RuleCheckpoints{Phases: []string{PhaseBefore}}}}
	const want = `{"surfaces":[],"actions":[{"id":"rule.checkpoint.resume","mutating":true,"scope":"job"}],"case_lanes":[],"artifact_types":[],` +
		`"rule_checkpoints":{"version":1,"phases":["before"],"secret_refs":[]}}`
	if got := string(mustMarshal(t, r.Capabilities)); got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
	if _, ok := r.Action(RuleCheckpointResumeAction); !ok {
		t.Error("Action(rule.checkpoint.resume) not found")
	}
	var c Capabilities
	if err := json.Unmarshal([]byte(`{"actions":["job.start"],"rule_checkpoints":{"phases":["after"]}}`), &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Actions) != 2 || !reflect.DeepEqual(c.Actions[1], resumeAction()) || c.RuleCheckpoints.Version != 1 {
		t.Errorf("decoded %+v", c)
	}
	// Declaring it already: no second one.
	r2 := mustBuild(t, RegistrationSpec{AgentSlug: "s", DisplayName: "S", A2UICatalogVersion: "1",
		Actions:         []ActionSpec{ActionDefinition{ID: RuleCheckpointResumeAction, Scope: ScopeJob, Label: "Resume"}},
		RuleCheckpoints: &RuleCheckpoints{Phases: []string{PhaseBefore}}})
	if len(r2.Capabilities.Actions) != 1 || r2.Capabilities.Actions[0].Label != "Resume" {
		t.Errorf("actions %+v", r2.Capabilities.Actions)
	}
}

func TestScheduledStart(t *testing.T) {
	base := RegistrationSpec{AgentSlug: "s", DisplayName: "S", A2UICatalogVersion: "1", ScheduledStart: true}

	// job.start derived from job_policy.setup counts.
	spec := base
	spec.JobPolicy = &JobPolicy{Setup: &JobSetupPolicy{}}
	r := mustBuild(t, spec)
	if !strings.Contains(string(mustMarshal(t, r.Capabilities)), `"scheduled_start":true`) {
		t.Error("scheduled_start not written")
	}

	_, err := BuildRegistration(base)
	const want = "capabilities.scheduled_start: scheduled_start requires the job.start action in capabilities.actions (declared or derived from job_policy.setup)"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}

	// false is omitted, so existing registrations serialize as before.
	base.ScheduledStart = false
	if strings.Contains(string(mustMarshal(t, mustBuild(t, base))), "scheduled_start") {
		t.Error("scheduled_start false must be omitted")
	}
}

func TestWorkspaceBindingModesFillBlocks(t *testing.T) {
	r := mustBuild(t, RegistrationSpec{AgentSlug: "s", DisplayName: "S", A2UICatalogVersion: "1",
		WorkspaceBinding: &WorkspaceBinding{Modes: []string{BindExisting}}})
	const want = `{"required":false,"modes":["bind_existing"],"reference_label":"Agent workspace reference",` +
		`"reference_help":"Select or create the agent-side record this Studio workspace may access.",` +
		`"reference_placeholder":"Example: workspace-prod",` +
		`"existing":{"action":"workspace_binding.options","value_field":"agent_workspace_ref","label_field":"display_name"},"create":null}`
	if got := string(mustMarshal(t, r.WorkspaceBinding)); got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
	if a, ok := r.Action(WorkspaceBindingOptionsAction); !ok || a.Scope != ScopeWorkspace || a.ReadOnly {
		t.Errorf("binding action %+v %v", a, ok)
	}
	if r.HasSurface(WorkspaceBindingCreateSurface) {
		t.Error("no create block, no create surface")
	}
	// Decoding fills blocks the same way.
	var b WorkspaceBinding
	if err := json.Unmarshal([]byte(`{"modes":["create_and_bind"]}`), &b); err != nil {
		t.Fatal(err)
	}
	if b.Create == nil || b.Create.Surface != WorkspaceBindingCreateSurface || b.Create.Action != WorkspaceBindingCreateAction || b.Existing != nil {
		t.Errorf("decoded %+v", b)
	}
}

// The surface definitions only carry text for declared surfaces.
func TestSurfaceDefinitions(t *testing.T) {
	var r Registration
	if err := json.Unmarshal([]byte(`{"capabilities":{"surfaces":["a","b"],"surface_definitions":[{"id":"a","label":"A"},{"id":"b"}]}}`), &r); err != nil {
		t.Fatal(err)
	}
	// A definition without text is not written; the list is omitted once empty.
	if got := string(mustMarshal(t, r.Capabilities)); got != `{"surfaces":["a","b"],"surface_definitions":[{"id":"a","label":"A"}],"actions":[],"case_lanes":[],"artifact_types":[]}` {
		t.Errorf("got %s", got)
	}
	r.Capabilities.SurfaceDefinitions = r.Capabilities.SurfaceDefinitions[1:]
	if strings.Contains(string(mustMarshal(t, r.Capabilities)), "surface_definitions") {
		t.Error("text-less definitions must leave the list out")
	}
}

func TestBuildRegistrationErrors(t *testing.T) {
	long := strings.Repeat("x", 301)
	base := func() RegistrationSpec {
		return RegistrationSpec{AgentSlug: "s", DisplayName: "S", A2UICatalogVersion: "1", Surfaces: []SurfaceSpec{SurfaceID("job.start")}}
	}
	for _, tc := range []struct {
		name string
		edit func(*RegistrationSpec)
		want []string
	}{
		{"required arguments", func(s *RegistrationSpec) { *s = RegistrationSpec{} }, []string{
			"agent_slug: Field required", "display_name: Field required", "a2ui_catalog_version: Field required",
		}},
		{"blank action id", func(s *RegistrationSpec) { s.Actions = []ActionSpec{ActionID(" ")} }, []string{
			"actions[0]: action definitions must have a non-empty id",
		}},
		{"blank action definition id", func(s *RegistrationSpec) { s.Actions = []ActionSpec{ActionID("ok"), ActionDefinition{Label: "x"}} }, []string{
			"actions[1]: action definitions must have a non-empty id",
		}},
		{"nil action", func(s *RegistrationSpec) { s.Actions = []ActionSpec{(*ActionDefinition)(nil), nil} }, []string{
			"actions[0]: an action must be an ActionID or an ActionDefinition, not nil",
			"actions[1]: an action must be an ActionID or an ActionDefinition, not <nil>",
		}},
		{"action defined twice", func(s *RegistrationSpec) {
			s.Actions = []ActionSpec{ActionDefinition{ID: "a"}, ActionID("a"), ActionDefinition{ID: "a"}}
		}, []string{"actions[2]: action 'a' is defined twice"}},
		{"blank surface definition id", func(s *RegistrationSpec) { s.Surfaces = []SurfaceSpec{SurfaceDefinition{Label: "x"}} }, []string{
			"surfaces[0]: surface definitions must have a non-empty id",
		}},
		{"surface described twice", func(s *RegistrationSpec) {
			s.Surfaces = []SurfaceSpec{SurfaceDefinition{ID: "x", Label: "X"}, SurfaceDefinition{ID: "x", Description: "again"}}
		}, []string{"capabilities.surface_definitions[1]: surface_definitions describes surface 'x' twice"}},
		{"surface text too long", func(s *RegistrationSpec) {
			s.Surfaces = []SurfaceSpec{SurfaceDefinition{ID: "x", Label: long, Description: " " + long[1:] + " "}}
		}, []string{"capabilities.surface_definitions[0].label: String should have at most 300 characters"}},
		{"action scope", func(s *RegistrationSpec) { s.Actions = []ActionSpec{ActionDefinition{ID: "a", Scope: "case"}} }, []string{
			"capabilities.actions[0].scope: Input should be 'workspace', 'mission' or 'job'",
		}},
		{"action kind", func(s *RegistrationSpec) { s.Actions = []ActionSpec{ActionDefinition{ID: "a", Kind: "query"}} }, []string{
			"capabilities.actions[0].kind: Input should be 'command' or 'help'",
		}},
		{"mutating help action", func(s *RegistrationSpec) {
			s.Actions = []ActionSpec{ActionDefinition{ID: "goal.suggest", Kind: KindHelp}}
		}, []string{"capabilities.actions[0]: help actions must declare mutating=False: a help action proposes or checks a draft and never changes agent state"}},
		{"target_field without help", func(s *RegistrationSpec) {
			s.Actions = []ActionSpec{ActionDefinition{ID: "a", TargetField: "goal"}, ActionDefinition{ID: "b", Kind: KindCommand, TargetField: "goal"}}
		}, []string{
			"capabilities.actions[0].target_field: target_field is only allowed with kind='help'",
			"capabilities.actions[1].target_field: target_field is only allowed with kind='help'",
		}},
		{"action text too long", func(s *RegistrationSpec) {
			s.Actions = []ActionSpec{ActionDefinition{ID: "a", Label: strings.Repeat("é", 300), Description: long}}
		}, []string{"capabilities.actions[0].description: String should have at most 300 characters"}},
		{"zero job timeout", func(s *RegistrationSpec) { s.JobPolicy = &JobPolicy{DefaultTimeoutSeconds: ptr(0)} }, []string{
			"job_policy.default_timeout_seconds: must be a whole number of seconds from 1 up, or unset (background work then times out after 24 h); got 0",
		}},
		{"negative job timeout", func(s *RegistrationSpec) { s.JobPolicy = &JobPolicy{DefaultTimeoutSeconds: ptr(-30)} }, []string{
			"job_policy.default_timeout_seconds: must be a whole number of seconds from 1 up, or unset (background work then times out after 24 h); got -30",
		}},
		{"agent method keys", func(s *RegistrationSpec) {
			s.AgentMethods = &AgentMethods{Custom: map[string]AgentMethod{"ok_key-1": {}, "bad key": {}, "bad.dot": {}}}
		}, []string{"agent_methods.custom: agent custom method keys may only contain letters, numbers, underscores, and hyphens"}},
		{"workspace binding without mode", func(s *RegistrationSpec) { s.WorkspaceBinding = &WorkspaceBinding{Required: true} }, []string{
			"workspace_binding: workspace_binding.required requires at least one mode",
		}},
		{"workspace binding mode", func(s *RegistrationSpec) { s.WorkspaceBinding = &WorkspaceBinding{Modes: []string{"bind"}} }, []string{
			"workspace_binding.modes[0]: Input should be 'bind_existing' or 'create_and_bind'",
		}},
		{"dashboard data", func(s *RegistrationSpec) {
			s.Dashboards = []DashboardDefinition{{ID: "d", Label: "D", Widgets: []DashboardWidget{
				{ID: "w0", Title: "W", Data: &WidgetData{}},
				{ID: "w1", Title: "W", Data: &WidgetData{Mode: WidgetDataAction}},
				{ID: "w2", Title: "W", Data: &WidgetData{Mode: WidgetDataInline}},
				{ID: "w3", Title: "W", Data: &WidgetData{Mode: "sql", DatasetID: "x"}},
				{ID: "w4", Title: "W", Data: &WidgetData{Mode: WidgetDataInline, Values: 3}},
				{ID: "w5", Title: "W", Data: &WidgetData{Mode: WidgetDataInline, Values: []any{map[string]any{}}}},
			}}}
		}, []string{
			"dashboards[0].widgets[0].data: Dashboard dataset refs require datasetId",
			"dashboards[0].widgets[1].data: Dashboard action data refs require action",
			"dashboards[0].widgets[2].data: Dashboard inline data refs require values",
			"dashboards[0].widgets[3].data.mode: Input should be 'ref', 'action' or 'inline'",
			"dashboards[0].widgets[4].data.values: values must be a list of objects or an object",
		}},
		{"dashboard visualization", func(s *RegistrationSpec) {
			s.Dashboards = []DashboardDefinition{{ID: "d", Label: "D", Widgets: []DashboardWidget{
				{ID: "w0", Title: "W", Visualization: WidgetVisualization{Type: VisualizationVegaLite}},
				{ID: "w1", Title: "W", Visualization: WidgetVisualization{Type: "pie"}},
			}}}
		}, []string{
			"dashboards[0].widgets[0].visualization: Vega-Lite dashboard widgets require visualization.spec",
			"dashboards[0].widgets[1].visualization.type: Input should be 'table', 'metric', 'vega-lite' or 'custom'",
		}},
		{"rule checkpoints", func(s *RegistrationSpec) {
			s.RuleCheckpoints = &RuleCheckpoints{Version: 2, Phases: []string{"before", "during", "before"},
				SecretRefs: []string{"job.fields.x", "job.fields.x", "secrets.y"}}
		}, []string{
			"capabilities.rule_checkpoints.version: Input should be 1",
			"capabilities.rule_checkpoints.phases[1]: Input should be 'before' or 'after'",
			"capabilities.rule_checkpoints.phases: rule_checkpoints.phases must not contain duplicates",
			"capabilities.rule_checkpoints.secret_refs: rule_checkpoints.secret_refs must not contain duplicates",
			"capabilities.rule_checkpoints.secret_refs: rule_checkpoints.secret_refs contains an invalid path",
		}},
		{"rule checkpoints without phase", func(s *RegistrationSpec) { s.RuleCheckpoints = &RuleCheckpoints{} }, []string{
			"capabilities.rule_checkpoints.phases: rule_checkpoints.phases must declare at least one phase",
		}},
		{"help action not declared", func(s *RegistrationSpec) {
			s.Actions = []ActionSpec{ActionID("goal.check")}
			s.JobPolicy = &JobPolicy{Setup: &JobSetupPolicy{Plan: &SetupPlan{Steps: []SetupStep{
				{ID: "a", Title: "A", HelpActions: []string{"goal.suggest", "goal.check"}},
			}}}}
		}, []string{
			"job_policy.setup.plan.steps[0].help_actions[0]: help action 'goal.suggest' is not declared in capabilities.actions; declare it with kind='help'",
			"job_policy.setup.plan.steps[0].help_actions[1]: help action 'goal.check' must be declared in capabilities.actions with kind='help'",
		}},
		{"help action in a plain-object plan", func(s *RegistrationSpec) {
			s.JobPolicy = &JobPolicy{Setup: &JobSetupPolicy{Plan: map[string]any{"steps": []any{map[string]any{"id": "a", "help_actions": []string{"x"}}}}}}
		}, []string{
			"job_policy.setup.plan.steps[0].help_actions[0]: help action 'x' is not declared in capabilities.actions; declare it with kind='help'",
		}},
		{"plan that is not an object", func(s *RegistrationSpec) { s.JobPolicy = &JobPolicy{Setup: &JobSetupPolicy{Plan: []int{1}}} }, []string{
			"job_policy.setup.plan: setup plan must be a V2SetupPlan or a JSON object",
		}},
		{"setup plan", func(s *RegistrationSpec) {
			s.JobPolicy = &JobPolicy{Setup: &JobSetupPolicy{ActionScopes: []string{"mission"}, Plan: &SetupPlan{
				Steps: []SetupStep{
					{ID: "a", Title: strings.Repeat("t", 121), Description: long, Status: "started", Fields: []FieldDefinition{
						{ID: "items", Label: "Items", Type: FieldList},
						{ID: "b", Label: "B", DependsOn: &DependsOn{Field: "nope", In: []string{"x"}}},
					}},
					{ID: "a", Title: " ", Fields: []FieldDefinition{{ID: "items", Label: "Again"}}},
					{ID: "c", Title: "C", Fields: []FieldDefinition{
						{ID: "p", Label: "P", DependsOn: &DependsOn{Field: "q", In: []string{"1"}}},
						{ID: "q", Label: "Q", DependsOn: &DependsOn{Field: "p", In: []string{"1"}}},
					}},
				},
				CostEstimate: &CostEstimate{Status: CostUnknown, Unit: "USD"},
			}}}
		}, []string{
			"job_policy.setup.action_scopes[0]: Input should be 'workspace', 'job', 'case' or 'step'",
			"job_policy.setup.plan.steps[0].title: String should have at most 120 characters",
			"job_policy.setup.plan.steps[0].description: String should have at most 300 characters",
			"job_policy.setup.plan.steps[0].status: Input should be 'pending', 'awaiting', 'done' or 'skipped'",
			`job_policy.setup.plan.steps[0].fields[0]: field "items": item_fields is required when type is list`,
			"job_policy.setup.plan.steps[1].id: setup step ids must be unique in a plan: 'a' is used twice",
			"job_policy.setup.plan.steps[1].title: setup steps must have a non-empty title",
			"job_policy.setup.plan.steps[1].fields[0].id: field 'items' is already declared at job_policy.setup.plan.steps[0].fields[0]",
			"job_policy.setup.plan.steps[0].fields[1].depends_on.field: field 'b' depends on undeclared field 'nope'",
			"job_policy.setup.plan.steps[2].fields[0].depends_on.field: field 'p' depends on itself through its parents",
			"job_policy.setup.plan.steps[2].fields[1].depends_on.field: field 'q' depends on itself through its parents",
			"job_policy.setup.plan.cost_estimate: an unknown cost must not have unit, min or max",
		}},
		{"resources, datasets and lanes", func(s *RegistrationSpec) {
			s.Resources = []ResourceDefinition{{ID: "r", Label: "R", Scope: "case", Operations: []string{"list", ""},
				Fields:       []ResourceFieldDefinition{{ID: "f", Label: "F", MinRows: ptr(2)}},
				MountedViews: []MountedView{{View: "edit"}}}}
			s.Datasets = []DatasetDefinition{{ID: "d", Label: "D", Scope: "step"}}
			s.CaseLanes = []CaseLane{{Label: "No id"}}
			s.ArtifactTypes = []ArtifactType{{Type: "t"}}
		}, []string{
			"capabilities.case_lanes[0].id: String should have at least 1 character",
			"capabilities.artifact_types[0].label: String should have at least 1 character",
			"resources[0].scope: Input should be 'workspace', 'mission' or 'job'",
			"resources[0].operations[1]: String should have at least 1 character",
			`resources[0].fields[0]: field "f": min_rows is only allowed with multiline`,
			"resources[0].mounted_views[0].surface: String should have at least 1 character",
			"datasets[0].scope: Input should be 'workspace', 'mission' or 'job'",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := base()
			tc.edit(&spec)
			r, err := BuildRegistration(spec)
			if err == nil {
				t.Fatalf("no error; registration %s", mustMarshal(t, r))
			}
			if r != nil {
				t.Error("a registration was returned with the error")
			}
			if got, want := err.Error(), strings.Join(tc.want, "\n"); got != want {
				t.Errorf("error:\n%s\nwant:\n%s", got, want)
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Error("errors are not *ValidationError")
			}
		})
	}
}

// Validate on decoded registrations: rules only a decoded (or hand-built) value can break.
func TestValidateDecodedRegistration(t *testing.T) {
	hello := readTestdata(t, "registration_hello_world.json")
	for _, tc := range []struct {
		name  string
		patch func(m map[string]any)
		want  []string
	}{
		{"valid", func(map[string]any) {}, nil},
		{"contract version", func(m map[string]any) { m["supervaizer_contract_version"] = 3 }, []string{
			"supervaizer_contract_version: Input should be 2",
		}},
		{"blank identity", func(m map[string]any) { m["agent"] = map[string]any{"id": "", "slug": " ", "display_name": "x"} }, []string{
			"agent.id: String should have at least 1 character", "agent.slug: String should have at least 1 character",
		}},
		{"offline policies", func(m map[string]any) {
			jp := m["job_policy"].(map[string]any)
			jp["offline_start_policy"], jp["offline_running_policy"] = "queue", "keep"
		}, []string{
			"job_policy.offline_start_policy: Input should be 'block'",
			"job_policy.offline_running_policy: Input should be 'fail_in_studio'",
		}},
		{"blank sync action", func(m map[string]any) { m["job_policy"].(map[string]any)["sync"] = map[string]any{"action": " "} }, []string{
			"job_policy.sync.action: job sync policy action must be a non-empty action id",
		}},
		{"blank setup action", func(m map[string]any) {
			m["job_policy"].(map[string]any)["setup"] = map[string]any{"submit_action": ""}
		}, []string{
			"job_policy.setup: job setup policy actions must be non-empty action ids",
		}},
		{"undeclared surface definition", func(m map[string]any) {
			m["capabilities"].(map[string]any)["surface_definitions"] = []any{map[string]any{"id": "x", "label": "X"}, map[string]any{"id": "", "label": "Y"}}
		}, []string{
			"capabilities.surface_definitions[0]: surface_definitions describes undeclared surface 'x'",
			"capabilities.surface_definitions[1].id: surface definitions must have a non-empty id",
		}},
		{"duplicate and blank actions", func(m map[string]any) {
			m["capabilities"].(map[string]any)["actions"] = []any{"job.start", map[string]any{"id": "job.start", "scope": "mission"}, ""}
		}, []string{
			"capabilities.actions[1]: action 'job.start' is declared twice",
			"capabilities.actions[2].id: action definitions must have a non-empty id",
		}},
		{"dataset scope", func(m map[string]any) {
			m["datasets"] = []any{map[string]any{"id": "d", "label": "D", "scope": "team"}}
		}, []string{
			"datasets[0].scope: Input should be 'workspace', 'mission' or 'job'",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal(hello, &m); err != nil {
				t.Fatal(err)
			}
			tc.patch(m)
			var r Registration
			if err := json.Unmarshal(mustMarshal(t, m), &r); err != nil {
				t.Fatal(err)
			}
			err := r.Validate()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || err.Error() != strings.Join(tc.want, "\n") {
				t.Errorf("error:\n%v\nwant:\n%s", err, strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestDecodeRegistrationErrors(t *testing.T) {
	for _, in := range []string{
		`[]`, `"x"`, `null`, `{"agent": []}`, `{"capabilities": {"actions": [1]}}`, `{"job_policy": {"sync": "job.sync"}}`,
		`{"resources": [{"operations": "list"}]}`, `{"dashboards": [{"widgets": [{"data": 1}]}]}`, `{"supervaizer_contract_version": "2"}`,
	} {
		var r Registration
		if err := json.Unmarshal([]byte(in), &r); err == nil {
			t.Errorf("%s decoded without error", in)
		}
	}
}

func FuzzRegistrationDecode(f *testing.F) {
	for _, name := range []string{"registration_hello_world.json", "registration_full.json", "registration_hello_world_1.4.json", "registration_sparse_1.4.json"} {
		b, err := readFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"capabilities":{"actions":["a",{"id":"b"}],"rule_checkpoints":{}},"job_policy":{"setup":{"plan":{"steps":[{"help_actions":["x"]}]}}}}`))
	f.Add([]byte(`{"workspace_binding":{"modes":["bind_existing","create_and_bind"]},"dashboards":[{"widgets":[{"data":{"mode":"inline","values":[{}]}}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var r Registration
		if json.Unmarshal(data, &r) != nil {
			return
		}
		_ = r.Validate() // must not panic
		first, err := json.Marshal(&r)
		if err != nil {
			// Only a plan that is not an object can fail to encode; decoding never produces one
			// from a JSON object, so anything else is a bug.
			t.Fatalf("decoded registration does not encode: %v\n%s", err, data)
		}
		var again Registration
		if err := json.Unmarshal(first, &again); err != nil {
			t.Fatalf("encoded registration does not decode: %v\n%s", err, first)
		}
		second, err := json.Marshal(&again)
		if err != nil || string(second) != string(first) {
			t.Fatalf("encoding is not stable:\n%s\n%s", first, second)
		}
		if r.Validate() == nil && again.Validate() != nil {
			t.Fatalf("a valid registration became invalid through a round trip: %v\n%s", again.Validate(), first)
		}
	})
}

func BenchmarkBuildRegistration(b *testing.B) {
	spec := fullSpec()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := BuildRegistration(spec); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMarshalRegistration(b *testing.B) {
	r, err := BuildRegistration(fullSpec())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeRegistration(b *testing.B) {
	r, err := BuildRegistration(fullSpec())
	if err != nil {
		b.Fatal(err)
	}
	data, _ := json.Marshal(r)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var out Registration
		if err := json.Unmarshal(data, &out); err != nil {
			b.Fatal(err)
		}
	}
}

func TestAgentMethods(t *testing.T) {
	m := &AgentMethods{
		Refresh: &AgentMethod{Method: "agents.refresh", Description: ptr("Refresh the catalog")},
		Custom:  map[string]AgentMethod{"b": {Method: "x.b", Timeout: ptr(30)}, "a": {Method: "x.a", Params: map[string]any{"k": 1}}},
	}
	if got := m.ActionIDs(); !reflect.DeepEqual(got, []string{"agent.refresh", "agent.custom.a", "agent.custom.b"}) {
		t.Errorf("ActionIDs = %q", got)
	}
	for _, tc := range []struct {
		action, method string
		ok             bool
	}{
		{"agent.refresh", "agents.refresh", true}, {"agent.custom.b", "x.b", true}, {"agent.custom.c", "", false}, {"job.start", "", false},
	} {
		got, ok := m.MethodFor(tc.action)
		if ok != tc.ok || got.Method != tc.method {
			t.Errorf("MethodFor(%s) = %+v, %v", tc.action, got, ok)
		}
	}
	if _, ok := (&AgentMethods{}).MethodFor("agent.refresh"); ok {
		t.Error("no refresh method declared")
	}
	var none *AgentMethods
	if none.ActionIDs() != nil {
		t.Error("nil methods derive actions")
	}
	const want = `{"refresh":{"method":"agents.refresh","params":{},"description":"Refresh the catalog","is_async":false,"timeout":600},` +
		`"custom":{"a":{"method":"x.a","params":{"k":1},"description":null,"is_async":false,"timeout":600},` +
		`"b":{"method":"x.b","params":{},"description":null,"is_async":false,"timeout":30}}}`
	b := mustMarshal(t, m)
	if string(b) != want {
		t.Errorf("got %s\nwant %s", b, want)
	}
	var back AgentMethods
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if string(mustMarshal(t, back)) != want {
		t.Error("round trip")
	}
}

// A job timeout of one second is the shortest BuildRegistration takes.
func TestBuildRegistrationJobTimeout(t *testing.T) {
	r, err := BuildRegistration(RegistrationSpec{AgentSlug: "a", DisplayName: "A", A2UICatalogVersion: "a.1",
		JobPolicy: &JobPolicy{DefaultTimeoutSeconds: ptr(1)}})
	if err != nil || *r.JobPolicy.DefaultTimeoutSeconds != 1 {
		t.Fatalf("%v", err)
	}
}
