package grant

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/supervaize/svz/core/contract"
)

// Option tunes the token verifier.
type Option func(*options)

type options struct {
	log          *slog.Logger
	client       *http.Client
	now          func() time.Time
	cooldown     time.Duration
	fetchTimeout time.Duration
	cacheSize    int
}

// WithLogger sets where the verifier logs JWKS fetches (never tokens). Default: slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithHTTPClient sets the client used to fetch the JWKS (its transport, proxy, TLS settings). Its
// redirect policy is replaced: redirects must stay on https (or loopback http), at most 3.
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.client = c } }

// WithClock sets the clock of every time check (exp, iat, JWKS freshness and cooldown).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithJWKSCooldown sets the least time between two JWKS fetches caused by calls (default 30 s).
func WithJWKSCooldown(d time.Duration) Option { return func(o *options) { o.cooldown = d } }

// WithJWKSFetchTimeout bounds one JWKS fetch (default 5 s).
func WithJWKSFetchTimeout(d time.Duration) Option { return func(o *options) { o.fetchTimeout = d } }

// WithTokenCacheSize sets how many verified tokens are remembered (default 1024; 0 turns the
// cache off and every call checks the signature).
func WithTokenCacheSize(n int) Option { return func(o *options) { o.cacheSize = n } }

// verifier checks Studio-signed workspace-grant tokens: steps 2–17 of spec §4.3, in that order.
// All its state (JWKS, verified tokens) lives in the value; it is safe for concurrent use.
type verifier struct {
	issuer         string
	audience       string // expected aud
	serverID       string // expected server_id
	leeway         int64  // seconds
	keys           keySource
	cache          *tokenCache
	now            func() time.Time
	configuredFrom string // "PEM" or "JWKS", for the start-up log
}

var _ Authorizer = (*verifier)(nil)

// AudiencePrefix is the prefix of the default audience, "supervaizer-server:<server id>".
const AudiencePrefix = "supervaizer-server:"

