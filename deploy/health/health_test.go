package health_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/deploy/health"
	"github.com/supervaize/svz/examples/helloworld/hello"
)

const key = "k-0123456789abcdef0123456789abcdef"

// controller answers as the Supervaizer controller does, after `failures` failing health checks.
func controller(t *testing.T, failures int32, rpcStatus int, rpcBody string) (*httptest.Server, *atomic.Int32) {
	var calls atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/health", func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) <= failures {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, `{"schema_version":"a2a_2023_v1","status":"operational","agents":{}}`)
	})
	mux.HandleFunc("GET /.well-known/agents.json", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"schema_version":"a2a_2023_v1","agents":[{"name":"Hello","agent_card_url":"`+cardPath+`"}]}`)
	})
	mux.HandleFunc("GET "+cardPath, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, validCard)
	})
	mux.HandleFunc("POST /a2a", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if string(body) != health.Probe || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "bad probe", http.StatusBadRequest)
			return
		}
		if r.Header.Get("X-API-Key") != key {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"detail":"Invalid or missing API key"}`)
			return
		}
		w.WriteHeader(rpcStatus)
		_, _ = io.WriteString(w, rpcBody)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &calls
}

// cardPath is where the test controllers serve their one Agent Card.
const cardPath = "/.well-known/agents/v1.0/hello_agent.json"

const validCard = `{"name":"Hello","version":"1.0","supervaizer":{"v2":{"supervaizer_contract_version":2,"agent":{"slug":"hello"}}}}`

const methodNotFound = `{"jsonrpc":"2.0","id":"svz-health","error":{"code":-32601,"message":"Method not found: svz/ping"}}`

// gate passes as soon as the controller is healthy: its deadline only bounds a failing test.
func gate() *health.Gate {
	return &health.Gate{Timeout: time.Minute, Interval: 10 * time.Millisecond}
}

func TestCheckPassesAfterStartup(t *testing.T) {
	srv, calls := controller(t, 2, http.StatusOK, methodNotFound)
	rep, err := gate().Check(context.Background(), srv.URL+"/", key)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Attempts != 3 || rep.RPC != "error -32601" || rep.URL != srv.URL || calls.Load() != 3 ||
		!reflect.DeepEqual(rep.Cards, []string{srv.URL + cardPath}) {
		t.Fatalf("report %+v after %d health calls", rep, calls.Load())
	}
}

func TestCheckWrongKeyFailsAtOnce(t *testing.T) {
	srv, _ := controller(t, 0, http.StatusOK, methodNotFound)
	rep, err := gate().Check(context.Background(), srv.URL, "wrong-key")
	if !errors.Is(err, health.ErrUnauthorized) || rep.Attempts != 1 {
		t.Fatalf("err %v after %d attempts, want ErrUnauthorized at once", err, rep.Attempts)
	}
	if strings.Contains(err.Error(), "wrong-key") {
		t.Fatal("the key is in the error")
	}
}

func TestCheckFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"server error", http.StatusBadGateway, "upstream", "POST /a2a: HTTP 502: upstream"},
		{"not json", http.StatusOK, "<html>", "POST /a2a: not a JSON-RPC response: invalid character '<' looking for beginning of value"},
		{"not json-rpc", http.StatusOK, `{"ok":true}`, `POST /a2a: not a JSON-RPC 2.0 response: {"ok":true}`},
		{"no result or error", http.StatusOK, `{"jsonrpc":"2.0","id":"x"}`, `POST /a2a: JSON-RPC response without result or error code: {"jsonrpc":"2.0","id":"x"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := controller(t, 0, tc.status, tc.body)
			g := &health.Gate{Timeout: 100 * time.Millisecond, Interval: 10 * time.Millisecond}
			_, err := g.Check(context.Background(), srv.URL, key)
			if err == nil || !strings.HasSuffix(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), srv.URL+" not healthy after ") {
				t.Fatalf("err %v, want … %s", err, tc.want)
			}
		})
	}
}

// TestCheckAttemptOutlivesTimeout: the timeout only stops new attempts. An attempt that outlasts it
// (a loaded machine, a slow cold start) runs to its end and the error is the service's answer,
// never "context deadline exceeded".
func TestCheckAttemptOutlivesTimeout(t *testing.T) {
	srv, calls := controller(t, 0, http.StatusBadGateway, "init failed")
	g := &health.Gate{Timeout: time.Nanosecond, Interval: time.Hour}
	rep, err := g.Check(context.Background(), srv.URL, key)
	want := srv.URL + " not healthy after 1 attempts in 1ns: POST /a2a: HTTP 502: init failed"
	if err == nil || err.Error() != want || rep.Attempts != 1 || calls.Load() != 1 {
		t.Fatalf("err %v after %d attempts\nwant %s", err, rep.Attempts, want)
	}
}

func TestCheckNotOperational(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"status":"degraded"}`)
	}))
	defer srv.Close()
	g := &health.Gate{Timeout: 50 * time.Millisecond, Interval: 10 * time.Millisecond}
	_, err := g.Check(context.Background(), srv.URL, key)
	if err == nil || !strings.HasSuffix(err.Error(), `GET /.well-known/health: status "degraded", want "operational"`) {
		t.Fatalf("err %v", err)
	}
}

