package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// ValidationError is one problem of a contract value: where it is (a JSON path such as
// "capabilities.actions[2].scope", or an argument name of BuildRegistration; empty for the whole
// value) and what is wrong, in the reference's words where the reference has them.
type ValidationError struct {
	Path    string
	Message string
}

func (e *ValidationError) Error() string {
	if e.Path == "" {
		return e.Message
	}
	return e.Path + ": " + e.Message
}

// joinPath joins JSON path segments.
func joinPath(at, path string) string {
	switch {
	case at == "":
		return path
	case path == "":
		return at
	case path[0] == '[':
		return at + path
	}
	return at + "." + path
}

// Messages shared by several rules. Where the reference has no message of its own (its
// constraints come from pydantic), these are pydantic's.
const (
	msgNonEmpty    = "String should have at least 1 character"
	msgDisplayText = "String should have at most 300 characters"
	msgScope       = "Input should be 'workspace', 'mission' or 'job'"
)

// problems collects validation errors in the order they are found.
type problems []error

func (p *problems) add(path, format string, args ...any) {
	msg := format
	if len(args) > 0 {
		msg = fmt.Sprintf(format, args...)
	}
	*p = append(*p, &ValidationError{Path: path, Message: msg})
}

// addErr adds each error joined in err under path.
func (p *problems) addErr(path string, err error) {
	if err == nil {
		return
	}
	for _, e := range splitJoined(err) {
		var ve *ValidationError
		if errors.As(e, &ve) {
			*p = append(*p, &ValidationError{Path: joinPath(path, ve.Path), Message: ve.Message})
			continue
		}
		*p = append(*p, &ValidationError{Path: path, Message: e.Error()})
	}
}

func (p *problems) nonEmpty(path, v string) {
	if strings.TrimSpace(v) == "" {
		p.add(path, msgNonEmpty)
	}
}

func (p *problems) displayText(path, v string) {
	if utf8.RuneCountInString(displayText(v)) > DisplayTextMaxLength {
		p.add(path, msgDisplayText)
	}
}

func (p *problems) scope(path, v string) {
	switch v {
	case "", ScopeWorkspace, ScopeMission, ScopeJob:
	default:
		p.add(path, msgScope)
	}
}

// Validate reports every reason r is not a valid registration, or nil. The errors are
// *ValidationError values joined with errors.Join, in document order. Absent optional members
// are fine: what MarshalJSON writes for them is valid.
func (r *Registration) Validate() error {
	var p problems
	if r.ContractVersion != 0 && r.ContractVersion != ContractVersion {
		p.add("supervaizer_contract_version", "Input should be 2")
	}
	p.nonEmpty("agent.id", r.Agent.ID)
	p.nonEmpty("agent.slug", r.Agent.Slug)
	p.nonEmpty("agent.display_name", r.Agent.DisplayName)
	p.nonEmpty("versions.a2ui_version", r.Versions.A2UIVersion)
	p.nonEmpty("versions.a2ui_catalog_version", r.Versions.A2UICatalogVersion)
	p.nonEmpty("versions.a2a_version", r.Versions.A2AVersion)
	p.nonEmpty("a2a.agent_card_url", r.A2A.AgentCardURL)
	p.nonEmpty("a2a.controller_url", r.A2A.ControllerURL)
	r.validateCapabilities(&p)
	r.validateJobPolicy(&p)
	for i := range r.Resources {
		validateResource(&p, fmt.Sprintf("resources[%d]", i), &r.Resources[i])
	}
	for i := range r.Datasets {
		d := &r.Datasets[i]
		at := fmt.Sprintf("datasets[%d]", i)
		p.nonEmpty(at+".id", d.ID)
		p.scope(at+".scope", d.Scope)
	}
	for i := range r.Dashboards {
		validateDashboard(&p, fmt.Sprintf("dashboards[%d]", i), &r.Dashboards[i])
	}
	if b := r.WorkspaceBinding; b != nil {
		validateWorkspaceBinding(&p, "workspace_binding", b)
	}
	return errors.Join(p...)
}

