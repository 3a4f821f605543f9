package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core/jobs/jobstest"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/grant/granttest"
	"github.com/supervaize/svz/core/idempotency"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
)

// wsStudio mints the workspace tokens of the per-workspace stream tests.
type wsStudio struct {
	issuer *granttest.Issuer
	authz  grant.Authorizer
}

func newWSStudio(t *testing.T) wsStudio {
	t.Helper()
	iss := granttest.NewIssuer("studio-2026-05")
	authz, err := grant.New(context.Background(), grant.Config{ServerID: "SRV",
		Settings: grant.Settings{Required: true, PublicKeyPEM: iss.PublicKeyPEM(), Issuer: dataIssuer, Leeway: grant.DefaultLeeway},
		Options:  []grant.Option{grant.WithClock(func() time.Time { return dataNow }), grant.WithLogger(slog.New(slog.DiscardHandler))}})
	if err != nil {
		t.Fatal(err)
	}
	return wsStudio{iss, authz}
}

// claims are Studio's usual claims for agent s in workspace ws, with scopes.
func (wsStudio) claims(ws string, scopes ...string) granttest.Claims {
	return granttest.Valid(dataNow, dataIssuer, scopes...).With("workspace_id", ws, "workspace_slug", nil)
}

func (s wsStudio) token(ws string, scopes ...string) string {
	return "Bearer " + s.issuer.Token(s.claims(ws, scopes...))
}

// streamHeaders are the headers of a stream request for workspace ws's events.
func (s wsStudio) streamHeaders(ws string) map[string]string {
	return map[string]string{core.GrantHeader: s.token(ws, grant.MethodEvents), core.HeaderAgentSlug: "s", core.HeaderWorkspaceID: ws}
}

// controller is an instance of controller SRV on st, verifying real tokens.
func (s wsStudio) controller(t *testing.T, st *memory.Store, cfg core.Config) *core.Controller {
	cfg.Store, cfg.ServerID, cfg.Authorizer, cfg.StudioAgentIDs = st, "SRV", s.authz, map[string]string{"s": studioAgent}
	return effectController(t, cfg)
}

// invokeIn runs job.start in workspace ws (a verified grant) with request id rid.
func (s wsStudio) invokeIn(t *testing.T, c http.Handler, ws, rid string, extra map[string]any) {
	t.Helper()
	p := map[string]any{"request_id": rid, "workspace": map[string]any{"id": ws}}
	for k, v := range extra {
		p[k] = v
	}
	status, body := post(t, c, rpcBody(t, rid, actionInvoke, params(p)), map[string]string{core.GrantHeader: s.token(ws, grant.MethodActionInvoke, "job.start")})
	if status != 200 || !strings.Contains(string(body), `"result"`) {
		t.Fatalf("job.start in %s: %d %s", ws, status, body)
	}
}

func effectData(rid string) string {
	return `{"agent_slug":"s","action":"job.start","request_id":"` + rid + `","effects":[{"type":"job.started","job_id":"job-123"}]}`
}

