package health_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/deploy/health"
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
		_, _ = io.WriteString(w, `{"schema_version":"a2a_2023_v1","agents":[]}`)
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

const methodNotFound = `{"jsonrpc":"2.0","id":"svz-health","error":{"code":-32601,"message":"Method not found: svz/ping"}}`

func gate() *health.Gate {
	return &health.Gate{Timeout: 2 * time.Second, Interval: 10 * time.Millisecond}
}

func TestCheckPassesAfterStartup(t *testing.T) {
	srv, calls := controller(t, 2, http.StatusOK, methodNotFound)
	rep, err := gate().Check(context.Background(), srv.URL+"/", key)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Attempts != 3 || rep.RPC != "error -32601" || rep.URL != srv.URL || calls.Load() != 3 {
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