func (r *Registration) validateCapabilities(p *problems) {
	c := &r.Capabilities
	described := map[string]bool{}
	for i, d := range c.SurfaceDefinitions {
		at := fmt.Sprintf("capabilities.surface_definitions[%d]", i)
		switch {
		case strings.TrimSpace(d.ID) == "":
			p.add(at+".id", "surface definitions must have a non-empty id")
		case !slices.Contains(c.Surfaces, d.ID):
			p.add(at, "surface_definitions describes undeclared surface '%s'", d.ID)
		case described[d.ID]:
			p.add(at, "surface_definitions describes surface '%s' twice", d.ID)
		}
		described[d.ID] = true
		p.displayText(at+".label", d.Label)
		p.displayText(at+".description", d.Description)
	}
	seen := map[string]bool{}
	for i, a := range c.Actions {
		at := fmt.Sprintf("capabilities.actions[%d]", i)
		validateActionDefinition(p, at, a)
		if a.ID != "" {
			if seen[a.ID] {
				p.add(at, "action '%s' is declared twice", a.ID)
			}
			seen[a.ID] = true
		}
	}
	for i, l := range c.CaseLanes {
		at := fmt.Sprintf("capabilities.case_lanes[%d]", i)
		p.nonEmpty(at+".id", l.ID)
		p.nonEmpty(at+".label", l.Label)
	}
	for i, t := range c.ArtifactTypes {
		at := fmt.Sprintf("capabilities.artifact_types[%d]", i)
		p.nonEmpty(at+".type", t.Type)
		p.nonEmpty(at+".label", t.Label)
	}
	if rc := c.RuleCheckpoints; rc != nil {
		validateRuleCheckpoints(p, "capabilities.rule_checkpoints", rc)
	}
	if c.ScheduledStart {
		if _, ok := r.Action(JobStartAction); !ok {
			p.add("capabilities.scheduled_start", "scheduled_start requires the %s action in capabilities.actions (declared or derived from job_policy.setup)", JobStartAction)
		}
	}
}

func validateActionDefinition(p *problems, at string, a ActionDefinition) {
	if strings.TrimSpace(a.ID) == "" {
		p.add(at+".id", "action definitions must have a non-empty id")
	}
	p.scope(at+".scope", a.Scope)
	switch a.Kind {
	case "", KindCommand, KindHelp:
	default:
		p.add(at+".kind", "Input should be 'command' or 'help'")
	}
	if a.Kind == KindHelp && !a.ReadOnly {
		p.add(at, "help actions must declare mutating=False: a help action proposes or checks a draft and never changes agent state")
	}
	if a.TargetField != "" && a.Kind != KindHelp {
		p.add(at+".target_field", "target_field is only allowed with kind='help'")
	}
	p.displayText(at+".label", a.Label)
	p.displayText(at+".description", a.Description)
}

func validateRuleCheckpoints(p *problems, at string, rc *RuleCheckpoints) {
	if rc.Version != 0 && rc.Version != 1 {
		p.add(at+".version", "Input should be 1")
	}
	if len(rc.Phases) == 0 {
		p.add(at+".phases", "rule_checkpoints.phases must declare at least one phase")
	}
	for i, ph := range rc.Phases {
		if ph != PhaseBefore && ph != PhaseAfter {
			p.add(fmt.Sprintf("%s.phases[%d]", at, i), "Input should be 'before' or 'after'")
		}
	}
	if hasDuplicates(rc.Phases) {
		p.add(at+".phases", "rule_checkpoints.phases must not contain duplicates")
	}
	if hasDuplicates(rc.SecretRefs) {
		p.add(at+".secret_refs", "rule_checkpoints.secret_refs must not contain duplicates")
	}
	// Secret refs are paths under one of these.
	prefixes := []string{"job.fields.", "case.metadata.", "step.payload.", "context."}
	for _, ref := range rc.SecretRefs {
		if !slices.ContainsFunc(prefixes, func(pre string) bool { return strings.HasPrefix(ref, pre) }) {
			p.add(at+".secret_refs", "rule_checkpoints.secret_refs contains an invalid path")
			break
		}
	}
}

func hasDuplicates(s []string) bool {
	seen := make(map[string]bool, len(s))
	for _, v := range s {
		if seen[v] {
			return true
		}
		seen[v] = true
	}
	return false
}

func (r *Registration) validateJobPolicy(p *problems) {
	j := &r.JobPolicy
	if j.OfflineStartPolicy != "" && j.OfflineStartPolicy != OfflineStartBlock {
		p.add("job_policy.offline_start_policy", "Input should be 'block'")
	}
	if j.OfflineRunningPolicy != "" && j.OfflineRunningPolicy != OfflineRunningFailInStudio {
		p.add("job_policy.offline_running_policy", "Input should be 'fail_in_studio'")
	}
	if s := j.Sync; s != nil && strings.TrimSpace(s.Action) == "" {
		p.add("job_policy.sync.action", "job sync policy action must be a non-empty action id")
	}
	s := j.Setup
	if s == nil {
		return
	}
	if strings.TrimSpace(s.PreviewAction) == "" || strings.TrimSpace(s.StartAction) == "" || strings.TrimSpace(s.SubmitAction) == "" {
		p.add("job_policy.setup", "job setup policy actions must be non-empty action ids")
	}
	for i, sc := range s.ActionScopes {
		switch sc {
		case ScopeWorkspace, ScopeJob, ScopeCase, ScopeStep:
		default:
			p.add(fmt.Sprintf("job_policy.setup.action_scopes[%d]", i), "Input should be 'workspace', 'job', 'case' or 'step'")
		}
	}
	if s.Plan == nil {
		return
	}
	const at = "job_policy.setup.plan"
	var plan *SetupPlan
	if planIsTyped(s.Plan) {
		plan, _ = typedPlan(s.Plan)
		*p = append(*p, plan.validate(at)...)
	} else {
		b, err := json.Marshal(s.Plan)
		if err != nil || len(b) == 0 || b[0] != '{' {
			p.add(at, "setup plan must be a V2SetupPlan or a JSON object")
			return
		}
		// A plain object passes as is; its help actions are still checked when it has the plan
		// shape, since Studio offers them all the same.
		plan, _ = typedPlan(json.RawMessage(b))
	}
	if plan == nil {
		return
	}
	for _, h := range plan.helpActions() {
		path, id := joinPath(at, h[0]), h[1]
		if strings.TrimSpace(id) == "" {
			continue // reported by the plan
		}
		a, ok := r.Action(id)
		switch {
		case !ok:
			p.add(path, "help action '%s' is not declared in capabilities.actions; declare it with kind='help'", id)
		case a.Kind != KindHelp:
			p.add(path, "help action '%s' must be declared in capabilities.actions with kind='help'", id)
		}
	}
}