// cardSite serves a healthy controller whose agent list and card are given; list may name the
// server's own URL as {base}.
func cardSite(t *testing.T, list string, cardStatus int, card string) *httptest.Server {
	t.Helper()
	var srv *httptest.Server
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/health", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"status":"operational"}`)
	})
	mux.HandleFunc("GET /.well-known/agents.json", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, strings.ReplaceAll(list, "{base}", srv.URL))
	})
	mux.HandleFunc("GET "+cardPath, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(cardStatus)
		_, _ = io.WriteString(w, card)
	})
	mux.HandleFunc("POST /a2a", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, methodNotFound)
	})
	srv = httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestCheckAgentCards: the gate fetches every card agents.json lists (absolute, or relative to the
// service URL) and wants a JSON card with its supervaizer.v2 block.
func TestCheckAgentCards(t *testing.T) {
	relative := `{"agents":[{"agent_card_url":"` + cardPath + `"}]}`
	absolute := `{"agents":[{"agent_card_url":"{base}` + cardPath + `"}]}`
	for _, tc := range []struct {
		name       string
		list       string
		cardStatus int
		card       string
		want       string // error suffix; "" passes
	}{
		{"relative", relative, http.StatusOK, validCard, ""},
		{"absolute", absolute, http.StatusOK, validCard, ""},
		{"no agent", `{"schema_version":"a2a_2023_v1","agents":[]}`, http.StatusOK, validCard,
			"GET /.well-known/agents.json: no agent listed, so no Agent Card to check"},
		{"list not json", `<html>`, http.StatusOK, validCard,
			"GET /.well-known/agents.json: not an agent list: invalid character '<' looking for beginning of value"},
		{"no card url", `{"agents":[{"name":"x"}]}`, http.StatusOK, validCard,
			"GET /.well-known/agents.json: agent 0 has no agent_card_url"},
		{"bad scheme", `{"agents":[{"agent_card_url":"file:///etc/passwd"}]}`, http.StatusOK, validCard,
			`GET /.well-known/agents.json: agent 0: agent_card_url scheme "file", want http or https`},
		{"no host", `{"agents":[{"agent_card_url":"http:card"}]}`, http.StatusOK, validCard,
			`GET /.well-known/agents.json: agent 0: agent_card_url has no host`},
		{"card missing", relative, http.StatusNotFound, `{"detail":"Not Found"}`,
			`GET ` + cardPath + `: HTTP 404: {"detail":"Not Found"}`},
		{"card not json", relative, http.StatusOK, `<html>`,
			"GET " + cardPath + ": not a JSON Agent Card: invalid character '<' looking for beginning of value"},
		{"no supervaizer block", absolute, http.StatusOK, `{"name":"Hello"}`,
			"GET " + cardPath + ": the Agent Card has no supervaizer block"},
		{"null v2", relative, http.StatusOK, `{"supervaizer":{"v2":null}}`,
			"GET " + cardPath + ": the Agent Card has no supervaizer.v2 block"},
		{"v2 not an object", relative, http.StatusOK, `{"supervaizer":{"v2":"yes"}}`,
			"GET " + cardPath + ": the Agent Card has no supervaizer.v2 block"},
		{"names differ in case", relative, http.StatusOK, `{"Supervaizer":{"V2":{}}}`,
			"GET " + cardPath + ": the Agent Card has no supervaizer block"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := cardSite(t, tc.list, tc.cardStatus, tc.card)
			g := &health.Gate{Timeout: 100 * time.Millisecond, Interval: 10 * time.Millisecond}
			rep, err := g.Check(context.Background(), srv.URL, key)
			if tc.want == "" {
				if err != nil || !reflect.DeepEqual(rep.Cards, []string{srv.URL + cardPath}) || rep.RPC != "error -32601" {
					t.Fatalf("report %+v, err %v", rep, err)
				}
				return
			}
			if err == nil || !strings.HasSuffix(err.Error(), tc.want) {
				t.Fatalf("err %v\nwant … %s", err, tc.want)
			}
		})
	}
}

