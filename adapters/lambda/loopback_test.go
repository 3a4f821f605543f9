package lambda

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/supervaize/svz/adapters/internal/httpkit"
	"github.com/supervaize/svz/core/jobs"
)

// hostEvents are the HTTP event kinds the adapter serves, each with the Host header set to host
// (none when host is "-"), written as the source writes it.
func hostEvents(host string) map[string]struct {
	event  any
	stream bool
} {
	set := func(m map[string]string, name string) {
		if host != "-" {
			m[name] = host
		}
	}
	fu := functionURLEvent("GET", "/a2a/events", "", "")
	delete(fu.Headers, "host")
	set(fu.Headers, "host")
	fuStream := functionURLEvent("GET", "/a2a/events", "", "")
	delete(fuStream.Headers, "host")
	set(fuStream.Headers, "host")
	v2 := httpAPIEvent()
	delete(v2.Headers, "host")
	set(v2.Headers, "host")
	v1 := restEvent()
	delete(v1.Headers, "Host")
	delete(v1.MultiValueHeaders, "Host")
	set(v1.Headers, "Host")
	if host != "-" {
		v1.MultiValueHeaders["Host"] = []string{host}
	}
	v1Single := restEvent()
	v1Single.MultiValueHeaders = nil
	delete(v1Single.Headers, "Host")
	set(v1Single.Headers, "Host")
	alb := albEvent(true)
	delete(alb.MultiValueHeaders, "host")
	if host != "-" {
		alb.MultiValueHeaders["host"] = []string{host}
	}
	albSingle := albEvent(false)
	delete(albSingle.Headers, "host")
	set(albSingle.Headers, "host")
	return map[string]struct {
		event  any
		stream bool
	}{
		"Function URL": {fu, false}, "Function URL streaming": {fuStream, true}, "HTTP API": {v2, false},
		"REST API": {v1, false}, "REST API single-value": {v1Single, false}, "ALB": {alb, false}, "ALB single-value": {albSingle, false},
	}
}

// answer is an HTTP answer as a client sees it: status, Content-Type and body.
type answer struct {
	Status      int
	ContentType string
	Body        string
}

// invokeAnswer runs ev through the adapter and returns its answer, from whichever payload the
// event's kind gets (buffered or streamed).
func invokeAnswer(t *testing.T, h http.Handler, ev any, opts ...Option) answer {
	t.Helper()
	out := invoke(t, h, payload(t, ev), opts...)
	if prelude, body, ok := bytes.Cut(out, make([]byte, 8)); ok && bytes.HasPrefix(prelude, []byte("{")) {
		var p struct {
			StatusCode int               `json:"statusCode"`
			Headers    map[string]string `json:"headers"`
		}
		if err := json.Unmarshal(prelude, &p); err != nil {
			t.Fatalf("prelude %q: %v", prelude, err)
		}
		return answer{p.StatusCode, p.Headers["Content-Type"], string(body)}
	}
	r, _ := decodeReply(t, out)
	ct := r.Headers["Content-Type"]
	if vs := r.MultiValueHeaders["Content-Type"]; len(vs) == 1 && ct == "" {
		ct = vs[0]
	}
	return answer{r.StatusCode, ct, r.Body}
}

// plainServerAnswer is what local mode's plain server answers a loopback peer naming host ("-":
// none), through the same httpkit.LoopbackOnly it serves behind.
func plainServerAnswer(host string) answer {
	r := httptest.NewRequest(http.MethodGet, "/a2a/events", nil)
	r.RemoteAddr, r.Host = "127.0.0.1:5000", strings.TrimPrefix(host, "-")
	w := httptest.NewRecorder()
	httpkit.LoopbackOnly(http.NotFoundHandler(), slog.New(slog.DiscardHandler)).ServeHTTP(w, r)
	return answer{w.Code, w.Header().Get("Content-Type"), w.Body.String()}
}

