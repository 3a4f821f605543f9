package grant

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/supervaize/svz/core/internal/wirejson"
)

// JWKS fetching bounds.
const (
	// DefaultJWKSCooldown is the least time between two fetches that a call can cause: a flood of
	// tokens with unknown kids costs at most one fetch per cooldown.
	DefaultJWKSCooldown = 30 * time.Second
	// DefaultJWKSFetchTimeout bounds one fetch, as the reference's 5 s.
	DefaultJWKSFetchTimeout = 5 * time.Second
	// MaxJWKSBytes bounds the JWKS response body; a key set is a few hundred bytes.
	MaxJWKSBytes = 64 << 10

	jwksDefaultTTL = 5 * time.Minute // without Cache-Control max-age
	jwksMinTTL     = time.Minute     // no-store, no-cache and small max-age
	jwksMaxTTL     = time.Hour       // a removed key must stop working within this time
	// jwksMaxStale is how long a set stays usable while every refresh fails: past it, calls are
	// refused rather than verified with keys Studio may have withdrawn a day ago.
	jwksMaxStale = 24 * time.Hour
	maxRedirects = 3
)

// jwksSource is SUPERVAIZER_WORKSPACE_AUTH_JWKS_URL. Unlike the reference (which refetches on every
// unknown kid and trusts a cached key forever) it keeps the whole key set for the response's
// Cache-Control max-age (bounded), refreshes it ahead of expiry in the background, serves the last
// good set while the endpoint fails, and lets calls cause at most one fetch per cooldown, shared by
// every goroutine that needs it.
type jwksSource struct {
	url      string
	logURL   string // scheme://host/path: what logs may show
	client   *http.Client
	timeout  time.Duration
	cooldown time.Duration
	now      func() time.Time
	log      *slog.Logger

	set atomic.Pointer[keySet] // last good set; nil before the first successful fetch

	mu          sync.Mutex
	running     *jwksFetch // the fetch in flight, joined by whoever needs it
	lastAttempt time.Time  // start of the last fetch; zero when the next one may start at once
	lastErr     *Error     // outcome of the last fetch; nil when it succeeded
}

var _ keySource = (*jwksSource)(nil)

// keySet is one fetched JWKS, immutable once published.
type keySet struct {
	keys      map[string]jwkEntry
	fetched   time.Time
	refreshAt time.Time // from here calls trigger a background refresh
	expires   time.Time // from here calls wait for a refresh (and fall back to this set if it fails)
}

// jwkEntry is the key published under one kid, or why it cannot be used (invalid_jwk): as in the
// reference, a bad key only fails the tokens that name it.
type jwkEntry struct {
	key ed25519.PublicKey
	err *Error
}

type jwksFetch struct {
	done chan struct{}
	err  *Error // set before done is closed
}

func newJWKSSource(rawURL string, o *options) (*jwksSource, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%s is not a valid URL (value not shown: it may hold a credential)", EnvJWKSURL)
	}
	if err := checkJWKSURL(u); err != nil {
		return nil, fmt.Errorf("%s: %w", EnvJWKSURL, err)
	}
	client := &http.Client{}
	if o.client != nil {
		c := *o.client
		client = &c
	}
	client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		return checkJWKSURL(req.URL)
	}
	return &jwksSource{
		url:      u.String(),
		logURL:   (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String(),
		client:   client,
		timeout:  o.fetchTimeout,
		cooldown: o.cooldown,
		now:      o.now,
		log:      o.log,
	}, nil
}

// checkJWKSURL accepts https, and plain http only to a loopback IP address (local tests): keys
// fetched over plain http from elsewhere could be replaced by anyone on the path.
func checkJWKSURL(u *url.URL) error {
	if u.User != nil {
		return errors.New("the JWKS URL must not carry credentials")
	}
	switch u.Scheme {
	case "https":
		if u.Hostname() == "" {
			return errors.New("the JWKS URL has no host")
		}
		return nil
	case "http":
		if ip := net.ParseIP(u.Hostname()); ip != nil && ip.IsLoopback() {
			return nil
		}
		return fmt.Errorf("the JWKS URL must use https (plain http is allowed only for loopback addresses such as 127.0.0.1), got host %q", u.Host)
	default:
		return fmt.Errorf("the JWKS URL must use https, got scheme %q", u.Scheme)
	}
}

// prefetch loads the set at start-up so that the first call does not wait. A failure is logged,
// not fatal (Studio may be briefly unreachable), and does not start the cooldown: the first call
// tries again.
func (s *jwksSource) prefetch(ctx context.Context) {
	if _, err := s.refresh(ctx, s.now(), true); err != nil {
		s.mu.Lock()
		if s.running == nil {
			s.lastAttempt = time.Time{}
		}
		s.mu.Unlock()
	}
}

