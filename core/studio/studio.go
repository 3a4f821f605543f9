// Package studio is the controller's client of Supervaize Studio's HTTP API, the one place where
// a controller calls Studio: the server.register handshake that links the controller and its
// agents to a workspace (spec §7), the agent lookup that brings the parameters the operator
// configured, encrypted to the controller's RSA key (§7.4, §7.5), the context API behind
// context.assign (§14) and the rule-checkpoint call (§6.3).
//
// Promises: Studio is reached only at the configured SUPERVAIZE_API_URL, never at a URL taken from
// a request; every call has a timeout and is retried only when the connection could not be made
// (nothing was sent); errors name the step and the HTTP status and never contain a key or token
// (fingerprints only); a controller in local mode never builds a client. The package links only
// net/http and the standard crypto packages, so serverless bootstraps stay small.
package studio

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"

	"github.com/supervaize/svz/core/telemetry"
	"github.com/supervaize/svz/internal/envvar"
	"github.com/supervaize/svz/internal/redact"
)

// Environment variables of the Studio connection. SUPERVAIZE_* are the reference's names.
const (
	EnvAPIURL      = "SUPERVAIZE_API_URL"
	EnvWorkspaceID = "SUPERVAIZE_WORKSPACE_ID"
	EnvAPIKey      = "SUPERVAIZE_API_KEY"
	EnvMaxRetries  = "SUPERVAIZE_HTTP_MAX_RETRIES"
	EnvTimeout     = "SUPERVAIZER_STUDIO_TIMEOUT"
)

// Defaults and bounds of the settings.
const (
	DefaultAPIURL     = "https://app.supervaize.com"
	DefaultTimeout    = 10 * time.Second
	DefaultMaxRetries = 2
	maxRetries        = 10
	// maxResponseBytes bounds what is read of an answer: parameters and context items are small.
	maxResponseBytes = 8 << 20
)

// Settings are the controller's Studio account (the reference's Account) and how it is called.
type Settings struct {
	// APIURL is Studio's API origin, without a trailing slash (SUPERVAIZE_API_URL).
	APIURL string
	// WorkspaceID is the workspace slug shown in Studio under Developer → Environment variables
	// (SUPERVAIZE_WORKSPACE_ID).
	WorkspaceID string
	// APIKey authenticates the controller to Studio (SUPERVAIZE_API_KEY).
	APIKey string
	// Timeout bounds each attempt of a call (SUPERVAIZER_STUDIO_TIMEOUT, 10 s).
	Timeout time.Duration
	// MaxRetries is how many times a call whose connection failed is retried
	// (SUPERVAIZE_HTTP_MAX_RETRIES, 2).
	MaxRetries int
}

// SettingsFromEnv reads the Studio settings. connected is false when SUPERVAIZE_API_KEY is unset
// (the controller is not connected to Studio; the account's other settings are then not checked,
// the timeout and retries are). Values
// are trimmed, as the reference does. Every bad value is reported, naming its variable.
func SettingsFromEnv(getenv func(string) string) (s Settings, connected bool, err error) {
	s = Settings{
		APIURL:      strings.TrimRight(strings.TrimSpace(getenv(EnvAPIURL)), "/"),
		WorkspaceID: strings.TrimSpace(getenv(EnvWorkspaceID)),
		APIKey:      strings.TrimSpace(getenv(EnvAPIKey)),
	}
	var errs []error
	s.Timeout, s.MaxRetries, errs = tuningFromEnv(getenv)
	if s.APIKey == "" {
		return Settings{}, false, errors.Join(errs...)
	}
	if s.APIURL == "" {
		s.APIURL = DefaultAPIURL
	}
	errs = append(errs, s.Validate())
	if err := errors.Join(errs...); err != nil {
		return Settings{}, true, err
	}
	return s, true, nil
}

// CheckTuning parses SUPERVAIZER_STUDIO_TIMEOUT and SUPERVAIZE_HTTP_MAX_RETRIES, strictly, whether
// or not the controller is connected to Studio (a misspelt setting is never silently ignored).
func CheckTuning(getenv func(string) string) error {
	_, _, errs := tuningFromEnv(getenv)
	return errors.Join(errs...)
}

func tuningFromEnv(getenv func(string) string) (time.Duration, int, []error) {
	t, terr := envvar.Duration(getenv, EnvTimeout, DefaultTimeout, 100*time.Millisecond, 5*time.Minute)
	n, nerr := envvar.Int(getenv, EnvMaxRetries, DefaultMaxRetries, 0, maxRetries)
	return t, int(n), []error{terr, nerr}
}

