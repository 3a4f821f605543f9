package grant

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/supervaize/svz/core/internal/wirejson"
)

// Google's OIDC ID tokens: what a platform queue sends to the controller it pushes to (Cloud
// Tasks' oidcToken of a service account). The verifier lives here, beside the workspace-grant
// verifier, to share its strict compact-JWS parser and its JWKS cache rules; it is RS256 over
// crypto/rsa, no GCP client.
const (
	// GoogleJWKSURL publishes the keys Google signs ID tokens with.
	GoogleJWKSURL = "https://www.googleapis.com/oauth2/v3/certs"
	// GoogleIssuer is the iss of Google's ID tokens; accounts.google.com (without the scheme) is
	// the same issuer in older tokens, accepted too.
	GoogleIssuer = "https://accounts.google.com"
	// DefaultOIDCLeeway is the clock skew allowed on exp, iat and nbf.
	DefaultOIDCLeeway = 30 * time.Second
	// minRSABits refuses keys too short to trust (Google's are 2048 bits).
	minRSABits = 2048
)

// OIDCError is why an ID token was refused. Its Reason never contains the token.
type OIDCError struct{ Reason string }

func (e *OIDCError) Error() string { return "oidc: " + e.Reason }

func oidcRefuse(reason string) *OIDCError { return &OIDCError{Reason: reason} }

// OIDCConfig configures an OIDCVerifier.
type OIDCConfig struct {
	// Audience is the aud the token must carry (the URL the queue pushes to); required.
	Audience string
	// Email is the service account the token must be issued for (email, with email_verified);
	// required.
	Email string
	// JWKSURL is where the keys are fetched (GoogleJWKSURL by default): https, or plain http to a
	// loopback address (tests).
	JWKSURL string
	// Client fetches the keys (a default client otherwise).
	Client *http.Client
	// Now is the clock (time.Now otherwise).
	Now func() time.Time
	// Leeway is the clock skew allowed (DefaultOIDCLeeway when zero).
	Leeway time.Duration
	// Cooldown is the least time between two fetches a token with an unknown kid can cause
	// (DefaultJWKSCooldown when zero).
	Cooldown time.Duration
	Log      *slog.Logger
}

// OIDCVerifier verifies Google-signed OIDC ID tokens for one audience and one service account.
// The keys are fetched on first use and kept for the response's Cache-Control max-age (bounded
// as for the workspace-grant JWKS: 1 min to 1 h); a stale set, or a token naming an unknown kid,
// refetches them, at most once per cooldown (a flood of bad tokens costs one fetch per cooldown);
// while refreshes fail, the last set stays usable for a day.
type OIDCVerifier struct {
	cfg    OIDCConfig
	url    string
	logURL string
	client *http.Client

	mu      sync.Mutex // held across a fetch: callers that need the keys wait for it
	keys    map[string]*rsa.PublicKey
	fetched time.Time
	expires time.Time
	tried   time.Time // the last fetch attempt, for the cooldown
	lastErr error     // why the last fetch failed; nil when it succeeded
}

// NewOIDCVerifier checks cfg and returns a verifier; nothing is fetched yet.
func NewOIDCVerifier(cfg OIDCConfig) (*OIDCVerifier, error) {
	if cfg.Audience == "" || cfg.Email == "" {
		return nil, errors.New("oidc: the verifier needs an audience and a service account email")
	}
	if cfg.JWKSURL == "" {
		cfg.JWKSURL = GoogleJWKSURL
	}
	u, err := url.Parse(cfg.JWKSURL)
	if err != nil {
		return nil, errors.New("oidc: the JWKS URL is not a valid URL")
	}
	if err := checkJWKSURL(u); err != nil {
		return nil, fmt.Errorf("oidc: %w", err)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Leeway <= 0 {
		cfg.Leeway = DefaultOIDCLeeway
	}
	if cfg.Cooldown <= 0 {
		cfg.Cooldown = DefaultJWKSCooldown
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	client := &http.Client{Timeout: DefaultJWKSFetchTimeout}
	if cfg.Client != nil {
		c := *cfg.Client
		client = &c
	}
	client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		return checkJWKSURL(req.URL)
	}
	return &OIDCVerifier{cfg: cfg, url: u.String(), logURL: (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String(), client: client}, nil
}

// VerifyAuthorization verifies the token of an Authorization header ("Bearer <token>").
func (v *OIDCVerifier) VerifyAuthorization(ctx context.Context, header string) error {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") { // the header is trimmed: a token follows the space
		return oidcRefuse("no bearer token")
	}
	return v.Verify(ctx, strings.TrimSpace(tok))
}

// Verify verifies a compact ID token: RS256 only, a key of Google's set, Google's issuer, the
// audience, exp/iat/nbf within the leeway, the service account's email, verified. A nil error
// means the token is good; an *OIDCError says why not (any other error: the keys could not be
// loaded).
func (v *OIDCVerifier) Verify(ctx context.Context, tok string) error {
	t, perr := parseToken(tok)
	if perr != nil {
		return oidcRefuse("malformed token")
	}
	if alg, _ := t.header.str("alg"); alg != "RS256" { // never none, never HS256
		return oidcRefuse("the token must be signed with RS256")
	}
	kid, _ := t.header.str("kid")
	if kid == "" {
		return oidcRefuse("the token header has no kid")
	}
	key, err := v.key(ctx, kid)
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(t.signed))
	if rsa.VerifyPKCS1v15(key, crypto.SHA256, sum[:], t.signature) != nil {
		return oidcRefuse("bad signature")
	}
	return v.checkClaims(t.claims)
}

