package lambda

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/supervaize/svz/adapters/adaptertest"
)

// TestHostileEvents sends the controller events whose HTTP request no client should send, or
// that only an event can carry (a header value with a line break, a key repeated in multi-value
// headers, a missing path), as Function URL and REST API events: each gets the controller's
// documented answer, and no header of the answer carries a byte of the request.
func TestHostileEvents(t *testing.T) {
	h := adaptertest.Handler(t)
	key := adaptertest.APIKey
	rpcBody := `{"jsonrpc":"2.0","id":1,"method":"missing.method"}`
	const notFound, noKey = `{"detail":"Not Found"}`, `{"detail":"Invalid or missing API key"}`
	methodNotFound := `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found: missing.method"}}`
	type ev = map[string]any
	fnURL := func(method, path, query, body string, headers map[string]string) ev {
		return ev{"version": "2.0", "rawPath": path, "rawQueryString": query, "headers": headers, "body": body,
			"requestContext": ev{"domainName": urlDomain, "http": ev{"method": method, "sourceIp": "203.0.113.9"}}}
	}
	rest := func(method, path, body string, multi map[string][]string) ev {
		return ev{"httpMethod": method, "path": path, "multiValueHeaders": multi, "body": body,
			"requestContext": ev{"stage": "prod", "identity": ev{"sourceIp": "198.51.100.7"}}}
	}
	cases := []struct {
		name   string
		event  ev
		status int
		body   string
	}{
		{"line break in the key", fnURL("POST", "/a2a", "", rpcBody, map[string]string{"x-api-key": key + "\r\nX-Injected: 1"}), 401, noKey},
		{"line break in Last-Event-ID", fnURL("GET", "/a2a/events", "", "", map[string]string{"x-api-key": key, "last-event-id": "0-0\r\nX-Injected: 1"}), 400,
			`{"detail":"the Last-Event-ID header is not an id of this stream (expected \"\u003cepoch\u003e-\u003cposition\u003e\"): reconnect without it, or with the id of the last event received"}`},
		{"line break in the method", fnURL("POST\r\nX-Injected: 1", "/a2a", "", rpcBody, map[string]string{"x-api-key": key}), 405, `{"detail":"Method Not Allowed"}`},
		{"lower-case method", fnURL("post", "/a2a", "", rpcBody, map[string]string{"x-api-key": key}), 405, `{"detail":"Method Not Allowed"}`},
		{"no path", fnURL("GET", "", "", "", nil), 404, notFound},
		{"path without a slash", fnURL("GET", ".well-known/agents.json", "", "", nil), 200, ""},
		{"encoded line break in the path", fnURL("GET", "/a2a%0D%0AX-Injected:%201", "", "", nil), 404, notFound},
		{"raw line break in the path", fnURL("GET", "/a2a\r\nX-Injected: 1", "", "", nil), 404, notFound},
		{"encoded slash", fnURL("GET", "/a2a%2Fevents", "", "", map[string]string{"x-api-key": key}), 404, notFound},
		{"no headers", fnURL("POST", "/a2a", "", rpcBody, nil), 401, noKey},
		{"the key as a cookie", ev{"version": "2.0", "rawPath": "/a2a", "body": rpcBody, "cookies": []string{"x-api-key=" + key},
			"requestContext": ev{"domainName": urlDomain, "http": ev{"method": "POST"}}}, 401, noKey},
		{"wrong key first of two", rest("POST", "/a2a", rpcBody, map[string][]string{"X-API-Key": {"wrong", key}}), 401, noKey},
		{"right key first of two", rest("POST", "/a2a", rpcBody, map[string][]string{"x-api-key": {key, "wrong"}}), 200, methodNotFound},
		{"empty key list", rest("POST", "/a2a", rpcBody, map[string][]string{"x-api-key": {}}), 401, noKey},
		{"body over the limit", fnURL("POST", "/a2a", "", `{"pad":"`+strings.Repeat("a", 1100_000)+`"}`, map[string]string{"x-api-key": key}), 413,
			`{"detail":"Request body too large: the limit is 1048576 bytes"}`},
		{"binary body, not base64-flagged", fnURL("POST", "/a2a", "", "\x00\x01{", map[string]string{"x-api-key": key}), 200,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := invoke(t, h, payload(t, tc.event))
			r, _ := decodeReply(t, out)
			if r.StatusCode != tc.status || tc.body != "" && r.Body != tc.body {
				t.Fatalf("%d %s, want %d %s", r.StatusCode, r.Body, tc.status, tc.body)
			}
			for name, v := range r.Headers {
				if strings.ContainsAny(name+v, "\r\n") || strings.Contains(name+v, "Injected") {
					t.Fatalf("header %s: %q carries request bytes", name, v)
				}
			}
			for name, vs := range r.MultiValueHeaders {
				if s := name + strings.Join(vs, ""); strings.ContainsAny(s, "\r\n") || strings.Contains(s, "Injected") {
					t.Fatalf("header %s: %q carries request bytes", name, vs)
				}
			}
			if !json.Valid([]byte(r.Body)) {
				t.Fatalf("body is not JSON: %q", r.Body)
			}
		})
	}
}
