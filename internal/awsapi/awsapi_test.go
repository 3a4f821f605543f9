package awsapi

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/internal/testenv"
)

var signingTime = time.Date(2026, 7, 8, 10, 0, 0, 0, time.UTC)

// verifySigV4 checks the request's signature independently of the SDK's signer, as AWS does:
// canonical request over the signed headers and the received body, string to sign, key chain.
func verifySigV4(r *http.Request, body []byte, secret string) error {
	auth := r.Header.Get("Authorization")
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		return fmt.Errorf("authorization %q", auth)
	}
	fields := map[string]string{}
	for _, f := range strings.Split(rest, ", ") {
		k, v, _ := strings.Cut(f, "=")
		fields[k] = v
	}
	scope := strings.SplitN(fields["Credential"], "/", 2)
	if len(scope) != 2 {
		return fmt.Errorf("credential %q", fields["Credential"])
	}
	parts := strings.Split(scope[1], "/") // date/region/service/aws4_request
	if len(parts) != 4 || parts[3] != "aws4_request" {
		return fmt.Errorf("scope %q", scope[1])
	}
	signed := strings.Split(fields["SignedHeaders"], ";")
	if !slices.Contains(signed, "host") || !slices.Contains(signed, "x-amz-date") || !slices.Contains(signed, "x-amz-target") {
		return fmt.Errorf("signed headers %v", signed)
	}
	var canon strings.Builder
	fmt.Fprintf(&canon, "%s\n%s\n%s\n", r.Method, r.URL.EscapedPath(), r.URL.RawQuery)
	for _, h := range signed {
		var v string
		switch h {
		case "host":
			v = r.Host
		case "content-length":
			v = strconv.FormatInt(r.ContentLength, 10)
		default:
			v = strings.Join(r.Header.Values(h), ",")
		}
		fmt.Fprintf(&canon, "%s:%s\n", h, strings.TrimSpace(v))
	}
	bodySum := sha256.Sum256(body)
	fmt.Fprintf(&canon, "\n%s\n%s", fields["SignedHeaders"], hex.EncodeToString(bodySum[:]))
	canonSum := sha256.Sum256([]byte(canon.String()))
	toSign := "AWS4-HMAC-SHA256\n" + r.Header.Get("X-Amz-Date") + "\n" + scope[1] + "\n" + hex.EncodeToString(canonSum[:])
	mac := func(key []byte, s string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(s))
		return h.Sum(nil)
	}
	key := mac([]byte("AWS4"+secret), parts[0])
	for _, p := range parts[1:] {
		key = mac(key, p)
	}
	if want := hex.EncodeToString(mac(key, toSign)); fields["Signature"] != want {
		return fmt.Errorf("signature %s, want %s", fields["Signature"], want)
	}
	return nil
}

func staticEnv(endpoint string) func(string) string {
	return env("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI-secret", "AWS_SESSION_TOKEN", "session-token",
		"AWS_REGION", "eu-west-3", "AWS_ENDPOINT_URL", endpoint)
}

func newClient(t *testing.T, getenv func(string) string, svc Service, opts ...Option) *Client {
	t.Helper()
	c, err := New(getenv, svc, append([]Option{WithClock(func() time.Time { return signingTime }), WithRetries(3, time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestWire pins what goes on the wire, which moto does not verify: method, path, headers, body,
// a signature AWS would accept, and the decoding of the answer.
func TestWire(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := verifySigV4(r, body, "wJalrXUtnFEMI-secret"); err != nil {
			t.Error(err)
		}
		for h, want := range map[string]string{
			"Content-Type":         "application/x-amz-json-1.0",
			"X-Amz-Target":         "DynamoDB_20120810.GetItem",
			"X-Amz-Date":           "20260708T100000Z",
			"X-Amz-Security-Token": "session-token",
			"Accept-Encoding":      "identity",
		} {
			if got := r.Header.Get(h); got != want {
				t.Errorf("%s: %q, want %q", h, got, want)
			}
		}
		if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260708/eu-west-3/dynamodb/aws4_request, ") {
			t.Errorf("authorization %q", r.Header.Get("Authorization"))
		}
		if r.Method != http.MethodPost || r.URL.Path != "/" || string(body) != `{"TableName":"t","Key":{"k":{"S":"a/b"}}}` {
			t.Errorf("%s %s %s", r.Method, r.URL, body)
		}
		answer := `{"Item":{"k":{"S":"a/b"}}}`
		w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(answer))), 10))
		_, _ = io.WriteString(w, answer)
	}))
	defer srv.Close()
	c := newClient(t, staticEnv(srv.URL), testDynamoDB)
	if c.Region() != "eu-west-3" || c.Endpoint() != srv.URL {
		t.Fatalf("region %q endpoint %q", c.Region(), c.Endpoint())
	}
	type attr struct{ S string }
	in := struct {
		TableName string
		Key       map[string]attr
	}{"t", map[string]attr{"k": {"a/b"}}}
	var out struct{ Item map[string]attr }
	if err := c.Call(context.Background(), "GetItem", in, &out); err != nil {
		t.Fatal(err)
	}
	if out.Item["k"].S != "a/b" {
		t.Fatalf("out %+v", out)
	}
	var raw json.RawMessage
	if err := c.Call(context.Background(), "GetItem", in, &raw); err != nil || string(raw) != `{"Item":{"k":{"S":"a/b"}}}` {
		t.Fatalf("raw %s %v", raw, err)
	}
}

