// Package hello is the Hello World agent: the Go twin of the reference SDK's built-in local agent,
// with the same registration, surfaces, actions and payloads (two surfaces, five actions, an
// optional human-review step). Its actions are stateless: job.sync answers from its own input, not
// from an earlier job.start, exactly as the reference does. It also declares a small DataResource,
// greetings (greetings.go), kept in the controller's store, to try the DataResource routes.
package hello

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"unicode"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/config"
	"github.com/supervaize/svz/core/contract"
)

// Identity of the Hello World agent.
const (
	Name           = "Hello World AI Agent"
	Slug           = "hello-world-ai-agent"
	Version        = "1.0"
	CatalogVersion = "supervaizer-v2-local.0"
	A2UIVersion    = "v0.8"
)

// Registration returns the agent's Supervaizer v2 registration (spec §3.2, in the ≥1.6 shape).
func Registration() (*contract.Registration, error) {
	return contract.BuildRegistration(contract.RegistrationSpec{
		AgentID:            Slug,
		AgentSlug:          Slug,
		DisplayName:        Name,
		AgentCardURL:       "/.well-known/agents/v" + Version + "/" + Slug + "_agent.json",
		ControllerURL:      "/a2a",
		A2UICatalogVersion: CatalogVersion,
		Surfaces:           []contract.SurfaceSpec{contract.SurfaceID("job.start"), contract.SurfaceID("case.step.awaiting")},
		Actions:            []contract.ActionSpec{contract.ActionID("job.start.preview"), contract.ActionID("job.start"), contract.ActionID("step.awaiting.submit")},
		CaseLanes:          []contract.CaseLane{{ID: "work", Label: "Work", Default: true}},
		JobPolicy:          &contract.JobPolicy{Sync: &contract.JobSyncPolicy{Action: "job.sync"}},
		Resources: []contract.ResourceDefinition{{
			ID: "hello_messages", Label: "Hello Messages", AutoSurface: true, Operations: []string{"list"},
		}},
	})
}

// GreetingParameter is the parameter the Studio-connected Hello World declares: the operator
// sets it in Studio, Studio sends it encrypted, and job.start reports it as the greeting member of
// its job.started effect.
var GreetingParameter = contract.Parameter{
	Name:        "HELLO_GREETING",
	Description: "Greeting reported by job.start (set in Studio)",
}

// NewAgent returns the Hello World agent with its handlers, exactly the reference's.
func NewAgent() (*core.Agent, error) { return newAgent(false) }

// NewStudioAgent returns the Hello World agent of a Studio-connected controller: it also declares
// GreetingParameter. The local-mode agent does not, so its wire output stays the reference's.
func NewStudioAgent() (*core.Agent, error) { return newAgent(true) }

func newAgent(greeting bool) (*core.Agent, error) {
	reg, err := Registration()
	if err != nil {
		return nil, err
	}
	cfg := core.AgentConfig{
		Name:         Name,
		Version:      Version,
		Author:       "Supervaizer (local test)",
		Description:  "Built-in Hello World agent for local testing without Studio.",
		Tags:         []string{"hello world", "ai agent", "local"},
		Registration: reg,
	}
	start := jobStart
	if greeting {
		cfg.Parameters = []contract.Parameter{GreetingParameter}
		start = jobStartWithGreeting
	}
	a, err := core.NewAgent(cfg)
	if err != nil {
		return nil, err
	}
	a.HandleSurface("job.start", core.SurfaceFunc(jobStartSurface))
	a.HandleSurface("case.step.awaiting", core.SurfaceFunc(awaitingSurface))
	a.HandleAction("job.start.preview", core.ActionFunc(preview))
	a.HandleAction("job.start", core.ActionFunc(start))
	a.HandleAction("job.sync", core.ActionFunc(jobSync))
	a.HandleAction("step.awaiting.submit", core.ActionFunc(submitReview))
	a.HandleAction("resource.hello_messages.list", core.ActionFunc(listMessages))
	a.AddDataResource(GreetingsResource())
	return a, nil
}