// Validate reports every reason s cannot be used, naming the variables.
func (s Settings) Validate() error {
	var errs []error
	if s.APIKey == "" {
		errs = append(errs, fmt.Errorf("%s is required to reach Studio", EnvAPIKey))
	}
	if err := checkAPIURL(s.APIURL); err != nil {
		errs = append(errs, err)
	}
	switch {
	case s.WorkspaceID == "":
		errs = append(errs, fmt.Errorf("%s is required with %s: the workspace slug shown in Studio under Developer → Environment variables", EnvWorkspaceID, EnvAPIKey))
	case strings.ContainsAny(s.WorkspaceID, "/?#%") || strings.IndexFunc(s.WorkspaceID, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		errs = append(errs, fmt.Errorf("%s=%q: must be the workspace slug (no spaces or /?#%%)", EnvWorkspaceID, s.WorkspaceID))
	}
	if s.Timeout < 0 || s.MaxRetries < 0 || s.MaxRetries > maxRetries {
		errs = append(errs, fmt.Errorf("studio: timeout must not be negative and retries must be from 0 to %d", maxRetries))
	}
	return errors.Join(errs...)
}

// checkAPIURL accepts an https origin, or http to a loopback address (a local Studio stand-in):
// the Studio key travels in every request.
func checkAPIURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/") {
		return fmt.Errorf("%s=%q: must be Studio's origin, e.g. %s (scheme and host, no path, query or credentials)", EnvAPIURL, redact.URL(raw), DefaultAPIURL)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if ip := net.ParseIP(u.Hostname()); ip != nil && ip.IsLoopback() {
			return nil
		}
	}
	return fmt.Errorf("%s=%q: must use https (plain http only to a loopback IP such as 127.0.0.1, for a local stand-in)", EnvAPIURL, redact.URL(raw))
}

