package lambda

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/supervaize/svz/adapters/internal/testkit"
)

const urlDomain = "abcdefgh.lambda-url.eu-west-3.on.aws"

// Sample events, built with aws-lambda-go's own event types so that the field names are AWS's,
// not ours.
func functionURLEvent(method, rawPath, rawQuery, body string) events.LambdaFunctionURLRequest {
	return events.LambdaFunctionURLRequest{
		Version:        "2.0",
		RawPath:        rawPath,
		RawQueryString: rawQuery,
		Cookies:        []string{"c1=v1", "c2=v2"},
		Headers: map[string]string{
			"host": urlDomain, "x-api-key": "key-1", "content-type": "application/json",
			"accept": "application/json, text/plain", "x-forwarded-for": "203.0.113.9", "x-forwarded-proto": "https",
		},
		Body: body,
		RequestContext: events.LambdaFunctionURLRequestContext{
			AccountID: "anonymous", RequestID: "req-1", APIID: "abcdefgh", DomainName: urlDomain, DomainPrefix: "abcdefgh",
			Time: "08/Jul/2026:10:00:00 +0000", TimeEpoch: 1783504800000,
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{
				Method: method, Path: rawPath, Protocol: "HTTP/1.1", SourceIP: "203.0.113.9", UserAgent: "curl/8",
			},
		},
	}
}

// localHost is the Host `sam local start-api` forwards: the only kind a function in local mode
// (events/env.json, adaptertest.Env) serves.
const localHost = "127.0.0.1:3000"

// localFunctionURLEvent is functionURLEvent as a function in local mode gets it: its Host names
// this machine.
func localFunctionURLEvent(method, rawPath, rawQuery, body string) events.LambdaFunctionURLRequest {
	e := functionURLEvent(method, rawPath, rawQuery, body)
	e.Headers["host"] = localHost
	return e
}

func httpAPIEvent() events.APIGatewayV2HTTPRequest {
	return events.APIGatewayV2HTTPRequest{
		Version:        "2.0",
		RouteKey:       "ANY /{proxy+}",
		RawPath:        "/prod/a2a/x y?z", // HTTP APIs deliver the path decoded
		RawQueryString: "b=2&a=1&a=3",
		Cookies:        []string{"c1=v1"},
		Headers:        map[string]string{"host": "api.example.com", "x-api-key": "key-1", "content-length": "5"},
		Body:           "hello",
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			DomainName: "api.example.com", Stage: "prod", APIID: "api123",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "PUT", Path: "/prod/a2a/x y?z", SourceIP: "2001:db8::1"},
		},
	}
}

func restEvent() events.APIGatewayProxyRequest {
	return events.APIGatewayProxyRequest{
		Resource:   "/{proxy+}",
		Path:       "/a2a/x%20y",
		HTTPMethod: "POST",
		Headers:    map[string]string{"Host": "rest.example.com", "X-Api-Key": "key-1", "Accept": "b"},
		MultiValueHeaders: map[string][]string{
			"Host": {"rest.example.com"}, "X-Api-Key": {"key-1"}, "Accept": {"a", "b"},
		},
		QueryStringParameters:           map[string]string{"a": "3", "q": "x y&z"},
		MultiValueQueryStringParameters: map[string][]string{"a": {"1", "3"}, "q": {"x y&z"}},
		RequestContext: events.APIGatewayProxyRequestContext{
			Stage: "prod", Identity: events.APIGatewayRequestIdentity{SourceIP: "198.51.100.7"},
		},
		Body:            base64.StdEncoding.EncodeToString([]byte{0xff, 0xfe, 'x'}),
		IsBase64Encoded: true,
	}
}

func albEvent(multi bool) events.ALBTargetGroupRequest {
	e := events.ALBTargetGroupRequest{
		HTTPMethod: "GET",
		Path:       "/a2a/x%20y",
		RequestContext: events.ALBTargetGroupRequestContext{
			ELB: events.ELBContext{TargetGroupArn: "arn:aws:elasticloadbalancing:eu-west-3:123456789012:targetgroup/svz/0123456789abcdef"},
		},
	}
	if multi {
		e.MultiValueHeaders = map[string][]string{"host": {"alb.example.com"}, "x-forwarded-for": {"192.0.2.4, 10.0.0.1"}, "accept": {"a", "b"}}
		e.MultiValueQueryStringParameters = map[string][]string{"q": {"x%20y"}, "a": {"1", "2"}}
	} else {
		e.Headers = map[string]string{"host": "alb.example.com", "x-forwarded-for": "192.0.2.4"}
		e.QueryStringParameters = map[string]string{"q": "x%20y"}
	}
	return e
}

