package studio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
)

// StepAgentLookup names the agent lookup in errors.
const StepAgentLookup = "agent lookup"

// AgentRecord is Studio's view of one agent (spec §7.4).
type AgentRecord struct {
	ID               string
	Slug             string
	Status           string
	OnboardingStatus string
	// ParametersEncrypted is set when OnboardingStatus is "configured": the parameter values,
	// encrypted to the controller's public key (Decrypt, then DecodeParameterValues).
	ParametersEncrypted string
}

// OnboardingConfigured is the onboarding status of an agent whose parameters the operator set.
const OnboardingConfigured = "configured"

// Agent looks an agent up: by its Studio id when known (GET …/agents/{id}), else by slug
// (…/agents/by-slug/{slug}). When studioID is given the answer's id must be it.
func (c *Client) Agent(ctx context.Context, studioID, slug string) (*AgentRecord, error) {
	path := "agents/by-slug/" + url.PathEscape(slug)
	if studioID != "" {
		path = "agents/" + url.PathEscape(studioID)
	}
	k := call{step: StepAgentLookup, method: http.MethodGet, url: c.workspaceURL(path), hints: map[int]string{
		http.StatusNotFound:  fmt.Sprintf("Studio has no agent %q in workspace %q: register the controller first (svz studio register, or start it with the Studio settings)", slug, c.s.WorkspaceID),
		http.StatusForbidden: registerHints[http.StatusForbidden],
	}}
	resp, err := c.do(ctx, k)
	if err != nil {
		return nil, err
	}
	if err := decodeJSON(k, resp, new(json.RawMessage)); err != nil {
		return nil, err
	}
	rec, err := DecodeAgent(resp.body, studioID)
	if err != nil {
		return nil, k.fail(resp.status, err)
	}
	return rec, nil
}

// DecodeAgent reads Studio's answer to an agent lookup: an object, possibly nested in object,
// agent or data, whose id must be studioID when that is given.
func DecodeAgent(body []byte, studioID string) (*AgentRecord, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return nil, errors.New("the agent Studio returned is not an object")
	}
	for _, wrap := range [...]string{"object", "agent", "data"} {
		if inner, ok := m[wrap]; ok {
			var n map[string]json.RawMessage
			if json.Unmarshal(inner, &n) == nil && n != nil {
				m = n
				break
			}
		}
	}
	str := func(name string) (string, error) {
		v, ok := m[name]
		if !ok || string(v) == "null" {
			return "", nil
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", fmt.Errorf("member %s of the agent Studio returned is not a string", name)
		}
		return s, nil
	}
	rec := &AgentRecord{}
	for _, f := range [...]struct {
		name string
		dst  *string
	}{{"id", &rec.ID}, {"slug", &rec.Slug}, {"status", &rec.Status}, {"onboarding_status", &rec.OnboardingStatus},
		{"parameters_encrypted", &rec.ParametersEncrypted}} {
		v, err := str(f.name)
		if err != nil {
			return nil, err
		}
		*f.dst = v
	}
	if rec.ID == "" {
		return nil, errors.New("the agent Studio returned has no id")
	}
	if studioID != "" && rec.ID != studioID {
		return nil, fmt.Errorf("Agent ID mismatch: %s != %s", studioID, printable(rec.ID, 100))
	}
	return rec, nil
}

// ParameterValue is one decrypted {name, value} pair.
type ParameterValue struct {
	Name  string
	Value string
	Set   bool // false when Studio sent null
}

// DecodeParameterValues reads the decrypted parameters_encrypted: a JSON list of {"name", "value"}
// objects, value a string or null. Errors name the entry, never a value.
func DecodeParameterValues(plain string) ([]ParameterValue, error) {
	var items []map[string]json.RawMessage
	if err := json.Unmarshal([]byte(plain), &items); err != nil {
		return nil, errors.New("decrypted parameters are not a JSON list of {name, value} objects")
	}
	out := make([]ParameterValue, 0, len(items))
	for i, it := range items {
		var pv ParameterValue
		if it == nil || json.Unmarshal(it["name"], &pv.Name) != nil || pv.Name == "" {
			return nil, fmt.Errorf("decrypted parameter %d has no name", i)
		}
		switch raw, ok := it["value"]; {
		case !ok:
			return nil, fmt.Errorf("decrypted parameter %q has no value member", pv.Name)
		case string(raw) == "null":
		default:
			if json.Unmarshal(raw, &pv.Value) != nil {
				return nil, fmt.Errorf("decrypted parameter %q: value must be a string or null", pv.Name)
			}
			pv.Set = true
		}
		out = append(out, pv)
	}
	return out, nil
}