// Error is a failed Studio call. It names the step, the endpoint (masked) and the HTTP status
// (0 when Studio did not answer), and never holds a key or token.
type Error struct {
	Step   string // e.g. "server.register", "agent lookup"
	Method string
	URL    string // masked
	Status int
	// Hint says what usually causes the failure and how to fix it.
	Hint string
	Err  error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("studio: " + e.Step)
	if e.URL != "" {
		b.WriteString(" (" + e.Method + " " + e.URL + ")")
	}
	if e.Status != 0 {
		fmt.Fprintf(&b, ": HTTP %d %s", e.Status, http.StatusText(e.Status))
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	if e.Hint != "" {
		b.WriteString(" — " + e.Hint)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Client calls Studio. It is safe for concurrent use.
type Client struct {
	s    Settings
	http *http.Client
	log  *slog.Logger
	// secrets are scrubbed from anything Studio sends back before it reaches an error.
	secrets []string
	tel     *callTelemetry
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sends requests through hc (its Timeout and redirect policy are replaced).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithLogger logs calls (step, endpoint, status, duration; never headers or bodies) to log.
func WithLogger(log *slog.Logger) Option { return func(c *Client) { c.log = log } }

// WithTelemetry records a client span and a duration per call (trace.go) and sends the call's
// trace context to Studio (traceparent).
func WithTelemetry(p telemetry.Providers) Option {
	return func(c *Client) { c.tel = newCallTelemetry(p) }
}

// New returns a client for s.
func New(s Settings, opts ...Option) (*Client, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if s.Timeout == 0 {
		s.Timeout = DefaultTimeout
	}
	c := &Client{s: s}
	for _, o := range opts {
		o(c)
	}
	base := c.http
	if base == nil {
		base = &http.Client{}
	}
	hc := *base
	hc.Timeout = 0 // each attempt gets its own context deadline
	hc.CheckRedirect = sameOriginGET(s.APIURL)
	c.http = &hc
	if c.log == nil {
		c.log = slog.Default()
	}
	c.secrets = []string{s.APIKey}
	if c.tel == nil {
		c.tel = newCallTelemetry(telemetry.Providers{})
	}
	return c, nil
}

// Settings returns the client's settings.
func (c *Client) Settings() Settings { return c.s }

// sameOriginGET follows a redirect only for a GET and only on Studio's own origin: the key must
// never reach another host, and a POST is never replayed.
func sameOriginGET(apiURL string) func(*http.Request, []*http.Request) error {
	origin, _ := url.Parse(apiURL)
	return func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 || req.Method != http.MethodGet || origin == nil || req.URL.Scheme != origin.Scheme || req.URL.Host != origin.Host {
			return http.ErrUseLastResponse
		}
		return nil
	}
}

// workspaceURL is {api_url}/w/{workspace}/api/v1/{path}.
func (c *Client) workspaceURL(path string) string {
	return c.s.APIURL + "/w/" + url.PathEscape(c.s.WorkspaceID) + "/api/v1/" + path
}

// call is one request to Studio.
type call struct {
	step    string
	method  string
	url     string
	body    any               // JSON-encoded when not nil
	headers map[string]string // extra headers (never logged)
	secrets []string          // more values to keep out of errors
	hints   map[int]string    // per-status explanations
}

// fail is the *Error of the call.
func (k call) fail(status int, err error) *Error {
	return &Error{Step: k.step, Method: k.method, URL: redact.URL(k.url), Status: status, Err: err}
}

// response is a successful (2xx) answer.
type response struct {
	status int
	body   []byte
}

// do sends the call with the account's headers, retrying only when the connection could not be
// made, and returns a 2xx answer or an *Error.
func (c *Client) do(ctx context.Context, k call) (*response, error) {
	fail := func(status int, err error) error {
		e := k.fail(status, err)
		if status != 0 {
			e.Hint = k.hints[status]
		}
		return e
	}
	var payload []byte
	if k.body != nil {
		b, err := json.Marshal(k.body)
		if err != nil {
			return nil, fail(0, fmt.Errorf("encode the request: %w", err))
		}
		payload = b
	}
	secrets := append(append([]string(nil), c.secrets...), k.secrets...)
	start := time.Now()
	ctx, span := c.tel.start(ctx, k)
	var status, attempts int
	defer func() { span.end(status, attempts, start) }()
	for attempt := 0; ; attempt++ {
		resp, err := c.attempt(ctx, k, payload)
		attempts = attempt + 1
		if err == nil {
			status = resp.status
			c.log.DebugContext(ctx, "studio call", "step", k.step, "method", k.method, "url", redact.URL(k.url),
				"status", resp.status, "attempts", attempt+1, "duration", time.Since(start))
			if resp.status < 200 || resp.status > 299 {
				return nil, fail(resp.status, studioDetail(resp.body, secrets))
			}
			return resp, nil
		}
		if attempt >= c.s.MaxRetries || !connectFailed(err) || ctx.Err() != nil {
			c.log.WarnContext(ctx, "studio call failed", "step", k.step, "method", k.method, "url", redact.URL(k.url),
				"attempts", attempt+1, "error", scrub(err.Error(), secrets))
			cause := unwrapURLError(err)
			if msg := cause.Error(); scrub(msg, secrets) != msg {
				cause = errors.New(scrub(msg, secrets))
			}
			return nil, fail(0, cause)
		}
		// A short pause: the retry is for a Studio that restarts or a connection that flapped.
		t := time.NewTimer(time.Duration(attempt+1) * 200 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fail(0, ctx.Err())
		case <-t.C:
		}
	}
}

// attempt sends one request under the per-attempt timeout and reads the answer.
func (c *Client) attempt(ctx context.Context, k call, payload []byte) (*response, error) {
	ctx, cancel := context.WithTimeout(ctx, c.s.Timeout)
	defer cancel()
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, k.method, k.url, body)
	if err != nil {
		return nil, err
	}
	c.tel.inject(ctx, req.Header)
	req.Header.Set("Authorization", "Api-Key "+c.s.APIKey)
	req.Header.Set("accept", "application/json")
	req.Header.Set("workspace", c.s.WorkspaceID)
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for h, v := range k.headers {
		req.Header.Set(h, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
			return nil, fmt.Errorf("no answer within %s (%s)", c.s.Timeout, EnvTimeout)
		}
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("no complete answer within %s (%s)", c.s.Timeout, EnvTimeout)
		}
		return nil, fmt.Errorf("read the answer: %w", err)
	}
	if len(b) > maxResponseBytes {
		return nil, fmt.Errorf("the answer is larger than %d bytes", maxResponseBytes)
	}
	return &response{status: resp.StatusCode, body: b}, nil
}

// connectFailed reports whether err happened before anything was sent: the request can be
// retried safely, even a POST.
func connectFailed(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// unwrapURLError drops net/http's `Post "url": ` prefix: the masked URL is already in the Error.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// studioDetail is what a failed answer says, when it is a short JSON detail; never the raw body.
func studioDetail(body []byte, secrets []string) error {
	var v struct {
		Detail any `json:"detail"`
		Error  any `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil {
		return nil
	}
	d := v.Detail
	if d == nil {
		d = v.Error
	}
	s, ok := d.(string)
	if !ok || s == "" {
		return nil
	}
	return fmt.Errorf("the answer says %q", printable(scrub(s, secrets), 200))
}

// scrub replaces every occurrence of the secrets in s.
func scrub(s string, secrets []string) string {
	for _, sec := range secrets {
		if len(sec) >= 4 {
			s = strings.ReplaceAll(s, sec, redact.Mask)
		}
	}
	return s
}

// printable keeps at most n runes of s, without control characters (they could forge log lines).
func printable(s string, n int) string {
	var b strings.Builder
	count := 0
	for _, r := range s {
		if count == n {
			b.WriteString("…")
			break
		}
		if unicode.IsControl(r) {
			r = ' '
		}
		b.WriteRune(r)
		count++
	}
	return b.String()
}

// decodeJSON decodes a successful answer into v, or says that Studio did not answer JSON.
func decodeJSON(k call, resp *response, v any) error {
	if err := json.Unmarshal(resp.body, v); err != nil {
		e := k.fail(resp.status, errors.New("the answer is not valid JSON"))
		e.Hint = "check that " + EnvAPIURL + " points to Studio's API, not to a web page or a proxy"
		return e
	}
	return nil
}