func payload(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// invoke runs one event through the adapter the way the runtime does and returns the payload.
func invoke(t *testing.T, h http.Handler, ev []byte, opts ...Option) []byte {
	t.Helper()
	log, _ := testkit.Logger()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := NewHandler(h, append([]Option{WithLogger(log)}, opts...)...).Invoke(ctx, ev)
	if err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	return out
}

// reply is the union of the buffered payload shapes.
type reply struct {
	StatusCode        int                 `json:"statusCode"`
	StatusDescription string              `json:"statusDescription"`
	Headers           map[string]string   `json:"headers"`
	MultiValueHeaders map[string][]string `json:"multiValueHeaders"`
	Cookies           []string            `json:"cookies"`
	Body              string              `json:"body"`
	IsBase64Encoded   bool                `json:"isBase64Encoded"`
}

func decodeReply(t *testing.T, b []byte) (reply, map[string]json.RawMessage) {
	t.Helper()
	var r reply
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("payload %s: %v", b, err)
	}
	_ = json.Unmarshal(b, &fields)
	return r, fields
}

func TestRequestTranslation(t *testing.T) {
	cases := []struct {
		name   string
		event  any
		want   echoed
		fields string // payload members, sorted
	}{
		{
			name:  "function URL",
			event: functionURLEvent("POST", "/a2a/x%20y", "b=2&a=1&a=3", `{"jsonrpc":"2.0"}`),
			want: echoed{
				Method: "POST", RequestURI: "/a2a/x%20y?b=2&a=1&a=3", Path: "/a2a/x y", RawQuery: "b=2&a=1&a=3",
				Query: map[string][]string{"a": {"1", "3"}, "b": {"2"}}, Host: urlDomain, RemoteAddr: "203.0.113.9:0",
				Header: http.Header{
					"X-Api-Key": {"key-1"}, "Content-Type": {"application/json"}, "Accept": {"application/json, text/plain"},
					"X-Forwarded-For": {"203.0.113.9"}, "X-Forwarded-Proto": {"https"}, "Cookie": {"c1=v1; c2=v2"},
				},
				Body: b64(`{"jsonrpc":"2.0"}`), ContentLength: 17, HasDeadline: true,
			},
			fields: "body,cookies,headers,isBase64Encoded,statusCode",
		},
		{
			name:  "HTTP API with a named stage and a decoded path",
			event: httpAPIEvent(),
			want: echoed{
				Method: "PUT", RequestURI: "/a2a/x%20y%3Fz?b=2&a=1&a=3", Path: "/a2a/x y?z", RawQuery: "b=2&a=1&a=3",
				Query: map[string][]string{"a": {"1", "3"}, "b": {"2"}}, Host: "api.example.com", RemoteAddr: "[2001:db8::1]:0",
				Header: http.Header{"X-Api-Key": {"key-1"}, "Content-Length": {"5"}, "Cookie": {"c1=v1"}},
				Body:   b64("hello"), ContentLength: 5, HasDeadline: true,
			},
			fields: "body,cookies,headers,isBase64Encoded,statusCode",
		},
		{
			name:  "REST API with a base64 body and decoded query parameters",
			event: restEvent(),
			want: echoed{
				Method: "POST", RequestURI: "/a2a/x%20y?a=1&a=3&q=x+y%26z", Path: "/a2a/x y", RawQuery: "a=1&a=3&q=x+y%26z",
				Query: map[string][]string{"a": {"1", "3"}, "q": {"x y&z"}}, Host: "rest.example.com", RemoteAddr: "198.51.100.7:0",
				Header: http.Header{"X-Api-Key": {"key-1"}, "Accept": {"a", "b"}},
				Body:   b64("\xff\xfex"), ContentLength: 3, HasDeadline: true,
			},
			fields: "body,isBase64Encoded,multiValueHeaders,statusCode",
		},
		{
			name:  "ALB with multi-value headers and raw query parameters",
			event: albEvent(true),
			want: echoed{
				Method: "GET", RequestURI: "/a2a/x%20y?a=1&a=2&q=x%20y", Path: "/a2a/x y", RawQuery: "a=1&a=2&q=x%20y",
				Query: map[string][]string{"a": {"1", "2"}, "q": {"x y"}}, Host: "alb.example.com", RemoteAddr: "192.0.2.4:0",
				Header:      http.Header{"X-Forwarded-For": {"192.0.2.4, 10.0.0.1"}, "Accept": {"a", "b"}},
				HasDeadline: true,
			},
			fields: "body,isBase64Encoded,multiValueHeaders,statusCode,statusDescription",
		},
		{
			name:  "ALB with single-value headers",
			event: albEvent(false),
			want: echoed{
				Method: "GET", RequestURI: "/a2a/x%20y?q=x%20y", Path: "/a2a/x y", RawQuery: "q=x%20y",
				Query: map[string][]string{"q": {"x y"}}, Host: "alb.example.com", RemoteAddr: "192.0.2.4:0",
				Header:      http.Header{"X-Forwarded-For": {"192.0.2.4"}},
				HasDeadline: true,
			},
			fields: "body,headers,isBase64Encoded,statusCode,statusDescription",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := invoke(t, echo(), payload(t, tc.event))
			r, fields := decodeReply(t, out)
			if got := strings.Join(slices.Sorted(maps.Keys(fields)), ","); got != tc.fields {
				t.Errorf("payload members %s, want %s", got, tc.fields)
			}
			if r.StatusCode != http.StatusCreated || r.IsBase64Encoded {
				t.Fatalf("status %d base64 %v: %s", r.StatusCode, r.IsBase64Encoded, out)
			}
			var got echoed
			if err := json.Unmarshal([]byte(r.Body), &got); err != nil {
				t.Fatalf("body %q: %v", r.Body, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				gb, _ := json.Marshal(got)
				wb, _ := json.Marshal(tc.want)
				t.Fatalf("handler saw\n %s\nwant\n %s", gb, wb)
			}
		})
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestResponseHeaders(t *testing.T) {
	cookies := []string{"session=1; Path=/; HttpOnly", "theme=dark"}
	multi := map[string][]string{"Content-Type": {"application/json"}, "X-Multi": {"a", "b"}, "Set-Cookie": cookies}
	t.Run("payload 2.0", func(t *testing.T) {
		r, _ := decodeReply(t, invoke(t, echo(), payload(t, functionURLEvent("GET", "/", "", ""))))
		if want := map[string]string{"Content-Type": "application/json", "X-Multi": "a,b"}; !reflect.DeepEqual(r.Headers, want) {
			t.Errorf("headers %v, want %v", r.Headers, want)
		}
		if !reflect.DeepEqual(r.Cookies, cookies) {
			t.Errorf("cookies %v", r.Cookies)
		}
	})
	t.Run("REST", func(t *testing.T) {
		r, _ := decodeReply(t, invoke(t, echo(), payload(t, restEvent())))
		if !reflect.DeepEqual(r.MultiValueHeaders, multi) {
			t.Errorf("multiValueHeaders %v, want %v", r.MultiValueHeaders, multi)
		}
	})
	t.Run("ALB multi-value", func(t *testing.T) {
		r, _ := decodeReply(t, invoke(t, echo(), payload(t, albEvent(true))))
		if !reflect.DeepEqual(r.MultiValueHeaders, multi) || r.StatusDescription != "201 Created" {
			t.Errorf("multiValueHeaders %v, description %q", r.MultiValueHeaders, r.StatusDescription)
		}
	})
	t.Run("ALB single-value", func(t *testing.T) {
		log, logs := testkit.Logger()
		out, err := NewHandler(echo(), WithLogger(log)).Invoke(context.Background(), payload(t, albEvent(false)))
		if err != nil {
			t.Fatal(err)
		}
		r, _ := decodeReply(t, out)
		want := map[string]string{"Content-Type": "application/json", "X-Multi": "a,b", "Set-Cookie": cookies[0]}
		if !reflect.DeepEqual(r.Headers, want) {
			t.Errorf("headers %v, want %v", r.Headers, want)
		}
		if !strings.Contains(logs.String(), `"msg":"an ALB without multi-value headers relays one Set-Cookie header: enable multi-value headers on the target group","dropped":1`) {
			t.Errorf("dropped cookie not reported: %s", logs)
		}
	})
}

func TestResponseBodies(t *testing.T) {
	cases := []struct {
		path, wantBody, wantType string
		wantStatus               int
		wantB64                  bool
	}{
		{path: "/binary", wantBody: base64.StdEncoding.EncodeToString([]byte{0xff, 0x00, 0x01, 'a'}), wantB64: true, wantType: "application/octet-stream", wantStatus: 200},
		{path: "/sniff", wantBody: "<html><body>hi</body></html>", wantType: "text/html; charset=utf-8", wantStatus: 200},
		{path: "/nocontent", wantBody: "", wantStatus: 204},
		{path: "/events", wantBody: "event: one\ndata: {}\n\nevent: poll\ndata: feature not supported\n\n", wantType: "text/event-stream", wantStatus: 200},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			for _, ev := range []any{functionURLEvent("GET", tc.path, "", ""), restEvent(), albEvent(true)} {
				switch e := ev.(type) {
				case events.APIGatewayProxyRequest:
					e.Path, e.IsBase64Encoded, e.Body = tc.path, false, ""
					ev = e
				case events.ALBTargetGroupRequest:
					e.Path = tc.path
					ev = e
				}
				r, _ := decodeReply(t, invoke(t, echo(), payload(t, ev)))
				ct := r.Headers["Content-Type"]
				if r.MultiValueHeaders != nil {
					ct = strings.Join(r.MultiValueHeaders["Content-Type"], ",")
				}
				if r.StatusCode != tc.wantStatus || r.Body != tc.wantBody || r.IsBase64Encoded != tc.wantB64 || ct != tc.wantType {
					t.Fatalf("%T: %d %q base64=%v type=%q", ev, r.StatusCode, r.Body, r.IsBase64Encoded, ct)
				}
			}
		})
	}
}

