package leads_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/state"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/core/studio"
	"github.com/supervaize/svz/core/svztest"
	"github.com/supervaize/svz/examples/leadgen/leads"
	"github.com/supervaize/svz/internal/devstudio"
	"github.com/supervaize/svz/internal/fingerprint"
	"github.com/supervaize/svz/internal/syncbuf"
	"github.com/supervaize/svz/internal/testenv"
)

// A governed lead run: Studio's rules pause the import before it runs, an operator allows it,
// and Studio's resume reaches the other controller instance, which imports and completes the job.
// Studio is the local stand-in (svz dev studio), called over HTTP by the real client.

func standIn(t *testing.T, decisions map[string]string) *devstudio.Server {
	t.Helper()
	ds, err := devstudio.Start(context.Background(), devstudio.Config{Checkpoints: decisions}, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ds.Close() })
	return ds
}

// checkpointsOf is the rule checkpoints of ds, through the real Studio client over HTTP.
func checkpointsOf(t *testing.T, ds *devstudio.Server) checkpoint.Studio {
	t.Helper()
	client, err := studio.New(studio.Settings{APIURL: ds.URL(), WorkspaceID: devstudio.DefaultWorkspace, APIKey: ds.APIKey(), Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return client.RuleCheckpoints()
}

// governedInput is job.start's input with the frozen rule snapshot Studio adds to a governed job.
func governedInput(region, token string) map[string]any {
	in := map[string]any{"rule_snapshot": map[string]any{"hash": "rules-v7", "checkpoint_url": "https://attacker.example/steal",
		"version": 1, "checkpoint_token": token}}
	for k, v := range setup {
		in[k] = v
	}
	in["region"] = region
	return in
}

// lastCheckpoint is the last rule checkpoint the stand-in answered.
func lastCheckpoint(t *testing.T, ds *devstudio.Server) devstudio.Recorded {
	t.Helper()
	var last *devstudio.Recorded
	for _, ev := range ds.Events() {
		if ev.Kind == "rule-checkpoint" {
			last = &ev
		}
	}
	if last == nil {
		t.Fatal("Studio received no rule checkpoint")
	}
	return *last
}

func resumeInput(rec devstudio.Recorded, phase, status string, occurrence string) map[string]any {
	return map[string]any{"checkpoint_id": rec.CheckpointID, "occurrence_id": occurrence, "phase": phase, "status": status,
		"snapshot_hash": "rules-v7", "input_hash": rec.InputHash, "decision_id": "decision-" + rec.CheckpointID}
}

func contactsOf(t *testing.T, h *svztest.Harness, jobID string) int {
	t.Helper()
	n := 0
	for r, err := range state.Of[leads.Contact](h.Context(), leads.Contacts).All(h.Context(), "") {
		if err != nil {
			t.Fatal(err)
		}
		if r.Value.JobID == jobID {
			n++
		}
	}
	return n
}

// approve waits for job's review, then approves it.
func approve(t *testing.T, h *svztest.Harness, job string) {
	t.Helper()
	h.WaitJob(t, job, contract.StateAwaiting)
	if res := h.Invoke(t, contract.StepAwaitingSubmitAction, map[string]any{"report": "# ok", "approved": true}, svztest.JobID(job),
		svztest.StepID(job+"-review")); res.Status != contract.StatusOK {
		t.Fatalf("approval = %s", res.JSON)
	}
}

func stepOf(res *svztest.Result, id string) *contract.Step {
	for _, c := range res.JobState.Cases {
		for i := range c.Steps {
			if c.Steps[i].ID == id {
				return &c.Steps[i]
			}
		}
	}
	return nil
}

func TestGovernedImport(t *testing.T) {
	ds := standIn(t, map[string]string{"before": "pause"})
	checkpoints := checkpointsOf(t, ds)
	s := memory.New()
	t.Cleanup(func() { _ = s.Close() })
	var logs syncbuf.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	controllers := make([]*svztest.Harness, 2) // two instances on one store
	for k := range controllers {
		a, err := leads.NewAgent(leads.Delays{})
		if err != nil {
			t.Fatal(err)
		}
		controllers[k] = svztest.New(t, a, svztest.WithStore(s), svztest.WithRuleCheckpoints(checkpoints), svztest.WithLogger(log))
	}
	h1, h2 := controllers[0], controllers[1]
	token := testenv.UniqueName("rule-snapshot-token-")
	var answers []string

	t.Run("pause, then Studio's allow on the other instance", func(t *testing.T) {
		res := h1.Invoke(t, contract.JobStartAction, governedInput("Nordics", token), svztest.JobID("gov-1"))
		if res.JobState.Job.Status != contract.StateActive {
			t.Fatalf("job.start = %s", res.JSON)
		}
		approve(t, h1, "gov-1")
		res = h1.WaitJob(t, "gov-1", contract.StateAwaiting)
		if st := stepOf(res, "gov-1-import.wait.before"); st == nil || st.Status != contract.StateAwaiting || st.Awaiting.Action != contract.RuleCheckpointResumeAction ||
			stepOf(res, "gov-1-import") != nil {
			t.Fatalf("after the approval = %s", res.JSON)
		}
		// Only the review takes an answer from step.awaiting.submit, never a paused import.
		if res := h1.Invoke(t, contract.StepAwaitingSubmitAction, map[string]any{"report": "# ok", "approved": true}, svztest.JobID("gov-1"),
			svztest.StepID("gov-1-import.wait.before")); len(res.Errors) != 1 || res.Errors[0].Code != "step_not_awaiting" {
			t.Errorf("an answer to the import = %s", res.JSON)
		}
		if n := contactsOf(t, h1, "gov-1"); n != 0 {
			t.Fatalf("%d contacts imported before Studio allowed it", n)
		}
		answers = append(answers, string(res.JSON))
		rec := lastCheckpoint(t, ds)
		var body struct {
			Phase, OccurrenceID, JobID, CaseID, StepID, SnapshotHash string
			Context                                                  map[string]any
			SecretRefs                                               []string `json:"secret_refs"`
		}
		_ = json.Unmarshal(rec.Request, &body)
		if rec.Decision != "pause" || rec.TokenFingerprint != fingerprint.Of(token) || body.Context["operation"] != "contacts.import" ||
			body.Context["reviewer_email"] != nil || len(body.SecretRefs) != 1 {
			t.Errorf("checkpoint %+v, body %s", rec, rec.Request)
		}
		// Studio resumes through the other controller.
		res = h2.Invoke(t, contract.RuleCheckpointResumeAction, resumeInput(rec, "before", "allow", "gov-1-import-1"),
			svztest.JobID("gov-1"), svztest.CaseID("gov-1-report"))
		want := `{"status":"ok","effects":[{"type":"rule.checkpoint.resumed","job_id":"gov-1","status":"allow","summary":{"checkpoint_id":"` + rec.CheckpointID + `"}}]}`
		if string(res.JSON) != want {
			t.Errorf("resume = %s\nwant %s", res.JSON, want)
		}
		if n := contactsOf(t, h1, "gov-1"); n != 3 {
			t.Errorf("%d contacts imported, want 3", n)
		}
		res = h1.WaitJob(t, "gov-1", contract.StateCompleted)
		if st := stepOf(res, "gov-1-import"); st == nil || st.Status != contract.StateCompleted {
			t.Errorf("job.sync = %s", res.JSON)
		}
		answers = append(answers, string(res.JSON))
	})

	t.Run("Studio's stop", func(t *testing.T) {
		h1.Invoke(t, contract.JobStartAction, governedInput("Iberia", token), svztest.JobID("gov-2"))
		approve(t, h1, "gov-2")
		h1.WaitJob(t, "gov-2", contract.StateAwaiting)
		rec := lastCheckpoint(t, ds)
		res := h2.Invoke(t, contract.RuleCheckpointResumeAction, resumeInput(rec, "before", "stop", "gov-2-import-1"),
			svztest.JobID("gov-2"), svztest.CaseID("gov-2-report"))
		if res.Effects[0].Status != "stop" {
			t.Errorf("resume = %s", res.JSON)
		}
		res = h1.WaitJob(t, "gov-2", contract.StateFailed)
		if st := stepOf(res, "gov-2-import"); st == nil || st.Status != contract.StateFailed {
			t.Errorf("the stopped import = %s", res.JSON)
		}
		if !strings.Contains(string(res.JobState.Job.Extra["error"]), "returned 'stop'") || contactsOf(t, h1, "gov-2") != 0 {
			t.Errorf("job.sync = %s, %d contacts", res.JSON, contactsOf(t, h1, "gov-2"))
		}
	})

	t.Run("a pause before, then one after the import: each waits in its own step", func(t *testing.T) {
		if err := ds.SetCheckpoints(map[string]string{"before": "pause", "after": "pause"}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ds.SetCheckpoints(map[string]string{"before": "pause"}) })
		h1.Invoke(t, contract.JobStartAction, governedInput("Alps", token), svztest.JobID("gov-4"))
		approve(t, h1, "gov-4")
		h1.WaitJob(t, "gov-4", contract.StateAwaiting)
		rec := lastCheckpoint(t, ds)
		h2.Invoke(t, contract.RuleCheckpointResumeAction, resumeInput(rec, "before", "allow", "gov-4-import-1"), svztest.JobID("gov-4"), svztest.CaseID("gov-4-report"))
		// The import ran in the resume; the after checkpoint paused it, and the woken job waits again.
		res := h1.WaitJob(t, "gov-4", contract.StateAwaiting)
		first, second := stepOf(res, "gov-4-import.wait.before"), stepOf(res, "gov-4-import.wait.after")
		if first == nil || first.Status != contract.StateCompleted || second == nil || second.Status != contract.StateAwaiting ||
			second.Awaiting.Action != contract.RuleCheckpointResumeAction || stepOf(res, "gov-4-import") != nil || contactsOf(t, h1, "gov-4") != 3 {
			t.Fatalf("after the before checkpoint's allow = %s, %d contacts", res.JSON, contactsOf(t, h1, "gov-4"))
		}
		rec = lastCheckpoint(t, ds)
		if rec.Decision != "pause" || !strings.Contains(string(rec.Request), `"phase":"after"`) {
			t.Fatalf("checkpoint %+v", rec)
		}
		h1.Invoke(t, contract.RuleCheckpointResumeAction, resumeInput(rec, "after", "allow", "gov-4-import-1"), svztest.JobID("gov-4"), svztest.CaseID("gov-4-report"))
		res = h1.WaitJob(t, "gov-4", contract.StateCompleted)
		if st := stepOf(res, "gov-4-import"); st == nil || st.Status != contract.StateCompleted || stepOf(res, "gov-4-import.wait.after").Status != contract.StateCompleted {
			t.Errorf("job.sync = %s", res.JSON)
		}
	})

	t.Run("a pause in a resume is refused and the checkpoint keeps waiting", func(t *testing.T) {
		h1.Invoke(t, contract.JobStartAction, governedInput("Baltics", token), svztest.JobID("gov-3"))
		approve(t, h1, "gov-3")
		h1.WaitJob(t, "gov-3", contract.StateAwaiting)
		rec := lastCheckpoint(t, ds)
		resp := h2.Call(t, "supervaizer/action.invoke", h2.Request(t, contract.RuleCheckpointResumeAction,
			resumeInput(rec, "before", "pause", "gov-3-import-1"), svztest.JobID("gov-3"), svztest.CaseID("gov-3-report")))
		// An input error (not -32603, which Studio would retry): a pause is no decision.
		if want := `{"status":"error","effects":[],"errors":[{"code":"input_option","message":"rule.checkpoint.resume: input.status must be allow or stop: a pause is not a decision (the checkpoint keeps waiting)","field":"status"}]}`; !strings.Contains(string(resp.Body), want) {
			t.Errorf("pause = %s\nwant %s", resp.Body, want)
		}
		res := h1.Invoke(t, contract.JobSyncAction, nil, svztest.JobID("gov-3"))
		if res.JobState.Job.Status != contract.StateAwaiting {
			t.Errorf("job.sync = %s", res.JSON)
		}
	})

	t.Run("an ungoverned job imports as before, and the token is nowhere", func(t *testing.T) {
		h1.Invoke(t, contract.JobStartAction, setup, svztest.JobID("plain-1"))
		approve(t, h1, "plain-1")
		res := h1.WaitJob(t, "plain-1", contract.StateCompleted)
		if st := stepOf(res, "plain-1-import"); st == nil || st.Status != contract.StateCompleted || contactsOf(t, h1, "plain-1") != 3 {
			t.Errorf("an ungoverned job imports as a plain step: %s", res.JSON)
		}
		haystack := logs.String() + strings.Join(answers, "")
		records := 0
		for c := 'a'; c <= 'z'; c++ { // every record of the store, whatever its key
			after := ""
			for {
				p, err := s.List(context.Background(), string(c), after, store.MaxListLimit)
				if err != nil {
					t.Fatal(err)
				}
				for _, it := range p.Items {
					haystack += string(it.Value)
					records++
				}
				if p.Next == "" {
					break
				}
				after = p.Next
			}
		}
		if records < 10 {
			t.Fatalf("%d records in the store", records)
		}
		for _, ev := range ds.Events() {
			raw, _ := json.Marshal(ev)
			haystack += string(raw)
		}
		if strings.Contains(haystack, token) || strings.Contains(haystack, ds.APIKey()) {
			t.Error("the snapshot token or the Studio key is in the logs, a result, the store or what Studio recorded")
		}
	})
}

// TestGovernedThroughStudio: the same run configured as a deployment is (config.NewController:
// registration with Studio at start, workspace grants Studio signs, the store from the
// environment), driven over HTTP; the resume is a normal action, granted its scopes.
func TestGovernedThroughStudio(t *testing.T) {
	ds := standIn(t, map[string]string{"after": "pause"})
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	env := ds.Env("", "http://127.0.0.1:8000")
	env["SUPERVAIZER_API_KEY"] = "leadgen-controller-key"
	env["SUPERVAIZER_SERVER_ID"] = "leadgen-test-server"
	env["SUPERVAIZER_PRIVATE_KEY"] = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	env["SUPERVAIZER_STORE"] = "memory"
	var logs syncbuf.Buffer
	h, err := leads.Build(context.Background(), func(k string) string { return env[k] }, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	t.Cleanup(func() { _ = h.(io.Closer).Close() })
	ws := ds.WorkspaceID(devstudio.DefaultWorkspace)
	call := func(action string, input any, caseID string) map[string]any {
		t.Helper()
		tok, err := ds.MintToken(devstudio.TokenRequest{Workspace: devstudio.DefaultWorkspace, Agent: leads.Slug,
			Scopes: []string{"supervaizer/action.invoke", action}})
		if err != nil {
			t.Fatal(err)
		}
		params := map[string]any{"request_id": "r-" + action, "actor": map[string]any{"user_id": "u"}, "workspace": map[string]any{"id": ws},
			"mission_id": "m1", "agent_slug": leads.Slug, "surface": "job.start", "action": action, "input": input, "job_id": "gov-9"}
		if caseID != "" {
			params["case_id"] = caseID
		}
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "supervaizer/action.invoke", "params": params})
		req := httptest.NewRequest(http.MethodPost, "/a2a", bytes.NewReader(body))
		req.Header.Set("X-API-Key", env["SUPERVAIZER_API_KEY"])
		req.Header.Set("X-Supervaize-Workspace-Authorization", "Bearer "+tok.Token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out["result"] == nil {
			t.Fatalf("%s: %d %s", action, rec.Code, rec.Body)
		}
		return out["result"].(map[string]any)
	}
	token := testenv.UniqueName("rule-snapshot-token-")
	in := governedInput("Benelux", token)
	in["require_review"] = false // the import runs at job.start
	if res := call(contract.JobStartAction, in, ""); res["job_state"].(map[string]any)["job"].(map[string]any)["status"] != contract.StateActive {
		t.Fatalf("job.start = %v", res)
	}
	js := waitSync(t, func() map[string]any { return call(contract.JobSyncAction, map[string]any{}, "") }, contract.StateAwaiting)
	if len(js.Cases) != 2 || len(js.Cases[1].Steps) != 2 || js.Cases[1].Steps[1].ID != "gov-9-import.wait.after" || js.Cases[1].Steps[1].Status != contract.StateAwaiting {
		t.Fatalf("job.sync = %+v", js)
	}
	rec := lastCheckpoint(t, ds)
	if rec.Decision != "pause" || !strings.Contains(string(rec.Request), `"phase":"after"`) {
		t.Fatalf("checkpoint %+v", rec)
	}
	res := call(contract.RuleCheckpointResumeAction, resumeInput(rec, "after", "allow", "gov-9-import-1"), "gov-9-report")
	if eff := res["effects"].([]any)[0].(map[string]any); eff["status"] != "allow" {
		t.Fatalf("resume = %v", res)
	}
	waitSync(t, func() map[string]any { return call(contract.JobSyncAction, map[string]any{}, "") }, contract.StateCompleted)
	if strings.Contains(logs.String(), token) || strings.Contains(logs.String(), ds.APIKey()) {
		t.Errorf("the logs hold the token or the Studio key:\n%s", logs.String())
	}
}

// waitSync calls job.sync (sync) until the job's status is status, for 30 s at most.
func waitSync(t *testing.T, sync func() map[string]any, status string) contract.JobState {
	t.Helper()
	deadline := time.Now().Add(svztest.WaitJobTimeout)
	for {
		raw, _ := json.Marshal(sync()["job_state"])
		var js contract.JobState
		if err := json.Unmarshal(raw, &js); err != nil {
			t.Fatalf("job.sync: %v: %s", err, raw)
		}
		if js.Job.Status == status {
			return js
		}
		if time.Now().After(deadline) {
			t.Fatalf("job.sync is still %s, not %s: %s", js.Job.Status, status, raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
