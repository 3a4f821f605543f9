package rie

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

func TestResponse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		inv     Invocation
		status  int
		headers http.Header
		body    string
	}{
		{"buffered", Invocation{Status: 200, Payload: []byte(`{"statusCode":201,"headers":{"content-type":"application/json"},"cookies":["a=1","b=2"],"body":"{}"}`)},
			201, http.Header{"Content-Type": {"application/json"}, "Set-Cookie": {"a=1", "b=2"}}, "{}"},
		{"base64", Invocation{Status: 200, Payload: []byte(`{"statusCode":200,"body":"` + base64.StdEncoding.EncodeToString([]byte{0, 1, 2}) + `","isBase64Encoded":true}`)},
			200, http.Header{}, "\x00\x01\x02"},
		{"no status", Invocation{Status: 200, Payload: []byte(`{"body":"x"}`)}, 200, http.Header{}, "x"},
		{"streamed", Invocation{Status: 200, Payload: []byte("{\"statusCode\":200,\"headers\":{\"Content-Type\":\"text/event-stream\"}}\x00\x00\x00\x00\x00\x00\x00\x00event: one\ndata: {}\n\n")},
			200, http.Header{"Content-Type": {"text/event-stream"}}, "event: one\ndata: {}\n\n"},
		{"init error", Invocation{Status: 500, Payload: []byte(`{"errorType":"Runtime.InitError","errorMessage":"no"}`)},
			502, http.Header{"Content-Type": {"application/json"}}, `{"errorType":"Runtime.InitError","errorMessage":"no"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := Response(tc.inv)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !reflect.DeepEqual(resp.Header, tc.headers) || string(body) != tc.body {
				t.Fatalf("%d %v %q", resp.StatusCode, resp.Header, body)
			}
		})
	}
	for _, bad := range []string{`not json`, `{"statusCode":42}`, `{"statusCode":200,"body":"!!","isBase64Encoded":true}`, "{not json}\x00\x00\x00\x00\x00\x00\x00\x00body"} {
		if _, err := Response(Invocation{Status: 200, Payload: []byte(bad)}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestFunctionURLEvent: a request becomes the payload 2.0 event a Function URL sends: path and
// query as sent, lower-case headers, cookies apart, the body in base64, the Function URL domain.
func TestFunctionURLEvent(t *testing.T) {
	f := &FunctionURL{}
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080/a2a/x%20y?b=2&a=1", strings.NewReader(`{"jsonrpc":"2.0"}`))
	req.Header.Set("X-API-Key", "k")
	req.Header.Add("Cookie", "a=1; b=2")
	ev := f.event(req, []byte(`{"jsonrpc":"2.0"}`))
	raw, _ := json.Marshal(ev)
	if ev.RawPath != "/a2a/x%20y" || ev.RawQueryString != "b=2&a=1" || ev.Headers["x-api-key"] != "k" || ev.Headers["host"] != "127.0.0.1:8080" ||
		!reflect.DeepEqual(ev.Cookies, []string{"a=1", "b=2"}) || ev.Headers["cookie"] != "" || !ev.IsBase64Encoded ||
		ev.RequestContext.DomainName != "local.lambda-url.us-east-1.on.aws" || ev.RequestContext.HTTP.Method != "POST" || ev.Version != "2.0" {
		t.Fatalf("event %s", raw)
	}
	if b, _ := base64.StdEncoding.DecodeString(ev.Body); string(b) != `{"jsonrpc":"2.0"}` {
		t.Fatalf("body %q", b)
	}
	f.Domain = "hello-dev.lambda-url.eu-west-3.on.aws"
	if ev := f.event(req, nil); ev.RequestContext.DomainName != f.Domain || ev.RequestContext.DomainPrefix != "hello-dev" {
		t.Fatalf("domain %s %s", ev.RequestContext.DomainName, ev.RequestContext.DomainPrefix)
	}
}

func FuzzResponse(f *testing.F) {
	f.Add(200, []byte(`{"statusCode":201,"cookies":["a=1"],"body":"{}"}`))
	f.Add(200, []byte("{\"statusCode\":200}\x00\x00\x00\x00\x00\x00\x00\x00body"))
	f.Add(500, []byte(`{"errorType":"x"}`))
	f.Fuzz(func(t *testing.T, status int, payload []byte) {
		resp, err := Response(Invocation{Status: status, Payload: payload})
		if err != nil {
			return
		}
		if status != 200 && resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("failed invocation answered %d", resp.StatusCode)
		}
		if resp.StatusCode < 100 || resp.StatusCode > 599 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		_, _ = io.ReadAll(resp.Body)
	})
}
