package adaptertest

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core/grant/granttest"
	"github.com/supervaize/svz/examples/helloworld/hello"
)

// The DataResource suite's workspace authorization: Studio's signing key is derived from a fixed
// seed, so that a controller in another process (the Lambda bootstrap under the emulator) trusts
// the tokens this package mints.
const (
	DataIssuer        = "https://studio.adaptertest.example"
	DataStudioAgentID = "studio-hello-1"
)

// studio is the suite's token issuer.
func studio() *granttest.Issuer {
	seed := sha256.Sum256([]byte("svz adaptertest studio signing key"))
	return &granttest.Issuer{Key: ed25519.NewKeyFromSeed(seed[:]), KID: "adaptertest"}
}

// DataEnv is the environment of the DataResource suite: Env with workspace authorization on (the
// DataResource routes are never served in local mode) and Hello World linked to Studio.
func DataEnv() map[string]string {
	env := maps.Clone(Env())
	delete(env, "SUPERVAIZER_LOCAL_MODE")
	env["SUPERVAIZER_WORKSPACE_AUTH_REQUIRED"] = "true"
	env["SUPERVAIZER_WORKSPACE_AUTH_ISSUER"] = DataIssuer
	env["SUPERVAIZER_WORKSPACE_AUTH_PUBLIC_KEY"] = studio().PublicKeyPEM()
	env["SUPERVAIZER_STUDIO_AGENT_IDS"] = hello.Slug + "=" + DataStudioAgentID
	return env
}

// DataEnviron returns DataEnv as KEY=value pairs, for a child process.
func DataEnviron() []string { return environ(DataEnv()) }

// DataHandler builds the controller of the DataResource suite (hello.Build with DataEnv) and
// closes it when the test ends.
func DataHandler(t testing.TB) http.Handler {
	t.Helper()
	return handler(t, DataEnv())
}

// dataToken mints a grant for workspace ws with scopes, valid for 15 minutes.
func dataToken(ws string, scopes ...string) string {
	now := time.Now()
	return "Bearer " + studio().Token(granttest.Valid(now, DataIssuer, scopes...).With(
		"aud", "supervaizer-server:svz-adaptertest-server", "server_id", "svz-adaptertest-server",
		"agent_slug", hello.Slug, "agent_id", DataStudioAgentID, "workspace_id", ws, "workspace_slug", "suite",
		"exp", now.Add(15*time.Minute).Unix()))
}

