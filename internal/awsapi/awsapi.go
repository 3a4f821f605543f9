// Package awsapi calls AWS services that speak the JSON protocol (awsJson1_0, awsJson1_1:
// DynamoDB, Secrets Manager...) with SigV4-signed HTTPS requests, configured by the environment
// the way Lambda, App Runner and ECS configure a process. It exists so that binaries whose cold
// start matters link no AWS SDK service client nor the SDK's config loader, whose package
// initialisation alone costs milliseconds at every start; it links only the SDK's signer.
//
// A Client is configured once by New, from getenv:
//
//	credentials  AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN; else the container
//	             credentials endpoint: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI (ECS, App Runner) or
//	             AWS_CONTAINER_CREDENTIALS_FULL_URI with AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE or
//	             AWS_CONTAINER_AUTHORIZATION_TOKEN (EKS Pod Identity, Lambda SnapStart)
//	region       AWS_REGION, else AWS_DEFAULT_REGION
//	endpoint     AWS_ENDPOINT_URL_<SERVICE> (e.g. AWS_ENDPOINT_URL_DYNAMODB), else AWS_ENDPOINT_URL,
//	             else https://<service>.<region>.amazonaws.com (.amazonaws.com.cn in China)
//
// Shared config files, profiles, SSO, web identity and EC2 instance metadata are read only through
// a Fallback the caller gives (WithFallback; package awschain has the AWS SDK's default chain),
// and only when the environment has neither static nor container credentials. Otherwise a process
// without credentials gets an explicit error, never a silent fallback.
//
// # Retries
//
// Call makes up to 3 attempts (WithRetries changes it), with jittered exponential backoff, when
// the failure is transient: a transport error (no answer, a cut or corrupted answer, an attempt
// that took longer than AttemptTimeout), HTTP 5xx, a throttling error, or an expired session
// token from the container endpoint (the credentials are then fetched again). Client errors
// (4xx) and context cancellation end the call at once.
//
// A retried request is sent again byte for byte, re-signed. That is safe for reads, and for
// conditional writes too, which is how callers must write: if the first attempt was applied and
// only its answer was lost, the retry finds its condition failed by the first attempt's own
// effect, and the caller can recognise that (a write that stores a fresh random version can
// compare the version in the failed condition's old item with its own). An unconditional,
// non-idempotent operation must not be sent through Call with retries.
package awsapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	redaction "github.com/supervaize/svz/internal/redact"
)

// Limits of a call.
const (
	// AttemptTimeout bounds one attempt (credentials, request and answer), so a connection that
	// went silent (a frozen Lambda's, a NAT that forgot it) is retried instead of hanging.
	AttemptTimeout = 10 * time.Second
	// MaxResponse bounds what is read of an answer: a DynamoDB item is at most 400 KB, about
	// 540 KB in JSON.
	MaxResponse = 2 << 20
)

// Defaults of the retry policy.
const (
	defaultAttempts = 3
	defaultBackoff  = 100 * time.Millisecond
)

// Service describes an AWS service of the JSON protocol.
type Service struct {
	// ID is the endpoint prefix and the SigV4 signing name, e.g. "dynamodb", "secretsmanager".
	ID string
	// Name is the service's SDK id, e.g. "DynamoDB", "Secrets Manager": messages use it, and
	// AWS_ENDPOINT_URL_<NAME> (upper case, spaces as underscores) overrides its endpoint.
	Name string
	// Target prefixes the operation in X-Amz-Target, e.g. "DynamoDB_20120810", "secretsmanager".
	Target string
	// JSONVersion is the protocol version, "1.0" (DynamoDB) or "1.1" (Secrets Manager).
	JSONVersion string
}

// EndpointVariable is the variable that overrides the service's endpoint, e.g.
// AWS_ENDPOINT_URL_SECRETS_MANAGER.
func (s Service) EndpointVariable() string {
	return "AWS_ENDPOINT_URL_" + strings.ToUpper(strings.ReplaceAll(s.Name, " ", "_"))
}

// Doer sends HTTP requests; *http.Client is one.
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

var _ Doer = (*http.Client)(nil)

// settings are what options set.
type settings struct {
	http     Doer
	now      func() time.Time
	region   string
	attempts int
	backoff  time.Duration
	fallback Fallback
}

func newSettings(opts []Option) settings {
	s := settings{http: &http.Client{}, now: time.Now, attempts: defaultAttempts, backoff: defaultBackoff}
	for _, o := range opts {
		o(&s)
	}
	return s
}

// Option configures New.
type Option func(*settings)

// WithHTTPClient sends requests (API calls and credential fetches) through d instead of a
// default http.Client.
func WithHTTPClient(d Doer) Option { return func(s *settings) { s.http = d } }

// WithRegion sets the region instead of AWS_REGION, e.g. the region of a resource's ARN.
func WithRegion(region string) Option { return func(s *settings) { s.region = region } }

// WithClock makes signatures and credential expiry use now instead of time.Now.
func WithClock(now func() time.Time) Option { return func(s *settings) { s.now = now } }