// NewVerifier returns the token verifier of settings s for the controller whose
// SUPERVAIZER_SERVER_ID is serverID. Every setting is checked here, before anything is served: an
// issuer and a key source are required, a PEM key must be an Ed25519 SubjectPublicKeyInfo, a
// JWKS URL must be https (plain http only to loopback), the leeway must be within [0, 10 min].
// With a JWKS URL the key set is fetched once now; a failure is logged and retried by the first
// call (Studio may be briefly unreachable), it does not stop the start.
//
// The expected audience is s.Audience, or "supervaizer-server:<serverID>"; the expected server_id
// is the suffix of an audience of that form, else serverID (spec §4.3 step 12).
func NewVerifier(ctx context.Context, s Settings, serverID string, opts ...Option) (Authorizer, error) {
	o := options{
		log:          slog.Default(),
		now:          time.Now,
		cooldown:     DefaultJWKSCooldown,
		fetchTimeout: DefaultJWKSFetchTimeout,
		cacheSize:    DefaultTokenCacheSize,
	}
	for _, opt := range opts {
		opt(&o)
	}
	var errs []error
	if s.Issuer == "" {
		errs = append(errs, fmt.Errorf("%s (set %s)", msgNoIssuer, EnvIssuer))
	}
	if !s.HasKeySource() {
		errs = append(errs, fmt.Errorf("%s (set %s or %s)", msgNoKeySource, EnvPublicKey, EnvJWKSURL))
	}
	if s.Leeway < 0 || s.Leeway > MaxLeeway || s.Leeway%time.Second != 0 {
		errs = append(errs, fmt.Errorf("%s must be a whole number of seconds between 0 and %d, got %s", EnvLeeway, int(MaxLeeway/time.Second), s.Leeway))
	}
	audience := s.Audience
	if audience == "" {
		audience = AudiencePrefix + serverID
	}
	expectedServer := serverID
	if suffix, ok := strings.CutPrefix(audience, AudiencePrefix); ok {
		expectedServer = suffix
	}
	if expectedServer == "" {
		errs = append(errs, fmt.Errorf("workspace authorization needs this server's id to check tokens: set SUPERVAIZER_SERVER_ID, or %s to %s<server id>", EnvAudience, AudiencePrefix))
	}
	if o.log == nil || o.now == nil || o.cooldown < 0 || o.fetchTimeout <= 0 || o.cacheSize < 0 {
		errs = append(errs, errors.New("grant: invalid verifier option (nil logger or clock, negative cooldown or cache size, non-positive fetch timeout)"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	v := &verifier{
		issuer:   s.Issuer,
		audience: audience,
		serverID: expectedServer,
		leeway:   int64(s.Leeway / time.Second),
		cache:    newTokenCache(o.cacheSize),
		now:      o.now,
	}
	if s.PublicKeyPEM != "" {
		k, err := parsePublicKeyPEM(s.PublicKeyPEM)
		if err != nil {
			return nil, err
		}
		v.keys, v.configuredFrom = staticKey(k), "PEM"
		if s.JWKSURL != "" {
			o.log.WarnContext(ctx, "workspace authorization: both a public key and a JWKS URL are set; the public key is used and the JWKS URL ignored",
				"public_key_env", EnvPublicKey, "jwks_url_env", EnvJWKSURL)
		}
	} else {
		src, err := newJWKSSource(s.JWKSURL, &o)
		if err != nil {
			return nil, err
		}
		src.prefetch(ctx)
		v.keys, v.configuredFrom = src, "JWKS"
	}
	o.log.InfoContext(ctx, "workspace authorization: verifying EdDSA tokens", "keys_from", v.configuredFrom,
		"issuer", v.issuer, "audience", v.audience, "server_id", v.serverID, "leeway_seconds", v.leeway)
	return v, nil
}

// Authorize verifies call.Token for call (spec §4.3 steps 2–17) and returns the verified context
// handlers receive: the token's grant, workspace, agent, server and all of its scopes.
//
// A token already verified (same bytes, SHA-256) skips parsing and the signature check while the
// key source still yields its key; every other check runs on every call, in order.
func (v *verifier) Authorize(ctx context.Context, call Call) (*contract.VerifiedWorkspaceContext, error) {
	tok := extractToken(call.Token)
	if tok == "" { // step 2
		return nil, refuse(CodeMissing, MsgMissing)
	}
	now := v.now().Unix()
	c, err := v.verify(ctx, tok, now)
	if err != nil {
		return nil, err
	}
	return v.authorize(c, call)
}

// verify runs steps 3–12: everything that depends on the token and this server only.
func (v *verifier) verify(ctx context.Context, tok string, now int64) (*claims, *Error) {
	if len(tok) > MaxTokenBytes { // before hashing a megabyte
		return nil, refuse(CodeMalformed, msgMalformed)
	}
	var k tokenKey
	if v.cache != nil {
		k = hashToken(tok)
		if e := v.cache.get(&k, now); e != nil {
			if key, err := v.keys.key(ctx, e.kid); err == nil && key.Equal(e.key) {
				return e.claims, v.checkToken(e.claims, now)
			}
			// The key was withdrawn or replaced: verify from scratch (and answer why it fails).
		}
	}
	t, perr := parseToken(tok) // step 3
	if perr != nil {
		return nil, perr
	}
	if alg, ok := t.header.str("alg"); !ok || alg != "EdDSA" { // step 4: nothing else, ever
		return nil, refuse(CodeUnsupportedAlg, msgUnsupportedAlg)
	}
	kid, _ := t.header.str("kid")
	key, kerr := v.keys.key(ctx, kid) // step 5
	if kerr != nil {
		return nil, kerr
	}
	if !ed25519.Verify(key, []byte(t.signed), t.signature) { // step 6 (false for a signature that is not 64 bytes)
		return nil, refuse(CodeBadSignature, msgBadSignature)
	}
	c, cerr := parseClaims(t.claims) // step 7
	if cerr != nil {
		return nil, cerr
	}
	if err := v.checkToken(c, now); err != nil { // steps 8–12
		return nil, err
	}
	if v.cache != nil {
		v.cache.put(&k, &verifiedToken{claims: c, kid: kid, key: key, until: satAdd(c.exp, v.leeway)})
	}
	return c, nil
}

// checkToken runs steps 8–12: issuer, audience, expiry, issue time, server.
func (v *verifier) checkToken(c *claims, now int64) *Error {
	if c.iss != v.issuer { // 8
		return refuse(CodeWrongIssuer, msgWrongIssuer)
	}
	if !slices.Contains(c.aud, v.audience) { // 9
		return refuse(CodeWrongAudience, msgWrongAudience)
	}
	if c.exp < now-v.leeway { // 10: exp + leeway < now, written so that it cannot overflow
		return refuse(CodeExpired, msgExpired)
	}
	if c.hasIat && c.iat > now+v.leeway { // 11
		return refuse(CodeNotYetValid, msgIssuedInFuture)
	}
	if c.hasNbf && c.nbf > now+v.leeway { // 11, nbf: not checked by the reference, honoured here
		return refuse(CodeNotYetValid, msgNotBefore)
	}
	if c.serverID != v.serverID { // 12
		return refuse(CodeWrongServer, msgWrongServer)
	}
	return nil
}

// authorize runs steps 13–17 against the request and builds the handler's context. The context is
// a fresh copy on every call: a handler that alters it cannot alter a cached token.
func (v *verifier) authorize(c *claims, call Call) (*contract.VerifiedWorkspaceContext, error) {
	if call.Agent == nil { // 13
		return nil, UnknownAgent(call.AgentSlug)
	}
	if c.agentSlug != call.AgentSlug { // 14
		return nil, refuse(CodeWrongAgent, msgWrongAgentSlug)
	}
	if call.Agent.StudioID == "" { // 15
		return nil, refuse(CodeAgentNotRegistered, msgNotRegistered)
	}
	if c.agentID != call.Agent.StudioID {
		return nil, refuse(CodeWrongAgent, msgWrongAgentID)
	}
	if c.workspaceID != call.Workspace.ID { // 16
		return nil, refuse(CodeWrongWorkspace, msgWrongWorkspace)
	}
	if s := call.Workspace.Slug; s != nil && *s != "" && c.workspaceSlug != "" && c.workspaceSlug != *s {
		return nil, refuse(CodeWrongWorkspace, msgWrongWSSlug)
	}
	var missing []string
	for _, want := range call.RequiredScopes() { // 17
		if !slices.Contains(c.scopes, want) {
			missing = append(missing, want)
		}
	}
	if len(missing) > 0 {
		return nil, refuse(CodeMissingScope, msgMissingScopePfx+strings.Join(missing, ", "))
	}
	// One allocation for the context, the strings its pointers name and (usually) its scopes.
	blk := &struct {
		ctx       contract.VerifiedWorkspaceContext
		slug, ref string
		scopes    [4]string
	}{slug: c.workspaceSlug, ref: c.agentWorkspaceRef}
	blk.ctx = contract.VerifiedWorkspaceContext{
		GrantID:     c.grantID,
		WorkspaceID: c.workspaceID,
		AgentID:     c.agentID,
		AgentSlug:   c.agentSlug,
		ServerID:    c.serverID,
		Scopes:      append(blk.scopes[:0:len(blk.scopes)], c.scopes...),
	}
	if c.hasWorkspaceSlug {
		blk.ctx.WorkspaceSlug = &blk.slug
	}
	if c.hasAgentWSRef {
		blk.ctx.AgentWorkspaceRef = &blk.ref
	}
	return &blk.ctx, nil
}

// hashToken is the SHA-256 of tok without copying it to the heap (tokens up to 4 KiB, that is
// every token Studio sends, are hashed from a stack buffer).
func hashToken(tok string) tokenKey {
	var buf [4 << 10]byte
	if len(tok) <= len(buf) {
		b := buf[:len(tok)]
		copy(b, tok)
		return sha256.Sum256(b)
	}
	return sha256.Sum256([]byte(tok))
}

// satAdd adds without wrapping past the int64 range.
func satAdd(a, b int64) int64 {
	if b > 0 && a > (1<<63-1)-b {
		return 1<<63 - 1
	}
	return a + b
}