// Build is the Hello World controller configured from the environment (package config); its
// signature is the one adapters/platform runs.
func Build(ctx context.Context, getenv func(string) string, log *slog.Logger) (http.Handler, error) {
	newAgent := NewAgent
	if config.StudioConnected(getenv) {
		newAgent = NewStudioAgent
	}
	a, err := newAgent()
	if err != nil {
		return nil, err
	}
	return config.NewController(ctx, getenv, log, a)
}

// form is an A2UI Form document, in the reference's member order.
type form struct {
	Type    string      `json:"type"`
	ID      string      `json:"id"`
	Title   string      `json:"title"`
	Fields  []formField `json:"fields"`
	Submit  formAction  `json:"submit"`
	Preview *formAction `json:"preview,omitempty"`
	State   any         `json:"state"`
}

// draftState and reviewState keep the reference's member order.
type draftState struct {
	DraftSessionID *string `json:"draft_session_id"`
}

type reviewState struct {
	JobID  *string `json:"job_id"`
	CaseID *string `json:"case_id"`
	StepID *string `json:"step_id"`
}

type formField struct {
	ID       string `json:"id"`
	Label    string `json:"label"`
	Type     string `json:"type"`
	Required bool   `json:"required"`
	Default  any    `json:"default,omitempty"`
}

type formAction struct {
	Action string `json:"action"`
	Label  string `json:"label,omitempty"`
}

func surfaceResult(surface string, doc form) (*contract.SurfaceResult, error) {
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	a2ui, catalog := A2UIVersion, CatalogVersion
	return &contract.SurfaceResult{Surface: surface, A2UIVersion: &a2ui, A2UICatalogVersion: &catalog, Document: b}, nil
}

func jobStartSurface(_ context.Context, req *contract.SurfaceRequest) (*contract.SurfaceResult, error) {
	return surfaceResult("job.start", form{
		Type:  "Form",
		ID:    "supervaizer.local.hello_world.job.start",
		Title: "Start Hello World",
		Fields: []formField{
			{ID: "count", Label: "How many times to say hello", Type: "number", Required: true, Default: 3},
			{ID: "enable_human_review", Label: "Enable human review", Type: "boolean", Required: false, Default: false},
		},
		Submit:  formAction{Action: "job.start", Label: "Start"},
		Preview: &formAction{Action: "job.start.preview"},
		State:   draftState{DraftSessionID: req.DraftSessionID},
	})
}

func awaitingSurface(_ context.Context, req *contract.SurfaceRequest) (*contract.SurfaceResult, error) {
	return surfaceResult("case.step.awaiting", form{
		Type:   "Form",
		ID:     "supervaizer.local.hello_world.case.step.awaiting",
		Title:  "Human Review",
		Fields: reviewFormFields(),
		Submit: formAction{Action: "step.awaiting.submit", Label: "Submit"},
		State:  reviewState{JobID: req.JobID, CaseID: req.CaseID, StepID: req.StepID},
	})
}

func reviewFormFields() []formField {
	return []formField{
		{ID: "approved", Label: "Approve this case", Type: "boolean", Required: true},
		{ID: "comment", Label: "Comment", Type: "string", Required: false},
	}
}

func reviewFields() []contract.FieldDefinition {
	return []contract.FieldDefinition{
		{ID: "approved", Label: "Approve this case", Type: "boolean", Required: true},
		{ID: "comment", Label: "Comment", Type: "string", Required: false},
	}
}

func preview(_ context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	rid, _ := json.Marshal(req.RequestID)
	return &contract.ActionResult{
		Status:  contract.StatusOK,
		Effects: []contract.Effect{{Type: "job.start.previewed", Extra: contract.Extra{"request_id": rid}}},
	}, nil
}

