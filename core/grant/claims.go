package grant

import (
	"math"
	"strconv"
	"strings"

	"github.com/supervaize/svz/core/internal/wirejson"
)

// claims are the workspace-grant token claims (WorkspaceAuthorizationClaims) once typed. A value
// is never modified after parseClaims: cached tokens share it between concurrent calls.
type claims struct {
	iss string
	// aud holds the audience; a single string is kept as a one-element list (same matching rule).
	aud               []string
	grantID           string
	workspaceID       string
	workspaceSlug     string // "" when absent
	agentID           string
	agentSlug         string
	serverID          string
	scopes            []string
	agentWorkspaceRef string // "" when absent
	hasWorkspaceSlug  bool
	hasAgentWSRef     bool
	exp               int64
	iat, nbf          int64
	hasIat, hasNbf    bool
}

// parseClaims performs step 7 of spec §4.3. It is stricter than the reference's pydantic model on
// purpose: numbers must be JSON numbers with an integral value (no "123" strings, no booleans),
// identity claims and scopes must be non-empty strings. Extra claims are allowed. An absent
// scopes claim is an empty list, as in the reference (whose validator only judges a scopes claim
// that is present): the call is then refused for its missing scopes (step 17). The message names
// every faulty claim and what is wrong with it, never the values.
func parseClaims(m *object) (*claims, *Error) {
	var c claims
	var problems []string
	bad := func(name, what string) { problems = append(problems, name+": "+what) }

	required := func(name string, dst *string) {
		raw, ok := m.get(name)
		switch s, isStr := m.String(raw); {
		case !ok:
			bad(name, "field required")
		case !isStr:
			bad(name, "must be a string")
		case strings.TrimSpace(s) == "":
			bad(name, "must not be empty")
		default:
			*dst = s
		}
	}
	optional := func(name string, dst *string, present *bool) {
		raw, ok := m.get(name)
		if !ok || string(raw) == "null" {
			return
		}
		s, isStr := m.String(raw)
		if !isStr {
			bad(name, "must be a string")
			return
		}
		*dst = s
		if present != nil {
			*present = true
		}
	}
	number := func(name string, dst *int64, present *bool) {
		raw, ok := m.get(name)
		if !ok || (present != nil && string(raw) == "null") {
			if present == nil {
				bad(name, "field required")
			}
			return
		}
		n, isInt := jsonInt(raw)
		if !isInt {
			bad(name, "must be an integer")
			return
		}
		*dst = n
		if present != nil {
			*present = true
		}
	}

	required("iss", &c.iss)
	switch raw, ok := m.get("aud"); {
	case !ok:
		bad("aud", "field required")
	default:
		if s, isStr := m.String(raw); isStr {
			c.aud = []string{s}
		} else if list, isList := stringList(m, raw); isList {
			c.aud = list
		} else {
			bad("aud", "must be a string or a list of strings")
		}
	}
	var sub, jti string
	optional("sub", &sub, nil)
	required("grant_id", &c.grantID)
	required("workspace_id", &c.workspaceID)
	optional("workspace_slug", &c.workspaceSlug, &c.hasWorkspaceSlug)
	required("agent_id", &c.agentID)
	required("agent_slug", &c.agentSlug)
	required("server_id", &c.serverID)
	switch raw, ok := m.get("scopes"); {
	case !ok: // no scope at all: refused at step 17, naming the scopes the call needs
	default:
		list, isList := stringList(m, raw)
		switch {
		case !isList:
			bad("scopes", "must be a list of strings")
		case len(list) == 0:
			bad("scopes", "workspace authorization token must include scopes")
		case hasBlank(list):
			bad("scopes", "must not contain empty scopes")
		default:
			c.scopes = list
		}
	}
	optional("agent_workspace_ref", &c.agentWorkspaceRef, &c.hasAgentWSRef)
	number("iat", &c.iat, &c.hasIat)
	number("nbf", &c.nbf, &c.hasNbf)
	number("exp", &c.exp, nil)
	optional("jti", &jti, nil)

	if len(problems) > 0 {
		return nil, refuse(CodeInvalidClaims, msgInvalidClaims+strings.Join(problems, "; "))
	}
	return &c, nil
}

// jsonInt reads a JSON number with an integral value that fits an int64 (1779100600, 1.7791006e9).
func jsonInt(raw []byte) (int64, bool) {
	if len(raw) == 0 || !(raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
		return 0, false
	}
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return n, true
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, false
	}
	return int64(f), true
}

// stringList reads a JSON array of strings, a member of o.
func stringList(o *object, raw []byte) ([]string, bool) {
	if wirejson.Kind(raw) != '[' {
		return nil, false
	}
	out := make([]string, 0, 8)
	for it := range wirejson.Elements(raw) {
		s, ok := o.String(it)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

func hasBlank(list []string) bool {
	for _, s := range list {
		if strings.TrimSpace(s) == "" {
			return true
		}
	}
	return false
}