func TestHead(t *testing.T) {
	r, _ := decodeReply(t, invoke(t, echo(), payload(t, functionURLEvent("HEAD", "/sniff", "", ""))))
	if r.StatusCode != 200 || r.Body != "" {
		t.Fatalf("HEAD: %d %q", r.StatusCode, r.Body)
	}
}

// timestampRE matches the timestamp of the 500 body, also when the body is a JSON string.
var timestampRE = regexp.MustCompile(`(\\?"timestamp\\?":\\?")[0-9T:.+\-]+`)

func maskTimestamp(b []byte) []byte { return timestampRE.ReplaceAll(b, []byte("${1}T")) }

const internalError = `{"error":"Internal Error","error_type":"internal_error","detail":"The controller failed to handle the request","timestamp":"T","status_code":500}`

func TestPanicBuffered(t *testing.T) {
	for _, ev := range []any{functionURLEvent("GET", "/panic", "", ""), albEvent(false)} {
		if e, ok := ev.(events.ALBTargetGroupRequest); ok {
			e.Path = "/panic"
			ev = e
		}
		log, logs := testkit.Logger()
		out, err := NewHandler(echo(), WithLogger(log)).Invoke(context.Background(), payload(t, ev))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), "sk-secret-value") {
			t.Fatalf("the panic value leaked: %s", out)
		}
		r, _ := decodeReply(t, out)
		if got := string(maskTimestamp([]byte(r.Body))); r.StatusCode != 500 || got != internalError {
			t.Fatalf("%T: %d %s", ev, r.StatusCode, r.Body)
		}
		if r.Headers["Content-Type"] != "application/json" || r.Headers["X-Before-Panic"] != "" {
			t.Fatalf("headers %v", r.Headers)
		}
		if !strings.Contains(logs.String(), `"msg":"handler panicked","panic":"boom: sk-secret-value"`) {
			t.Fatalf("panic not logged: %s", logs)
		}
	}
}

