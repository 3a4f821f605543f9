// Package adaptertest is the protocol suite every adapter runs with identical assertions: the
// Hello World controller is reached through the adapter under test (net/http, the Cloud Run
// functions framework, a Lambda event source under the Runtime Interface Emulator), and every
// answer — discovery documents, each error class of /a2a, action and surface results, the first
// event of the effect stream, and (RunData, with workspace authorization on) every route and
// refusal of the DataResource routes — must match, status, headers and body, the golden files
// under testdata/, which the plain net/http server produced: go test ./adapters/httpserver
// -update rewrites them from its answers (Reference), -update in another adapter fails.
package adaptertest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/examples/helloworld/hello"
	"github.com/supervaize/svz/internal/golden"
)

// APIKey is the controller's API key in the suite's environment.
const APIKey = "adaptertest-key-7f3a9c2e51"

// Env is the environment of the controller under test: Hello World in local mode (action calls
// need no workspace grant) with an in-memory store and a fixed public URL, so that documents do
// not depend on the address an adapter listens on. The Lambda suite runs it under the Runtime
// Interface Emulator, a local emulation where local mode is allowed (SUPERVAIZER_LOCAL_EMULATOR).
func Env() map[string]string {
	return map[string]string{
		"SUPERVAIZER_API_KEY":        APIKey,
		"SUPERVAIZER_SERVER_ID":      "svz-adaptertest-server",
		"SUPERVAIZER_PUBLIC_URL":     "https://controller.example.com",
		"SUPERVAIZER_LOCAL_MODE":     "true",
		"SUPERVAIZER_LOCAL_EMULATOR": "true",
		"SUPERVAIZER_STORE":          "memory",
	}
}

// Environ returns Env as KEY=value pairs, for a child process.
func Environ() []string { return environ(Env()) }

