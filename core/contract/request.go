package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/supervaize/svz/core/internal/wirejson"
)

// Actor is the Studio user on whose behalf a request is made (V2ActorRef).
type Actor struct {
	UserID string `json:"user_id"`
	Extra  Extra  `json:"-"`
}

// WorkspaceRef names the Studio workspace of a request. Its slug is a display and routing hint,
// never an authorization input: handlers use the verified WorkspaceAuthorization instead.
type WorkspaceRef struct {
	ID    string  `json:"id"`
	Slug  *string `json:"slug"`
	Extra Extra   `json:"-"`
}

// MissionContext is the optional mission block of a request (V2MissionContext, SDK 1.8.0): the
// mission's id, name and Studio metadata, carried without reading its keys. Metadata is always a
// JSON object. Studio sends the current metadata on every request; do not cache it in the job.
type MissionContext struct {
	ID       string          `json:"id"`
	Name     *string         `json:"name,omitzero"`
	Metadata json.RawMessage `json:"metadata,omitzero"`
	Extra    Extra           `json:"-"`
}

// VerifiedWorkspaceContext is what the controller proved about the caller before a handler runs
// (V2VerifiedWorkspaceContext): the grant, workspace, agent and server the Studio-signed token was
// issued for, and all of its scopes. In local mode it is an unverified stand-in whose GrantID is
// LocalModeGrantID. Bootstrap calls (workspace binding) get none.
type VerifiedWorkspaceContext struct {
	GrantID           string   `json:"grant_id"`
	WorkspaceID       string   `json:"workspace_id"`
	WorkspaceSlug     *string  `json:"workspace_slug"`
	AgentID           string   `json:"agent_id"`
	AgentSlug         string   `json:"agent_slug"`
	ServerID          string   `json:"server_id"`
	Scopes            []string `json:"scopes"`
	AgentWorkspaceRef *string  `json:"agent_workspace_ref"`
}

// LocalModeGrantID is the grant id of the unverified context handlers receive in local mode.
const LocalModeGrantID = "local-mode"

// ActionRequest is the params of supervaizer/action.invoke (V2ActionRequest).
type ActionRequest struct {
	RequestID      string          `json:"request_id"`
	Actor          Actor           `json:"actor"`
	Workspace      WorkspaceRef    `json:"workspace"`
	MissionID      string          `json:"mission_id"`
	AgentSlug      string          `json:"agent_slug"`
	Surface        string          `json:"surface"`
	Action         string          `json:"action"`
	Input          json.RawMessage `json:"input"` // always a JSON object; {} when absent
	IdempotencyKey *string         `json:"idempotency_key,omitzero"`
	DraftSessionID *string         `json:"draft_session_id,omitzero"`
	JobID          *string         `json:"job_id,omitzero"`
	CaseID         *string         `json:"case_id,omitzero"`
	StepID         *string         `json:"step_id,omitzero"`
	Mission        *MissionContext `json:"mission,omitzero"`

	// WorkspaceAuthorization is set by the controller after verification; whatever a caller sends
	// under this name is discarded on decode and never reaches a handler.
	WorkspaceAuthorization *VerifiedWorkspaceContext `json:"workspace_authorization,omitzero"`

	Extra Extra `json:"-"`
}

// SurfaceRequest is the params of supervaizer/surface.load (V2SurfaceRequest).
type SurfaceRequest struct {
	RequestID      string          `json:"request_id"`
	Actor          Actor           `json:"actor"`
	Workspace      WorkspaceRef    `json:"workspace"`
	MissionID      string          `json:"mission_id"`
	AgentSlug      string          `json:"agent_slug"`
	Surface        string          `json:"surface"`
	Input          json.RawMessage `json:"input"`
	DraftSessionID *string         `json:"draft_session_id,omitzero"`
	JobID          *string         `json:"job_id,omitzero"`
	CaseID         *string         `json:"case_id,omitzero"`
	StepID         *string         `json:"step_id,omitzero"`
	Mission        *MissionContext `json:"mission,omitzero"`

	WorkspaceAuthorization *VerifiedWorkspaceContext `json:"workspace_authorization,omitzero"`

	Extra Extra `json:"-"`
}