func TestDeadline(t *testing.T) {
	deadline := time.Now().Add(42 * time.Second).Truncate(time.Millisecond)
	var got time.Time
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got, _ = r.Context().Deadline() })
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if _, err := NewHandler(h).Invoke(ctx, payload(t, functionURLEvent("GET", "/", "", ""))); err != nil {
		t.Fatal(err)
	}
	if !got.Equal(deadline) {
		t.Fatalf("request deadline %v, want the invocation's %v", got, deadline)
	}
}

func TestBadEvents(t *testing.T) {
	cases := []struct {
		name, payload, wantErr string
	}{
		{"direct invoke", `{}`, ErrUnsupportedEvent.Error()},
		{"schedule", `{"source":"aws.events","detail-type":"Scheduled Event"}`, ErrUnsupportedEvent.Error()},
		{"payload 2.0 without a method", `{"version":"2.0","rawPath":"/"}`, "lambda: payload 2.0 event without requestContext.http.method"},
		{"ALB without a method", `{"requestContext":{"elb":{}}}`, "lambda: ALB event without httpMethod"},
		{"not JSON", `[1,2]`, "json: cannot unmarshal array into Go value of type lambda.event"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewHandler(echo()).Invoke(context.Background(), []byte(tc.payload))
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("error %v, want %s", err, tc.wantErr)
			}
		})
	}
}

