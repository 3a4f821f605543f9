package studio

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/internal/fingerprint"
)

// Constants of the server.register details (spec §7.2).
const (
	APIVersion                = "v1"
	ControllerContractVersion = "1.0"
	APIBasePath               = "/api"
	// ControllerVersion is svz's version, sent as controller_version.
	ControllerVersion = "0.1.0"
	// DefaultEnvironment is the environment of a controller without SUPERVAIZER_ENVIRONMENT.
	DefaultEnvironment = "dev"
	// EnvEnvironment names the deployment environment (informative).
	EnvEnvironment = "SUPERVAIZER_ENVIRONMENT"
)

// controllerEndpoints is the reference's controller endpoint map (CONTROLLER_ENDPOINTS), sent
// as is: Studio reads the contract from it. svz serves HEALTH_CHECK and GET_AGENT_BY_SLUG; the
// v1 job routes are not part of a v2 controller (docs/differences.md).
func controllerEndpoints() map[string]string {
	return map[string]string{
		"POST_AGENT_JOB_START":                 "/api/supervaizer/agents/{agent_slug}/jobs",
		"POST_AGENT_JOB_CUSTOM":                "/api/supervaizer/agents/{agent_slug}/custom/{method_name}",
		"POST_AGENT_STATUS":                    "/api/supervaizer/agents/{agent_slug}/status",
		"GET_JOB_STATUS":                       "/api/supervaizer/jobs/{job_id}",
		"GET_AGENT_JOB_STATUS":                 "/api/supervaizer/agents/{agent_slug}/jobs/{job_id}",
		"POST_AGENT_STOP":                      "/api/supervaizer/agents/{agent_slug}/stop",
		"GET_AGENT_JOB_LIST":                   "/api/supervaizer/agents/{agent_slug}/jobs",
		"GET_AGENT_BY_ID":                      "/api/supervaizer/agents/{agent_id}",
		"GET_AGENT_LIST":                       "/api/supervaizer/agents",
		"GET_AGENT_BY_SLUG":                    "/api/supervaizer/agents/{agent_slug}",
		"POST_AGENT_PARAMETERS":                "/api/supervaizer/agents/{agent_slug}/parameters",
		"POST_AGENT_CASE_UPDATE":               "/api/supervaizer/jobs/{job_id}/cases/{case_id}/update",
		"POST_AGENT_PARAMETER_VALIDATION":      "/api/supervaizer/agents/{agent_slug}/validate-agent-parameters",
		"POST_AGENT_METHOD_FIELD_VALIDATION":   "/api/supervaizer/agents/{agent_slug}/validate-method-fields",
		"DATA_RESOURCE":                        "/api/agents/{agent_slug}/data/{resource_name}/",
		"DATA_RESOURCE_ITEM":                   "/api/agents/{agent_slug}/data/{resource_name}/{item_id}",
		"DATA_RESOURCE_IMPORT":                 "/api/agents/{agent_slug}/data/{resource_name}/import/",
		"HEALTH_CHECK":                         ".well-known/health",
		"CONTROLLER_CONTRACT":                  "/api/supervaizer/contract",
		"POST_CONTROLLER_REGISTRATION_REFRESH": "/api/supervaizer/registration/refresh",
	}
}

// ServerRegistration is the details of the server.register event (build_server_registration_info).
// It holds the controller's API key in clear, as Studio must store it: it prints and logs
// without it.
type ServerRegistration struct {
	ServerID                  string                               `json:"server_id"`
	URL                       string                               `json:"url"`
	URI                       string                               `json:"uri"`
	APIVersion                string                               `json:"api_version"`
	ControllerVersion         string                               `json:"controller_version"`
	ControllerContractVersion string                               `json:"controller_contract_version"`
	APIBasePath               string                               `json:"api_base_path"`
	Endpoints                 map[string]string                    `json:"endpoints"`
	Environment               string                               `json:"environment"`
	PublicKey                 string                               `json:"public_key"`
	APIKey                    string                               `json:"api_key"`
	Docs                      RegistrationDocs                     `json:"docs"`
	Agents                    []contract.AgentRegistrationContract `json:"agents"`
}

// RegistrationDocs are the documentation URLs of the details (informative: svz serves none).
type RegistrationDocs struct {
	Swagger string `json:"swagger"`
	Redoc   string `json:"redoc"`
	OpenAPI string `json:"openapi"`
}

// String keeps the API key out of fmt output.
func (r ServerRegistration) String() string {
	return fmt.Sprintf("server.register{server_id=%s url=%s agents=%d api_key=%s}", r.ServerID, r.URL, len(r.Agents), fingerprint.Of(r.APIKey))
}

