package lambda

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/supervaize/svz/adapters/adaptertest"
	"github.com/supervaize/svz/internal/testenv"
)

// TestProtocol runs the protocol suite against the real Hello World bootstrap, built by
// `make build-ControllerFunction` exactly as sam build does, under the Runtime Interface
// Emulator, once per event source: the suite's HTTP requests become Function URL (buffered and
// streaming), API Gateway REST and HTTP API, and ALB events, and the function's payloads become
// HTTP responses again. The DataResource suite runs the same way against functions configured
// with workspace authorization. The requests name 127.0.0.1:3000, as under sam local start-api:
// the suite's function runs in local mode, which refuses a Host that is not loopback.
func TestProtocol(t *testing.T) {
	testenv.Need(t, testenv.RIE)
	bootstrap := buildBootstrap(t)
	env := adaptertest.Environ()
	buffered := startEmulator(t, bootstrap, env...)
	// The stream ends shortly before the invocation deadline; a short timeout keeps the test short.
	streamEnv := []string{"SUPERVAIZER_LAMBDA_INVOKE_MODE=RESPONSE_STREAM", "AWS_LAMBDA_FUNCTION_TIMEOUT=3"}
	streaming := startEmulator(t, bootstrap, append(env, streamEnv...)...)
	// The DataResource suite needs workspace authorization on, hence functions of its own.
	data := adaptertest.DataEnviron()
	dataBuffered := startEmulator(t, bootstrap, data...)
	dataStreaming := startEmulator(t, bootstrap, append(data, streamEnv...)...)
	for _, tc := range []struct {
		name     string
		tr, data *eventTransport
	}{
		{"FunctionURL", &eventTransport{em: buffered, kind: srcFunctionURL}, &eventTransport{em: dataBuffered, kind: srcFunctionURL}},
		{"FunctionURLStreaming", &eventTransport{em: streaming, kind: srcFunctionURL, stream: true}, &eventTransport{em: dataStreaming, kind: srcFunctionURL, stream: true}},
		{"HTTPAPI", &eventTransport{em: buffered, kind: srcHTTPAPI}, &eventTransport{em: dataBuffered, kind: srcHTTPAPI}},
		{"RESTAPI", &eventTransport{em: buffered, kind: srcRESTAPI}, &eventTransport{em: dataBuffered, kind: srcRESTAPI}},
		{"ALB", &eventTransport{em: buffered, kind: srcALB}, &eventTransport{em: dataBuffered, kind: srcALB}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.tr.t = t
			adaptertest.Run(t, &http.Client{Transport: tc.tr}, "http://"+localHost)
			t.Run("DataResources", func(t *testing.T) {
				tc.data.t = t
				adaptertest.RunData(t, &http.Client{Transport: tc.data}, "http://"+localHost)
			})
		})
	}
}

// buildBootstrap builds the Lambda bootstrap with the Makefile target sam build runs.
func buildBootstrap(t *testing.T) string {
	t.Helper()
	return buildBootstrapOf(t, "")
}

// buildBootstrapOf builds the bootstrap of the main package main (a path from the repository
// root, "" for the template's) as sam build does.
func buildBootstrapOf(t *testing.T, main string, vars ...string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	dir := t.TempDir()
	args := []string{"-f", "mk/lambda.mk", "build-ControllerFunction", "ARTIFACTS_DIR=" + dir, "GOARCH=" + runtime.GOARCH}
	if main != "" {
		args = append(args, "LAMBDA_MAIN="+main)
	}
	args = append(args, vars...)
	cmd := exec.Command("make", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make build-ControllerFunction: %v\n%s", err, out)
	}
	return filepath.Join(dir, "bootstrap")
}

// eventTransport plays the event source in front of the function: it turns an HTTP request into
// the source's event, invokes the function under the emulator, and turns the payload back into
// an HTTP response. It uses aws-lambda-go's event types, independent from the adapter's own.
type eventTransport struct {
	t      *testing.T
	em     *emulator
	kind   source
	stream bool
}

