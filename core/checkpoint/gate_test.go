package checkpoint_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/store/memory"
)

func memoryWorld(t testing.TB, decide map[string]string) *world {
	s := memory.New()
	t.Cleanup(func() { _ = s.Close() })
	return newWorld(t, s, decide)
}

// TestFromJobStart: the reference's errors, and a snapshot never quoted in one.
func TestFromJobStart(t *testing.T) {
	w := memoryWorld(t, nil)
	i := w.instance(behaviour{})
	const token = "tok-NEVER-SHOWN-7f3a"
	snap := func(members string) string {
		return `{"amount":1,"rule_snapshot":{` + members + `}}`
	}
	full := `"hash":"h1","checkpoint_url":"https://x.example","version":1,"checkpoint_token":"` + token + `"`
	for _, c := range []struct {
		name, input, slug string
		want              error
		msg               string
	}{
		{"no snapshot", `{"amount":1}`, agentSlug, checkpoint.ErrNoSnapshot, "Governed job requires rule_snapshot"},
		{"null snapshot", `{"rule_snapshot":null}`, agentSlug, checkpoint.ErrNoSnapshot, "Governed job requires rule_snapshot"},
		{"empty input", ``, agentSlug, checkpoint.ErrNoSnapshot, "Governed job requires rule_snapshot"},
		{"no agent", snap(full), "", checkpoint.ErrNoAgentSlug, "Governed job requires agent_slug"},
		{"not an object", `{"rule_snapshot":"` + token + `"}`, agentSlug, nil, "input.rule_snapshot must be an object"},
		{"input not an object", `["` + token + `"]`, agentSlug, nil, "the input must be a JSON object"},
		{"no hash", snap(`"checkpoint_url":"u","version":1,"checkpoint_token":"` + token + `"`), agentSlug, nil, "rule_snapshot.hash must be a non-empty string"},
		{"empty hash", snap(`"hash":"","checkpoint_url":"u","version":1,"checkpoint_token":"` + token + `"`), agentSlug, nil, "rule_snapshot.hash must be a non-empty string"},
		{"no url", snap(`"hash":"h","version":1,"checkpoint_token":"` + token + `"`), agentSlug, nil, "rule_snapshot.checkpoint_url must be a string"},
		{"version 2", snap(`"hash":"h","checkpoint_url":"u","version":2,"checkpoint_token":"` + token + `"`), agentSlug, nil, "rule_snapshot.version must be 1"},
		{"version as text", snap(`"hash":"h","checkpoint_url":"u","version":"` + token + `","checkpoint_token":"` + token + `"`), agentSlug, nil, "rule_snapshot.version must be 1"},
		{"no token", snap(`"hash":"h","checkpoint_url":"u","version":1`), agentSlug, nil, "rule_snapshot.checkpoint_token must be a non-empty string"},
		{"token not a string", snap(`"hash":"` + token + `","checkpoint_url":"u","version":1,"checkpoint_token":["` + token + `"]`), agentSlug, nil, "rule_snapshot.checkpoint_token must be a non-empty string"},
		{"another agent's request", snap(full), "other-agent", nil, `the request names agent "other-agent"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := &contract.ActionRequest{AgentSlug: c.slug, Input: json.RawMessage(c.input)}
			g, err := checkpoint.FromJobStart(i.ctx(), req)
			if err == nil || g != nil {
				t.Fatalf("accepted: %v", g)
			}
			if c.want != nil && (!errors.Is(err, c.want) || err.Error() != c.msg) {
				t.Errorf("error %q, want exactly %q", err, c.msg)
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error %q, want %q", err, c.msg)
			}
			if strings.Contains(err.Error(), token) {
				t.Errorf("the error shows the token: %v", err)
			}
		})
	}
	// Without a job id the gate binds to the job of its first step.
	g, err := checkpoint.FromJobStart(i.ctx(), &contract.ActionRequest{AgentSlug: agentSlug, Input: json.RawMessage(snap(full))})
	if err != nil || g.JobID() != "" || g.SnapshotHash() != "h1" || g.AgentSlug() != agentSlug {
		t.Fatalf("gate %v, %v", g, err)
	}
	if refs := g.SecretRefs(); len(refs) != 2 || refs[0] != "context.customer.card" {
		t.Errorf("secret refs %v: the registration's by default", refs)
	}
	g, err = checkpoint.FromJobStart(i.ctx(), &contract.ActionRequest{AgentSlug: agentSlug, Input: json.RawMessage(snap(full))},
		checkpoint.WithSecretRefs("job.fields.iban"))
	if err != nil || len(g.SecretRefs()) != 1 {
		t.Errorf("WithSecretRefs: %v, %v", g, err)
	}
	for refs, msg := range map[string]string{"other.path": "contains an invalid path", "context.a": "must not contain duplicates"} {
		paths := []string{refs}
		if refs == "context.a" {
			paths = append(paths, refs)
		}
		if _, err := checkpoint.FromJobStart(i.ctx(), &contract.ActionRequest{AgentSlug: agentSlug, Input: json.RawMessage(snap(full))},
			checkpoint.WithSecretRefs(paths...)); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("secret refs %v: %v", paths, err)
		}
	}
}

// TestGateNeverShowsItsToken: printing, logging or encoding a gate never shows the token.
func TestGateNeverShowsItsToken(t *testing.T) {
	w := memoryWorld(t, nil)
	i := w.instance(behaviour{})
	j := w.job()
	g := j.gate(t, i)
	var shown []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%d", "%x", "%q", "%T %[1]v"} {
		shown = append(shown, fmt.Sprintf(verb, g), fmt.Sprintf(verb, *g))
	}
	b, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	shown = append(shown, string(b), g.String())
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("gate", "gate", g, "value", *g)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("gate", "gate", g)
	shown = append(shown, logs.String())
	for _, s := range shown {
		if strings.Contains(s, j.token) {
			t.Errorf("shows the token: %s", s)
		}
	}
	if !strings.Contains(shown[0], snapshotHash) || !strings.Contains(string(b), `"snapshot_hash":"`+snapshotHash+`"`) {
		t.Errorf("a gate shows its agent, job and snapshot hash: %s / %s", shown[0], b)
	}
	if err := json.Unmarshal(b, new(checkpoint.Gate)); err == nil {
		t.Error("a gate was decoded from JSON")
	}
}

// TestTokenKeptOutOfContexts: a context, an input or a result holding the token is refused,
// before anything is sent or stored.
func TestTokenKeptOutOfContexts(t *testing.T) {
	w := memoryWorld(t, nil)
	i := w.instance(behaviour{})
	j := w.job()
	g := j.gate(t, i)
	var snapshotInput map[string]any
	_ = json.Unmarshal(j.req.Input, &snapshotInput)
	if _, err := checkpoint.RunGuardedStep(i.ctx(), g, i.step, j.occ, snapshotInput, j.order); !errors.Is(err, checkpoint.ErrTokenInContext) {
		t.Errorf("the job.start input as context: %v", err)
	}
	leaky := j.order
	leaky.ID = "order-" + j.token
	if _, err := checkpoint.RunGuardedStep(i.ctx(), g, i.step, j.occ, j.before(), leaky); !errors.Is(err, checkpoint.ErrTokenInContext) {
		t.Errorf("the token in the input: %v", err)
	}
	if _, err := checkpoint.RunGuardedStep(i.ctx(), g, i.step, j.occ, []int{1}, j.order); err == nil || !strings.Contains(err.Error(), "must be a JSON object") {
		t.Errorf("a context that is no object: %v", err)
	}
	if len(w.studio.allCalls()) != 0 {
		t.Error("Studio was called")
	}
	// A result holding the token is not recorded: the step then needs recovery.
	w2 := memoryWorld(t, nil)
	i2 := w2.instance(behaviour{effect: func(_ context.Context, o order) (receipt, error) {
		return receipt{Order: o.ID, Ref: w2.tokens[0]}, nil
	}})
	j2 := w2.job()
	if _, err := j2.run(t, i2); !errors.Is(err, checkpoint.ErrTokenInContext) || !errors.Is(err, checkpoint.ErrEffectStarted) {
		t.Errorf("the token in the result: %v", err)
	}
	w.noSecrets(t)
	w2.noSecrets(t)
}

// TestRefusals: what a handler can get wrong, and a controller without Studio.
func TestRefusals(t *testing.T) {
	w := memoryWorld(t, nil)
	i := w.instance(behaviour{})
	j := w.job()
	g := j.gate(t, i)
	if _, err := checkpoint.FromJobStart(context.Background(), j.req); !errors.Is(err, checkpoint.ErrNoScope) {
		t.Errorf("outside a handler: %v", err)
	}
	noStudio := checkpoint.NewContext(context.Background(), checkpoint.NewService(checkpoint.Config{Store: w.store}), i.reg, agentSlug, w.ws)
	_, err := checkpoint.FromJobStart(noStudio, j.req)
	if !errors.Is(err, checkpoint.ErrNoStudio) || !strings.Contains(err.Error(), "local mode never calls Studio") {
		t.Errorf("without Studio: %v", err)
	}
	// Without a snapshot, the job is simply not governed, Studio or not.
	if _, err := checkpoint.FromJobStart(noStudio, &contract.ActionRequest{AgentSlug: agentSlug, Input: json.RawMessage(`{}`)}); !errors.Is(err, checkpoint.ErrNoSnapshot) {
		t.Errorf("ungoverned without Studio: %v", err)
	}
	// Another agent's gate, or the same job started by another agent.
	other := checkpoint.NewContext(context.Background(), i.svc, i.reg, "other-agent", w.ws)
	if _, err := checkpoint.RunGuardedStep(other, g, i.step, j.occ, j.before(), j.order); !errors.Is(err, checkpoint.ErrOtherAgent) {
		t.Errorf("another agent's gate: %v", err)
	}
	req := *j.req
	req.AgentSlug = "other-agent"
	if _, err := checkpoint.FromJobStart(other, &req); !errors.Is(err, checkpoint.ErrOtherAgent) || err.Error() != "Rule checkpoint case belongs to another agent" {
		t.Errorf("the job of another agent: %v", err)
	}
	// A gate not made by FromJobStart or JobGate (the zero Gate), even under a scope whose agent
	// matches its empty one: no token to send, refused as no gate.
	noAgent := checkpoint.NewContext(context.Background(), i.svc, i.reg, "", w.ws)
	if _, err := checkpoint.RunGuardedStep(noAgent, &checkpoint.Gate{}, i.step, j.occ, j.before(), j.order); err == nil ||
		err.Error() != "checkpoint: a guarded step needs its job's gate (FromJobStart or JobGate)" {
		t.Errorf("the zero Gate: %v", err)
	}
	// A step defined on another registry, missing ids, a gate for another job.
	stranger := w.instance(behaviour{})
	if _, err := checkpoint.RunGuardedStep(i.ctx(), g, stranger.step, j.occ, j.before(), j.order); err == nil || !strings.Contains(err.Error(), `guarded step "charge" is not defined on agent`) {
		t.Errorf("another registry's step: %v", err)
	}
	if _, err := checkpoint.RunGuardedStep(i.ctx(), g, i.step, checkpoint.Occurrence{JobID: j.occ.JobID}, j.before(), j.order); err == nil || !strings.Contains(err.Error(), "needs CaseID, StepID, OccurrenceID") {
		t.Errorf("missing ids: %v", err)
	}
	occ := j.occ
	occ.JobID = "job-other"
	if _, err := checkpoint.RunGuardedStep(i.ctx(), g, i.step, occ, j.before(), j.order); err == nil || !strings.Contains(err.Error(), "the gate belongs to job") {
		t.Errorf("another job: %v", err)
	}
	if _, err := checkpoint.StepState(i.ctx(), i.step, j.occ); err == nil || !strings.Contains(err.Error(), "has not run") {
		t.Errorf("state of a step that never ran: %v", err)
	}
}

// TestDefine: mistakes are collected for core.New to report.
func TestDefine(t *testing.T) {
	effect := func(context.Context, order) (receipt, error) { return receipt{}, nil }
	after := func(order, receipt) (any, error) { return map[string]any{}, nil }
	undeclared := checkpoint.NewRegistry(nil)
	checkpoint.Define(owner{undeclared}, "x", checkpoint.Funcs[order, receipt]{Effect: effect, AfterContext: after})
	if err := undeclared.Err(); err == nil || !strings.Contains(err.Error(), "declares no rule_checkpoints") {
		t.Errorf("undeclared: %v", err)
	}
	reg := checkpoint.NewRegistry(rules())
	checkpoint.Define(owner{reg}, "ok", checkpoint.Funcs[order, receipt]{Effect: effect, AfterContext: after})
	checkpoint.Define(owner{reg}, "ok", checkpoint.Funcs[order, receipt]{Effect: effect, AfterContext: after})
	checkpoint.Define(owner{reg}, "", checkpoint.Funcs[order, receipt]{Effect: effect, AfterContext: after})
	checkpoint.Define(owner{reg}, "no-effect", checkpoint.Funcs[order, receipt]{AfterContext: after})
	checkpoint.Define(owner{reg}, "no-after", checkpoint.Funcs[order, receipt]{Effect: effect})
	err := reg.Err()
	for _, want := range []string{`"ok": defined twice`, "a step name is 1 to 200 printable characters", `"no-effect": Funcs.Effect is required`, `"no-after": Funcs.AfterContext is required`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in %v", want, err)
		}
	}
	if reg.Len() != 1 {
		t.Errorf("%d steps defined", reg.Len())
	}
}

// FuzzParseSnapshot: whatever Studio (or a forger) sends as rule_snapshot, FromJobStart answers
// a gate or an error, and an error never holds the token.
func FuzzParseSnapshot(f *testing.F) {
	f.Add(`{"rule_snapshot":{"hash":"h","checkpoint_url":"u","version":1,"checkpoint_token":"SECRET-TOKEN"}}`)
	f.Add(`{"rule_snapshot":{"hash":"SECRET-TOKEN","version":"1"}}`)
	f.Add(`{"rule_snapshot":[1,2]}`)
	w := memoryWorld(f, nil)
	i := w.instance(behaviour{})
	f.Fuzz(func(t *testing.T, input string) {
		g, err := checkpoint.FromJobStart(i.ctx(), &contract.ActionRequest{AgentSlug: agentSlug, Input: json.RawMessage(input)})
		if err == nil {
			if g == nil || g.SnapshotHash() == "" {
				t.Fatalf("gate %v", g)
			}
			return
		}
		if strings.Contains(err.Error(), "SECRET-TOKEN") {
			t.Fatalf("error shows the token: %v", err)
		}
	})
}

// FuzzResume: whatever a resume carries, it is answered or refused; a refusal changes nothing.
func FuzzResume(f *testing.F) {
	f.Add(`{"checkpoint_id":"chk-1","occurrence_id":"o","phase":"before","status":"allow","snapshot_hash":"snapshot-hash-1","input_hash":"i","decision_id":"d"}`, "job-1", "case-1")
	f.Add(`{"status":"pause"}`, "", "")
	f.Add(`[]`, "j", "c")
	w := memoryWorld(f, nil)
	i := w.instance(behaviour{})
	f.Fuzz(func(t *testing.T, input, jobID, caseID string) {
		res, err := checkpoint.Resume(i.ctx(), &contract.ActionRequest{AgentSlug: agentSlug, JobID: &jobID, CaseID: &caseID, Input: json.RawMessage(input)})
		if err == nil && (res == nil || res.Validate() != nil) {
			t.Fatalf("result %+v", res)
		}
	})
}

// TestKeysKeepTuplesApart: the store keys of occurrences and gates are built from their parts so
// that no two tuples meet, even when the parts concatenate to the same text.
func TestKeysKeepTuplesApart(t *testing.T) {
	w := memoryWorld(t, map[string]string{"before": "pause"})
	i := w.instance(behaviour{})
	j := w.job()
	g := j.gate(t, i)
	first, second := j.occ, j.occ
	first.CaseID, first.OccurrenceID = "c", "1x"
	second.CaseID, second.OccurrenceID = "c1", "x"
	for _, o := range []checkpoint.Occurrence{first, second} {
		out, err := checkpoint.RunGuardedStep(i.ctx(), g, i.step, o, j.before(), j.order)
		if err != nil || out.Status != checkpoint.Awaiting {
			t.Fatalf("occurrence %+v: %+v, %v", o, out, err)
		}
		if n := len(w.studio.callsOf(o.OccurrenceID)); n != 1 {
			t.Errorf("occurrence %+v sent %d checkpoints, want its own one", o, n)
		}
	}
	// A gate of job "1"+id in workspace ws is not job id's gate in workspace ws+"1".
	ctxIn := func(ws string) context.Context {
		return checkpoint.NewContext(context.Background(), i.svc, i.reg, agentSlug, ws)
	}
	req := *j.req
	job := "1" + j.occ.JobID
	req.JobID = &job
	if _, err := checkpoint.FromJobStart(ctxIn(i.ws), &req); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.JobGate(ctxIn(i.ws+"1"), j.occ.JobID); !errors.Is(err, checkpoint.ErrNotGoverned) {
		t.Errorf("a workspace and job that concatenate to another gate's: %v; want ErrNotGoverned", err)
	}
}