// Job, Case, Step, DraftSession and Idempotency return the optional id of the same name
// (JobID, CaseID, StepID, DraftSessionID, IdempotencyKey), "" when the request has none.
func (r *ActionRequest) Job() string          { return deref(r.JobID) }
func (r *ActionRequest) Case() string         { return deref(r.CaseID) }
func (r *ActionRequest) Step() string         { return deref(r.StepID) }
func (r *ActionRequest) DraftSession() string { return deref(r.DraftSessionID) }
func (r *ActionRequest) Idempotency() string  { return deref(r.IdempotencyKey) }

// Job, Case, Step and DraftSession return the optional id of the same name, "" when the
// request has none.
func (r *SurfaceRequest) Job() string          { return deref(r.JobID) }
func (r *SurfaceRequest) Case() string         { return deref(r.CaseID) }
func (r *SurfaceRequest) Step() string         { return deref(r.StepID) }
func (r *SurfaceRequest) DraftSession() string { return deref(r.DraftSessionID) }

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// DecodeInput decodes the request input into v.
func (r *ActionRequest) DecodeInput(v any) error {
	if err := json.Unmarshal(inputOrEmpty(r.Input), v); err != nil {
		return fmt.Errorf("decode input of action %q: %w", r.Action, err)
	}
	return nil
}

// DecodeInput decodes the request input into v.
func (r *SurfaceRequest) DecodeInput(v any) error {
	if err := json.Unmarshal(inputOrEmpty(r.Input), v); err != nil {
		return fmt.Errorf("decode input of surface %q: %w", r.Surface, err)
	}
	return nil
}

// InputMember returns the JSON of the member name of the request's input (the last one when the
// name repeats), without decoding the rest; ok is false when the input has no such member. The
// input of a decoded request is valid JSON: nothing is validated again.
func (r *ActionRequest) InputMember(name string) (json.RawMessage, bool) {
	return memberOf(r.Input, name)
}

// InputMember returns the JSON of the member name of the request's input, like
// ActionRequest.InputMember.
func (r *SurfaceRequest) InputMember(name string) (json.RawMessage, bool) {
	return memberOf(r.Input, name)
}

func memberOf(obj json.RawMessage, name string) (v json.RawMessage, ok bool) {
	for n, raw := range wirejson.Members(obj) {
		if string(wirejson.Name(n)) == name {
			v, ok = raw, true
		}
	}
	return v, ok
}

func inputOrEmpty(in json.RawMessage) json.RawMessage {
	if len(in) == 0 {
		return json.RawMessage("{}")
	}
	return in
}

// FieldError is one validation error of a request, shaped like the pydantic error items the
// reference puts in JSON-RPC error data ({"type", "loc", "msg"}). The offending input is not
// echoed: it may hold secrets.
type FieldError struct {
	Type string `json:"type"`
	Loc  []any  `json:"loc"`
	Msg  string `json:"msg"`
}

// FieldErrors is a list of validation errors; it is an error.
type FieldErrors []FieldError

func (e FieldErrors) Error() string {
	parts := make([]string, 0, len(e))
	for _, fe := range e {
		loc := make([]string, len(fe.Loc))
		for i, l := range fe.Loc {
			loc[i] = fmt.Sprint(l)
		}
		parts = append(parts, strings.Join(loc, ".")+": "+fe.Msg)
	}
	return strings.Join(parts, "; ")
}

// Pydantic's error types and messages, for the cases a request decoder can meet.
const (
	errMissing = "missing"
	msgMissing = "Field required"
	errString  = "string_type"
	msgString  = "Input should be a valid string"
	errDict    = "dict_type"
	msgDict    = "Input should be a valid dictionary"
	errModel   = "model_type"
	errList    = "list_type"
	msgList    = "Input should be a valid list"
	errValue   = "value_error"
	errJSON    = "json_invalid"
)

// msgModel is pydantic's message for a member of a model type that is not an object.
func msgModel(model string) string {
	return "Input should be a valid dictionary or instance of " + model
}