func (s *jwksSource) key(ctx context.Context, kid string) (ed25519.PublicKey, *Error) {
	if kid == "" {
		return nil, refuse(CodeMissingKID, msgMissingKID)
	}
	now := s.now()
	set := s.usable(now)
	switch {
	case set == nil || !now.Before(set.expires):
		// Nothing usable, or the set outlived its max-age: get a fresh one before answering
		// (joined by concurrent calls; at most once per cooldown). On failure a stale set is
		// still used below.
		s.refresh(ctx, now, true)
		set = s.usable(now)
	case !now.Before(set.refreshAt):
		s.refresh(ctx, now, false) // refresh ahead: this call does not wait
	}
	if set != nil {
		if e, ok := set.keys[kid]; ok {
			return e.key, e.err.clone()
		}
	}
	// Unknown kid: Studio may have rotated its key. Fetch again, at most once per cooldown.
	ran, err := s.refresh(ctx, now, true)
	switch {
	case ran && err != nil:
		return nil, s.untilNextFetch(err, now)
	case ran:
		if set = s.usable(now); set != nil {
			if e, ok := set.keys[kid]; ok {
				return e.key, e.err.clone()
			}
		}
	default:
		s.mu.Lock()
		last := s.lastErr
		s.mu.Unlock()
		if last != nil {
			return nil, s.untilNextFetch(last, now)
		}
	}
	if set == nil {
		return nil, s.untilNextFetch(refuse(CodeJWKSUnavailable, msgJWKSDown), now)
	}
	return nil, refuse(CodeUnknownKID, msgUnknownKID)
}

// untilNextFetch returns a copy of e, the outcome of a failed or cooled-down fetch, that says
// when a call can cause the next fetch when e is jwks_unavailable ("could not be loaded"): the
// cooldown refuses every call until then, and a caller that retries at once (a JWKS server still
// starting) must know to wait. While a fetch is under way (this call gave up waiting for it), the
// next call joins it: nothing to add.
func (s *jwksSource) untilNextFetch(e *Error, now time.Time) *Error {
	s.mu.Lock()
	running, next := s.running != nil, s.lastAttempt.Add(s.cooldown)
	s.mu.Unlock()
	if e.Code != CodeJWKSUnavailable || running {
		return e.clone()
	}
	return refuse(e.Code, jwksDownMessage(next.Sub(now)))
}

// jwksDownMessage is the reference's jwks_unavailable message, followed by when the next fetch can
// be made: in wait, in whole seconds rounded up (at least 1).
func jwksDownMessage(wait time.Duration) string {
	secs := max(1, int64(math.Ceil(wait.Seconds())))
	return msgJWKSDown + "; it is fetched again for a call made in " + strconv.FormatInt(secs, 10) + " s or later: retry then"
}

// usable returns the last good set unless it is older than jwksMaxStale.
func (s *jwksSource) usable(now time.Time) *keySet {
	set := s.set.Load()
	if set == nil || now.Sub(set.fetched) >= jwksMaxStale {
		return nil
	}
	return set
}

// refresh joins the fetch in flight, or starts one unless the previous one started less than a
// cooldown ago. With wait it returns ran=true and the outcome of the fetch it joined or started;
// ran=false means the cooldown held (or wait was false). The fetch is detached from ctx: a call
// that gives up does not abort a fetch other calls are waiting for.
func (s *jwksSource) refresh(ctx context.Context, now time.Time, wait bool) (ran bool, err *Error) {
	s.mu.Lock()
	f := s.running
	if f == nil {
		if !s.lastAttempt.IsZero() && now.Sub(s.lastAttempt) < s.cooldown {
			s.mu.Unlock()
			return false, nil
		}
		f = &jwksFetch{done: make(chan struct{})}
		s.running = f
		s.lastAttempt = now
		go s.fetch(context.WithoutCancel(ctx), f)
	}
	s.mu.Unlock()
	if !wait {
		return false, nil
	}
	select {
	case <-f.done:
		return true, f.err
	case <-ctx.Done():
		return true, refuse(CodeJWKSUnavailable, msgJWKSDown)
	}
}

func (s *jwksSource) fetch(ctx context.Context, f *jwksFetch) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	set, err := s.download(ctx)
	s.mu.Lock()
	if err == nil {
		s.set.Store(set)
	}
	s.lastErr = err
	s.running = nil
	f.err = err
	s.mu.Unlock()
	close(f.done)
}