// Fallback gives credentials when the environment has neither static nor container ones. It is
// called once, at the first call that needs credentials (never at start), and the provider it
// returns is asked for credentials at every call (cache them, as aws.CredentialsCache does). Its
// errors say what it tried.
type Fallback func(ctx context.Context) (aws.CredentialsProvider, error)

// WithFallback makes a client whose environment has no credentials use f instead of failing.
func WithFallback(f Fallback) Option { return func(s *settings) { s.fallback = f } }

// WithRetries sets the number of attempts of a call (at least 1) and the first backoff, which
// quadruples after every attempt; each wait is drawn between half of it and all of it.
func WithRetries(attempts int, backoff time.Duration) Option {
	return func(s *settings) { s.attempts, s.backoff = max(attempts, 1), backoff }
}

// Client calls one AWS service in one region. It is safe for concurrent use.
type Client struct {
	svc      Service
	region   string
	endpoint string
	creds    *provider
	http     Doer
	signer   *v4.Signer
	now      func() time.Time
	attempts int
	backoff  time.Duration
}

// New returns a client of svc configured by getenv (os.Getenv in production); see the package
// documentation for the variables. It fails when the region, the endpoint or the credentials
// are missing or malformed; it makes no call.
func New(getenv func(string) string, svc Service, opts ...Option) (*Client, error) {
	s := newSettings(opts)
	region := s.region
	if region == "" {
		region = Region(getenv)
	}
	if region == "" {
		return nil, errors.New("no AWS region: set AWS_REGION")
	}
	endpoint, err := resolveEndpoint(getenv, svc, region)
	if err != nil {
		return nil, err
	}
	creds, err := newProvider(getenv, s)
	if err != nil {
		return nil, err
	}
	return &Client{
		svc: svc, region: region, endpoint: endpoint, creds: creds,
		http: s.http, signer: v4.NewSigner(), now: s.now, attempts: s.attempts, backoff: s.backoff,
	}, nil
}

// Region returns the signing region.
func (c *Client) Region() string { return c.region }

// Endpoint returns the URL requests are sent to.
func (c *Client) Endpoint() string { return c.endpoint }

// Call sends operation op (e.g. "GetItem") with in encoded as JSON, and decodes the answer into
// out with encoding/json (out may be nil; a *json.RawMessage receives the answer as is). An
// error answer is an *APIError; transient failures are retried (see the package documentation).
func (c *Client) Call(ctx context.Context, op string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("%s %s: encode the request: %w", c.svc.Name, op, err)
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	for attempt := 1; ; attempt++ {
		answer, err := c.attempt(ctx, op, body, hash)
		if err == nil {
			if out == nil {
				return nil
			}
			if err := json.Unmarshal(answer, out); err != nil {
				return fmt.Errorf("%s %s: the answer is not the expected JSON: %w", c.svc.Name, op, err)
			}
			return nil
		}
		if attempt >= c.attempts || !retryable(err) {
			return unwrapTransient(err)
		}
		if ctxErr := c.wait(ctx, attempt); ctxErr != nil {
			if errors.Is(err, ctxErr) {
				return unwrapTransient(err)
			}
			return fmt.Errorf("%w (after %w)", ctxErr, unwrapTransient(err))
		}
	}
}

// wait sleeps after the failed attempt (1-based), or returns the context's error.
func (c *Client) wait(ctx context.Context, attempt int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d := c.backoff << (2 * (attempt - 1))
	if d > 0 {
		d = d/2 + rand.N(d/2+1)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// attempt makes one signed request and returns the answer's body when it is a success.
func (c *Client) attempt(ctx context.Context, op string, body []byte, hash string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, AttemptTimeout)
	defer cancel()
	creds, err := c.creds.Retrieve(ctx)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s endpoint %q: %w", c.svc.Name, ShownURL(c.endpoint), err)
	}
	req.Header.Set("Content-Type", "application/x-amz-json-"+c.svc.JSONVersion)
	req.Header.Set("X-Amz-Target", c.svc.Target+"."+op)
	// No transparent gzip: DynamoDB's X-Amz-Crc32 covers the bytes as sent.
	req.Header.Set("Accept-Encoding", "identity")
	if err := c.signer.SignHTTP(ctx, creds, req, hash, c.svc.ID, c.region, c.now()); err != nil {
		return nil, fmt.Errorf("sign the request: %w", err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// A *url.Error names the endpoint with its query: show it masked instead.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = fmt.Errorf("%s %s: %w", ue.Op, ShownURL(ue.URL), ue.Err)
		}
		return nil, transient{err}
	}
	defer resp.Body.Close()
	answer, err := readBounded(resp.Body, MaxResponse)
	if err != nil {
		var tooLarge *tooLargeError
		if errors.As(err, &tooLarge) {
			return nil, fmt.Errorf("%s %s: %w", c.svc.Name, op, err)
		}
		return nil, transient{fmt.Errorf("%s %s: read the answer: %w", c.svc.Name, op, err)}
	}
	if err := checkCRC32(resp.Header, answer); err != nil {
		return nil, transient{fmt.Errorf("%s %s: %w", c.svc.Name, op, err)}
	}
	if resp.StatusCode == http.StatusOK {
		return answer, nil
	}
	apiErr := parseError(resp.StatusCode, resp.Header, answer)
	if apiErr.expiredToken() && c.creds.invalidate(creds) {
		return nil, transient{apiErr}
	}
	return nil, apiErr
}

