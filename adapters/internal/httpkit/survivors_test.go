package httpkit_test

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/supervaize/svz/adapters/internal/httpkit"
)

// Tests that each kill a mutant the mutation tester left alive (issue 30).

// TestNotLoopbackHostEdges: brackets stripped only as a pair, a port's digits 0 to 9, and a
// quoted host cut past 64 bytes (64 kept whole).
func TestNotLoopbackHostEdges(t *testing.T) {
	const fix = "; open it as 127.0.0.1, [::1] or localhost"
	named := func(host string) string { return `the request names the host "` + host + `"` + fix }
	for _, tc := range []struct{ host, want string }{
		{"x::1]", named("x::1]")},
		{"[::1", named("[::1")},
		{"]", named("]")},
		{"[", named("[")},
		{"127.0.0.1:9", ""},
		{"127.0.0.1:3009", ""},
		{"127.0.0.1:0", ""},
		{"127.0.0.1:9/", named("127.0.0.1:9/")},
		{strings.Repeat("b", 64), named(strings.Repeat("b", 64))},
		{strings.Repeat("b", 65), named(strings.Repeat("b", 64) + "…")},
	} {
		if got := httpkit.NotLoopbackHost(tc.host); got != tc.want {
			t.Errorf("Host %q: %q, want %q", tc.host, got, tc.want)
		}
	}
}

// TestRefusalClosesOnUnreadBody: a refusal (400 and above) that left the request's body unread
// closes the connection after the answer; a refusal of a request without a body, one whose body
// was read, and a success keep it open.
func TestRefusalClosesOnUnreadBody(t *testing.T) {
	tr := httpkit.NewTracker(slog.New(slog.DiscardHandler), 0)
	srv := server(t, tr.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("read") != "" {
			_, _ = io.Copy(io.Discard, r.Body)
		}
		switch r.URL.Query().Get("code") {
		case "400":
			w.WriteHeader(http.StatusBadRequest)
		case "399":
			w.WriteHeader(399)
		case "hints":
			w.Header().Set("Link", "</a.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			w.WriteHeader(http.StatusUnauthorized)
		default:
			w.WriteHeader(http.StatusUnauthorized)
		}
		_, _ = io.WriteString(w, `{"detail":"no"}`)
	})))
	for _, tc := range []struct {
		method, query string
		close         bool
	}{
		{"POST", "", true},
		{"POST", "code=400", true},
		{"POST", "code=hints", true},
		{"POST", "code=399", false},
		{"POST", "read=1", false},
		{"GET", "", false},
	} {
		var body io.Reader
		if tc.method == "POST" {
			body = strings.NewReader(`{"a":1}`)
		}
		req, _ := http.NewRequest(tc.method, srv.URL+"/?"+tc.query, body)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.Close != tc.close {
			t.Errorf("%s ?%s (%d): connection closed %v, want %v", tc.method, tc.query, resp.StatusCode, resp.Close, tc.close)
		}
	}
}

// TestPanicAfterWriteHeader: a handler that panics after WriteHeader(200), before writing any
// body, has started its response: it is aborted (the client gets no complete response), never
// completed with the 500 body under the 200 already set.
func TestPanicAfterWriteHeader(t *testing.T) {
	tr := httpkit.NewTracker(slog.New(slog.DiscardHandler), 0)
	srv := server(t, tr.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		panic("after the header")
	})))
	resp, err := srv.Client().Get(srv.URL + "/x")
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("a response aborted after its header reached the client as %d %q", resp.StatusCode, body)
	}
}