// TestCheckHelloWorld runs the gate against the real Hello World controller, without a public URL
// (relative card URLs) and with one (absolute).
func TestCheckHelloWorld(t *testing.T) {
	for _, public := range []bool{false, true} {
		var srv *httptest.Server
		env := map[string]string{"SUPERVAIZER_API_KEY": key, "SUPERVAIZER_STORE": "memory", "SUPERVAIZER_SERVER_ID": "2f8e1c3a-5b6d-4e7f-8a9b-0c1d2e3f4a5b"}
		srv = httptest.NewUnstartedServer(nil)
		srv.Start()
		t.Cleanup(srv.Close)
		if public {
			env["SUPERVAIZER_PUBLIC_URL"] = srv.URL
		}
		h, err := hello.Build(context.Background(), func(k string) string { return env[k] }, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		srv.Config.Handler = h
		rep, err := gate().Check(context.Background(), srv.URL, key)
		if err != nil {
			t.Fatalf("public URL %v: %v", public, err)
		}
		if want := []string{srv.URL + "/.well-known/agents/v1.0/hello-world-ai-agent_agent.json"}; !reflect.DeepEqual(rep.Cards, want) || rep.RPC != "error -32601" {
			t.Fatalf("public URL %v: report %+v", public, rep)
		}
	}
}

func TestParseEnvelope(t *testing.T) {
	for body, want := range map[string]string{
		methodNotFound: "error -32601",
		`{"jsonrpc":"2.0","result":{"status":"ok"}}`:              "result",
		`{"jsonrpc":"2.0","error":{"code":-32030,"message":"x"}}`: "error -32030",
	} {
		got, err := health.ParseEnvelope([]byte(body))
		if err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", body, got, err, want)
		}
	}
	for _, body := range []string{``, `[]`, `{"jsonrpc":"1.0","result":1}`, `{"jsonrpc":"2.0","error":{"message":"no code"}}`} {
		if got, err := health.ParseEnvelope([]byte(body)); err == nil {
			t.Errorf("%s: accepted as %q", body, got)
		}
	}
}

func FuzzParseEnvelope(f *testing.F) {
	f.Add([]byte(methodNotFound))
	f.Add([]byte(`{"jsonrpc":"2.0","result":{}}`))
	f.Add([]byte(`{"detail":"Invalid or missing API key"}`))
	f.Add([]byte(`{"jsonrpc":"2.0","error":{"code":1e400}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := health.ParseEnvelope(body)
		if err == nil && got != "result" && !strings.HasPrefix(got, "error ") {
			t.Fatalf("accepted %q as %q", body, got)
		}
		if err != nil && len(err.Error()) > 400 {
			t.Fatalf("error too long: %d bytes", len(err.Error()))
		}
	})
}

// TestSummary: a passed check says in words what it verified; the expected -32601 never reads as
// a failure.
func TestSummary(t *testing.T) {
	for _, tc := range []struct {
		rpc, want string
	}{
		{"error -32601", "healthy after 2 attempt(s): health operational, 1 Agent Card(s) served, /a2a answered: API key accepted, JSON-RPC reachable (an unknown method answers -32601 as expected)"},
		{"result", "healthy after 2 attempt(s): health operational, 1 Agent Card(s) served, /a2a answered: API key accepted, JSON-RPC reachable (the probe answered a result)"},
		{"error -32030", "healthy after 2 attempt(s): health operational, 1 Agent Card(s) served, /a2a answered: API key accepted, JSON-RPC reachable (the probe answered error -32030)"},
	} {
		rep := health.Report{Attempts: 2, Cards: []string{"http://x/card.json"}, RPC: tc.rpc}
		if got := rep.Summary(); got != tc.want {
			t.Errorf("%s: %q\nwant %q", tc.rpc, got, tc.want)
		}
	}
}
