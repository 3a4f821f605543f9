// Package grant decides whether a Studio call may reach an agent's handler: it verifies the
// Studio-signed workspace-grant token (EdDSA JWT) of every /a2a call and yields the verified
// workspace context handlers receive, or a typed *Error whose code and message are the reference
// SDK's (spec §4.5). It also owns the two exceptions: the local-mode bypass (spec §4.7) and the
// "not configured" refusal of a controller without trust material.
//
// Promises: only EdDSA over Ed25519 is ever accepted, whatever a header or a key says; the checks
// run in the order of spec §4.3 on every call; every setting is checked before anything is
// served. The warm path touches no network and costs one SHA-256 of the token: verified tokens
// are remembered until exp + leeway, the JWKS for its Cache-Control max-age (bounded), refreshed
// in the background, at most once per cooldown on unknown kids, and kept while Studio is
// unreachable. All state lives in the verifier value.
package grant

import (
	"context"
	"fmt"

	"github.com/supervaize/svz/core/contract"
)

// Code is a workspace-authorization error code (JSON-RPC -32030 data.code).
type Code string

// Error codes, exactly as the reference SDK sends them.
const (
	CodeNotConfigured      Code = "workspace_authorization_not_configured"
	CodeMissing            Code = "workspace_authorization_missing"
	CodeMalformed          Code = "workspace_authorization_malformed"
	CodeUnsupportedAlg     Code = "workspace_authorization_unsupported_alg"
	CodeInvalidKey         Code = "workspace_authorization_invalid_key"
	CodeMissingKID         Code = "workspace_authorization_missing_kid"
	CodeJWKSUnavailable    Code = "workspace_authorization_jwks_unavailable"
	CodeInvalidJWKS        Code = "workspace_authorization_invalid_jwks"
	CodeUnknownKID         Code = "workspace_authorization_unknown_kid"
	CodeInvalidJWK         Code = "workspace_authorization_invalid_jwk"
	CodeBadSignature       Code = "workspace_authorization_bad_signature"
	CodeInvalidClaims      Code = "workspace_authorization_invalid_claims"
	CodeWrongIssuer        Code = "workspace_authorization_wrong_issuer"
	CodeWrongAudience      Code = "workspace_authorization_wrong_audience"
	CodeExpired            Code = "workspace_authorization_expired"
	CodeNotYetValid        Code = "workspace_authorization_not_yet_valid"
	CodeWrongServer        Code = "workspace_authorization_wrong_server"
	CodeUnknownAgent       Code = "workspace_authorization_unknown_agent"
	CodeWrongAgent         Code = "workspace_authorization_wrong_agent"
	CodeAgentNotRegistered Code = "workspace_authorization_agent_not_registered"
	CodeWrongWorkspace     Code = "workspace_authorization_wrong_workspace"
	CodeMissingScope       Code = "workspace_authorization_missing_scope"
)

// Error is a refused call. Its Message is safe to send to the caller: it never holds the token.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string { return e.Message }

// Messages of the codes whose text does not vary. The full list, word for word the reference
// SDK's, is in messages.go.
const (
	MsgNotConfigured = "Workspace authorization is required but is not configured for this Supervaizer server"
	MsgMissing       = "Missing X-Supervaize-Workspace-Authorization header"
)

// UnknownAgent is the refusal of a call for an agent this controller does not serve.
func UnknownAgent(slug string) *Error {
	return &Error{Code: CodeUnknownAgent, Message: "Unknown agent_slug for workspace authorization: " + slug}
}

// JSON-RPC methods, which are also the first required scope of a call.
const (
	MethodActionInvoke = "supervaizer/action.invoke"
	MethodSurfaceLoad  = "supervaizer/surface.load"
)

// MethodDataResource marks a call of a DataResource route (spec §8). It is not a scope: the call
// requires exactly its Target, "resource.<name>.<op>". Such calls are never bypassed in local mode.
const MethodDataResource = "supervaizer/data_resource"

// MethodEvents marks a GET /a2a/events request that carries a workspace token, to see only its
// workspace's effects (an svz addition: the reference's stream has no workspace filter). The call
// requires exactly this scope; Target is empty.
const MethodEvents = "supervaizer/events"

// Agent is what the controller knows of the agent a call names.
type Agent struct {
	Slug string
	// ID is the controller's deterministic agent id (Agent.id, a shortuuid of the name); local-mode
	// contexts carry it.
	ID string
	// StudioID is the Studio agent id from the registration handshake, empty when the agent has
	// not been linked to Studio. Tokens must carry it as agent_id.
	StudioID string
}

// Call is one /a2a or DataResource call to authorize.
type Call struct {
	// Token is the X-Supervaize-Workspace-Authorization header value as received ("Bearer x" or
	// the raw token; empty when absent).
	Token string
	// Method is MethodActionInvoke, MethodSurfaceLoad, MethodDataResource or MethodEvents.
	Method string
	// Target is the action or surface id, or the DataResource scope "resource.<name>.<op>".
	Target string
	// AgentSlug is the request's agent_slug; Agent is nil when this controller does not serve it.
	AgentSlug string
	Agent     *Agent
	Workspace contract.WorkspaceRef
}