func jobStart(_ context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	in := inputMember(req.InputMember)
	jobID := orDefault(req.JobID, "local-v2-job")
	if reviewEnabled(in) {
		return &contract.ActionResult{
			Status:   contract.StatusOK,
			Effects:  []contract.Effect{{Type: "job.started", JobID: jobID, Status: "awaiting", Message: "Awaiting human review"}},
			JobState: awaitingState(req),
		}, nil
	}
	n := boundedCount(in)
	return &contract.ActionResult{
		Status:   contract.StatusOK,
		Effects:  []contract.Effect{{Type: "job.started", JobID: jobID, Status: "completed", Message: "Completed " + strconv.Itoa(n) + " cases"}},
		JobState: completedState(req, n),
	}, nil
}

// jobStartWithGreeting is jobStart with the greeting the operator configured in Studio, when
// there is one, in the job.started effect.
func jobStartWithGreeting(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	greeting, ok, err := core.Parameter(ctx, GreetingParameter.Name)
	if err != nil {
		return nil, err
	}
	res, err := jobStart(ctx, req)
	if err != nil || !ok {
		return res, err
	}
	g, err := json.Marshal(greeting)
	if err != nil {
		return nil, err
	}
	res.Effects[0].Extra = contract.Extra{"greeting": g}
	return res, nil
}

func jobSync(_ context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	in := inputMember(req.InputMember)
	synced := contract.Effect{Type: "job.synced", Status: "completed", Message: "Completed"}
	var state *contract.JobState
	if reviewEnabled(in) {
		synced.Status, synced.Message, state = "awaiting", "Awaiting human review", awaitingState(req)
	} else {
		state = completedState(req, boundedCount(in))
	}
	synced.SetIDs(req.JobID, nil, nil) // the request's job_id as sent: absent stays absent, "" stays ""
	return &contract.ActionResult{Status: contract.StatusOK, Effects: []contract.Effect{synced}, JobState: state}, nil
}

func submitReview(_ context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	state := jobState(req, "completed", []contract.Case{{
		ID:     orDefault(req.CaseID, "hello-review-1"),
		Lane:   contract.DefaultLane,
		Title:  "Hello review",
		Status: "completed",
		Steps: []contract.Step{{
			ID:       orDefault(req.StepID, "human-review"),
			Activity: contract.ActivityOperation,
			Status:   "completed",
			Title:    "Human Review",
			Outputs:  []contract.ArtifactRef{{ID: "review-decision", Type: "decision", Title: "Review decision"}},
		}},
	}})
	submitted := contract.Effect{Type: "step.awaiting.submitted", Status: "completed"}
	submitted.SetIDs(req.JobID, req.CaseID, req.StepID)
	return &contract.ActionResult{Status: contract.StatusOK, Effects: []contract.Effect{submitted}, JobState: state}, nil
}

func listMessages(context.Context, *contract.ActionRequest) (*contract.ActionResult, error) {
	return &contract.ActionResult{
		Status: contract.StatusOK,
		Effects: []contract.Effect{{
			Type:     "resource.listed",
			Resource: "hello_messages",
			Items:    []map[string]any{{"id": "hello-1", "message": "Hello from Supervaizer v2"}},
		}},
	}, nil
}

func awaitingState(req *contract.ActionRequest) *contract.JobState {
	return jobState(req, "awaiting", []contract.Case{{
		ID:     "hello-review-1",
		Lane:   contract.DefaultLane,
		Title:  "Hello review",
		Status: "awaiting",
		Steps: []contract.Step{{
			ID:       "human-review",
			Activity: contract.ActivityOperation,
			Status:   "awaiting",
			Title:    "Human Review",
			Awaiting: &contract.Awaiting{
				Reason:  "human_input",
				Surface: "case.step.awaiting",
				Action:  "step.awaiting.submit",
				Fields:  reviewFields(),
			},
		}},
	}})
}

