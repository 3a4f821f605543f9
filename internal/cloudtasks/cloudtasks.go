// Package cloudtasks is a small REST client of the Cloud Tasks API v2: the calls svz makes, and
// nothing else. The controller creates tasks with it at run time (a Cloud Run service that
// defines background work), and svz deploy manages the queue and its IAM policy with it. It is
// plain net/http and encoding/json, with an access token from the metadata server on Cloud Run:
// no GCP client library, so that a controller binary links no gRPC stack for one POST, and a
// cold start dials nothing until a job starts.
package cloudtasks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// DefaultEndpoint is the API's endpoint.
const DefaultEndpoint = "https://cloudtasks.googleapis.com"

// maxResponseBytes bounds what is read of an answer.
const maxResponseBytes = 1 << 20

// Client calls the Cloud Tasks API.
type Client struct {
	// Endpoint is the API's base URL (DefaultEndpoint when empty).
	Endpoint string
	// HTTP sends the requests (http.DefaultClient when nil).
	HTTP *http.Client
	// Token returns an OAuth2 access token; nil sends no Authorization (a fake).
	Token func(ctx context.Context) (string, error)
}

// APIError is an error answer of the API.
type APIError struct {
	Code    int    // HTTP status
	Status  string // e.g. NOT_FOUND, ALREADY_EXISTS
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("cloud tasks: %d %s: %s", e.Code, e.Status, e.Message)
}

// IsNotFound reports whether err is the API's 404.
func IsNotFound(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Code == http.StatusNotFound
}

// IsAlreadyExists reports whether err is the API's 409.
func IsAlreadyExists(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Code == http.StatusConflict
}

var queueName = regexp.MustCompile(`^projects/([a-z][a-z0-9-]{4,28}[a-z0-9]|[0-9]+)/locations/([a-z0-9-]+)/queues/([A-Za-z0-9-]{1,100})$`)

// ParseQueue checks a queue's full name, projects/P/locations/L/queues/Q, and returns its parts.
func ParseQueue(name string) (project, location, queue string, err error) {
	m := queueName.FindStringSubmatch(name)
	if m == nil {
		return "", "", "", errors.New("must be a Cloud Tasks queue name, projects/PROJECT/locations/LOCATION/queues/QUEUE (letters, digits and hyphens)")
	}
	return m[1], m[2], m[3], nil
}

// Task is an HTTP task: POST body to URL with headers, authenticated by an OIDC token of
// OIDCAccount for Audience, dispatched at Schedule (now when zero), to be answered within
// Deadline (the API's default, 10 minutes, when zero).
type Task struct {
	URL         string
	Body        []byte
	Headers     map[string]string
	OIDCAccount string
	Audience    string
	Schedule    time.Time
	Deadline    time.Duration
}

// Wire shapes (JSON of the REST API).
type (
	wireTask struct {
		Name             string          `json:"name,omitempty"`
		HTTPRequest      wireHTTPRequest `json:"httpRequest"`
		ScheduleTime     string          `json:"scheduleTime,omitempty"`
		DispatchDeadline string          `json:"dispatchDeadline,omitempty"`
	}
	wireHTTPRequest struct {
		URL        string            `json:"url"`
		HTTPMethod string            `json:"httpMethod"`
		Headers    map[string]string `json:"headers,omitempty"`
		Body       []byte            `json:"body,omitempty"` // base64, as the API's bytes fields
		OIDCToken  *OIDCToken        `json:"oidcToken,omitempty"`
	}
)

// OIDCToken is the token Cloud Tasks attaches to a task's request.
type OIDCToken struct {
	ServiceAccountEmail string `json:"serviceAccountEmail"`
	Audience            string `json:"audience,omitempty"`
}

// CreateTaskRequest is the body of projects.locations.queues.tasks.create.
type CreateTaskRequest struct {
	Task wireTask `json:"task"`
}

// Duration writes d as the API's durations ("1800s").
func Duration(d time.Duration) string { return fmt.Sprintf("%ds", int64(d/time.Second)) }

