// Package health decides whether a deployed controller serves: its health route reports
// "operational", its agent list names at least one Agent Card and every card listed (the first 20)
// answers as JSON with its supervaizer.v2 block, and a JSON-RPC call carrying the stored API key reaches the
// controller. Any JSON-RPC envelope proves the key (the probe method does not exist, so the
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
	"net/url"
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
	// Timeout bounds the retries, 0 means 3 minutes: no attempt starts after it. An attempt in
	// flight is never cut short (each request is bounded by the client's timeout), so a failure
	// reports the service's last answer, never a deadline that a slow machine happened to hit.
	Timeout time.Duration
	// Interval is the first pause between attempts, doubled up to 15 s; 0 means 2 s.
	Interval time.Duration
}

// Report is the outcome of one successful check.
type Report struct {
	URL      string `json:"url"`
	Attempts int    `json:"attempts"`
	// Cards are the Agent Card URLs checked, as agents.json lists them.
	Cards []string `json:"cards"`
	// RPC is the JSON-RPC answer to the probe, e.g. "error -32601".
	RPC string `json:"rpc"`
}

// Summary says in words what a passed check verified, for progress lines: the probe's -32601 is
// the expected answer (its method does not exist), so it reads as the success it is.
func (r Report) Summary() string {
	answer := "the probe answered " + r.RPC
	switch r.RPC {
	case "error -32601":
		answer = "an unknown method answers -32601 as expected"
	case "result":
		answer = "the probe answered a result"
	}
	return fmt.Sprintf("healthy after %d attempt(s): health operational, %d Agent Card(s) served, /a2a answered: API key accepted, JSON-RPC reachable (%s)",
		r.Attempts, len(r.Cards), answer)
}

// maxCards bounds the cards checked per attempt: a controller serves a handful of agents.
const maxCards = 20

// Check probes baseURL until the three checks pass, the API key is rejected, or the timeout ends.
// The first attempt always runs to its end.
func (g *Gate) Check(ctx context.Context, baseURL, apiKey string) (Report, error) {
	timeout, interval := g.Timeout, g.Interval
	if timeout <= 0 {
		timeout = 3 * time.Minute
	}
	if interval <= 0 {
		interval = 2 * time.Second
	}
	deadline := time.Now().Add(timeout)
	base := strings.TrimRight(baseURL, "/")
	rep := Report{URL: base}
	for {
		rep.Attempts++
		cards, rpc, err := g.once(ctx, base, apiKey)
		if err == nil {
			rep.Cards, rep.RPC = cards, rpc
			return rep, nil
		}
		if errors.Is(err, ErrUnauthorized) || ctx.Err() != nil {
			return rep, err
		}
		if time.Now().Add(interval).After(deadline) {
			return rep, fmt.Errorf("%s not healthy after %d attempts in %s: %w", base, rep.Attempts, timeout, err)
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return rep, fmt.Errorf("%s not healthy after %d attempts: %w", base, rep.Attempts, err)
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

// once runs the checks in order and returns the cards checked and the probe's answer.
func (g *Gate) once(ctx context.Context, base, apiKey string) ([]string, string, error) {
	body, err := g.get(ctx, base+"/.well-known/health", "/.well-known/health")
	if err != nil {
		return nil, "", err
	}
	var h struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(body, &h); err != nil {
		return nil, "", fmt.Errorf("GET /.well-known/health: not JSON: %w", err)
	}
	if h.Status != "operational" {
		return nil, "", fmt.Errorf("GET /.well-known/health: status %q, want \"operational\"", h.Status)
	}
	body, err = g.get(ctx, base+"/.well-known/agents.json", "/.well-known/agents.json")
	if err != nil {
		return nil, "", err
	}
	cards, err := cardURLs(base, body)
	if err != nil {
		return nil, "", fmt.Errorf("GET /.well-known/agents.json: %w", err)
	}
	for _, c := range cards {
		label := cardLabel(c)
		body, err := g.get(ctx, c, label)
		if err != nil {
			return nil, "", err
		}
		if err := checkCard(body); err != nil {
			return nil, "", fmt.Errorf("GET %s: %w", label, err)
		}
	}
	rpc, err := g.rpc(ctx, base+"/a2a", apiKey)
	return cards, rpc, err
}

// cardURLs reads the agent list and resolves each agent_card_url against the service URL (the
// controller lists relative URLs when it has no public URL). It wants at least one agent.
func cardURLs(base string, body []byte) ([]string, error) {
	var list struct {
		Agents []struct {
			AgentCardURL string `json:"agent_card_url"`
		} `json:"agents"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("not an agent list: %w", err)
	}
	if len(list.Agents) == 0 {
		return nil, errors.New("no agent listed, so no Agent Card to check")
	}
	b, err := url.Parse(base + "/")
	if err != nil {
		return nil, fmt.Errorf("service URL: %w", err)
	}
	var cards []string
	for i, a := range list.Agents {
		if i == maxCards {
			break
		}
		if a.AgentCardURL == "" {
			return nil, fmt.Errorf("agent %d has no agent_card_url", i)
		}
		ref, err := url.Parse(a.AgentCardURL)
		if err != nil {
			return nil, fmt.Errorf("agent %d: agent_card_url is not a URL", i)
		}
		u := b.ResolveReference(ref)
		if u.Scheme != "http" && u.Scheme != "https" {
			return nil, fmt.Errorf("agent %d: agent_card_url scheme %q, want http or https", i, u.Scheme)
		}
		if u.Host == "" {
			return nil, fmt.Errorf("agent %d: agent_card_url has no host", i)
		}
		cards = append(cards, u.String())
	}
	return cards, nil
}

// cardLabel names a card in messages by its path (the host is the service's, or the public URL's).
func cardLabel(card string) string {
	u, err := url.Parse(card)
	if err != nil || u.Path == "" {
		return "Agent Card"
	}
	return u.Path
}

// checkCard wants a JSON Agent Card carrying the supervaizer.v2 block, which Studio reads. Member
// names are matched exactly, as Studio matches them.
func checkCard(body []byte) error {
	var card map[string]json.RawMessage
	if err := json.Unmarshal(body, &card); err != nil {
		return fmt.Errorf("not a JSON Agent Card: %w", err)
	}
	var ext map[string]json.RawMessage
	if raw, ok := card["supervaizer"]; !ok || json.Unmarshal(raw, &ext) != nil || ext == nil {
		return errors.New("the Agent Card has no supervaizer block")
	}
	if v2 := bytes.TrimSpace(ext["v2"]); len(v2) == 0 || v2[0] != '{' {
		return errors.New("the Agent Card has no supervaizer.v2 block")
	}
	return nil
}

// get fetches a JSON document; label names it in errors.
func (g *Gate) get(ctx context.Context, target, label string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", label, err)
	}
	req.Header.Set("Accept", "application/json")
	body, status, err := g.do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", label, err)
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d: %s", label, status, excerpt(body))
	}
	return body, nil
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
