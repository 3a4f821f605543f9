package core_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/idempotency"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/internal/syncbuf"
)

// doOnly is the idempotency gate without its appending side: the controller appends the event.
type doOnly struct{ g *idempotency.Gate }

func (d doOnly) Do(ctx context.Context, req *contract.ActionRequest, run func(context.Context) (*contract.ActionResult, error)) (*contract.ActionResult, error) {
	return d.g.Do(ctx, req, run)
}

// TestReplayedOnlyForReplays: the Idempotent-Replayed header and the log line's "replayed" say
// true for a replay of the recorded run, and only then: not on the first run (whose
// strictly_idempotent_response is true as well), appended with its record or not, nor on a
// conflict.
func TestReplayedOnlyForReplays(t *testing.T) {
	for name, gate := range map[string]func(*memory.Store) core.ActionGate{
		"appending gate": func(s *memory.Store) core.ActionGate { return idempotency.New(s) },
		"plain gate":     func(s *memory.Store) core.ActionGate { return doOnly{idempotency.New(s)} },
	} {
		t.Run(name, func(t *testing.T) {
			var logs syncbuf.Buffer
			s := memory.New()
			c := effectController(t, core.Config{Store: s, Gate: gate(s), Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
			call := func(id int, input map[string]any) (string, string) {
				t.Helper()
				body := rpcBody(t, id, actionInvoke, params(map[string]any{"idempotency_key": "idem-1", "request_id": "r-" + strconv.Itoa(id), "input": input}))
				req := httptest.NewRequest(http.MethodPost, "/a2a", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-API-Key", testKey)
				rec := httptest.NewRecorder()
				c.ServeHTTP(rec, req)
				var line struct {
					Replayed *bool `json:"replayed"`
				}
				lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
				if err := json.Unmarshal([]byte(lines[len(lines)-1]), &line); err != nil || line.Replayed == nil {
					t.Fatalf("call %d: the last log line is not the action's: %s", id, logs.String())
				}
				_, has := rec.Header()[core.ReplayedHeader]
				return strings.TrimSpace(rec.Body.String()), map[bool]string{true: "header " + rec.Header().Get(core.ReplayedHeader), false: "no header"}[has] +
					map[bool]string{true: ", logged replayed", false: ", logged not replayed"}[*line.Replayed]
			}
			first, how := call(1, map[string]any{"n": 1})
			if how != "no header, logged not replayed" || !strings.Contains(first, `"strictly_idempotent_response":true`) {
				t.Errorf("first run: %s; %s", how, first)
			}
			again, how := call(2, map[string]any{"n": 1})
			if how != "header true, logged replayed" || again != strings.Replace(first, `"id":1`, `"id":2`, 1) {
				t.Errorf("the same request again: %s; %s", how, again)
			}
			other, how := call(3, map[string]any{"n": 2})
			if how != "no header, logged not replayed" || !strings.Contains(other, `"code":"idempotency_conflict"`) {
				t.Errorf("a conflict: %s; %s", how, other)
			}
			// The run's event is in the log once, whichever side appended it.
			if r, err := s.ReadLog(context.Background(), "effects/SRV-test", 0, 10); err != nil || len(r.Entries) != 1 {
				t.Errorf("the effect log holds %d events, want the one run's: %v", len(r.Entries), err)
			}
		})
	}
}
