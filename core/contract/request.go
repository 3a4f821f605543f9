package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
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
	errValue   = "value_error"
)

// DecodeActionRequest validates and decodes action.invoke params. It accepts what the reference
// accepts: unknown members are kept in Extra, optional members may be null, input defaults to {}.
// Strings are never coerced from other JSON types.
func DecodeActionRequest(params json.RawMessage) (*ActionRequest, error) {
	return decodeRequest(params, true)
}

// DecodeSurfaceRequest validates and decodes surface.load params, like DecodeActionRequest.
func DecodeSurfaceRequest(params json.RawMessage) (*SurfaceRequest, error) {
	r, err := decodeRequest(params, false)
	if err != nil {
		return nil, err
	}
	return &SurfaceRequest{
		RequestID: r.RequestID, Actor: r.Actor, Workspace: r.Workspace, MissionID: r.MissionID,
		AgentSlug: r.AgentSlug, Surface: r.Surface, Input: r.Input, DraftSessionID: r.DraftSessionID,
		JobID: r.JobID, CaseID: r.CaseID, StepID: r.StepID, Mission: r.Mission, Extra: r.Extra,
	}, nil
}

// decodeRequest reads the members of both request kinds, in the reference models' order (which
// is the order of the errors); action and idempotency_key only for an action request (a surface
// request keeps them as unknown members).
func decodeRequest(params json.RawMessage, action bool) (*ActionRequest, error) {
	r, errs := newFieldReader(params)
	if errs != nil {
		return nil, errs
	}
	req := &ActionRequest{
		RequestID: r.str("request_id"),
		Actor:     r.actor(),
		Workspace: r.workspace(),
		MissionID: r.str("mission_id"),
		AgentSlug: r.str("agent_slug"),
		Surface:   r.str("surface"),
	}
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
	req.Mission = r.mission(req.MissionID)
	r.discard("workspace_authorization")
	req.Extra = r.rest()
	if len(r.errs) > 0 {
		return nil, r.errs
	}
	return req, nil
}

// fieldReader walks one JSON object, collecting pydantic-style errors in field order.
type fieldReader struct {
	m    map[string]json.RawMessage
	loc  []any
	errs FieldErrors
}

func newFieldReader(data json.RawMessage) (*fieldReader, FieldErrors) {
	m, ok := asObject(data)
	if !ok {
		return nil, FieldErrors{{Type: errModel, Loc: []any{}, Msg: msgDict}}
	}
	return &fieldReader{m: m}, nil
}

// isObject reports whether data, known to be valid JSON (a member of a decoded document), is an
// object: its first byte says so, no need to decode it.
func isObject(data json.RawMessage) bool {
	data = bytes.TrimSpace(data)
	return len(data) > 0 && data[0] == '{'
}

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
	full := make([]any, 0, len(r.loc)+len(loc))
	full = append(full, r.loc...)
	full = append(full, loc...)
	r.errs = append(r.errs, FieldError{Type: typ, Loc: full, Msg: msg})
}

func (r *fieldReader) take(name string) (json.RawMessage, bool) {
	v, ok := r.m[name]
	if ok {
		delete(r.m, name)
	}
	return v, ok
}

func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }

func (r *fieldReader) str(name string) string {
	v, ok := r.take(name)
	if !ok {
		r.fail(errMissing, msgMissing, name)
		return ""
	}
	var s string
	if bytes.TrimSpace(v)[0] != '"' || json.Unmarshal(v, &s) != nil {
		r.fail(errString, msgString, name)
		return ""
	}
	return s
}

func (r *fieldReader) optStr(name string) *string {
	v, ok := r.take(name)
	if !ok || isNull(v) {
		return nil
	}
	var s string
	if bytes.TrimSpace(v)[0] != '"' || json.Unmarshal(v, &s) != nil {
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
	return compact(v)
}

func (r *fieldReader) sub(name string) (*fieldReader, bool) {
	v, ok := r.take(name)
	if !ok {
		r.fail(errMissing, msgMissing, name)
		return nil, false
	}
	m, isObj := asObject(v)
	if !isObj {
		r.fail(errModel, msgDict, name)
		return nil, false
	}
	loc := append(append([]any{}, r.loc...), name)
	return &fieldReader{m: m, loc: loc}, true
}

func (r *fieldReader) merge(s *fieldReader) { r.errs = append(r.errs, s.errs...) }

func (r *fieldReader) actor() Actor {
	s, ok := r.sub("actor")
	if !ok {
		return Actor{}
	}
	a := Actor{UserID: s.str("user_id")}
	a.Extra = s.rest()
	r.merge(s)
	return a
}

func (r *fieldReader) workspace() WorkspaceRef {
	s, ok := r.sub("workspace")
	if !ok {
		return WorkspaceRef{}
	}
	w := WorkspaceRef{ID: s.str("id"), Slug: s.optStr("slug")}
	w.Extra = s.rest()
	r.merge(s)
	return w
}

func (r *fieldReader) mission(missionID string) *MissionContext {
	v, ok := r.m["mission"]
	if !ok || isNull(v) {
		delete(r.m, "mission")
		return nil
	}
	s, ok := r.sub("mission")
	if !ok {
		return nil
	}
	mc := &MissionContext{ID: s.str("id"), Name: s.optStr("name")}
	if md, present := s.take("metadata"); present && !isNull(md) {
		if !isObject(md) {
			s.fail(errDict, "Input should be a valid dictionary; mission metadata must be a JSON object", "metadata")
		} else {
			mc.Metadata = compact(md)
		}
	}
	mc.Extra = s.rest()
	r.merge(s)
	if mc.ID != "" && mc.ID != missionID {
		r.fail(errValue, "Value error, mission.id must equal mission_id", "mission")
	}
	return mc
}

func (r *fieldReader) discard(name string) { delete(r.m, name) }

// rest returns the members nobody took.
func (r *fieldReader) rest() Extra {
	if len(r.m) == 0 {
		return nil
	}
	extra := make(Extra, len(r.m))
	for k, v := range r.m {
		extra[k] = compact(v)
	}
	return extra
}

func compact(v json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	if err := json.Compact(&buf, v); err != nil {
		return v
	}
	return buf.Bytes()
}

// MarshalJSON writes the request with its unknown members.
func (r ActionRequest) MarshalJSON() ([]byte, error) {
	type plain ActionRequest
	p := plain(r)
	p.Input = inputOrEmpty(p.Input)
	return encodeObject(p, r.Extra)
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
func (r SurfaceRequest) MarshalJSON() ([]byte, error) {
	type plain SurfaceRequest
	p := plain(r)
	p.Input = inputOrEmpty(p.Input)
	return encodeObject(p, r.Extra)
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
func (a Actor) MarshalJSON() ([]byte, error) {
	type plain Actor
	return encodeObject(plain(a), a.Extra)
}

// MarshalJSON writes the workspace reference with its unknown members.
func (w WorkspaceRef) MarshalJSON() ([]byte, error) {
	type plain WorkspaceRef
	return encodeObject(plain(w), w.Extra)
}

// MarshalJSON writes the mission context with its unknown members.
func (m MissionContext) MarshalJSON() ([]byte, error) {
	type plain MissionContext
	return encodeObject(plain(m), m.Extra)
}

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