// TestLocalModeRefusesForeignHost: with WithLoopbackOnly (local mode under sam local), every HTTP
// event kind whose Host header does not name this machine gets exactly the plain server's
// refusal and never reaches the handler; a loopback Host is served. Without it (a deployed
// function), any Host is served.
func TestLocalModeRefusesForeignHost(t *testing.T) {
	const fix = `; open it as 127.0.0.1, [::1] or localhost"}`
	refused := map[string]string{
		"attacker.example":                `{"detail":"Local mode answers loopback only: the request names the host \"attacker.example\"` + fix,
		"attacker.example:3000":           `{"detail":"Local mode answers loopback only: the request names the host \"attacker.example\"` + fix,
		"localhost.attacker.example:3000": `{"detail":"Local mode answers loopback only: the request names the host \"localhost.attacker.example\"` + fix,
		"127.0.0.1.nip.io:3000":           `{"detail":"Local mode answers loopback only: the request names the host \"127.0.0.1.nip.io\"` + fix,
		"":                                `{"detail":"Local mode answers loopback only: the request names no host (no Host header)` + fix,
		"-":                               `{"detail":"Local mode answers loopback only: the request names no host (no Host header)` + fix,
	}
	accepted := []string{localHost, "localhost:3000", "[::1]:3000", "LOCALHOST", "127.0.0.1"}
	var reached atomic.Int32
	var sawHost atomic.Value
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		sawHost.Store(r.Host)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("reached"))
	})
	served := answer{http.StatusOK, "text/plain; charset=utf-8", "reached"}
	for host, body := range refused {
		want := answer{http.StatusForbidden, "application/json", body}
		if plain := plainServerAnswer(host); plain != want {
			t.Fatalf("Host %q: the plain server answers %+v, the test expects %+v", host, plain, want)
		}
		for kind, tc := range hostEvents(host) {
			opts := []Option{WithLoopbackOnly()}
			if tc.stream {
				opts = append(opts, WithStreaming())
			}
			reached.Store(0)
			if got := invokeAnswer(t, h, tc.event, opts...); got != want || reached.Load() != 0 {
				t.Errorf("local mode, %s, Host %q: %+v (handler reached %d times), want %+v", kind, host, got, reached.Load(), want)
			}
			// Outside local mode nothing changes: the handler answers whatever the Host.
			reached.Store(0)
			if got := invokeAnswer(t, h, tc.event, opts[1:]...); got != served || reached.Load() != 1 {
				t.Errorf("normal mode, %s, Host %q: %+v (handler reached %d times), want %+v", kind, host, got, reached.Load(), served)
			}
		}
	}
	for _, host := range accepted {
		for kind, tc := range hostEvents(host) {
			opts := []Option{WithLoopbackOnly()}
			if tc.stream {
				opts = append(opts, WithStreaming())
			}
			reached.Store(0)
			if got := invokeAnswer(t, h, tc.event, opts...); got != served || reached.Load() != 1 || sawHost.Load() != host {
				t.Errorf("local mode, %s, Host %q: %+v (handler reached %d times, Host %v), want %+v", kind, host, got, reached.Load(), sawHost.Load(), served)
			}
		}
	}
}

// TestLocalModeHostHeaderForms: the Host header's name is case-insensitive, the multi-value
// headers are the ones a REST API or ALB event is read from, and every Host value must be
// loopback.
func TestLocalModeHostHeaderForms(t *testing.T) {
	const attacker = `{"detail":"Local mode answers loopback only: the request names the host \"attacker.example\"; open it as 127.0.0.1, [::1] or localhost"}`
	upper := functionURLEvent("GET", "/", "", "")
	delete(upper.Headers, "host")
	upper.Headers["HOST"] = "attacker.example"
	upperLoopback := functionURLEvent("GET", "/", "", "")
	delete(upperLoopback.Headers, "host")
	upperLoopback.Headers["HoSt"] = "127.0.0.1:3000"
	// The single-value map names loopback, the multi-value one (what the adapter reads) does not.
	restMixed := restEvent()
	restMixed.Headers["Host"] = "127.0.0.1:3000"
	restMixed.MultiValueHeaders["host"] = []string{"attacker.example"}
	delete(restMixed.MultiValueHeaders, "Host")
	restTwo := restEvent()
	restTwo.MultiValueHeaders["Host"] = []string{"127.0.0.1:3000", "attacker.example"}
	albTwo := albEvent(true)
	albTwo.MultiValueHeaders["host"] = []string{"localhost:3000", "attacker.example:3000"}
	// A missing Host header is refused even when the event's domain name is loopback.
	noHost := httpAPIEvent()
	delete(noHost.Headers, "host")
	noHost.RequestContext.DomainName = "localhost"
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("reached")) })
	for name, tc := range map[string]struct {
		event any
		want  answer
	}{
		"HOST":                          {upper, answer{403, "application/json", attacker}},
		"HoSt loopback":                 {upperLoopback, answer{200, "text/plain; charset=utf-8", "reached"}},
		"REST multi-value wins":         {restMixed, answer{403, "application/json", attacker}},
		"REST two Hosts":                {restTwo, answer{403, "application/json", attacker}},
		"ALB two Hosts":                 {albTwo, answer{403, "application/json", attacker}},
		"no Host, domain name loopback": {noHost, answer{403, "application/json", `{"detail":"Local mode answers loopback only: the request names no host (no Host header); open it as 127.0.0.1, [::1] or localhost"}`}},
	} {
		if got := invokeAnswer(t, h, tc.event, WithLoopbackOnly()); got != tc.want {
			t.Errorf("%s: %+v, want %+v", name, got, tc.want)
		}
	}
}

// TestLocalModeSQSUnaffected: SQS events carry no Host; local mode delivers them as always.
func TestLocalModeSQSUnaffected(t *testing.T) {
	var delivered atomic.Int32
	deliver := func(context.Context, jobs.Message, jobs.Delivery) error { delivered.Add(1); return nil }
	msg := string(jobs.Message{Agent: "a", Workspace: "w", Job: "j", Work: "work", Attempt: 1}.Encode())
	out, err := NewHandler(http.NotFoundHandler(), WithLoopbackOnly(), WithJobs(deliver, 5), WithLogger(slog.New(slog.DiscardHandler))).
		Invoke(context.Background(), sqsEvent(sqsRecordOf("m-1", msg, "1")))
	if err != nil || string(out) != `{"batchItemFailures":[]}` || delivered.Load() != 1 {
		t.Fatalf("%s %v, delivered %d", out, err, delivered.Load())
	}
}