// DecodeActionRequest validates and decodes action.invoke params. It accepts what the reference
// accepts: unknown members are kept in Extra, optional members may be null, input defaults to {}.
// Strings are never coerced from other JSON types. A workspace_authorization member is validated
// like any typed member (a V2VerifiedWorkspaceContext or null), then discarded. params must be
// JSON in valid UTF-8.
func DecodeActionRequest(params json.RawMessage) (*ActionRequest, error) {
	req := new(ActionRequest)
	if err := decodeRequest(params, req, true); err != nil {
		return nil, err
	}
	return req, nil
}

// DecodeSurfaceRequest validates and decodes surface.load params, like DecodeActionRequest.
func DecodeSurfaceRequest(params json.RawMessage) (*SurfaceRequest, error) {
	var r ActionRequest
	if err := decodeRequest(params, &r, false); err != nil {
		return nil, err
	}
	return &SurfaceRequest{
		RequestID: r.RequestID, Actor: r.Actor, Workspace: r.Workspace, MissionID: r.MissionID,
		AgentSlug: r.AgentSlug, Surface: r.Surface, Input: r.Input, DraftSessionID: r.DraftSessionID,
		JobID: r.JobID, CaseID: r.CaseID, StepID: r.StepID, Mission: r.Mission, Extra: r.Extra,
	}, nil
}

// decodeRequest reads the members of both request kinds in one pass over the compacted params,
// in the reference models' order (which is the order of the errors); action and idempotency_key
// only for an action request (a surface request keeps them as unknown members).
func decodeRequest(params json.RawMessage, req *ActionRequest, action bool) error {
	model := "V2SurfaceRequest"
	if action {
		model = "V2ActionRequest"
	}
	doc, err := wirejson.AppendCompact(make([]byte, 0, len(params)), params, false)
	if err != nil {
		return FieldErrors{{Type: errJSON, Loc: []any{}, Msg: "Invalid JSON: the request is not JSON in valid UTF-8"}}
	}
	if wirejson.Kind(doc) != '{' {
		return FieldErrors{{Type: errModel, Loc: []any{}, Msg: msgModel(model)}}
	}
	d := &document{Text: wirejson.NewText(doc)}
	r := d.reader(doc, 16)
	req.RequestID = r.str("request_id")
	req.Actor = r.actor()
	req.Workspace = r.workspace()
	req.MissionID = r.str("mission_id")
	req.AgentSlug = r.str("agent_slug")
	req.Surface = r.str("surface")
	if action {
		req.Action = r.str("action")
	}
	req.Input = r.object("input")
	if action {
		req.IdempotencyKey = r.optStr("idempotency_key")
	}
	req.DraftSessionID = r.optStr("draft_session_id")
	req.JobID = r.optStr("job_id")
	req.CaseID = r.optStr("case_id")
	req.StepID = r.optStr("step_id")
	r.verifiedContext() // validated, then discarded: only the verifier sets it
	req.Mission = r.mission(req.MissionID)
	req.Extra = r.rest()
	if len(d.errs) > 0 {
		return d.errs
	}
	return nil
}

// document is one compacted request being decoded: its strings are slices of one string (see
// wirejson.Text), its raw values (input, unknown members) slices of its bytes.
type document struct {
	wirejson.Text
	errs FieldErrors // pydantic-style, in field order
}

// fieldReader walks the members of one JSON object of a document.
type fieldReader struct {
	doc     *document
	members []member
	parent  *fieldReader // nil at the top
	name    string       // the member this object is, under parent
}

type member struct {
	name  []byte // unquoted
	value []byte
	taken bool
}

func (d *document) reader(obj []byte, size int) fieldReader {
	r := fieldReader{doc: d, members: make([]member, 0, size)}
	for name, v := range wirejson.Members(obj) {
		r.members = append(r.members, member{name: wirejson.Name(name), value: v})
	}
	return r
}

// isObject reports whether data, known to be valid JSON (a member of a decoded document), is an
// object: its first byte says so, no need to decode it.
func isObject(data json.RawMessage) bool { return wirejson.Kind(data) == '{' }

