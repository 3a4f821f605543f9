package studio_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core/studio"
	"github.com/supervaize/svz/internal/devstudio"
	"github.com/supervaize/svz/internal/fingerprint"
)

const checkpointToken = "rule-checkpoint-token-5e4d3c2b1a"

func checkpointRequest(phase string) studio.RuleCheckpointRequest {
	return studio.RuleCheckpointRequest{OccurrenceID: "occ-1", Phase: phase, SnapshotHash: "snapshot-1", JobID: "job-1", CaseID: "case-1",
		StepID: "step-1", Context: json.RawMessage(`{"state":"proposed"}`), SecretRefs: []string{"case.metadata.customer_secret"}}
}

func TestRuleCheckpointDecisions(t *testing.T) {
	s := standIn(t, devstudio.Config{Checkpoints: map[string]string{"before": "pause", "after": "stop"}})
	var l logs
	c := newClient(t, s, &l, nil)
	for phase, want := range map[string]string{"before": "pause", "after": "stop"} {
		got, err := c.RuleCheckpoint(context.Background(), checkpointToken, checkpointRequest(phase))
		if err != nil || got.Status != want || got.SnapshotHash != "snapshot-1" || got.CheckpointID == "" || got.InputHash == "" {
			t.Fatalf("%s: %+v %v", phase, got, err)
		}
	}
	ev := s.Events()
	if len(ev) != 2 || ev[0].Kind != "rule-checkpoint" || ev[0].TokenFingerprint != fingerprint.Of(checkpointToken) {
		t.Fatalf("recorded %+v", ev)
	}
	var body map[string]any
	_ = json.Unmarshal(ev[0].Request, &body)
	if body["occurrence_id"] != "occ-1" || body["snapshot_hash"] != "snapshot-1" || body["context"].(map[string]any)["state"] != "proposed" {
		t.Errorf("request %s", ev[0].Request)
	}
	noSecret(t, "log", l.String(), checkpointToken)
	allow := standIn(t, devstudio.Config{})
	if got, err := newClient(t, allow, nil, nil).RuleCheckpoint(context.Background(), checkpointToken, checkpointRequest("before")); err != nil || got.Status != "allow" {
		t.Errorf("default decision %+v %v", got, err)
	}
}

// TestRuleCheckpointWire checks the URL (no workspace prefix) and headers of spec §6.3, and the
// reference's two errors.
func TestRuleCheckpointWire(t *testing.T) {
	answer := `{"checkpoint_id":"c","status":"allow","snapshot_hash":"snapshot-1","input_hash":"i"}`
	status := http.StatusOK
	var got *http.Request
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, body = r.Clone(context.Background()), nil
		body, _ = io.ReadAll(r.Body)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(answer))
	}))
	defer srv.Close()
	var l logs
	c, _ := studio.New(studio.Settings{APIURL: srv.URL, WorkspaceID: "team", APIKey: "studio-key-1234", Timeout: time.Minute}, studio.WithLogger(l.logger()))
	if _, err := c.RuleCheckpoint(context.Background(), checkpointToken, checkpointRequest("before")); err != nil {
		t.Fatal(err)
	}
	if got.URL.Path != "/api/v1/rule-checkpoints/" || got.Header.Get("X-Rule-Checkpoint-Token") != checkpointToken ||
		got.Header.Get("Authorization") != "Api-Key studio-key-1234" || got.Header.Get("workspace") != "team" || got.Header.Get("accept") != "application/json" {
		t.Errorf("request %s %v", got.URL, got.Header)
	}
	if string(body) != `{"occurrence_id":"occ-1","phase":"before","snapshot_hash":"snapshot-1","job_id":"job-1","case_id":"case-1","step_id":"step-1","context":{"state":"proposed"},"secret_refs":["case.metadata.customer_secret"]}` {
		t.Errorf("body %s", body)
	}
	for _, tc := range []struct {
		status int
		answer string
		want   error
	}{
		{200, `{"checkpoint_id":"c","status":"allow","snapshot_hash":"other","input_hash":"i"}`, studio.ErrCheckpointHashMismatch},
		{500, `{"detail":"boom ` + checkpointToken + `"}`, studio.ErrCheckpointFailed},
		{200, `not json`, studio.ErrCheckpointFailed},
		{200, `{"checkpoint_id":"c","status":"maybe","snapshot_hash":"snapshot-1"}`, studio.ErrCheckpointFailed},
	} {
		status, answer = tc.status, tc.answer
		_, err := c.RuleCheckpoint(context.Background(), checkpointToken, checkpointRequest("after"))
		if !errors.Is(err, tc.want) || !strings.HasPrefix(err.Error(), tc.want.Error()) {
			t.Errorf("%d %s: %v, want %v", tc.status, tc.answer, err, tc.want)
		}
		if err != nil {
			noSecret(t, "error", err.Error(), checkpointToken)
		}
	}
	noSecret(t, "log", l.String(), checkpointToken, "studio-key-1234")
	if _, err := c.RuleCheckpoint(context.Background(), "", checkpointRequest("after")); !errors.Is(err, studio.ErrCheckpointFailed) {
		t.Errorf("no token: %v", err)
	}
}