func completedState(req *contract.ActionRequest, n int) *contract.JobState {
	cases := make([]contract.Case, 0, n)
	for i := 1; i <= n; i++ {
		title := "Hello case " + strconv.Itoa(i)
		id := "hello-case-" + strconv.Itoa(i)
		cases = append(cases, contract.Case{
			ID:     id,
			Lane:   contract.DefaultLane,
			Title:  title,
			Status: "completed",
			Steps: []contract.Step{{
				ID:       id + "-complete",
				Activity: contract.ActivityOperation,
				Status:   "completed",
				Title:    "Say hello",
				Outputs:  []contract.ArtifactRef{{ID: id + "-message", Type: "message", Title: title}},
			}},
		})
	}
	return jobState(req, "completed", cases)
}

func jobState(req *contract.ActionRequest, status string, cases []contract.Case) *contract.JobState {
	slug := req.AgentSlug
	if slug == "" {
		slug = Slug
	}
	mission := req.MissionID
	if mission == "" {
		mission = "local-mission"
	}
	return &contract.JobState{
		Job: contract.Job{
			ID:        orDefault(req.JobID, "local-v2-job"),
			AgentSlug: slug,
			MissionID: mission,
			Status:    status,
			Source:    contract.JobSource{Type: contract.SourceFreshStart},
		},
		Cases: cases,
	}
}

// orDefault is the reference's `request.get(x) or default`: nil and "" give def.
func orDefault(p *string, def string) string {
	if p == nil || *p == "" {
		return def
	}
	return *p
}

// inputMember reads one member of a request's input (ActionRequest.InputMember).
type inputMember func(name string) (json.RawMessage, bool)

// inputMembers reads the members of an input, a JSON object already validated.
func inputMembers(in json.RawMessage) inputMember {
	return (&contract.ActionRequest{Input: in}).InputMember
}

// reviewEnabled is the reference's str(input.get("enable_human_review", False)).lower() in
// ("true", "on", "1", "yes"), over JSON values.
func reviewEnabled(in inputMember) bool {
	v, ok := in("enable_human_review")
	if !ok {
		return false
	}
	v = bytes.TrimSpace(v)
	var s string
	switch {
	case len(v) > 0 && v[0] == '"':
		_ = json.Unmarshal(v, &s)
		s = strings.ToLower(s)
	default: // true/false print as True/False, an integer as its digits; floats never match
		s = strings.ToLower(string(v))
	}
	switch s {
	case "true", "on", "1", "yes":
		return true
	}
	return false
}

// boundedCount is the reference's int(input.get("count", 1)), 1 when that fails, clamped to
// 0..100, over JSON values: numbers truncate toward zero, booleans count as 0 and 1, strings
// parse like Python's int() (surrounding spaces, a sign, digits with single underscores).
func boundedCount(in inputMember) int {
	v, ok := in("count")
	if !ok {
		return 1
	}
	v = bytes.TrimSpace(v)
	n := 1.0
	switch {
	case string(v) == "true":
		n = 1
	case string(v) == "false":
		n = 0
	case len(v) > 0 && v[0] == '"':
		var s string
		if json.Unmarshal(v, &s) == nil {
			if i, ok := pythonInt(s); ok {
				n = i
			}
		}
	default:
		if f, err := strconv.ParseFloat(string(v), 64); err == nil {
			n = math.Trunc(f)
		}
	}
	return int(math.Max(0, math.Min(n, 100)))
}

// pythonInt parses s like Python's int(s) for base 10, as a float64 (only its clamp matters).
func pythonInt(s string) (float64, bool) {
	s = strings.TrimFunc(s, unicode.IsSpace)
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if s == "" || s[0] == '_' || s[len(s)-1] == '_' || strings.Contains(s, "__") {
		return 0, false
	}
	var n float64
	for _, r := range s {
		switch {
		case r == '_':
		case r >= '0' && r <= '9':
			n = n*10 + float64(r-'0')
		default:
			return 0, false
		}
	}
	if neg {
		n = -n
	}
	return n, true
}