// TestEffectStreamPerWorkspace: with a workspace token, a stream sends only that workspace's
// events, live and replayed on another instance, and moves the client's Last-Event-ID past the
// others with an id alone, so that a reconnect reads none of them again. Without a token, every
// event (the reference's stream), including an entry written before workspaces were kept. The
// wire never shows the workspace kept with an entry.
func TestEffectStreamPerWorkspace(t *testing.T) {
	studio := newWSStudio(t)
	st := memory.New()
	a := studio.controller(t, st, core.Config{})
	b := studio.controller(t, st, core.Config{})
	srvB := httptest.NewServer(b)
	defer srvB.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	onlyA := openStream(t, ctx, srvB.URL, studio.streamHeaders("workspace-1"))
	all := openStream(t, ctx, srvB.URL, nil)
	for _, r := range []*sse{ptr(readEvent(t, onlyA)), ptr(readEvent(t, all))} {
		if r.event != "supervaizer.connected" {
			t.Fatalf("first event %+v", r)
		}
	}

	// On instance a: A, B, an entry of the old format (no workspace), A, B.
	studio.invokeIn(t, a, "workspace-1", "a-0", nil)
	studio.invokeIn(t, a, "workspace-2", "b-0", nil)
	old := `{"agent_slug":"s","action":"job.start","request_id":"old-0","effects":[]}`
	if _, err := st.AppendLog(ctx, "effects/SRV", []byte(old), store.Retention{}); err != nil {
		t.Fatal(err)
	}
	studio.invokeIn(t, a, "workspace-1", "a-1", nil)
	studio.invokeIn(t, a, "workspace-2", "b-1", nil)

	var unfiltered []sse
	for range 5 {
		unfiltered = append(unfiltered, readEvent(t, all))
	}
	epoch, _, _ := strings.Cut(unfiltered[0].id, "-")
	id := func(n int) string { return fmt.Sprintf("%s-%d", epoch, n) }
	eff := func(n int, rid string) sse { return sse{id(n), "supervaizer.effect", effectData(rid)} }
	mark := func(n int) sse { return sse{id: id(n)} }
	oldEv := sse{id(3), "supervaizer.effect", old}
	if want := []sse{eff(1, "a-0"), eff(2, "b-0"), oldEv, eff(4, "a-1"), eff(5, "b-1")}; !slices.Equal(unfiltered, want) {
		t.Fatalf("the stream without a token:\n got %+v\nwant %+v", unfiltered, want)
	}

	// Live: A's two events, ids alone for the rest (how the follower batches them varies), ending
	// at the newest position.
	var effects []sse
	last := 0
	for last < 5 {
		ev := readEvent(t, onlyA)
		_, n, _ := strings.Cut(ev.id, "-")
		var seq int
		if _, err := fmt.Sscan(n, &seq); err != nil || seq <= last || !strings.HasPrefix(ev.id, epoch+"-") {
			t.Fatalf("after position %d: %+v", last, ev)
		}
		last = seq
		switch ev.event {
		case "supervaizer.effect":
			effects = append(effects, ev)
		case "":
			if ev.data != "" {
				t.Fatalf("an id alone with data: %+v", ev)
			}
		default:
			t.Fatalf("unexpected %+v", ev)
		}
	}
	if want := []sse{eff(1, "a-0"), eff(4, "a-1")}; !slices.Equal(effects, want) {
		t.Fatalf("workspace-1's live stream:\n got %+v\nwant %+v", effects, want)
	}

	// Replayed from the log on the other instance.
	hdrA, hdrB := studio.streamHeaders("workspace-1"), studio.streamHeaders("workspace-2")
	cases := []struct {
		name string
		hdr  map[string]string
		last string
		want []sse
	}{
		{"A from the start", hdrA, "0-0", []sse{{"0-0", "supervaizer.connected", `{"status":"connected"}`}, eff(1, "a-0"), eff(4, "a-1"), mark(5)}},
		{"A after its first", hdrA, id(1), []sse{{id(1), "supervaizer.connected", `{"status":"connected"}`}, eff(4, "a-1"), mark(5)}},
		{"A after the id alone: nothing again", hdrA, id(5), []sse{{id(5), "supervaizer.connected", `{"status":"connected"}`}}},
		{"B from the start", hdrB, "0-0", []sse{{"0-0", "supervaizer.connected", `{"status":"connected"}`}, eff(2, "b-0"), eff(5, "b-1")}},
		{"no token from A's first", nil, id(1), []sse{{id(1), "supervaizer.connected", `{"status":"connected"}`}, eff(2, "b-0"), oldEv, eff(4, "a-1"), eff(5, "b-1")}},
	}
	for _, tc := range cases {
		status, _, evs := pollEventsWith(t, a, tc.last, tc.hdr)
		if status != 200 || !slices.Equal(evs, tc.want) {
			t.Errorf("%s: %d\n got %+v\nwant %+v", tc.name, status, evs, tc.want)
		}
	}
	// An event of B moves A's position on, and only that.
	studio.invokeIn(t, b, "workspace-2", "b-2", nil)
	if _, _, evs := pollEventsWith(t, a, id(5), hdrA); !slices.Equal(evs, []sse{{id(5), "supervaizer.connected", `{"status":"connected"}`}, mark(6)}) {
		t.Fatalf("A after B's event: %+v", evs)
	}
	if ev := readEvent(t, onlyA); ev != mark(6) {
		t.Fatalf("A's live stream after B's event: %+v", ev)
	}
	if _, _, evs := pollEventsWith(t, a, id(6), hdrA); !slices.Equal(evs, []sse{{id(6), "supervaizer.connected", `{"status":"connected"}`}}) {
		t.Fatalf("A after the new id: %+v", evs)
	}

	// The catch-up budget counts skipped events too: each poll ends on an id the client resumes
	// from, and a reconnect never reads a skipped event again.
	small := studio.controller(t, st, core.Config{EventCatchUp: 2})
	var got []sse
	for at, polls := "0-0", 0; ; polls++ {
		if polls > 6 {
			t.Fatalf("no end to the polls: %+v", got)
		}
		_, _, evs := pollEventsWith(t, small, at, hdrA)
		if len(evs) == 1 {
			break
		}
		got = append(got, evs[1:]...)
		at = evs[len(evs)-1].id
	}
	if want := []sse{eff(1, "a-0"), mark(2), eff(4, "a-1"), mark(6)}; !slices.Equal(got, want) {
		t.Fatalf("polls of 2 events:\n got %+v\nwant %+v", got, want)
	}
}

