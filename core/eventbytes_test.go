package core_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/idempotency"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/bolt"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/internal/syncbuf"
)

// TestEventByteSettings: an event bound larger than the log's, or a negative one, stops New.
func TestEventByteSettings(t *testing.T) {
	for _, tc := range []struct {
		cfg  core.Config
		want string
	}{
		{core.Config{EventRetentionBytes: 1 << 20, EventMaxBytes: 1<<20 + 1},
			"an event may hold up to 1048577 bytes (EventMaxBytes, SUPERVAIZER_EVENT_MAX_BYTES), more than the whole effect log keeps, 1048576 (EventRetentionBytes, SUPERVAIZER_EVENT_RETENTION_BYTES): lower the first or raise the second"},
		{core.Config{EventRetentionBytes: 60 << 10}, // the default event bound, 64 KiB, exceeds it
			"an event may hold up to 65536 bytes"},
		{core.Config{EventRetentionBytes: -1}, "event settings cannot be negative"},
		{core.Config{EventMaxBytes: -1}, "event settings cannot be negative"},
	} {
		tc.cfg.APIKey, tc.cfg.Authorizer = testKey, grant.LocalBypass{}
		if _, err := core.New(tc.cfg, newAgent(t, handlers{})); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
	c, err := core.New(core.Config{APIKey: testKey, Authorizer: grant.LocalBypass{}, EventRetentionBytes: 1 << 20, EventMaxBytes: 1 << 20}, newAgent(t, handlers{}))
	if err != nil {
		t.Fatalf("an event bound equal to the log's: %v", err)
	}
	_ = c.Close()
}

// largeEffects answers job.start with an artifact of the given size, as artifact.get of a large
// report does.
func largeEffects(size int) handlers {
	return handlers{actions: map[string]core.ActionFunc{
		"job.start": func(_ context.Context, r *contract.ActionRequest) (*contract.ActionResult, error) {
			return contract.OK(contract.Effect{Type: "artifact.loaded", JobID: "job-1", ArtifactID: "report-1", Status: "ok",
				Data: map[string]any{"content": strings.Repeat("r", size)}}), nil
		},
	}}
}

// TestLargeEventTruncatedOnTheStream: an action whose effects are larger than EventMaxBytes is
// answered whole, but its event goes to the log, and the stream, truncated (its effects' type,
// ids and status, marked), with a warning naming the setting; through the idempotency gate that
// appends with the run's record too.
func TestLargeEventTruncatedOnTheStream(t *testing.T) {
	for _, gated := range []bool{false, true} {
		var logs syncbuf.Buffer
		s := memory.New()
		cfg := core.Config{Store: s, EventMaxBytes: 2048, Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
		p := map[string]any{}
		if gated {
			cfg.Gate, p["idempotency_key"] = idempotency.New(s), "idem-1"
		}
		c := newController(t, cfg, largeEffects(900_000))
		_, body := post(t, c, rpcBody(t, 1, actionInvoke, params(p)), nil)
		if len(body) < 900_000 {
			t.Fatalf("gated %v: the answer lost its effects: %d bytes", gated, len(body))
		}
		_, _, evs := pollEvents(t, c, "0-0")
		const want = `{"agent_slug":"s","action":"job.start","request_id":"request-1","effects":[` +
			`{"type":"artifact.loaded","job_id":"job-1","artifact_id":"report-1","status":"ok","truncated":true}]}`
		if len(evs) != 2 || evs[1].event != "supervaizer.effect" || evs[1].data != want {
			t.Fatalf("gated %v: events %+v, want the effect truncated: %s", gated, evs, want)
		}
		if !strings.Contains(logs.String(), `"msg":"effect event truncated: larger than SUPERVAIZER_EVENT_MAX_BYTES`) ||
			!strings.Contains(logs.String(), `"max_bytes":2048,"effects":1,"effects_kept":1`) {
			t.Errorf("gated %v: no warning of the truncation:\n%s", gated, logs.String())
		}
	}
}

// TestEffectLogBoundedInBytes reproduces the trial on a real bolt file: 100 calls whose events
// are each as large as an event may be (60 KB, under the 64 KiB bound) keep at most the log's
// byte bound (1 MiB), and the file stays within a few times that; the stream still serves the
// newest events. Before the byte bound, 100 artifact.get of a 900 KB report grew the file from
// 1 MiB to 105 MiB.
func TestEffectLogBoundedInBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "svz.db")
	s, err := bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	c := newController(t, core.Config{Store: s, EventRetentionBytes: 1 << 20}, largeEffects(60_000))
	for range 100 {
		post(t, c, rpcBody(t, 1, actionInvoke, params(map[string]any{})), nil)
	}
	r, err := s.ReadLog(context.Background(), "effects/SRV-test", 0, store.MaxLogRead)
	if err != nil {
		t.Fatal(err)
	}
	var kept int
	for _, e := range r.Entries {
		kept += len(e.Data)
	}
	if kept > 1<<20 || len(r.Entries) < 10 || r.Last != 100 || r.First != 100-uint64(len(r.Entries))+1 {
		t.Fatalf("the log keeps %d bytes in %d events (%d to %d), want the newest within 1 MiB", kept, len(r.Entries), r.First, r.Last)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > 8<<20 {
		t.Fatalf("the bolt file holds %d MiB after 100 events of 60 KB in a log kept to 1 MiB", st.Size()>>20)
	}
	if _, _, evs := pollEvents(t, c, "0-0"); len(evs) != len(r.Entries)+2 || evs[1].event != "supervaizer.events_lost" {
		t.Fatalf("a client from the beginning: %v", names(evs))
	}
}