// GoString keeps the API key out of %#v.
func (r ServerRegistration) GoString() string { return r.String() }

// LogValue keeps the API key out of slog output.
func (r ServerRegistration) LogValue() slog.Value { return slog.StringValue(r.String()) }

// Server is what a controller tells Studio about itself.
type Server struct {
	// ServerID is SUPERVAIZER_SERVER_ID.
	ServerID string
	// URL is the public URL Studio calls (SUPERVAIZER_PUBLIC_URL, or the deployed service's URL).
	URL string
	// PublicKey is the public half of SUPERVAIZER_PRIVATE_KEY.
	PublicKey *rsa.PublicKey
	// APIKey is SUPERVAIZER_API_KEY, the key Studio must store and send as X-API-Key.
	APIKey string
	// Environment is SUPERVAIZER_ENVIRONMENT ("dev" when empty).
	Environment string
	// Agents are the agents' registration payloads.
	Agents []contract.AgentRegistrationContract
}

// NewServerRegistration builds the details of s, or reports every missing piece.
func NewServerRegistration(s Server) (*ServerRegistration, error) {
	var errs []error
	if len(strings.TrimSpace(s.ServerID)) <= 5 {
		errs = append(errs, errors.New("SUPERVAIZER_SERVER_ID must be set and longer than 5 characters to register with Studio"))
	}
	if !strings.HasPrefix(s.URL, "https://") && !strings.HasPrefix(s.URL, "http://") {
		errs = append(errs, fmt.Errorf("the controller's public URL must be an absolute http(s) URL to register with Studio, got %q (set SUPERVAIZER_PUBLIC_URL)", s.URL))
	}
	if s.PublicKey == nil {
		errs = append(errs, fmt.Errorf("%s is required to register with Studio: Studio encrypts the agents' parameters to its public key", EnvPrivateKey))
	}
	if s.APIKey == "" {
		errs = append(errs, errors.New("SUPERVAIZER_API_KEY is required to register with Studio: Studio stores it to call the controller"))
	}
	if len(s.Agents) == 0 {
		errs = append(errs, errors.New("no agent to register"))
	}
	var pub string
	if s.PublicKey != nil {
		p, err := PublicKeyPEM(s.PublicKey)
		errs = append(errs, err)
		pub = p
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	url := strings.TrimRight(s.URL, "/")
	env := s.Environment
	if env == "" {
		env = DefaultEnvironment
	}
	return &ServerRegistration{
		ServerID:                  s.ServerID,
		URL:                       url,
		URI:                       ServerURI(s.ServerID),
		APIVersion:                APIVersion,
		ControllerVersion:         ControllerVersion,
		ControllerContractVersion: ControllerContractVersion,
		APIBasePath:               APIBasePath,
		Endpoints:                 controllerEndpoints(),
		Environment:               env,
		PublicKey:                 pub,
		APIKey:                    s.APIKey,
		Docs:                      RegistrationDocs{Swagger: url + "/docs", Redoc: url + "/redoc", OpenAPI: url + "/openapi.json"},
		Agents:                    s.Agents,
	}, nil
}

// ServerURI is the uri of a server: "server:" and six hex pairs joined by "-", like the
// reference's "server:<MAC>". svz derives the pairs from the server id (with the multicast bit
// set, as a MAC that is not a real interface's), so the CLI, a deploy and every instance of one
// server send the same uri.
func ServerURI(serverID string) string {
	sum := sha256.Sum256([]byte("svz-server-uri:" + serverID))
	sum[0] |= 0x01
	parts := make([]string, 6)
	for i := range parts {
		parts[i] = fmt.Sprintf("%02X", sum[i])
	}
	return "server:" + strings.Join(parts, "-")
}

// Event is a controller → Studio event (spec §7.1).
type Event struct {
	Source     map[string]string `json:"source"`
	Workspace  string            `json:"workspace"`
	EventType  string            `json:"event_type"`
	ObjectType string            `json:"object_type"`
	Details    any               `json:"details"`
}

// SendEvent posts e to the workspace's ctrl-events endpoint and returns Studio's JSON answer.
// The workspace is always the account's.
func (c *Client) SendEvent(ctx context.Context, e Event) (json.RawMessage, error) {
	return c.sendEvent(ctx, e, "ctrl-event "+e.EventType, nil, nil)
}

func (c *Client) sendEvent(ctx context.Context, e Event, step string, hints map[int]string, secrets []string) (json.RawMessage, error) {
	e.Workspace = c.s.WorkspaceID
	k := call{step: step, method: http.MethodPost, url: c.workspaceURL("ctrl-events/"), body: e, hints: hints, secrets: secrets}
	resp, err := c.do(ctx, k)
	if err != nil {
		return nil, err
	}
	var raw json.RawMessage
	if err := decodeJSON(k, resp, &raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// Expect is what the controller already knows, that the handshake must agree with.
type Expect struct {
	// Audience is the configured SUPERVAIZER_WORKSPACE_AUTH_AUDIENCE ("" when unset).
	Audience string
	// AgentIDs are the Studio agent ids the controller already has (SUPERVAIZER_STUDIO_AGENT_IDS).
	AgentIDs map[string]string
}

// Outcome is what the handshake gives the controller: the audience of its tokens and the Studio
// agent id of each of its agents.
type Outcome struct {
	// ServerID is the server id Studio registered (the handshake's server_id).
	ServerID string `json:"server_id"`
	// Audience is the aud of the workspace-grant tokens Studio signs for this server.
	Audience string `json:"audience"`
	// StudioServerID is Studio's own id of the server, when Studio says it.
	StudioServerID string `json:"studio_server_id,omitempty"`
	// AgentIDs maps each agent slug to its Studio agent id.
	AgentIDs map[string]string `json:"agent_ids"`
	// StoredKeyFingerprint is the fingerprint of the API key Studio stored.
	StoredKeyFingerprint string `json:"stored_controller_api_key_fingerprint,omitempty"`
}

// AgentIDsValue is AgentIDs as SUPERVAIZER_STUDIO_AGENT_IDS holds them: slug=id, sorted by slug.
func (o *Outcome) AgentIDsValue() string {
	slugs := make([]string, 0, len(o.AgentIDs))
	for s := range o.AgentIDs {
		slugs = append(slugs, s)
	}
	sort.Strings(slugs)
	for i, s := range slugs {
		slugs[i] = s + "=" + o.AgentIDs[s]
	}
	return strings.Join(slugs, ",")
}

// Env is the outcome as the two settings an instance that does not register needs.
func (o *Outcome) Env() map[string]string {
	return map[string]string{grant.EnvAudience: o.Audience, grant.EnvStudioAgentIDs: o.AgentIDsValue()}
}

// registerHints explain the failures of server.register the seeds describe.
var registerHints = map[int]string{
	http.StatusUnauthorized: "Studio rejected " + EnvAPIKey + ": copy it again from Studio (Developer → Environment variables)",
	http.StatusForbidden: EnvWorkspaceID + " must be the workspace slug shown in Studio under Developer → Environment variables, " +
		"and the user of " + EnvAPIKey + " must belong to that workspace and keep Developer access",
	http.StatusNotFound: "no such workspace at " + EnvAPIURL + ": " + EnvWorkspaceID + " must be the workspace slug, and " + EnvAPIURL + " Studio's API origin",
}

// StepRegister names the registration step in errors.
const StepRegister = "server.register"

// Register sends server.register with reg and validates Studio's handshake against exp (spec
// §7.3). Any failure is an *Error naming the step; the controller must not serve then.
func (c *Client) Register(ctx context.Context, reg *ServerRegistration, exp Expect) (*Outcome, error) {
	e := Event{Source: map[string]string{"server": reg.URI}, EventType: "server.register", ObjectType: "server", Details: reg}
	raw, err := c.sendEvent(ctx, e, StepRegister, registerHints, []string{reg.APIKey})
	if err != nil {
		return nil, err
	}
	out, err := ValidateHandshake(raw, reg.APIKey, reg.Agents, exp)
	if err != nil {
		return nil, call{step: StepRegister, method: http.MethodPost, url: c.workspaceURL("ctrl-events/")}.fail(0, err)
	}
	c.log.InfoContext(ctx, "Studio registration handshake verified", "server_id", out.ServerID,
		"controller_key_fingerprint", fingerprint.Of(reg.APIKey), "audience", out.Audience, "agents", len(out.AgentIDs))
	return out, nil
}

// HandshakeError is a handshake that does not let the controller serve. Its message is the
// reference SDK's, word for word.
type HandshakeError struct{ Msg string }

func (e *HandshakeError) Error() string { return e.Msg }

func handshakeFailed(format string, args ...any) error {
	return &HandshakeError{Msg: "Studio registration handshake failed: " + fmt.Sprintf(format, args...)}
}

// ValidateHandshake checks Studio's answer to server.register (src/supervaizer/studio_handshake.py,
// in its order) for a controller whose API key is apiKey and whose agents are agents, and returns
// the outcome. Workspace authorization is always on for a Studio-connected svz controller, so the
// workspace_authorization block is always required. Every message is the reference's.
func ValidateHandshake(raw []byte, apiKey string, agents []contract.AgentRegistrationContract, exp Expect) (*Outcome, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		v = nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, handshakeFailed("server.register response did not include a response object. " +
			"Studio-to-agent API key persistence could not be verified.")
	}
	hs, ok := obj["supervaizer_handshake"].(map[string]any)
	if !ok {
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return nil, handshakeFailed("server.register response did not include supervaizer_handshake. "+
			"Studio-to-agent API key persistence could not be verified. Check that SUPERVAIZE_API_URL points to a Studio "+
			"instance that supports the Supervaizer v2 registration handshake. response_keys=%s", pyList(keys))
	}
	if match, _ := hs["controller_api_key_match"].(bool); !match {
		return nil, handshakeFailed("Studio did not persist the controller API key for server_id=%s. "+
			"controller_key_fingerprint=%s studio_fingerprint=%s reason=%s",
			pyStr(hs["server_id"]), fingerprint.Of(apiKey), pyStr(hs["stored_controller_api_key_fingerprint"]), pyStr(hs["reason"]))
	}
	wa, ok := hs["workspace_authorization"].(map[string]any)
	if !ok {
		return nil, handshakeFailed("workspace authorization is enabled but supervaizer_handshake.workspace_authorization is missing.")
	}
	audience, _ := wa["audience"].(string)
	if strings.TrimSpace(audience) == "" {
		return nil, handshakeFailed("workspace authorization is enabled but supervaizer_handshake.workspace_authorization.audience is missing.")
	}
	if exp.Audience != "" && exp.Audience != audience {
		return nil, handshakeFailed("configured workspace authorization audience does not match Studio's server audience.")
	}
	bindings, ok := wa["agents"].([]any)
	if !ok {
		return nil, handshakeFailed("workspace authorization is enabled but supervaizer_handshake.workspace_authorization.agents is missing.")
	}
	bySlug := map[string]string{}
	for _, b := range bindings {
		m, ok := b.(map[string]any)
		if !ok {
			return nil, handshakeFailed("workspace authorization agent binding must be an object.")
		}
		id, _ := m["id"].(string)
		slug, _ := m["slug"].(string)
		if strings.TrimSpace(id) == "" {
			return nil, handshakeFailed("workspace authorization agent binding is missing id.")
		}
		if strings.TrimSpace(slug) == "" {
			return nil, handshakeFailed("workspace authorization agent binding is missing slug.")
		}
		bySlug[slug] = id
	}
	out := &Outcome{Audience: audience, AgentIDs: map[string]string{}}
	out.ServerID, _ = hs["server_id"].(string)
	out.StudioServerID, _ = wa["studio_server_id"].(string)
	out.StoredKeyFingerprint, _ = hs["stored_controller_api_key_fingerprint"].(string)
	var missing []string
	for _, a := range agents {
		id := bySlug[a.Slug]
		if id == "" {
			missing = append(missing, a.Slug)
			continue
		}
		if have := exp.AgentIDs[a.Slug]; have != "" && have != id {
			return nil, handshakeFailed("workspace authorization agent id mismatch for slug=%s.", a.Slug)
		}
		out.AgentIDs[a.Slug] = id
	}
	if len(missing) > 0 {
		return nil, handshakeFailed("workspace authorization did not return Studio agent id(s) for slug(s): %s", strings.Join(missing, ", "))
	}
	// The outcome must travel as the two settings: ids a setting cannot carry are refused here,
	// not at the next cold start.
	if _, err := grant.ParseStudioAgentIDs(out.AgentIDsValue()); err != nil {
		return nil, fmt.Errorf("the agent ids Studio returned cannot be kept by this controller: %w", err)
	}
	if strings.ContainsAny(audience, "\r\n") {
		return nil, errors.New("the audience Studio returned has a line break")
	}
	return out, nil
}

// pyStr formats a JSON value as a Python f-string does: None, True, False, the string itself.
func pyStr(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case string:
		return printable(x, 100)
	case json.Number:
		return x.String()
	}
	b, _ := json.Marshal(v)
	return printable(string(b), 100)
}

// pyList formats strings as Python's repr of a list: ['a', 'b'].
func pyList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(printable(s, 60)) + "'"
	}
	return "[" + strings.Join(q, ", ") + "]"
}