func validateResource(p *problems, at string, d *ResourceDefinition) {
	p.nonEmpty(at+".id", d.ID)
	p.nonEmpty(at+".label", d.Label)
	p.scope(at+".scope", d.Scope)
	for i, op := range d.Operations {
		p.nonEmpty(fmt.Sprintf("%s.operations[%d]", at, i), op)
	}
	for _, op := range d.ReadOnlyOperations {
		if !slices.Contains(d.Operations, op) {
			p.add(at+".operations", "ReadOnlyOperations names %q, which is not one of the resource's operations", op)
		}
	}
	for i := range d.Fields {
		p.addErr(fmt.Sprintf("%s.fields[%d]", at, i), d.Fields[i].Validate())
	}
	for i, v := range d.MountedViews {
		vp := fmt.Sprintf("%s.mounted_views[%d]", at, i)
		p.nonEmpty(vp+".view", v.View)
		p.nonEmpty(vp+".surface", v.Surface)
	}
}

func validateDashboard(p *problems, at string, d *DashboardDefinition) {
	p.nonEmpty(at+".id", d.ID)
	p.nonEmpty(at+".label", d.Label)
	for i := range d.Widgets {
		w := &d.Widgets[i]
		wp := fmt.Sprintf("%s.widgets[%d]", at, i)
		p.nonEmpty(wp+".id", w.ID)
		p.nonEmpty(wp+".title", w.Title)
		if dt := w.Data; dt != nil {
			dp := wp + ".data"
			switch dt.Mode {
			case "", WidgetDataRef:
				if dt.DatasetID == "" {
					p.add(dp, "Dashboard dataset refs require datasetId")
				}
			case WidgetDataAction:
				if dt.Action == "" {
					p.add(dp, "Dashboard action data refs require action")
				}
			case WidgetDataInline:
				if dt.Values == nil {
					p.add(dp, "Dashboard inline data refs require values")
				}
			default:
				p.add(dp+".mode", "Input should be 'ref', 'action' or 'inline'")
			}
			if dt.Values != nil && !objectOrObjectList(dt.Values) {
				p.add(dp+".values", "values must be a list of objects or an object")
			}
		}
		vp := wp + ".visualization"
		switch w.Visualization.Type {
		case "", VisualizationTable, VisualizationMetric, VisualizationCustom:
		case VisualizationVegaLite:
			if w.Visualization.Spec == nil {
				p.add(vp, "Vega-Lite dashboard widgets require visualization.spec")
			}
		default:
			p.add(vp+".type", "Input should be 'table', 'metric', 'vega-lite' or 'custom'")
		}
	}
}

// objectOrObjectList reports whether v encodes as a JSON object or an array of objects.
func objectOrObjectList(v any) bool {
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(b, &obj) == nil && obj != nil {
		return true
	}
	var list []map[string]json.RawMessage
	if json.Unmarshal(b, &list) != nil || list == nil {
		return false
	}
	return !slices.ContainsFunc(list, func(m map[string]json.RawMessage) bool { return m == nil })
}

func validateWorkspaceBinding(p *problems, at string, b *WorkspaceBinding) {
	if b.Required && len(b.Modes) == 0 {
		p.add(at, "workspace_binding.required requires at least one mode")
	}
	for i, m := range b.Modes {
		if m != BindExisting && m != CreateAndBind {
			p.add(fmt.Sprintf("%s.modes[%d]", at, i), "Input should be 'bind_existing' or 'create_and_bind'")
		}
	}
	if c := b.Create; c != nil {
		for i := range c.Fields {
			p.addErr(fmt.Sprintf("%s.create.fields[%d]", at, i), c.Fields[i].Validate())
		}
	}
}