// dataCases is the DataResource suite, in order: each case may depend on the ones before it (the
// greetings it created). Every run uses a fresh workspace, so a run starts from no greetings
// whatever earlier runs left in the same process.
func dataCases(ws string) []testCase {
	base := "/api/agents/" + hello.Slug + "/data/greetings/"
	ops := []string{"list", "get", "create", "update", "delete", "import"}
	all := make([]string, len(ops))
	for i, op := range ops {
		all[i] = "resource.greetings." + op
	}
	grant := map[string]string{
		"X-Supervaize-Workspace-Authorization": dataToken(ws, all...),
		"X-Supervaize-Workspace-Id":            ws,
		"X-Supervaize-Workspace-Slug":          "suite",
		"X-Supervaize-Request-Id":              "request-1",
	}
	with := func(kv ...string) map[string]string {
		h := maps.Clone(grant)
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(h, kv[i])
			} else {
				h[kv[i]] = kv[i+1]
			}
		}
		return h
	}
	meta := base64.RawURLEncoding.EncodeToString([]byte(`{"region":"eu","goal":"say hello"}`))
	inMission := with("X-Supervaize-Mission-Id", "mission-7", "X-Supervaize-Mission-Metadata", meta)
	return []testCase{
		{Name: "data_list_empty", Method: "GET", Path: base, Key: APIKey, Header: grant},
		{Name: "data_redirect", Method: "GET", Path: strings.TrimSuffix(base, "/") + "?limit=5", Key: APIKey, Header: grant},
		{Name: "data_no_key", Method: "GET", Path: base, Header: grant},
		{Name: "data_no_grant", Method: "GET", Path: base, Key: APIKey, Header: with("X-Supervaize-Workspace-Authorization", "")},
		{Name: "data_missing_scope", Method: "POST", Path: base, Key: APIKey, Body: `{"text":"Hi"}`,
			Header: with("X-Supervaize-Workspace-Authorization", dataToken(ws, "resource.greetings.list"))},
		{Name: "data_wrong_workspace", Method: "GET", Path: base, Key: APIKey, Header: with("X-Supervaize-Workspace-Id", "another-workspace")},
		{Name: "data_create", Method: "POST", Path: base, Key: APIKey, Body: `{"id":"hello-1","text":"Hello from the suite ✓ <&>"}`, Header: grant},
		{Name: "data_create_conflict", Method: "POST", Path: base, Key: APIKey, Body: `{"id":"hello-1","text":"again"}`, Header: grant},
		{Name: "data_create_invalid", Method: "POST", Path: base, Key: APIKey, Body: `{"id":"hello-2","text":"  "}`, Header: grant},
		{Name: "data_create_not_an_object", Method: "POST", Path: base, Key: APIKey, Body: `["hello"]`, Header: grant},
		{Name: "data_create_wrong_type", Method: "POST", Path: base, Key: APIKey, Body: `{"text":7}`, Header: grant},
		{Name: "data_create_in_mission", Method: "POST", Path: base, Key: APIKey, Body: `{"id":"hello-2","text":"Hello, mission"}`, Header: inMission},
		{Name: "data_get", Method: "GET", Path: base + "hello-1", Key: APIKey, Header: grant},
		{Name: "data_get_missing", Method: "GET", Path: base + "nope", Key: APIKey, Header: grant},
		{Name: "data_update", Method: "PUT", Path: base + "hello-1", Key: APIKey, Body: `{"text":"Hello again"}`, Header: grant},
		{Name: "data_update_missing", Method: "PUT", Path: base + "nope", Key: APIKey, Body: `{"text":"Hello"}`, Header: grant},
		{Name: "data_list", Method: "GET", Path: base + "?skip=0&limit=10", Key: APIKey, Header: grant},
		{Name: "data_list_window", Method: "GET", Path: base + "?skip=1&limit=1", Key: APIKey, Header: grant},
		{Name: "data_list_in_mission", Method: "GET", Path: base, Key: APIKey, Header: inMission},
		{Name: "data_list_bad_query", Method: "GET", Path: base + "?skip=-1&limit=1001", Key: APIKey, Header: grant},
		{Name: "data_metadata_invalid", Method: "GET", Path: base, Key: APIKey, Header: with("X-Supervaize-Mission-Id", "mission-7", "X-Supervaize-Mission-Metadata", "not base64!")},
		{Name: "data_metadata_without_mission", Method: "GET", Path: base, Key: APIKey, Header: with("X-Supervaize-Mission-Metadata", meta)},
		{Name: "data_metadata_too_large", Method: "GET", Path: base, Key: APIKey,
			Header: with("X-Supervaize-Mission-Id", "mission-7", "X-Supervaize-Mission-Metadata", strings.Repeat("A", 4097))},
		{Name: "data_import", Method: "POST", Path: base + "import/", Key: APIKey, Body: `[{"id":"imported-1","text":"One"},{"id":"hello-1","text":"Dup"}]`, Header: grant},
		{Name: "data_import_not_a_list", Method: "POST", Path: base + "import/", Key: APIKey, Body: `{"id":"x"}`, Header: grant},
		{Name: "data_delete", Method: "DELETE", Path: base + "hello-1", Key: APIKey, Header: grant},
		{Name: "data_delete_again", Method: "DELETE", Path: base + "hello-1", Key: APIKey, Header: grant},
		{Name: "data_list_after", Method: "GET", Path: base, Key: APIKey, Header: grant},
		{Name: "data_method_not_allowed", Method: "PATCH", Path: base + "hello-2", Key: APIKey, Body: `{}`, Header: grant},
		{Name: "data_wrong_key", Method: "DELETE", Path: base + "hello-2", Key: "not-the-key", Header: grant},
		{Name: "data_too_large", Method: "POST", Path: base, Key: APIKey, Body: `{"text":"` + strings.Repeat("a", 1100_000) + `"}`, Header: grant},
		{Name: "data_unknown_resource", Method: "GET", Path: "/api/agents/" + hello.Slug + "/data/nope/", Key: APIKey, Header: grant},
	}
}

// RunData runs the DataResource suite against the controller (built with DataEnv) that client
// reaches at base. Redirects are answers, not followed (as in Run).
func RunData(t *testing.T, client *http.Client, base string, opts ...Option) {
	t.Helper()
	var b [8]byte
	_, _ = rand.Read(b[:])
	run(t, client, base, dataCases("suite-"+hex.EncodeToString(b[:])), opts)
}