func ptr[T any](v T) *T { return &v }

// TestEffectStreamWorkspaceOfEveryWriter: the events the idempotency gate appends with its record
// (a keyed job.start) are kept with their workspace too.
func TestEffectStreamWorkspaceOfEveryWriter(t *testing.T) {
	studio := newWSStudio(t)
	st := memory.New()
	c := studio.controller(t, st, core.Config{Gate: idempotency.New(st)})
	studio.invokeIn(t, c, "workspace-2", "keyed-b", map[string]any{"idempotency_key": "k-b"})
	studio.invokeIn(t, c, "workspace-1", "keyed-a", map[string]any{"idempotency_key": "k-a"})
	_, _, evs := pollEventsWith(t, c, "0-0", studio.streamHeaders("workspace-1"))
	if len(evs) != 2 || evs[1].event != "supervaizer.effect" || evs[1].data != effectData("keyed-a") || !strings.HasSuffix(evs[1].id, "-2") {
		t.Fatalf("workspace-1's keyed event: %+v", evs)
	}
	r, err := st.ReadLog(context.Background(), "effects/SRV", 0, 10)
	if err != nil || len(r.Entries) != 2 {
		t.Fatalf("the log: %+v %v", r, err)
	}
	// The workspace is in the store, ahead of the event, and nowhere on the wire.
	if got, want := string(r.Entries[1].Data), "\x00\x0bworkspace-1"+effectData("keyed-a"); got != want {
		t.Fatalf("the stored entry %q, want %q", got, want)
	}
}

