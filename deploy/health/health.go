// Package health decides whether a deployed controller serves: its health route reports
// "operational", its Agent Card list answers, and a JSON-RPC call carrying the stored API key reaches
// the controller. Any JSON-RPC envelope proves the key (the probe method does not exist, so the
// controller answers -32601); HTTP 401 proves the key wrong and fails at once, without retrying.
package health

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Probe is the JSON-RPC request sent to /a2a.
const Probe = `{"jsonrpc":"2.0","id":"svz-health","method":"svz/ping"}`

// ErrUnauthorized is returned (wrapped) when the controller rejects the API key.
var ErrUnauthorized = errors.New("the controller rejected the API key (HTTP 401)")

// Gate checks a deployed controller, retrying while it starts.
type Gate struct {
	// Client sends the requests; nil uses a client with a 30 s timeout per request.
	Client *http.Client
	// Timeout bounds the whole check, retries included; 0 means 3 minutes.
	Timeout time.Duration
	// Interval is the first pause between attempts, doubled up to 15 s; 0 means 2 s.
	Interval time.Duration
}

// Report is the outcome of one successful check.
type Report struct {
	URL      string `json:"url"`
	Attempts int    `json:"attempts"`
	// RPC is the JSON-RPC answer to the probe, e.g. "error -32601".
	RPC string `json:"rpc"`
}

// Check probes baseURL until the three checks pass, the API key is rejected, or the timeout ends.
func (g *Gate) Check(ctx context.Context, baseURL, apiKey string) (Report, error) {
	timeout, interval := g.Timeout, g.Interval
	if timeout <= 0 {
		timeout = 3 * time.Minute
	}
	if interval <= 0 {
		interval = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	base := strings.TrimRight(baseURL, "/")
	rep := Report{URL: base}
	for {
		rep.Attempts++
		rpc, err := g.once(ctx, base, apiKey)
		if err == nil {
			rep.RPC = rpc
			return rep, nil
		}
		if errors.Is(err, ErrUnauthorized) {
			return rep, err
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return rep, fmt.Errorf("%s not healthy after %d attempts in %s: %w", base, rep.Attempts, timeout, err)
		case <-t.C:
		}
		interval = min(interval*2, 15*time.Second)
	}
}

func (g *Gate) client() *http.Client {
	if g.Client != nil {
		return g.Client
	}
	return &http.Client{Timeout: 30 * time.Second}
}

// once runs the three checks in order.
func (g *Gate) once(ctx context.Context, base, apiKey string) (string, error) {
	var h struct {
		Status string `json:"status"`
	}
	if err := g.getJSON(ctx, base+"/.well-known/health", &h); err != nil {
		return "", err
	}
	if h.Status != "operational" {
		return "", fmt.Errorf("GET /.well-known/health: status %q, want \"operational\"", h.Status)
	}
	var cards json.RawMessage
	if err := g.getJSON(ctx, base+"/.well-known/agents.json", &cards); err != nil {
		return "", err
	}
	return g.rpc(ctx, base+"/a2a", apiKey)
}

func (g *Gate) getJSON(ctx context.Context, url string, v any) error {
	path := url[strings.Index(url, "/.well-known"):]
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	req.Header.Set("Accept", "application/json")
	body, status, err := g.do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	if status != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d: %s", path, status, excerpt(body))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: not JSON: %w", path, err)
	}
	return nil
}

func (g *Gate) rpc(ctx context.Context, url, apiKey string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(Probe)))
	if err != nil {
		return "", fmt.Errorf("POST /a2a: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", apiKey)
	body, status, err := g.do(req)
	if err != nil {
		return "", fmt.Errorf("POST /a2a: %w", err)
	}
	switch {
	case status == http.StatusUnauthorized:
		return "", ErrUnauthorized
	case status != http.StatusOK:
		return "", fmt.Errorf("POST /a2a: HTTP %d: %s", status, excerpt(body))
	}
	return ParseEnvelope(body)
}

// ParseEnvelope accepts a JSON-RPC 2.0 response (result or error) and summarises it.
func ParseEnvelope(body []byte) (string, error) {
	var env struct {
		JSONRPC string          `json:"jsonrpc"`
		Result  json.RawMessage `json:"result"`
		Error   *struct {
			Code    *int   `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return "", fmt.Errorf("POST /a2a: not a JSON-RPC response: %w", err)
	}
	switch {
	case env.JSONRPC != "2.0":
		return "", fmt.Errorf("POST /a2a: not a JSON-RPC 2.0 response: %s", excerpt(body))
	case env.Error != nil && env.Error.Code != nil:
		return fmt.Sprintf("error %d", *env.Error.Code), nil
	case env.Error == nil && len(env.Result) > 0:
		return "result", nil
	}
	return "", fmt.Errorf("POST /a2a: JSON-RPC response without result or error code: %s", excerpt(body))
}

func (g *Gate) do(req *http.Request) ([]byte, int, error) {
	resp, err := g.client().Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("read body: %w", err)
	}
	return body, resp.StatusCode, nil
}

// excerpt keeps error messages short; controller bodies carry no secrets by design.
func excerpt(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