func environ(env map[string]string) []string {
	var out []string
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// Handler builds the controller under test (hello.Build with Env) and closes it when the test
// ends.
func Handler(t testing.TB) http.Handler {
	t.Helper()
	return handler(t, Env())
}

func handler(t testing.TB, env map[string]string) http.Handler {
	t.Helper()
	h, err := hello.Build(context.Background(), func(k string) string { return env[k] }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("hello.Build: %v", err)
	}
	if c, ok := h.(io.Closer); ok {
		t.Cleanup(func() { _ = c.Close() })
	}
	return h
}

// testCase is one request of the suite.
type testCase struct {
	Name   string // the golden file is testdata/<Name>.golden
	Method string
	Path   string
	Key    string // X-API-Key, when set
	Body   string
	Stream bool              // an event stream: only its first event is compared
	Header map[string]string // more request headers
	// Unclean is the clean form of Path when Path is not clean (//, /./, /../): the controller
	// answers it as is, but a server that cleans paths answers a redirect there (CleansPaths).
	Unclean string
}

func rpc(id, method, params string) string {
	idPart := ""
	if id != "" {
		idPart = `"id":` + id + `,`
	}
	return `{"jsonrpc":"2.0",` + idPart + `"method":"` + method + `","params":` + params + `}`
}

const actionParams = `{"request_id":"request-1","actor":{"user_id":"user-1"},"workspace":{"id":"workspace-1","slug":"workspace"},"mission_id":"mission-1","agent_slug":"hello-world-ai-agent","surface":"job.start","action":"%s","job_id":"job-1","input":%s}`

const surfaceParams = `{"request_id":"request-2","actor":{"user_id":"user-1"},"workspace":{"id":"workspace-1"},"mission_id":"mission-1","agent_slug":"%s","surface":"%s","draft_session_id":"draft-é✓ <&>"}`

// cases returns the suite.
func cases() []testCase {
	card := "/.well-known/agents/v" + hello.Version + "/" + hello.Slug + "_agent.json"
	return append([]testCase{
		{Name: "agents_list", Method: "GET", Path: "/.well-known/agents.json"},
		{Name: "agent_card", Method: "GET", Path: card},
		{Name: "agent_card_legacy", Method: "GET", Path: "/.well-known/agents/" + hello.Slug + "_agent.json"},
		{Name: "agent_card_unknown", Method: "GET", Path: "/.well-known/agents/nonexistent_agent.json"},
		{Name: "health", Method: "GET", Path: "/.well-known/health"},
		{Name: "not_found", Method: "GET", Path: "/nope?x=1"},
		{Name: "method_not_allowed", Method: "GET", Path: "/a2a"},
		{Name: "rpc_no_key", Method: "POST", Path: "/a2a", Body: rpc(`"rpc-1"`, "missing.method", "{}")},
		{Name: "rpc_wrong_key", Method: "POST", Path: "/a2a", Key: "not-the-key", Body: rpc(`"rpc-1"`, "missing.method", "{}")},
		{Name: "events_no_key", Method: "GET", Path: "/a2a/events"},
		{Name: "rpc_invalid_json", Method: "POST", Path: "/a2a", Key: APIKey, Body: `{"jsonrpc":`},
		{Name: "rpc_batch", Method: "POST", Path: "/a2a", Key: APIKey, Body: `[` + rpc(`1`, "missing.method", "{}") + `]`},
		{Name: "rpc_too_large", Method: "POST", Path: "/a2a", Key: APIKey, Body: `{"pad":"` + strings.Repeat("a", 1100_000) + `"}`},
		{Name: "rpc_method_not_found", Method: "POST", Path: "/a2a", Key: APIKey, Body: rpc(`"rpc-1"`, "missing.method", "{}")},
		{Name: "rpc_method_not_found_no_id", Method: "POST", Path: "/a2a", Key: APIKey, Body: rpc("", "missing.method", "{}")},
		{Name: "rpc_invalid_envelope", Method: "POST", Path: "/a2a", Key: APIKey, Body: `{"jsonrpc":"1.0","id":5,"method":"supervaizer/action.invoke"}`},
		{Name: "rpc_invalid_params", Method: "POST", Path: "/a2a", Key: APIKey, Body: rpc(`7`, "supervaizer/action.invoke", `{"request_id":"r"}`)},
		{Name: "rpc_unknown_agent", Method: "POST", Path: "/a2a", Key: APIKey, Body: rpc(`8`, "supervaizer/surface.load", fmt.Sprintf(surfaceParams, "nope", "job.start"))},
		{Name: "rpc_action_not_registered", Method: "POST", Path: "/a2a", Key: APIKey, Body: rpc(`9`, "supervaizer/action.invoke", fmt.Sprintf(actionParams, "job.stop", `{}`))},
		{Name: "rpc_surface_not_registered", Method: "POST", Path: "/a2a", Key: APIKey, Body: rpc(`10`, "supervaizer/surface.load", fmt.Sprintf(surfaceParams, hello.Slug, "mission.analytics"))},
		{Name: "rpc_job_start", Method: "POST", Path: "/a2a", Key: APIKey, Body: rpc(`"rpc-job"`, "supervaizer/action.invoke", fmt.Sprintf(actionParams, "job.start", `{"count":2,"note":"héllo ✓ \u0000 <&>"}`))},
		{Name: "rpc_job_start_review", Method: "POST", Path: "/a2a", Key: APIKey, Body: rpc(`12`, "supervaizer/action.invoke", fmt.Sprintf(actionParams, "job.start", `{"enable_human_review":"yes"}`))},
		{Name: "rpc_surface_job_start", Method: "POST", Path: "/a2a", Key: APIKey, Body: rpc(`13`, "supervaizer/surface.load", fmt.Sprintf(surfaceParams, hello.Slug, "job.start"))},
		{Name: "rpc_resource_list", Method: "POST", Path: "/a2a", Key: APIKey, Body: rpc(`14`, "supervaizer/action.invoke", fmt.Sprintf(actionParams, "resource.hello_messages.list", `{}`))},
		{Name: "events_first", Method: "GET", Path: "/a2a/events", Key: APIKey, Stream: true},
		// Local mode never bypasses the workspace grant of the DataResource routes (RunData serves them).
		{Name: "data_local_mode_refused", Method: "GET", Path: "/api/agents/" + hello.Slug + "/data/greetings/", Key: APIKey,
			Header: map[string]string{"X-Supervaize-Workspace-Id": "workspace-1"}},
		{Name: "data_unknown_agent", Method: "GET", Path: "/api/agents/nope/data/greetings/", Key: APIKey},
	}, hostileCases()...)
}

// hostileCases are requests no client should send: each must get the same documented answer
// through every adapter, with nothing echoed into a header.
func hostileCases() []testCase {
	missing := rpc(`1`, "missing.method", "{}")
	return []testCase{
		{Name: "rpc_not_utf8", Method: "POST", Path: "/a2a", Key: APIKey, Body: "{\"id\":\"\xff\",\"method\":\"missing.method\"}"},
		{Name: "rpc_not_an_object", Method: "POST", Path: "/a2a", Key: APIKey, Body: `42`},
		{Name: "rpc_trailing_data", Method: "POST", Path: "/a2a", Key: APIKey, Body: missing + ` {}`},
		{Name: "rpc_byte_order_mark", Method: "POST", Path: "/a2a", Key: APIKey, Body: "\uFEFF" + missing},
		{Name: "rpc_id_object", Method: "POST", Path: "/a2a", Key: APIKey, Body: rpc(`{"a":1}`, "missing.method", "{}")},
		{Name: "rpc_id_big_integer", Method: "POST", Path: "/a2a", Key: APIKey, Body: rpc(`123456789012345678901234567890`, "missing.method", "{}")},
		{Name: "rpc_id_integral_float", Method: "POST", Path: "/a2a", Key: APIKey, Body: rpc(`1E2`, "missing.method", "{}")},
		{Name: "rpc_params_not_object", Method: "POST", Path: "/a2a", Key: APIKey, Body: rpc(`1`, "supervaizer/action.invoke", `[1]`)},
		{Name: "rpc_duplicate_members", Method: "POST", Path: "/a2a", Key: APIKey, Body: `{"id":1,"id":2,"method":"x","method":"missing.method"}`},
		{Name: "rpc_method_crlf", Method: "POST", Path: "/a2a", Key: APIKey, Body: rpc(`1`, `x\r\nSet-Cookie: a=b`, "{}")},
		{Name: "rpc_text_content_type", Method: "POST", Path: "/a2a", Key: APIKey, Body: missing, Header: map[string]string{"Content-Type": "text/plain"}},
		{Name: "rpc_query_string", Method: "POST", Path: "/a2a?x=1&y", Key: APIKey, Body: missing},
		{Name: "rpc_head", Method: "HEAD", Path: "/a2a", Key: APIKey},
		{Name: "rpc_options", Method: "OPTIONS", Path: "/a2a",
			Header: map[string]string{"Origin": "https://attacker.example", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "x-api-key"}},
		{Name: "health_head", Method: "HEAD", Path: "/.well-known/health"},
		{Name: "health_post", Method: "POST", Path: "/.well-known/health", Body: `{}`},
		{Name: "health_trailing_slash", Method: "GET", Path: "/.well-known/health/"},
		{Name: "health_double_slash", Method: "GET", Path: "//.well-known/health", Unclean: "/.well-known/health"},
		{Name: "health_dot_segments", Method: "GET", Path: "/x/../.well-known/health", Unclean: "/.well-known/health"},
		{Name: "card_encoded_dot_segments", Method: "GET", Path: "/.well-known/agents/v" + hello.Version + "/%2e%2e/" + hello.Slug + "_agent.json"},
		{Name: "events_bad_last_event_id", Method: "GET", Path: "/a2a/events", Key: APIKey, Header: map[string]string{"Last-Event-ID": "nope"}},
		{Name: "events_post", Method: "POST", Path: "/a2a/events", Key: APIKey, Body: `{}`},
	}
}

// Option configures Run and RunData.
type Option func(*runConfig)

type runConfig struct{ reference, cleans bool }

// Reference marks the reference adapter (the plain net/http server, ./adapters/httpserver): with
// -update its answers become the golden files. Any other adapter's -update fails instead.
func Reference() Option { return func(c *runConfig) { c.reference = true } }

// CleansPaths marks an adapter whose server redirects a path that is not clean to its clean
// form (307), before the controller sees it: net/http's ServeMux, which the Functions Framework
// serves through. Such a request then gets that redirect instead of the controller's answer.
func CleansPaths() Option { return func(c *runConfig) { c.cleans = true } }

// Run runs the suite against the controller that client reaches at base (scheme://host), and
// compares every answer with the golden files.
func Run(t *testing.T, client *http.Client, base string, opts ...Option) {
	t.Helper()
	run(t, client, base, cases(), opts)
}

func run(t *testing.T, client *http.Client, base string, cases []testCase, opts []Option) {
	t.Helper()
	var cfg runConfig
	for _, o := range opts {
		o(&cfg)
	}
	noFollow := *client // a redirect is an answer, not followed
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	client = &noFollow
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			if cfg.cleans && c.Unclean != "" {
				got := do(t, client, base, c)
				if !bytes.HasPrefix(got, []byte("HTTP 307\n")) || !bytes.Contains(got, []byte("\nLocation: "+c.Unclean+"\n")) {
					t.Fatalf("answer\n%s\nwant the server's redirect (307) to the clean path %s", got, c.Unclean)
				}
				return
			}
			golden.Shared(t, filepath.Join(dir(), c.Name+".golden"), do(t, client, base, c), "./adapters/httpserver", cfg.reference)
		})
	}
}