// download GETs and parses the set. Failures are logged here, once per fetch, not per call.
func (s *jwksSource) download(ctx context.Context) (*keySet, *Error) {
	fail := func(code Code, msg, why string, args ...any) (*keySet, *Error) {
		s.log.WarnContext(ctx, "workspace authorization JWKS not loaded; the last good key set (if any) stays in use",
			append([]any{"url", s.logURL, "code", string(code), "reason", why}, args...)...)
		return nil, refuse(code, msg)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return fail(CodeJWKSUnavailable, msgJWKSDown, "request", "error", err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may carry a query string
		}
		return fail(CodeJWKSUnavailable, msgJWKSDown, "transport", "error", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fail(CodeJWKSUnavailable, msgJWKSDown, "status", "status", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxJWKSBytes+1))
	if err != nil {
		return fail(CodeJWKSUnavailable, msgJWKSDown, "read", "error", err)
	}
	if len(body) > MaxJWKSBytes {
		return fail(CodeJWKSUnavailable, msgJWKSDown, "too large", "limit_bytes", MaxJWKSBytes)
	}
	keys, perr := parseJWKS(body)
	if perr != nil {
		return fail(perr.Code, perr.Message, "payload")
	}
	ttl := jwksTTL(resp.Header)
	fetched := s.now()
	s.log.InfoContext(ctx, "workspace authorization JWKS loaded", "url", s.logURL, "kids", len(keys), "ttl", ttl)
	return &keySet{keys: keys, fetched: fetched, refreshAt: fetched.Add(ttl * 3 / 4), expires: fetched.Add(ttl)}, nil
}

// parseJWKS reads a JWKS as the reference does: not JSON → jwks_unavailable; no "keys" list →
// invalid_jwks; an entry that is not an object → invalid_jwks (the whole set). Entries are indexed
// by kid (the first one wins); each is judged on its own (invalid_jwk only for tokens naming it).
func parseJWKS(body []byte) (map[string]jwkEntry, *Error) {
	if !wirejson.Valid(body) {
		return nil, refuse(CodeJWKSUnavailable, msgJWKSDown)
	}
	if wirejson.Kind(body) != '{' {
		return nil, refuse(CodeInvalidJWKS, msgJWKSNoKeys)
	}
	top, ok := parseObject(body)
	if !ok {
		return nil, refuse(CodeInvalidJWKS, msgJWKSNoKeys)
	}
	list, ok := top.get("keys")
	if !ok || wirejson.Kind(list) != '[' {
		return nil, refuse(CodeInvalidJWKS, msgJWKSNoKeys)
	}
	keys := map[string]jwkEntry{}
	for it := range wirejson.Elements(list) {
		if wirejson.Kind(it) != '{' {
			return nil, refuse(CodeInvalidJWKS, msgJWKSNotObjects)
		}
		m, ok := parseObject(it)
		if !ok {
			return nil, refuse(CodeInvalidJWKS, msgJWKSNotObjects)
		}
		kid, ok := m.str("kid")
		if !ok || kid == "" {
			continue // no token can name it
		}
		if _, seen := keys[kid]; !seen {
			keys[kid] = parseJWK(m)
		}
	}
	return keys, nil
}

// parseJWK accepts only an OKP/Ed25519 public key with a 32-byte x. alg and use are ignored, as in
// the reference: the key is only ever used for Ed25519 whatever it says.
func parseJWK(m *object) jwkEntry {
	kty, _ := m.str("kty")
	crv, _ := m.str("crv")
	if kty != "OKP" || crv != "Ed25519" {
		return jwkEntry{err: refuse(CodeInvalidJWK, msgJWKNotOKP)}
	}
	if _, private := m.get("d"); private {
		return jwkEntry{err: refuse(CodeInvalidJWK, msgJWKPrivate)}
	}
	x, ok := m.str("x")
	if !ok || x == "" {
		return jwkEntry{err: refuse(CodeInvalidJWK, msgJWKNoX)}
	}
	b, err := decodeSegment(x) // padding tolerated: Python encoders often pad
	if err != nil || len(b) != ed25519.PublicKeySize {
		return jwkEntry{err: refuse(CodeInvalidJWK, msgJWKBadX)}
	}
	return jwkEntry{key: ed25519.PublicKey(b)}
}

// jwksTTL is how long a fetched set is fresh: Cache-Control max-age minus Age, no-store/no-cache
// as the minimum, 5 minutes without either, always within [1 min, 1 h].
func jwksTTL(h http.Header) time.Duration {
	const maxSeconds = int64(jwksMaxTTL / time.Second)
	ttl := jwksDefaultTTL
	var maxAge int64 = -1
	noCache := false
	for _, v := range h.Values("Cache-Control") {
		for d := range strings.SplitSeq(v, ",") {
			name, val, _ := strings.Cut(strings.TrimSpace(d), "=")
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "no-store", "no-cache":
				noCache = true
			case "max-age":
				if n, err := strconv.ParseInt(strings.Trim(strings.TrimSpace(val), `"`), 10, 64); err == nil && n >= 0 {
					maxAge = n
				}
			}
		}
	}
	switch {
	case noCache:
		return jwksMinTTL
	case maxAge >= 0:
		if age, err := strconv.ParseInt(strings.TrimSpace(h.Get("Age")), 10, 64); err == nil && age > 0 {
			maxAge -= age
		}
		ttl = time.Duration(min(max(maxAge, 0), maxSeconds)) * time.Second
	}
	return min(max(ttl, jwksMinTTL), jwksMaxTTL)
}