// answers serves the given answers in turn (the last one repeats) and counts the calls.
type answers struct {
	calls atomic.Int32
	list  []func(w http.ResponseWriter)
}

func (a *answers) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	n := int(a.calls.Add(1))
	a.list[min(n, len(a.list))-1](w)
}

func status(code int, body string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

func TestRetries(t *testing.T) {
	ok := status(200, `{"ok":true}`)
	badCRC := func(w http.ResponseWriter) {
		w.Header().Set("X-Amz-Crc32", "12345")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}
	huge := func(w http.ResponseWriter) {
		_, _ = io.WriteString(w, `{"ok":"`+strings.Repeat("x", MaxResponse)+`"}`)
	}
	cases := []struct {
		name    string
		answers []func(http.ResponseWriter)
		calls   int32
		wantErr string
	}{
		{"throttled, then a server error, then ok", []func(http.ResponseWriter){
			status(400, `{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"Rate exceeded"}`),
			status(500, `{"__type":"InternalServerError","message":"oops"}`), ok}, 3, ""},
		{"provisioned throughput exceeded", []func(http.ResponseWriter){
			status(400, `{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException"}`), ok}, 2, ""},
		{"429", []func(http.ResponseWriter){status(429, ``), ok}, 2, ""},
		{"corrupted answer", []func(http.ResponseWriter){badCRC, ok}, 2, ""},
		{"server errors until the end", []func(http.ResponseWriter){status(503, `{"__type":"ServiceUnavailable"}`)}, 3,
			"ServiceUnavailable (HTTP 503)"},
		{"client error", []func(http.ResponseWriter){status(400, `{"__type":"com.amazonaws.dynamodb.v20120810#ValidationException","message":"bad key"}`)}, 1,
			"ValidationException: bad key (HTTP 400)"},
		{"conditional check failed", []func(http.ResponseWriter){status(400, `{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed"}`)}, 1,
			"ConditionalCheckFailedException: The conditional request failed (HTTP 400)"},
		{"answer too large", []func(http.ResponseWriter){huge}, 1,
			"DynamoDB GetItem: the answer is larger than 2097152 bytes"},
		{"not JSON", []func(http.ResponseWriter){status(200, `<html>`)}, 1,
			"DynamoDB GetItem: the answer is not the expected JSON: invalid character '<' looking for beginning of value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := &answers{list: tc.answers}
			srv := httptest.NewServer(a)
			defer srv.Close()
			c := newClient(t, staticEnv(srv.URL), testDynamoDB)
			var out struct{ OK bool }
			err := c.Call(context.Background(), "GetItem", map[string]string{}, &out)
			if got := a.calls.Load(); got != tc.calls {
				t.Errorf("%d calls, want %d", got, tc.calls)
			}
			if tc.wantErr == "" {
				if err != nil || !out.OK {
					t.Fatalf("%v %+v", err, out)
				}
				return
			}
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("error = %v, want %s", err, tc.wantErr)
			}
		})
	}
}

func TestRetryCount(t *testing.T) {
	a := &answers{list: []func(http.ResponseWriter){status(500, ``)}}
	srv := httptest.NewServer(a)
	defer srv.Close()
	c := newClient(t, staticEnv(srv.URL), testDynamoDB, WithRetries(5, time.Microsecond))
	err := c.Call(context.Background(), "GetItem", nil, nil)
	var api *APIError
	if !errors.As(err, &api) || api.Status != 500 || api.Code != "Internal Server Error" || a.calls.Load() != 5 {
		t.Fatalf("%v after %d calls", err, a.calls.Load())
	}
	c = newClient(t, staticEnv(srv.URL), testDynamoDB, WithRetries(0, 0))
	a.calls.Store(0)
	if err := c.Call(context.Background(), "GetItem", nil, nil); err == nil || a.calls.Load() != 1 {
		t.Fatalf("%v after %d calls", err, a.calls.Load())
	}
}

func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestTransportErrorsRetried(t *testing.T) {
	addr := closedPort(t)
	var tries atomic.Int32
	doer := doerFunc(func(r *http.Request) (*http.Response, error) {
		tries.Add(1)
		return http.DefaultClient.Do(r)
	})
	c := newClient(t, staticEnv("http://"+addr), testDynamoDB, WithHTTPClient(doer))
	err := c.Call(context.Background(), "GetItem", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), addr) || tries.Load() != 3 {
		t.Fatalf("%v after %d tries", err, tries.Load())
	}
	if strings.Contains(err.Error(), "wJalrXUtnFEMI-secret") || strings.Contains(err.Error(), "session-token") {
		t.Fatalf("error leaks a secret: %v", err)
	}
}

