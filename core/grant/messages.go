package grant

// Refusal messages, word for word the reference SDK's (spec §4.5) so that Studio shows operators
// the same text whichever SDK runs the agent. None of them ever contains the token.
const (
	msgNotCompact     = "Workspace authorization token must be a compact JWT"
	msgMalformed      = "Workspace authorization token is malformed"
	msgNotObjects     = "Workspace authorization token header and claims must be JSON objects"
	msgUnsupportedAlg = "Workspace authorization token must be signed with EdDSA"
	msgKeyNotLoaded   = "Workspace authorization EdDSA public key could not be loaded"
	msgKeyNotEd25519  = "Workspace authorization EdDSA public key must be an Ed25519 public key"
	msgMissingKID     = "Workspace authorization token header must include kid for JWKS"
	msgJWKSDown       = "Workspace authorization JWKS could not be loaded"
	msgJWKSNoKeys     = "Workspace authorization JWKS payload has no keys list"
	msgJWKSNotObjects = "Workspace authorization JWKS keys must be JSON objects"
	msgUnknownKID     = "Workspace authorization JWKS has no key matching token kid"
	msgJWKNotOKP      = "Workspace authorization EdDSA JWK must be OKP/Ed25519"
	msgJWKNoX         = "Workspace authorization Ed25519 JWK must include x"
	msgJWKBadX        = "Workspace authorization Ed25519 JWK x is invalid"
	// Not in the reference: a JWK that publishes its private half means anyone can mint tokens.
	msgJWKPrivate      = "Workspace authorization Ed25519 JWK must not include private key material"
	msgBadSignature    = "Workspace authorization token signature is invalid"
	msgInvalidClaims   = "Workspace authorization token claims are invalid: "
	msgWrongIssuer     = "Workspace authorization token issuer does not match this server configuration"
	msgWrongAudience   = "Workspace authorization token audience does not match this server"
	msgExpired         = "Workspace authorization token is expired"
	msgIssuedInFuture  = "Workspace authorization token was issued in the future"
	msgNotBefore       = "Workspace authorization token is not valid yet (nbf)"
	msgWrongServer     = "Workspace authorization token server_id does not match this server"
	msgWrongAgentSlug  = "Workspace authorization token agent_slug does not match the request"
	msgWrongAgentID    = "Workspace authorization token agent_id does not match the request"
	msgNotRegistered   = "Workspace authorization requires the Studio agent id from registration, but this agent has not been linked to Studio"
	msgWrongWorkspace  = "Workspace authorization token workspace_id does not match the request"
	msgWrongWSSlug     = "Workspace authorization token workspace_slug does not match the request"
	msgMissingScopePfx = "Workspace authorization token is missing scope(s): "
)

// Start-up refusals of enabled verification without its settings (the reference's words).
const (
	msgNoIssuer    = "Workspace authorization is enabled but issuer is not configured"
	msgNoKeySource = "Workspace authorization is enabled but no public_key_pem or jwks_url is configured"
)

// refuse builds a refusal. Each call gets its own value: nothing shared can be altered by a caller.
func refuse(code Code, msg string) *Error { return &Error{Code: code, Message: msg} }

// clone copies a refusal shared between calls (a cached JWKS outcome), nil staying nil.
func (e *Error) clone() *Error {
	if e == nil {
		return nil
	}
	return refuse(e.Code, e.Message)
}
