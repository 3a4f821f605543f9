package awsapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// Container credentials endpoint.
const (
	// containerHost serves AWS_CONTAINER_CREDENTIALS_RELATIVE_URI (ECS, App Runner).
	containerHost = "http://169.254.170.2"
	// refreshWindow: credentials are fetched again this long before they expire (or after half
	// their remaining lifetime, when that is shorter).
	refreshWindow = 5 * time.Minute
	// retryRefreshAfter: after a failed refresh, the still-valid credentials serve this long
	// before the next attempt.
	retryRefreshAfter = 10 * time.Second
	// maxCredentialsAnswer bounds what is read of the endpoint's answer.
	maxCredentialsAnswer = 64 << 10
)

// errNoCredentials starts every "no credentials" message; callers' tests match on it.
const errNoCredentials = "no AWS credentials in the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"

// errNoContainer follows it when no container credentials endpoint is set either.
const errNoContainer = "nor a container credentials endpoint (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI, AWS_CONTAINER_CREDENTIALS_FULL_URI)"

// provider gives the signing credentials of the environment: the static keys of
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (with AWS_SESSION_TOKEN), or those of the container
// credentials endpoint, cached until shortly before they expire and fetched by one caller at a
// time. It is safe for concurrent use.
type provider struct {
	static    *aws.Credentials
	fallback  *fallback // else the caller's Fallback (WithFallback), loaded at first use
	endpoint  string    // the container credentials URL
	variable  string    // the variable that named it, for messages
	token     string    // AWS_CONTAINER_AUTHORIZATION_TOKEN
	tokenFile string    // AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE, read at every fetch (it rotates)
	http      Doer
	now       func() time.Time
	cache     atomic.Pointer[cachedCredentials]
	fetching  chan struct{} // one slot: the caller holding it fetches
}

type cachedCredentials struct {
	creds     aws.Credentials
	refreshAt time.Time // fetch again from then on
	expires   time.Time // zero: they do not expire
}