// isObjectJSON reports whether arbitrary bytes are one valid JSON object.
func isObjectJSON(data []byte) bool { return isObject(data) && json.Valid(data) }

// asObject decodes data when it is a JSON object.
func asObject(data json.RawMessage) (map[string]json.RawMessage, bool) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return nil, false
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, false
	}
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	return m, true
}

func (r *fieldReader) fail(typ, msg string, loc ...any) {
	var path []any
	for p := r; p.parent != nil; p = p.parent {
		path = append(path, p.name)
	}
	slices.Reverse(path)
	r.doc.errs = append(r.doc.errs, FieldError{Type: typ, Loc: append(path, loc...), Msg: msg})
}

// take returns the value of the member name (the last one, when a name repeats, as JSON parsers
// read it) and marks every member of that name as read.
func (r *fieldReader) take(name string) (json.RawMessage, bool) {
	var v []byte
	found := false
	for i := range r.members {
		if m := &r.members[i]; !m.taken && string(m.name) == name {
			m.taken, v, found = true, m.value, true
		}
	}
	return v, found
}

func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }

func (r *fieldReader) str(name string) string {
	v, ok := r.take(name)
	if !ok {
		r.fail(errMissing, msgMissing, name)
		return ""
	}
	s, isStr := r.doc.String(v)
	if !isStr {
		r.fail(errString, msgString, name)
	}
	return s
}

func (r *fieldReader) optStr(name string) *string {
	v, ok := r.take(name)
	if !ok || wirejson.IsNull(v) {
		return nil
	}
	s, isStr := r.doc.String(v)
	if !isStr {
		r.fail(errString, msgString, name)
		return nil
	}
	return &s
}

// object returns a member that must be a JSON object, {} when absent.
func (r *fieldReader) object(name string) json.RawMessage {
	v, ok := r.take(name)
	if !ok {
		return json.RawMessage("{}")
	}
	if !isObject(v) {
		r.fail(errDict, msgDict, name)
		return nil
	}
	return v
}

// sub returns the reader of the member name, an object of the reference model named model.
func (r *fieldReader) sub(name, model string) (fieldReader, bool) {
	v, ok := r.take(name)
	if !ok {
		r.fail(errMissing, msgMissing, name)
		return fieldReader{}, false
	}
	return r.model(name, v, model)
}

func (r *fieldReader) model(name string, v []byte, model string) (fieldReader, bool) {
	if !isObject(v) {
		r.fail(errModel, msgModel(model), name)
		return fieldReader{}, false
	}
	s := r.doc.reader(v, 4) // actor, workspace...: a few members
	s.parent, s.name = r, name
	return s, true
}

func (r *fieldReader) actor() Actor {
	s, ok := r.sub("actor", "V2ActorContext")
	if !ok {
		return Actor{}
	}
	return Actor{UserID: s.str("user_id"), Extra: s.rest()}
}

func (r *fieldReader) workspace() WorkspaceRef {
	s, ok := r.sub("workspace", "V2WorkspaceContext")
	if !ok {
		return WorkspaceRef{}
	}
	w := WorkspaceRef{ID: s.str("id"), Slug: s.optStr("slug")}
	w.Extra = s.rest()
	return w
}

// verifiedContext validates a caller-sent workspace_authorization (a V2VerifiedWorkspaceContext
// or null, as the reference model types it) and drops it.
func (r *fieldReader) verifiedContext() {
	v, ok := r.take("workspace_authorization")
	if !ok || wirejson.IsNull(v) {
		return
	}
	s, ok := r.model("workspace_authorization", v, "V2VerifiedWorkspaceContext")
	if !ok {
		return
	}
	s.str("grant_id")
	s.str("workspace_id")
	s.optStr("workspace_slug")
	s.str("agent_id")
	s.str("agent_slug")
	s.str("server_id")
	if scopes, present := s.take("scopes"); present {
		if wirejson.Kind(scopes) != '[' {
			s.fail(errList, msgList, "scopes")
		} else {
			i := 0
			for it := range wirejson.Elements(scopes) {
				if wirejson.Kind(it) != '"' {
					s.fail(errString, msgString, "scopes", i)
				}
				i++
			}
		}
	}
	s.optStr("agent_workspace_ref")
}