// TestEffectStreamTokenRefused: a stream request whose workspace token does not hold is refused
// with 403 and the verifier's message, as the DataResource routes are; the API key is checked
// first. A token is verified for one of the controller's agents, its workspace and the scope
// supervaizer/events.
func TestEffectStreamTokenRefused(t *testing.T) {
	studio := newWSStudio(t)
	forger := granttest.NewIssuer("studio-2026-05")
	st := memory.New()
	c := studio.controller(t, st, core.Config{})
	notConfigured := effectController(t, core.Config{Authorizer: grant.NotConfigured{}})
	good := studio.streamHeaders("workspace-1")
	with := func(kv ...string) map[string]string {
		h := map[string]string{"X-API-Key": testKey}
		for k, v := range good {
			h[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			h[kv[i]] = kv[i+1]
		}
		return h
	}
	tok := func(claims granttest.Claims) string { return "Bearer " + studio.issuer.Token(claims) }
	valid := studio.claims("workspace-1", grant.MethodEvents)
	cases := []struct {
		name   string
		h      http.Handler
		hdr    map[string]string
		status int
		detail string
	}{
		{"forged", c, with(core.GrantHeader, "Bearer "+forger.Token(valid)), 403, "Workspace authorization token signature is invalid"},
		{"expired", c, with(core.GrantHeader, tok(valid.With("exp", 1, "iat", 1))), 403, "Workspace authorization token is expired"},
		{"another agent's token", c, with(core.GrantHeader, tok(valid.With("agent_slug", "other"))), 403, "Workspace authorization token agent_slug does not match the request"},
		{"another agent named", c, with(core.HeaderAgentSlug, "other"), 403, "Unknown agent_slug for workspace authorization: other"},
		{"no agent named", c, with(core.HeaderAgentSlug, ""), 403, "Unknown agent_slug for workspace authorization: "},
		{"another workspace named", c, with(core.HeaderWorkspaceID, "workspace-2"), 403, "Workspace authorization token workspace_id does not match the request"},
		{"another workspace slug named", c, with(core.GrantHeader, tok(valid.With("workspace_slug", "acme")), core.HeaderWorkspaceSlug, "other"), 403,
			"Workspace authorization token workspace_slug does not match the request"},
		{"an action's token", c, with(core.GrantHeader, studio.token("workspace-1", grant.MethodActionInvoke, "job.start")), 403,
			"Workspace authorization token is missing scope(s): supervaizer/events"},
		{"empty token", c, with(core.GrantHeader, ""), 403, "Missing X-Supervaize-Workspace-Authorization header"},
		{"not configured", notConfigured, with(), 403, "Workspace authorization is required but is not configured for this Supervaizer server"},
		{"a wrong API key, before the token", c, with("X-API-Key", "wrong"), 401, "Invalid or missing API key"},
		// An authorizer's failure (not a refusal), or an answer of nothing, is a 500 that says nothing of it.
		{"an authorizer failing", effectController(t, core.Config{Authorizer: failingAuthorizer{errors.New("keys unreachable")}}), with(), 500, "Internal Server Error"},
		{"an authorizer answering nothing", effectController(t, core.Config{Authorizer: &fixedAuthorizer{}}), with(), 500, "Internal Server Error"},
	}
	// A request let through would be a stream: its client gone, it ends at once (and answers no 403).
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range cases {
		req := httptest.NewRequestWithContext(gone, http.MethodGet, "/a2a/events", nil)
		for k, v := range tc.hdr {
			req.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		tc.h.ServeHTTP(w, req)
		if w.Code != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, w.Code, w.Body, tc.status)
			continue
		}
		want, _ := json.Marshal(map[string]string{"detail": tc.detail})
		if w.Body.String() != string(want) || w.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s: %s %q, want %s", tc.name, w.Body, w.Header().Get("Content-Type"), want)
		}
	}
}

// TestJobSyncedKeepsItsWorkspace: a background job's job.synced, appended outside any request,
// keeps the verified workspace of its job. In local mode the stream's token is not verified (as
// for /a2a): the workspace is the one the request names.
func TestJobSyncedKeepsItsWorkspace(t *testing.T) {
	q := &jobstest.Queue{}
	c := workController(t, q)
	post(t, c, rpcBody(t, 1, "supervaizer/action.invoke", actionParams("job.start", "job-1", map[string]any{"name": "ada"})), nil)
	msgs := q.Take()
	if len(msgs) != 1 {
		t.Fatalf("dispatched %+v", msgs)
	}
	if err := c.Jobs().Deliver(context.Background(), msgs[0], jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	_, _, evs := pollEventsWith(t, c, "0-0", localStreamHeaders("w", "workspace-1"))
	if len(evs) != 3 || !strings.Contains(evs[1].data, `"action":"job.start"`) ||
		evs[2].data != `{"agent_slug":"w","action":"job.sync","request_id":"","effects":[{"type":"job.synced","job_id":"job-1","status":"completed"}]}` {
		t.Fatalf("workspace-1: %+v", evs)
	}
	_, _, evs = pollEventsWith(t, c, "0-0", localStreamHeaders("w", "workspace-2"))
	if len(evs) != 2 || evs[1].event != "" || evs[1].data != "" || !strings.HasSuffix(evs[1].id, "-2") { // an id alone past both
		t.Fatalf("workspace-2: %+v", evs)
	}
}