func TestCancelDuringBackoff(t *testing.T) {
	a := &answers{list: []func(http.ResponseWriter){status(500, `{"__type":"InternalServerError"}`)}}
	srv := httptest.NewServer(a)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	c := newClient(t, staticEnv(srv.URL), testDynamoDB, WithRetries(3, time.Hour), WithHTTPClient(doerFunc(func(r *http.Request) (*http.Response, error) {
		defer cancel() // the wait that follows is cut short
		return http.DefaultClient.Do(r)
	})))
	err := c.Call(ctx, "GetItem", nil, nil)
	var api *APIError
	if !errors.Is(err, context.Canceled) || !errors.As(err, &api) || err.Error() != "context canceled (after InternalServerError (HTTP 500))" {
		t.Fatalf("%v", err)
	}
	if a.calls.Load() != 1 {
		t.Fatalf("%d calls", a.calls.Load())
	}
}

type doerFunc func(*http.Request) (*http.Response, error)

func (f doerFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

func TestParseError(t *testing.T) {
	cases := []struct {
		status int
		header http.Header
		body   string
		want   string
		code   string
	}{
		{400, nil, `{"__type":"ResourceNotFoundException","message":"Secrets Manager can't find the specified secret."}`,
			"ResourceNotFoundException: Secrets Manager can't find the specified secret. (HTTP 400)", "ResourceNotFoundException"},
		{400, nil, `{"__type":"com.amazonaws.secretsmanager#AccessDeniedException","Message":"User is not authorized"}`,
			"AccessDeniedException: User is not authorized (HTTP 400)", "AccessDeniedException"},
		{400, http.Header{"X-Amzn-Errortype": {"UnrecognizedClientException:http://internal.amazon.com/coral/com.amazon.coral.service/"}}, ``,
			"UnrecognizedClientException (HTTP 400)", "UnrecognizedClientException"},
		{503, nil, `oops`, "Service Unavailable (HTTP 503)", "Service Unavailable"},
		{599, nil, ``, "HTTP 599 (HTTP 599)", "HTTP 599"},
		{400, nil, `{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed","Item":{"k":{"S":"x"}}}`,
			"ConditionalCheckFailedException: The conditional request failed (HTTP 400)", "ConditionalCheckFailedException"},
	}
	for _, tc := range cases {
		h := tc.header
		if h == nil {
			h = http.Header{}
		}
		h.Set("X-Amzn-Requestid", "req-1")
		e := parseError(tc.status, h, []byte(tc.body))
		if e.Error() != tc.want || e.Code != tc.code || e.Status != tc.status || e.RequestID != "req-1" || string(e.Body) != tc.body {
			t.Errorf("parseError(%d, %s) = %q %+v, want %q", tc.status, tc.body, e, e, tc.want)
		}
	}
}

func FuzzParseError(f *testing.F) {
	f.Add(400, "", []byte(`{"__type":"a#B","message":"m"}`))
	f.Add(500, "", []byte(``))
	f.Add(400, "X:y", []byte(`{"code":"C","Message":"m"}`))
	f.Add(418, "", []byte(`[1,2]`))
	f.Fuzz(func(t *testing.T, status int, header string, body []byte) {
		h := http.Header{}
		h.Set("X-Amzn-Errortype", header)
		e := parseError(status, h, body)
		if e.Code == "" || e.Status != status || !strings.HasSuffix(e.Error(), "(HTTP "+strconv.Itoa(status)+")") {
			t.Fatalf("parseError(%d, %q, %q) = %+v", status, header, body, e)
		}
		if strings.ContainsAny(e.Code, "#:") {
			t.Fatalf("code %q keeps its namespace", e.Code)
		}
	})
}

// TestMoto calls DynamoDB in moto_server: a success, and an error answer with its code.
func TestMoto(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	c, err := New(env("AWS_ACCESS_KEY_ID", "test", "AWS_SECRET_ACCESS_KEY", "test", "AWS_REGION", "us-east-1", "AWS_ENDPOINT_URL_DYNAMODB", endpoint), testDynamoDB)
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ TableNames []string }
	if err := c.Call(context.Background(), "ListTables", struct{}{}, &out); err != nil || out.TableNames == nil {
		t.Fatalf("ListTables: %+v %v", out, err)
	}
	err = c.Call(context.Background(), "DescribeTable", map[string]string{"TableName": "svz-awsapi-missing"}, nil)
	var api *APIError
	if !errors.As(err, &api) || api.Code != "ResourceNotFoundException" || api.Status != 400 || api.RequestID == "" || api.Retryable() {
		t.Fatalf("DescribeTable of a missing table: %#v", err)
	}
}

func TestShownURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:4566/":                         "http://127.0.0.1:4566/",
		"https://u:s3cret@host.example/p?token=s3cret#f": "https://xxxxx@host.example/p?token=xxxxx",
		"mailto:s3cret@x":                                "<unparsable URL>",
		"http://[::1":                                    "<unparsable URL>",
	} {
		if got := ShownURL(in); got != want {
			t.Errorf("ShownURL(%q) = %q, want %q", in, got, want)
		}
	}
}