func (r *fieldReader) mission(missionID string) *MissionContext {
	v, ok := r.take("mission")
	if !ok || wirejson.IsNull(v) {
		return nil
	}
	s, ok := r.model("mission", v, "V2MissionContext")
	if !ok {
		return nil
	}
	mc := &MissionContext{ID: s.str("id"), Name: s.optStr("name")}
	if md, present := s.take("metadata"); present && !wirejson.IsNull(md) {
		if !isObject(md) {
			s.fail(errDict, "Input should be a valid dictionary; mission metadata must be a JSON object", "metadata")
		} else {
			mc.Metadata = md
		}
	}
	mc.Extra = s.rest()
	if mc.ID != "" && mc.ID != missionID {
		r.fail(errValue, "Value error, mission.id must equal mission_id", "mission")
	}
	return mc
}

// rest returns the members nobody took (the last of each name).
func (r *fieldReader) rest() Extra {
	var extra Extra
	for _, m := range r.members {
		if m.taken {
			continue
		}
		if extra == nil {
			extra = make(Extra)
		}
		extra[string(m.name)] = m.value
	}
	return extra
}

// MarshalJSON writes the request with its unknown members.
func (r ActionRequest) MarshalJSON() ([]byte, error) { return marshal(&r) }

func (r *ActionRequest) wire(e *encoder) error {
	if len(r.Input) == 0 {
		p := *r
		p.Input = inputOrEmpty(p.Input)
		r = &p
	}
	return e.object(r, r.Extra)
}

// UnmarshalJSON decodes and validates the request like DecodeActionRequest.
func (r *ActionRequest) UnmarshalJSON(data []byte) error {
	req, err := DecodeActionRequest(data)
	if err != nil {
		return err
	}
	*r = *req
	return nil
}

// MarshalJSON writes the request with its unknown members.
func (r SurfaceRequest) MarshalJSON() ([]byte, error) { return marshal(&r) }

func (r *SurfaceRequest) wire(e *encoder) error {
	if len(r.Input) == 0 {
		p := *r
		p.Input = inputOrEmpty(p.Input)
		r = &p
	}
	return e.object(r, r.Extra)
}

// UnmarshalJSON decodes and validates the request like DecodeSurfaceRequest.
func (r *SurfaceRequest) UnmarshalJSON(data []byte) error {
	req, err := DecodeSurfaceRequest(data)
	if err != nil {
		return err
	}
	*r = *req
	return nil
}

// MarshalJSON writes the actor with its unknown members.
func (a Actor) MarshalJSON() ([]byte, error) { return marshal(&a) }

func (a *Actor) wire(e *encoder) error { return e.object(a, a.Extra) }

// MarshalJSON writes the workspace reference with its unknown members.
func (w WorkspaceRef) MarshalJSON() ([]byte, error) { return marshal(&w) }

func (w *WorkspaceRef) wire(e *encoder) error { return e.object(w, w.Extra) }

// MarshalJSON writes the mission context with its unknown members.
func (m MissionContext) MarshalJSON() ([]byte, error) { return marshal(&m) }

func (m *MissionContext) wire(e *encoder) error { return e.object(m, m.Extra) }

// UnmarshalJSON decodes the actor, keeping unknown members.
func (a *Actor) UnmarshalJSON(data []byte) error {
	type plain Actor
	return decodeInto(data, "actor", (*plain)(a), &a.Extra)
}

// UnmarshalJSON decodes the workspace reference, keeping unknown members.
func (w *WorkspaceRef) UnmarshalJSON(data []byte) error {
	type plain WorkspaceRef
	return decodeInto(data, "workspace", (*plain)(w), &w.Extra)
}

// UnmarshalJSON decodes the mission context, keeping unknown members.
func (m *MissionContext) UnmarshalJSON(data []byte) error {
	type plain MissionContext
	return decodeInto(data, "mission", (*plain)(m), &m.Extra)
}