// do sends c and returns its answer in golden form: the status line, the headers that belong to
// the answer (sorted; transport headers left out), a blank line and the body. Volatile values
// (timestamps) are masked.
func do(t *testing.T, client *http.Client, base string, c testCase) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var body io.Reader
	if c.Body != "" {
		body = strings.NewReader(c.Body)
	}
	req, err := http.NewRequestWithContext(ctx, c.Method, base+c.Path, body)
	if err != nil {
		t.Fatal(err)
	}
	if c.Body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Key != "" {
		req.Header.Set("X-API-Key", c.Key)
	}
	for k, v := range c.Header {
		req.Header.Set(k, v) // after the defaults: a case may replace them
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", c.Method, c.Path, err)
	}
	defer resp.Body.Close()
	var b []byte
	if c.Stream {
		b = firstEvent(t, resp.Body) // a stream may stay open: the answer is its first event
	} else if b, err = io.ReadAll(resp.Body); err != nil {
		t.Fatalf("%s %s: reading the body: %v", c.Method, c.Path, err)
	}
	var out bytes.Buffer
	fmt.Fprintf(&out, "HTTP %d\n", resp.StatusCode)
	names := make([]string, 0, len(resp.Header))
	for k := range resp.Header {
		switch k {
		case "Date", "Content-Length", "Connection", "Transfer-Encoding", "Keep-Alive":
		default:
			names = append(names, k)
		}
	}
	slices.Sort(names)
	for _, k := range names {
		fmt.Fprintf(&out, "%s: %s\n", k, strings.Join(resp.Header[k], ", "))
	}
	out.WriteByte('\n')
	out.Write(mask(b))
	return out.Bytes()
}

// firstEvent reads the first server-sent event of a stream.
func firstEvent(t *testing.T, r io.Reader) []byte {
	t.Helper()
	br := bufio.NewReader(r)
	var ev []byte
	for !bytes.HasSuffix(ev, []byte("\n\n")) {
		line, err := br.ReadBytes('\n')
		ev = append(ev, line...)
		if err != nil {
			t.Fatalf("the stream ended inside its first event: %q (%v)", ev, err)
		}
	}
	return ev
}

var (
	timestamps = regexp.MustCompile(`"timestamp":"[^"]*"`)
	eventIDs   = regexp.MustCompile(`(?m)^id: [0-9a-f]+-[0-9]+$`) // "<instance>-<sequence>": random, and the count of earlier effects
)

func mask(b []byte) []byte {
	b = timestamps.ReplaceAll(b, []byte(`"timestamp":"<masked>"`))
	return eventIDs.ReplaceAll(b, []byte(`id: <instance>-<sequence>`))
}

// dir is this package's testdata directory, wherever the suite runs from.
func dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata")
}