func (v *OIDCVerifier) checkClaims(c *object) error {
	iss, _ := c.str("iss")
	if iss != GoogleIssuer && iss != strings.TrimPrefix(GoogleIssuer, "https://") {
		return oidcRefuse("foreign issuer")
	}
	raw, ok := c.get("aud")
	var aud []string
	switch {
	case !ok:
	case wirejson.Kind(raw) == '"':
		s, _ := c.String(raw)
		aud = []string{s}
	default:
		aud, _ = stringList(c, raw)
	}
	if len(aud) != 1 || aud[0] != v.cfg.Audience { // Google's ID tokens have one audience
		return oidcRefuse("foreign audience")
	}
	now := v.cfg.Now().Unix()
	leeway := int64(v.cfg.Leeway / time.Second)
	exp, okExp := numberClaim(c, "exp")
	iat, okIat := numberClaim(c, "iat")
	if !okExp || !okIat {
		return oidcRefuse("exp and iat are required numbers")
	}
	if exp < now-leeway {
		return oidcRefuse("expired")
	}
	if iat > now+leeway {
		return oidcRefuse("issued in the future")
	}
	if _, has := c.get("nbf"); has {
		nbf, ok := numberClaim(c, "nbf")
		if !ok || nbf > now+leeway {
			return oidcRefuse("not valid yet (nbf)")
		}
	}
	if email, _ := c.str("email"); email != v.cfg.Email {
		return oidcRefuse("issued for another account")
	}
	if ev, _ := c.get("email_verified"); string(ev) != "true" { // absent: not verified
		return oidcRefuse("email not verified")
	}
	return nil
}

func numberClaim(c *object, name string) (int64, bool) {
	raw, _ := c.get(name) // absent: not a number
	return jsonInt(raw)
}

// key returns the key published under kid, fetching the set when it is missing, stale, or
// lacks kid (at most once per cooldown for an unknown kid).
func (v *OIDCVerifier) key(ctx context.Context, kid string) (*rsa.PublicKey, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.cfg.Now()
	if k, ok := v.keys[kid]; ok && now.Before(v.expires) {
		return k, nil
	}
	if now.Sub(v.tried) >= v.cfg.Cooldown { // never tried: the zero time, long past
		v.tried = now
		keys, ttl, err := v.download(ctx)
		if err == nil {
			v.keys, v.fetched, v.expires, v.lastErr = keys, now, now.Add(ttl), nil
		} else {
			v.lastErr = err
			v.cfg.Log.WarnContext(ctx, "OIDC JWKS not loaded; the last key set (if any) stays in use", "url", v.logURL, "error", err)
		}
	}
	if now.Sub(v.fetched) >= jwksMaxStale { // never fetched: the zero time, long past
		return nil, fmt.Errorf("oidc: the keys could not be loaded from %s: %w", v.logURL, v.lastErr)
	}
	if k, ok := v.keys[kid]; ok {
		return k, nil
	}
	return nil, oidcRefuse("no key matches the token's kid")
}

func (v *OIDCVerifier) download(ctx context.Context) (map[string]*rsa.PublicKey, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, DefaultJWKSFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.url, nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := v.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxJWKSBytes+1))
	if err != nil {
		return nil, 0, err
	}
	if len(body) > MaxJWKSBytes {
		return nil, 0, fmt.Errorf("the key set is larger than %d bytes", MaxJWKSBytes)
	}
	keys, err := parseRSAJWKS(body)
	if err != nil {
		return nil, 0, err
	}
	return keys, jwksTTL(resp.Header), nil
}

// parseRSAJWKS reads the RSA signing keys of a JWKS by kid; other entries are skipped (they can
// verify nothing here), a malformed set is an error.
func parseRSAJWKS(body []byte) (map[string]*rsa.PublicKey, error) {
	if !wirejson.Valid(body) || wirejson.Kind(body) != '{' {
		return nil, errors.New("the key set is not a JSON object")
	}
	top, ok := parseObject(body)
	if !ok {
		return nil, errors.New("the key set has duplicate members")
	}
	list, _ := top.get("keys")
	if wirejson.Kind(list) != '[' { // absent: no kind
		return nil, errors.New("the key set has no keys list")
	}
	keys := map[string]*rsa.PublicKey{}
	for it := range wirejson.Elements(list) {
		if wirejson.Kind(it) != '{' {
			return nil, errors.New("a key is not a JSON object")
		}
		m, ok := parseObject(it)
		if !ok {
			return nil, errors.New("a key has duplicate members")
		}
		kid, _ := m.str("kid")
		if _, seen := keys[kid]; seen || kid == "" {
			continue
		}
		if k := rsaJWK(m); k != nil {
			keys[kid] = k
		}
	}
	return keys, nil
}

// rsaJWK is the RSA public key of a JWK meant for RS256 signatures, nil otherwise.
func rsaJWK(m *object) *rsa.PublicKey {
	kty, _ := m.str("kty")
	if kty != "RSA" {
		return nil
	}
	if alg, ok := m.str("alg"); ok && alg != "RS256" {
		return nil
	}
	if use, ok := m.str("use"); ok && use != "sig" {
		return nil
	}
	if _, private := m.get("d"); private {
		return nil
	}
	ns, _ := m.str("n")
	es, _ := m.str("e")
	nb, err1 := decodeSegment(ns)
	eb, err2 := decodeSegment(es)
	if err1 != nil || err2 != nil || len(eb) > 4 { // no byte: 0, refused below
		return nil
	}
	n := new(big.Int).SetBytes(nb)
	e := new(big.Int).SetBytes(eb).Int64()
	if n.BitLen() < minRSABits || e < 3 || e%2 == 0 || e > 1<<31-1 {
		return nil
	}
	return &rsa.PublicKey{N: n, E: int(e)}
}
