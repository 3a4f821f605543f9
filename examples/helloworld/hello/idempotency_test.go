package hello_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/supervaize/svz/core/config"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/svztest"
	"github.com/supervaize/svz/examples/helloworld/hello"
)

// localMode builds Hello World as local mode serves it: SUPERVAIZER_STORE is unset, so its
// idempotency records go to the default bolt file under SUPERVAIZER_DATA_DIR. Close it before
// building another on the same directory: one process holds the file at a time.
func localMode(t *testing.T, dataDir string) http.Handler {
	t.Helper()
	env := map[string]string{
		"SUPERVAIZER_LOCAL_MODE": "true",
		"SUPERVAIZER_SERVER_ID":  "local-server-1",
		"SUPERVAIZER_DATA_DIR":   dataDir,
	}
	h, err := hello.Build(context.Background(), func(k string) string { return env[k] }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	c, ok := h.(io.Closer)
	if !ok {
		t.Fatalf("%T is not an io.Closer: nothing would close its store", h)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return h
}

func closeHandler(t *testing.T, h http.Handler) {
	t.Helper()
	if err := h.(io.Closer).Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

func confirm() contract.ActionRequest {
	key, job := "hello-confirm-1", "job-1"
	return contract.ActionRequest{
		RequestID: "request-1",
		Actor:     contract.Actor{UserID: "user-1"},
		Workspace: contract.WorkspaceRef{ID: "workspace-1"},
		MissionID: "mission-1",
		AgentSlug: hello.Slug,
		Surface:   "job.start",
		Action:    "job.start",
		Input:     json.RawMessage(`{"count":2}`),
		JobID:     &job,

		IdempotencyKey: &key,
	}
}

// TestJobStartIsIdempotent is the test the seeds ask every agent to ship
// (assert_confirm_idempotent), run against the controller as local mode serves it.
func TestJobStartIsIdempotent(t *testing.T) {
	res := svztest.AssertConfirmIdempotent(t, localMode(t, t.TempDir()), config.LocalAPIKey, confirm())
	if res.Status != contract.StatusOK || res.JobState == nil || res.JobState.Job.ID != "job-1" || len(res.JobState.Cases) != 2 {
		t.Errorf("result = %+v; want job-1 with two cases", res)
	}
}

// TestJobStartReplaysAfterRestart: the records live in the bolt file, so a restarted local
// server replays the confirm instead of running it again.
func TestJobStartReplaysAfterRestart(t *testing.T) {
	dir := t.TempDir()
	first := localMode(t, dir)
	want := invoke(t, first, confirm())
	closeHandler(t, first)
	if _, err := os.Stat(filepath.Join(dir, "svz.db")); err != nil {
		t.Fatalf("local mode's default store: %v", err)
	}

	second := localMode(t, dir)
	retry := confirm()
	retry.RequestID = "request-after-restart"
	if got := invoke(t, second, retry); !bytes.Equal(got, want) {
		t.Errorf("after a restart = %s\nwant %s", got, want)
	}
	changed := confirm()
	changed.Input = json.RawMessage(`{"count":3}`)
	if got := invoke(t, second, changed); !bytes.Contains(got, []byte(`"code":"idempotency_conflict"`)) {
		t.Errorf("another input under the same key = %s; want idempotency_conflict", got)
	}
}

func invoke(t *testing.T, h http.Handler, req contract.ActionRequest) []byte {
	t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "supervaizer/action.invoke", "params": req})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/a2a", bytes.NewReader(body))
	r.Header.Set("X-API-Key", config.LocalAPIKey)
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("POST /a2a: HTTP %d %s", w.Code, w.Body)
	}
	return w.Body.Bytes()
}