// RequiredScopes are the scopes a token must grant for the call: the method and the target id,
// the target alone for a DataResource call, the method alone for an events stream.
func (c Call) RequiredScopes() []string {
	switch c.Method {
	case MethodDataResource:
		return []string{c.Target}
	case MethodEvents:
		return []string{MethodEvents}
	}
	return []string{c.Method, c.Target}
}

// Authorizer decides a call: the verified context for the handler, or an error (a *Error for a
// refusal; any other error is an internal failure that the controller must not leak).
type Authorizer interface {
	Authorize(ctx context.Context, call Call) (*contract.VerifiedWorkspaceContext, error)
}

// Config is what New needs to pick an Authorizer.
type Config struct {
	Settings Settings
	// ServerID is this controller's SUPERVAIZER_SERVER_ID.
	ServerID string
	// LocalMode is SUPERVAIZER_LOCAL_MODE=true.
	LocalMode bool
	// StudioConnected is true when the controller is connected to a Studio account
	// (SUPERVAIZE_API_KEY is set): workspace authorization is then mandatory. Outside local mode
	// incomplete settings stop the start; in local mode the call is refused as not configured
	// (never bypassed).
	StudioConnected bool
	// Options tune the token verifier (logger, HTTP client, clock, cache sizes...).
	Options []Option
}

// StudioRequiresAuthMessage is the start-up refusal of a Studio-connected controller without
// complete workspace-authorization settings.
const StudioRequiresAuthMessage = "Studio-registered Supervaizer v2 A2A requires workspace authorization. " +
	"Set SUPERVAIZER_WORKSPACE_AUTH_REQUIRED=true and configure SUPERVAIZER_WORKSPACE_AUTH_ISSUER plus either " +
	"SUPERVAIZER_WORKSPACE_AUTH_PUBLIC_KEY or SUPERVAIZER_WORKSPACE_AUTH_JWKS_URL."

// New returns the Authorizer the configuration calls for, or a start-up error:
//   - a Studio-connected controller outside local mode must have verification fully configured
//     (REQUIRED=true, ISSUER and a key source), or it does not start (the seeds: Server.launch()
//     refuses; local mode skips that check);
//   - local mode without Studio and without any trust material bypasses verification (spec §4.7);
//   - without SUPERVAIZER_WORKSPACE_AUTH_REQUIRED every call is refused as not configured (this is
//     also where a local-mode controller connected to Studio lands: it fails closed, never bypasses);
//   - otherwise tokens are verified, and every setting (issuer, key, JWKS URL, audience, leeway) is
//     checked before anything is served.
func New(ctx context.Context, cfg Config) (Authorizer, error) {
	s := cfg.Settings
	if cfg.StudioConnected && !cfg.LocalMode && (!s.Required || s.Issuer == "" || !s.HasKeySource()) {
		return nil, fmt.Errorf("%s", StudioRequiresAuthMessage)
	}
	if cfg.LocalMode && !cfg.StudioConnected && !s.HasTrustMaterial() {
		return LocalBypass{ServerID: cfg.ServerID}, nil
	}
	if !s.Required {
		return NotConfigured{}, nil
	}
	return NewVerifier(ctx, s, cfg.ServerID, cfg.Options...)
}

// NotConfigured refuses every call: the controller has no workspace-authorization settings.
type NotConfigured struct{}

var _ Authorizer = NotConfigured{}

// Authorize always refuses with workspace_authorization_not_configured.
func (NotConfigured) Authorize(context.Context, Call) (*contract.VerifiedWorkspaceContext, error) {
	return nil, &Error{Code: CodeNotConfigured, Message: MsgNotConfigured}
}

// LocalBypass accepts every call for a known agent without a token, with an UNVERIFIED context
// (grant_id "local-mode", the request's workspace, the agent's own id, exactly the required
// scopes). It is only ever chosen in local mode, without Studio and without trust material.
type LocalBypass struct {
	ServerID string
}

var _ Authorizer = LocalBypass{}

// Authorize returns the local-mode context, or workspace_authorization_unknown_agent. A
// DataResource call is refused as not configured: the reference never bypasses those.
func (b LocalBypass) Authorize(ctx context.Context, call Call) (*contract.VerifiedWorkspaceContext, error) {
	if call.Method == MethodDataResource {
		return NotConfigured{}.Authorize(ctx, call)
	}
	if call.Agent == nil {
		return nil, UnknownAgent(call.AgentSlug)
	}
	return &contract.VerifiedWorkspaceContext{
		GrantID:       contract.LocalModeGrantID,
		WorkspaceID:   call.Workspace.ID,
		WorkspaceSlug: call.Workspace.Slug,
		AgentID:       call.Agent.ID,
		AgentSlug:     call.AgentSlug,
		ServerID:      b.ServerID,
		Scopes:        call.RequiredScopes(),
	}, nil
}