// newProvider returns the credentials getenv configures (see the package documentation). It
// fails when there are none or their settings are malformed; it makes no call.
func newProvider(getenv func(string) string, s settings) (*provider, error) {
	id, secret := strings.TrimSpace(getenv("AWS_ACCESS_KEY_ID")), strings.TrimSpace(getenv("AWS_SECRET_ACCESS_KEY"))
	switch {
	case id != "" && secret != "":
		c := staticCredentials(id, secret, strings.TrimSpace(getenv("AWS_SESSION_TOKEN")))
		return &provider{static: &c}, nil
	case id != "":
		return nil, errors.New(errNoCredentials + ": AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is empty")
	case secret != "":
		return nil, errors.New(errNoCredentials + ": AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is empty")
	}
	c := &provider{http: s.http, now: s.now, fetching: make(chan struct{}, 1)}
	if rel := strings.TrimSpace(getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")); rel != "" {
		if !strings.HasPrefix(rel, "/") {
			return nil, errors.New("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI must be a path starting with /")
		}
		c.endpoint, c.variable = containerHost+rel, "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"
	} else if full := strings.TrimSpace(getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI")); full != "" {
		if err := checkContainerURL(full); err != nil {
			return nil, err
		}
		c.endpoint, c.variable = full, "AWS_CONTAINER_CREDENTIALS_FULL_URI"
	} else if s.fallback != nil {
		return &provider{fallback: &fallback{load: s.fallback}}, nil
	} else {
		msg := errNoCredentials + " " + errNoContainer
		if getenv("AWS_PROFILE") != "" || getenv("AWS_WEB_IDENTITY_TOKEN_FILE") != "" {
			msg += "; profiles and web identity are not read: export the credentials, e.g. with `aws configure export-credentials --format env`"
		}
		return nil, errors.New(msg)
	}
	c.tokenFile = strings.TrimSpace(getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"))
	if c.tokenFile == "" {
		c.token = strings.TrimSpace(getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN"))
		if err := checkToken(c.token); err != nil {
			return nil, fmt.Errorf("AWS_CONTAINER_AUTHORIZATION_TOKEN: %w", err)
		}
	}
	return c, nil
}

// checkContainerURL accepts what the SDK accepts for AWS_CONTAINER_CREDENTIALS_FULL_URI: https,
// or http to loopback or to the ECS and EKS credentials addresses (never to the network at large,
// where the authorization token could be read).
func checkContainerURL(v string) error {
	u, err := url.Parse(v)
	if err != nil || u.Host == "" {
		return errors.New("AWS_CONTAINER_CREDENTIALS_FULL_URI is not an absolute URL")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if host == "localhost" {
			return nil
		}
		if ip := net.ParseIP(host); ip != nil && (ip.IsLoopback() || ip.Equal(net.IPv4(169, 254, 170, 2)) ||
			ip.Equal(net.IPv4(169, 254, 170, 23)) || ip.Equal(net.ParseIP("fd00:ec2::23"))) {
			return nil
		}
	}
	return fmt.Errorf("AWS_CONTAINER_CREDENTIALS_FULL_URI %q must use https, or http to loopback, 169.254.170.2, 169.254.170.23 or fd00:ec2::23", ShownURL(u.String()))
}

// checkToken refuses a token that would split the Authorization header.
func checkToken(t string) error {
	if strings.ContainsAny(t, "\r\n") {
		return errors.New("the authorization token contains a line break")
	}
	return nil
}

// Retrieve returns credentials valid now. Static ones are returned as they are; container ones
// come from the cache, or are fetched (by one caller at a time; the others wait for it or their
// context). When a refresh fails while the cached credentials are still valid, those are used
// and the refresh is tried again 10 s later.
func (c *provider) Retrieve(ctx context.Context) (aws.Credentials, error) {
	if c.static != nil {
		return *c.static, nil
	}
	if c.fallback != nil {
		return c.fallback.Retrieve(ctx)
	}
	if e := c.cache.Load(); e != nil && c.now().Before(e.refreshAt) {
		return e.creds, nil
	}
	select {
	case c.fetching <- struct{}{}:
	case <-ctx.Done():
		return aws.Credentials{}, fmt.Errorf("wait for the container credentials: %w", ctx.Err())
	}
	defer func() { <-c.fetching }()
	now := c.now()
	prev := c.cache.Load()
	if prev != nil && now.Before(prev.refreshAt) {
		return prev.creds, nil // fetched while this caller waited
	}
	fresh, err := c.fetch(ctx, now)
	if err != nil {
		if prev != nil && (prev.expires.IsZero() || now.Add(retryRefreshAfter).Before(prev.expires)) {
			retry := *prev
			retry.refreshAt = now.Add(retryRefreshAfter)
			c.cache.Store(&retry)
			return prev.creds, nil
		}
		return aws.Credentials{}, err
	}
	c.cache.Store(fresh)
	return fresh.creds, nil
}

// invalidate drops used from the cache after the service called it expired, and reports whether
// fresh credentials may be fetched (not for static ones).
func (c *provider) invalidate(used aws.Credentials) bool {
	if c.static != nil {
		return false
	}
	if c.fallback != nil {
		return c.fallback.invalidate()
	}
	if e := c.cache.Load(); e != nil && e.creds.AccessKeyID == used.AccessKeyID && e.creds.SessionToken == used.SessionToken {
		c.cache.CompareAndSwap(e, nil)
	}
	return true
}

// containerAnswer is the answer of the container credentials endpoint.
type containerAnswer struct {
	AccessKeyID     string `json:"AccessKeyId"`
	SecretAccessKey string `json:"SecretAccessKey"`
	Token           string `json:"Token"`
	Expiration      string `json:"Expiration"`
	AccountID       string `json:"AccountId"`
	// An error answer.
	Code    string `json:"code"`
	Message string `json:"message"`
}

// fetch asks the container credentials endpoint.
func (c *provider) fetch(ctx context.Context, now time.Time) (*cachedCredentials, error) {
	token := c.token
	if c.tokenFile != "" {
		b, err := os.ReadFile(c.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: %w", err)
		}
		token = strings.TrimSpace(string(b))
		if err := checkToken(token); err != nil {
			return nil, fmt.Errorf("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE %s: %w", c.tokenFile, err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.endpoint, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.variable, err)
	}
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, transient{fmt.Errorf("fetch the container credentials: %w", err)}
	}
	defer resp.Body.Close()
	body, err := readBounded(resp.Body, maxCredentialsAnswer)
	if err != nil {
		return nil, transient{fmt.Errorf("fetch the container credentials: read the answer: %w", err)}
	}
	cc, err := parseContainerAnswer(resp.StatusCode, body, now)
	if err != nil {
		err = fmt.Errorf("container credentials endpoint %s: %w", c.variable, redact(err, token))
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
			return nil, transient{err}
		}
		return nil, err
	}
	return cc, nil
}

// parseContainerAnswer decodes an answer of the container credentials endpoint received at now.
// Its errors never show the credentials.
func parseContainerAnswer(status int, body []byte, now time.Time) (*cachedCredentials, error) {
	var a containerAnswer
	jsonErr := json.Unmarshal(body, &a)
	if status != http.StatusOK {
		if jsonErr != nil || a.Code == "" {
			return nil, fmt.Errorf("HTTP %d", status)
		}
		if a.Message == "" {
			return nil, fmt.Errorf("%s (HTTP %d)", a.Code, status)
		}
		return nil, fmt.Errorf("%s: %s (HTTP %d)", a.Code, a.Message, status)
	}
	if jsonErr != nil {
		return nil, errors.New("the answer is not JSON credentials")
	}
	if a.AccessKeyID == "" || a.SecretAccessKey == "" {
		return nil, errors.New("the answer has no AccessKeyId and SecretAccessKey")
	}
	cc := &cachedCredentials{creds: aws.Credentials{
		AccessKeyID: a.AccessKeyID, SecretAccessKey: a.SecretAccessKey, SessionToken: a.Token,
		Source: "container", AccountID: a.AccountID,
	}}
	if a.Expiration == "" {
		cc.refreshAt = now.Add(100 * 365 * 24 * time.Hour)
		return cc, nil
	}
	exp, err := time.Parse(time.RFC3339, a.Expiration)
	if err != nil {
		return nil, fmt.Errorf("the answer's Expiration %q is not an RFC 3339 time", a.Expiration)
	}
	if !exp.After(now) {
		return nil, fmt.Errorf("the credentials expired at %s, before they were received (%s)", exp.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	cc.creds.CanExpire, cc.creds.Expires, cc.expires = true, exp, exp
	cc.refreshAt = exp.Add(-min(refreshWindow, exp.Sub(now)/2))
	return cc, nil
}

// redact removes token from err's message, in case an endpoint echoes it.
func redact(err error, token string) error {
	if token == "" || !strings.Contains(err.Error(), token) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), token, "[token]"))
}

// fallback is a Fallback, loaded at the first Retrieve.
type fallback struct {
	load  Fallback
	mu    sync.Mutex
	creds aws.CredentialsProvider // nil until loaded
}

func (f *fallback) Retrieve(ctx context.Context) (aws.Credentials, error) {
	creds, err := f.provider(ctx)
	if err == nil {
		var v aws.Credentials
		if v, err = creds.Retrieve(ctx); err == nil {
			return v, nil
		}
	}
	return aws.Credentials{}, fmt.Errorf("%s %s, and %w", errNoCredentials, errNoContainer, err)
}

func (f *fallback) provider(ctx context.Context) (aws.CredentialsProvider, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.creds == nil {
		creds, err := f.load(ctx)
		if err != nil {
			return nil, err
		}
		f.creds = creds
	}
	return f.creds, nil
}

// invalidate drops the cached credentials after the service called them expired.
func (f *fallback) invalidate() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cache, ok := f.creds.(interface{ Invalidate() }); ok { // aws.CredentialsCache is one
		cache.Invalidate()
	}
	return true
}