// readBounded reads r to its end, failing when it holds more than limit bytes.
func readBounded(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, &tooLargeError{limit}
	}
	return b, nil
}

type tooLargeError struct{ limit int64 }

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("the answer is larger than %d bytes", e.limit)
}

// checkCRC32 verifies the X-Amz-Crc32 header DynamoDB puts on its answers, when present.
func checkCRC32(h http.Header, body []byte) error {
	v := h.Get("X-Amz-Crc32")
	if v == "" {
		return nil
	}
	want, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return fmt.Errorf("the answer's X-Amz-Crc32 %q is not a number", v)
	}
	if got := crc32.ChecksumIEEE(body); uint32(want) != got {
		return fmt.Errorf("the answer is corrupted: CRC32 %d, X-Amz-Crc32 says %d", got, want)
	}
	return nil
}

// APIError is an error answer of an AWS service.
type APIError struct {
	Status    int    // HTTP status
	Code      string // e.g. ResourceNotFoundException, without the namespace
	Message   string
	RequestID string // x-amzn-RequestId, for AWS support
	// Body is the answer as received: some errors carry data, e.g. the item of DynamoDB's
	// ConditionalCheckFailedException.
	Body []byte
}

func (e *APIError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("%s (HTTP %d)", e.Code, e.Status)
	}
	return fmt.Sprintf("%s: %s (HTTP %d)", e.Code, e.Message, e.Status)
}

// Retryable reports whether the same call may succeed later: a server error, or throttling
// (the codes the SDK's retryer treats as such).
func (e *APIError) Retryable() bool {
	if e.Status >= 500 || e.Status == http.StatusTooManyRequests {
		return true
	}
	switch e.Code {
	case "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottledException",
		"TooManyRequestsException", "ProvisionedThroughputExceededException",
		"TransactionInProgressException", "RequestLimitExceeded", "BandwidthLimitExceeded",
		"LimitExceededException", "RequestThrottled", "SlowDown", "PriorRequestNotComplete",
		"EC2ThrottledException", "RequestTimeout", "RequestTimeoutException":
		return true
	}
	return false
}

func (e *APIError) expiredToken() bool {
	return e.Code == "ExpiredTokenException" || e.Code == "ExpiredToken"
}

// parseError builds the APIError of a failed answer: the code from __type (or the
// X-Amzn-ErrorType header), the message from message or Message.
func parseError(status int, h http.Header, body []byte) *APIError {
	var e struct {
		Type    string `json:"__type"`
		Code    string `json:"code"`
		Message string `json:"message"`
		Msg     string `json:"Message"`
	}
	_ = json.Unmarshal(body, &e) // a body that is not JSON leaves the HTTP status to speak
	code := e.Type
	if code == "" {
		code = e.Code
	}
	if code == "" {
		code = h.Get("X-Amzn-ErrorType")
	}
	if i := strings.IndexByte(code, ':'); i >= 0 {
		code = code[:i] // "ResourceNotFoundException:http://internal.amazon.com/..."
	}
	if i := strings.LastIndexByte(code, '#'); i >= 0 {
		code = code[i+1:] // "com.amazonaws.dynamodb.v20120810#ResourceNotFoundException"
	}
	code = strings.TrimSpace(code)
	if code == "" {
		code = http.StatusText(status)
	}
	if code == "" {
		code = "HTTP " + strconv.Itoa(status)
	}
	msg := e.Message
	if msg == "" {
		msg = e.Msg
	}
	return &APIError{Status: status, Code: code, Message: msg, RequestID: h.Get("X-Amzn-Requestid"), Body: body}
}

// transient marks a failure worth another attempt; Call returns the error it wraps.
type transient struct{ err error }

func (t transient) Error() string { return t.err.Error() }
func (t transient) Unwrap() error { return t.err }

func retryable(err error) bool {
	var t transient
	if errors.As(err, &t) {
		return true
	}
	var api *APIError
	return errors.As(err, &api) && api.Retryable()
}

func unwrapTransient(err error) error {
	if t, ok := err.(transient); ok {
		return t.err
	}
	return err
}

// staticCredentials returns credentials that never expire.
func staticCredentials(id, secret, token string) aws.Credentials {
	return aws.Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: token, Source: "environment"}
}

// ShownURL is raw as it may appear in logs and errors (redaction.URL): credentials and query values
// masked, no fragment; an unparsable value is not shown at all.
func ShownURL(raw string) string {
	if s := redaction.URL(raw); s != "" {
		return s
	}
	// Not an absolute URL: shown as is when it cannot hold a credential (a relative path).
	if u, err := url.Parse(raw); err == nil && u.User == nil && u.RawQuery == "" && u.Fragment == "" && !strings.Contains(raw, "@") {
		return raw
	}
	return "<unparsable URL>"
}