func TestBadRequests(t *testing.T) {
	badBody := functionURLEvent("POST", "/a2a", "", "%%%")
	badBody.IsBase64Encoded = true
	badTarget := functionURLEvent("GET", "/a2a", "a=\x01", "")
	for _, ev := range []events.LambdaFunctionURLRequest{badBody, badTarget} {
		log, logs := testkit.Logger()
		out, err := NewHandler(echo(), WithLogger(log)).Invoke(context.Background(), payload(t, ev))
		if err != nil {
			t.Fatal(err)
		}
		r, _ := decodeReply(t, out)
		if r.StatusCode != 400 || r.Body != `{"detail":"Bad Request"}` {
			t.Fatalf("%d %s", r.StatusCode, r.Body)
		}
		if !strings.Contains(logs.String(), `"msg":"bad request","source":"Function URL","reason":"body is not valid base64: illegal base64 data at input byte 0"`) &&
			!strings.Contains(logs.String(), `"msg":"bad request","source":"Function URL","reason":"invalid request target: net/url: invalid control character in URL"`) {
			t.Fatalf("not logged: %s", logs)
		}
	}
}

func TestBadRequestStreaming(t *testing.T) {
	ev := functionURLEvent("POST", "/a2a", "", "%%%")
	ev.IsBase64Encoded = true
	r, _ := streamInvoke(t, echo(), ev)
	br := bufio.NewReader(r)
	if p := readPrelude(t, br); p["statusCode"] != float64(400) {
		t.Fatalf("prelude %v", p)
	}
	if body, _ := io.ReadAll(br); string(body) != badRequestBody {
		t.Fatalf("body %q", body)
	}
}

func TestEscapePath(t *testing.T) {
	cases := map[string]string{
		"":               "/",
		"/":              "/",
		"a":              "/a",
		"/a%20b":         "/a%20b",
		"/a b":           "/a%20b",
		"/a?b#c":         "/a%3Fb%23c",
		"/%zz%2":         "/%25zz%252",
		"/é":             "/%C3%A9",
		"/:@!$&'()*+,;=": "/:@!$&'()*+,;=",
	}
	for in, want := range cases {
		if got := escapePath(in); got != want {
			t.Errorf("escapePath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestStripStage(t *testing.T) {
	cases := []struct{ path, stage, want string }{
		{"/prod/a2a", "prod", "/a2a"},
		{"/prod", "prod", "/"},
		{"/production/a2a", "prod", "/production/a2a"},
		{"/a2a", "$default", "/a2a"},
		{"/a2a", "", "/a2a"},
	}
	for _, tc := range cases {
		if got := stripStage(tc.path, tc.stage); got != tc.want {
			t.Errorf("stripStage(%q, %q) = %q, want %q", tc.path, tc.stage, got, tc.want)
		}
	}
}

// streamInvoke runs a Function URL event in streaming mode and returns the reader the runtime
// would copy to the Runtime API.
func streamInvoke(t *testing.T, h http.Handler, ev events.LambdaFunctionURLRequest) (io.Reader, string) {
	t.Helper()
	log, _ := testkit.Logger()
	a := &adapter{h: h, config: config{stream: true, log: log}}
	var e event
	if err := json.Unmarshal(payload(t, ev), &e); err != nil {
		t.Fatal(err)
	}
	out, err := a.invoke(context.Background(), &e)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := out.(io.Reader)
	if !ok {
		t.Fatalf("streaming mode returned %T", out)
	}
	ct := ""
	if c, ok := out.(interface{ ContentType() string }); ok {
		ct = c.ContentType()
	}
	return r, ct
}

// readPrelude reads the streaming framing's JSON prelude and its 8 NUL separator.
func readPrelude(t *testing.T, br *bufio.Reader) map[string]any {
	t.Helper()
	var raw []byte
	for {
		b, err := br.ReadBytes(0)
		if err != nil {
			t.Fatalf("prelude: %v (read %q)", err, raw)
		}
		raw = append(raw, b...)
		if bytes.HasSuffix(raw, []byte("}\x00")) {
			break
		}
	}
	rest := make([]byte, 7)
	if _, err := io.ReadFull(br, rest); err != nil || !bytes.Equal(rest, make([]byte, 7)) {
		t.Fatalf("separator: %q %v", rest, err)
	}
	var prelude map[string]any
	if err := json.Unmarshal(raw[:len(raw)-1], &prelude); err != nil {
		t.Fatalf("prelude %q: %v", raw, err)
	}
	return prelude
}

func TestStreamingFlushes(t *testing.T) {
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Add("Set-Cookie", "a=1")
		_, _ = io.WriteString(w, "event: one\ndata: {}\n\n")
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("flush: %v", err)
		}
		<-release
		_, _ = io.WriteString(w, "event: two\ndata: {}\n\n")
	})
	r, ct := streamInvoke(t, h, functionURLEvent("GET", "/a2a/events", "", ""))
	if ct != "application/vnd.awslambda.http-integration-response" {
		t.Fatalf("content type %q", ct)
	}
	br := bufio.NewReader(r)
	prelude := readPrelude(t, br)
	want := map[string]any{"statusCode": float64(200), "headers": map[string]any{"Content-Type": "text/event-stream"}, "cookies": []any{"a=1"}}
	if !reflect.DeepEqual(prelude, want) {
		t.Fatalf("prelude %v, want %v", prelude, want)
	}
	// The first event arrives while the handler is still running.
	first := make([]byte, len("event: one\ndata: {}\n\n"))
	if _, err := io.ReadFull(br, first); err != nil || string(first) != "event: one\ndata: {}\n\n" {
		t.Fatalf("first event %q %v", first, err)
	}
	close(release)
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "event: two\ndata: {}\n\n" {
		t.Fatalf("rest %q %v", rest, err)
	}
}