func (tr *eventTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
	}
	text, b64 := string(body), false
	if !utf8.Valid(body) {
		text, b64 = base64.StdEncoding.EncodeToString(body), true
	}
	single := map[string]string{"host": req.URL.Host}
	multi := map[string][]string{"host": {req.URL.Host}}
	var cookies []string
	for k, vs := range req.Header {
		if k == "Cookie" {
			cookies = strings.Split(strings.Join(vs, "; "), "; ")
			continue
		}
		single[strings.ToLower(k)] = strings.Join(vs, ",")
		multi[strings.ToLower(k)] = vs
	}
	query := req.URL.Query()
	var ev any
	switch tr.kind {
	case srcFunctionURL:
		ev = events.LambdaFunctionURLRequest{
			Version: "2.0", RawPath: req.URL.EscapedPath(), RawQueryString: req.URL.RawQuery, Cookies: cookies,
			Headers: single, Body: text, IsBase64Encoded: b64,
			RequestContext: events.LambdaFunctionURLRequestContext{
				DomainName: "suite.lambda-url.eu-west-3.on.aws", RequestID: "req",
				HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: req.Method, Path: req.URL.Path, SourceIP: "203.0.113.10"},
			},
		}
	case srcHTTPAPI:
		ev = events.APIGatewayV2HTTPRequest{
			Version: "2.0", RouteKey: "$default", RawPath: req.URL.Path, RawQueryString: req.URL.RawQuery, Cookies: cookies,
			Headers: single, Body: text, IsBase64Encoded: b64,
			RequestContext: events.APIGatewayV2HTTPRequestContext{
				DomainName: "api.example.com", Stage: "$default",
				HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: req.Method, Path: req.URL.Path, SourceIP: "203.0.113.10"},
			},
		}
	case srcRESTAPI:
		e := events.APIGatewayProxyRequest{
			HTTPMethod: req.Method, Path: req.URL.EscapedPath(), Headers: single, MultiValueHeaders: multi,
			MultiValueQueryStringParameters: query, Body: text, IsBase64Encoded: b64,
			RequestContext: events.APIGatewayProxyRequestContext{Stage: "prod", Identity: events.APIGatewayRequestIdentity{SourceIP: "203.0.113.10"}},
		}
		if len(cookies) > 0 {
			e.MultiValueHeaders["cookie"] = []string{strings.Join(cookies, "; ")}
		}
		ev = e
	case srcALB:
		raw := map[string][]string{}
		for _, kv := range strings.Split(req.URL.RawQuery, "&") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				raw[k] = append(raw[k], v) // an ALB passes query parameters still encoded
			}
		}
		ev = events.ALBTargetGroupRequest{
			HTTPMethod: req.Method, Path: req.URL.EscapedPath(), MultiValueHeaders: multi, MultiValueQueryStringParameters: raw,
			Body: text, IsBase64Encoded: b64,
			RequestContext: events.ALBTargetGroupRequestContext{ELB: events.ELBContext{TargetGroupArn: "arn:aws:elasticloadbalancing:eu-west-3:123456789012:targetgroup/svz/1"}},
		}
	}
	status, out := tr.em.invoke(tr.t, payload(tr.t, ev))
	if status != http.StatusOK {
		return nil, fmt.Errorf("the emulator answered %d: %s", status, out)
	}
	if tr.stream {
		return streamedResponse(req, out)
	}
	return bufferedResponse(req, out)
}

func bufferedResponse(req *http.Request, out []byte) (*http.Response, error) {
	var p struct {
		StatusCode        int                 `json:"statusCode"`
		Headers           map[string]string   `json:"headers"`
		MultiValueHeaders map[string][]string `json:"multiValueHeaders"`
		Cookies           []string            `json:"cookies"`
		Body              string              `json:"body"`
		IsBase64Encoded   bool                `json:"isBase64Encoded"`
	}
	if err := json.Unmarshal(out, &p); err != nil {
		return nil, fmt.Errorf("payload %q: %w", out, err)
	}
	h := http.Header{}
	for k, v := range p.Headers {
		h.Set(k, v)
	}
	for k, vs := range p.MultiValueHeaders {
		h[http.CanonicalHeaderKey(k)] = vs
	}
	for _, c := range p.Cookies {
		h.Add("Set-Cookie", c)
	}
	body := []byte(p.Body)
	if p.IsBase64Encoded {
		var err error
		if body, err = base64.StdEncoding.DecodeString(p.Body); err != nil {
			return nil, err
		}
	}
	return &http.Response{StatusCode: p.StatusCode, Header: h, Body: io.NopCloser(bytes.NewReader(body)), Request: req}, nil
}

// streamedResponse parses the Function URL streaming framing: a JSON prelude, 8 NUL bytes, the
// body.
func streamedResponse(req *http.Request, out []byte) (*http.Response, error) {
	prelude, body, ok := bytes.Cut(out, make([]byte, 8))
	if !ok {
		return nil, fmt.Errorf("no streaming prelude in %q", out)
	}
	var p struct {
		StatusCode int               `json:"statusCode"`
		Headers    map[string]string `json:"headers"`
		Cookies    []string          `json:"cookies"`
	}
	if err := json.Unmarshal(prelude, &p); err != nil {
		return nil, fmt.Errorf("prelude %q: %w", prelude, err)
	}
	h := http.Header{}
	for k, v := range p.Headers {
		h.Set(k, v)
	}
	for _, c := range p.Cookies {
		h.Add("Set-Cookie", c)
	}
	return &http.Response{StatusCode: p.StatusCode, Header: h, Body: io.NopCloser(bufio.NewReader(bytes.NewReader(body))), Request: req}, nil
}