// CreateTask creates t in queue (its full name).
func (c *Client) CreateTask(ctx context.Context, queue string, t Task) error {
	w := wireTask{HTTPRequest: wireHTTPRequest{URL: t.URL, HTTPMethod: http.MethodPost, Headers: t.Headers, Body: t.Body}}
	if t.OIDCAccount != "" {
		w.HTTPRequest.OIDCToken = &OIDCToken{ServiceAccountEmail: t.OIDCAccount, Audience: t.Audience}
	}
	if !t.Schedule.IsZero() {
		w.ScheduleTime = t.Schedule.UTC().Format(time.RFC3339Nano)
	}
	if t.Deadline > 0 {
		w.DispatchDeadline = Duration(t.Deadline)
	}
	return c.do(ctx, http.MethodPost, "/v2/"+queue+"/tasks", CreateTaskRequest{Task: w}, nil)
}

// Queue is the part of a queue svz sets and reads.
type Queue struct {
	Name        string       `json:"name"`
	RetryConfig *RetryConfig `json:"retryConfig,omitempty"`
	HTTPTarget  *HTTPTarget  `json:"httpTarget,omitempty"`
	State       string       `json:"state,omitempty"`
}

// RetryConfig is how the queue retries a task whose delivery failed.
type RetryConfig struct {
	MaxAttempts  int    `json:"maxAttempts,omitempty"`
	MinBackoff   string `json:"minBackoff,omitempty"`
	MaxBackoff   string `json:"maxBackoff,omitempty"`
	MaxDoublings int    `json:"maxDoublings,omitempty"`
}

// HTTPTarget is the queue's override of its tasks' HTTP requests; svz uses only its headers.
type HTTPTarget struct {
	HeaderOverrides []HeaderOverride `json:"headerOverrides,omitempty"`
}

// HeaderOverride is one header the queue sets on every task.
type HeaderOverride struct {
	Header Header `json:"header"`
}

// Header is a header's key and value.
type Header struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// GetQueue reads a queue; nil and no error when it does not exist.
func (c *Client) GetQueue(ctx context.Context, name string) (*Queue, error) {
	var q Queue
	err := c.do(ctx, http.MethodGet, "/v2/"+name, nil, &q)
	if IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &q, nil
}

// CreateQueue creates q under its location (parent of q.Name).
func (c *Client) CreateQueue(ctx context.Context, q Queue) error {
	parent := q.Name[:strings.LastIndex(q.Name, "/queues/")]
	return c.do(ctx, http.MethodPost, "/v2/"+parent+"/queues", q, nil)
}

// UpdateQueue sets the retry configuration and HTTP target of q.
func (c *Client) UpdateQueue(ctx context.Context, q Queue) error {
	return c.do(ctx, http.MethodPatch, "/v2/"+q.Name+"?updateMask="+url.QueryEscape("retryConfig,httpTarget"), q, nil)
}

// DeleteQueue deletes a queue and its tasks.
func (c *Client) DeleteQueue(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v2/"+name, nil, nil)
}

// Policy is an IAM policy (unconditional bindings only: svz writes no other).
type Policy struct {
	Version  int       `json:"version,omitempty"`
	Etag     string    `json:"etag,omitempty"`
	Bindings []Binding `json:"bindings,omitempty"`
}

// Binding gives a role to members.
type Binding struct {
	Role    string   `json:"role"`
	Members []string `json:"members"`
}

// GetIamPolicy reads the IAM policy of a queue.
func (c *Client) GetIamPolicy(ctx context.Context, resource string) (*Policy, error) {
	var p Policy
	if err := c.do(ctx, http.MethodPost, "/v2/"+resource+":getIamPolicy", struct{}{}, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// SetIamPolicy writes the IAM policy of a queue (its etag guards against a concurrent change).
func (c *Client) SetIamPolicy(ctx context.Context, resource string, p *Policy) error {
	return c.do(ctx, http.MethodPost, "/v2/"+resource+":setIamPolicy", map[string]any{"policy": p}, nil)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	endpoint := c.Endpoint
	if endpoint == "" {
		endpoint = DefaultEndpoint
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("cloud tasks: encode the request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(endpoint, "/")+path, body)
	if err != nil {
		return fmt.Errorf("cloud tasks: %w", err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != nil {
		tok, err := c.Token(ctx)
		if err != nil {
			return fmt.Errorf("cloud tasks: access token: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("cloud tasks: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return fmt.Errorf("cloud tasks: read the answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct {
				Message string `json:"message"`
				Status  string `json:"status"`
			} `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		return &APIError{Code: resp.StatusCode, Status: e.Error.Status, Message: e.Error.Message}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("cloud tasks: decode the answer: %w", err)
		}
	}
	return nil
}