func TestStreamingLargeAndSniffed(t *testing.T) {
	big := strings.Repeat("<p>x</p>", 5000) // over one chunk, delivered before the handler ends
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, big) })
	r, _ := streamInvoke(t, h, functionURLEvent("GET", "/", "", ""))
	br := bufio.NewReader(r)
	prelude := readPrelude(t, br)
	if prelude["headers"].(map[string]any)["Content-Type"] != "text/html; charset=utf-8" {
		t.Fatalf("prelude %v", prelude)
	}
	body, err := io.ReadAll(br)
	if err != nil || string(body) != big {
		t.Fatalf("body %d bytes, %v", len(body), err)
	}
}

func TestStreamingPanics(t *testing.T) {
	t.Run("before the response", func(t *testing.T) {
		r, _ := streamInvoke(t, echo(), functionURLEvent("GET", "/panic", "", ""))
		br := bufio.NewReader(r)
		prelude := readPrelude(t, br)
		if prelude["statusCode"] != float64(500) || !reflect.DeepEqual(prelude["headers"], map[string]any{"Content-Type": "application/json"}) {
			t.Fatalf("prelude %v", prelude)
		}
		body, _ := io.ReadAll(br)
		if got := string(maskTimestamp(body)); got != internalError {
			t.Fatalf("body %s", body)
		}
	})
	t.Run("after the response started", func(t *testing.T) {
		r, _ := streamInvoke(t, echo(), functionURLEvent("GET", "/late-panic", "", ""))
		br := bufio.NewReader(r)
		if p := readPrelude(t, br); p["statusCode"] != float64(200) {
			t.Fatalf("prelude %v", p)
		}
		body, err := io.ReadAll(br)
		if string(body) != "data: first\n\n" || !errors.Is(err, errHandlerPanicked) {
			t.Fatalf("body %q, error %v", body, err)
		}
	})
}

// TestStreamingClientGone checks that a handler learns the stream is gone when the runtime stops
// reading (it closes the response).
func TestStreamingClientGone(t *testing.T) {
	flushErr := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		for range 100 {
			_, _ = io.WriteString(w, "data: x\n\n")
			if err := rc.Flush(); err != nil {
				flushErr <- err
				return
			}
		}
		flushErr <- nil
	})
	r, _ := streamInvoke(t, h, functionURLEvent("GET", "/", "", ""))
	readPrelude(t, bufio.NewReader(r))
	r.(io.Closer).Close()
	select {
	case err := <-flushErr:
		if !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("flush after close: %v", err)
		}
	case <-time.After(30 * time.Second): // generous: a loaded machine
		t.Fatal("the handler never learned the stream was closed")
	}
}

func TestStreamingOnlyForFunctionURLs(t *testing.T) {
	for _, ev := range []any{httpAPIEvent(), restEvent(), albEvent(true)} {
		r, _ := decodeReply(t, invoke(t, echo(), payload(t, ev), WithStreaming()))
		if r.StatusCode != 201 {
			t.Fatalf("%T answered %d", ev, r.StatusCode)
		}
	}
}
