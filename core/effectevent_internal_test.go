package core

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/supervaize/svz/core/contract"
)

// TestEffectEntryHeader: the stored header round-trips, an entry without one (written before
// workspaces were kept) is of no workspace, and a malformed one is sent to no stream.
func TestEffectEntryHeader(t *testing.T) {
	req := &contract.ActionRequest{AgentSlug: "s", Action: "job.start", RequestID: "r"}
	for _, ws := range []string{"", "w", strings.Repeat("x", 300)} {
		entry, tr, err := encodeEffectEvent(req, ws, nil, 0)
		if err != nil || tr != nil {
			t.Fatal(tr, err)
		}
		gotWS, data, ok := splitEntry(entry)
		if !ok || string(gotWS) != ws || string(data) != `{"agent_slug":"s","action":"job.start","request_id":"r","effects":[]}` {
			t.Errorf("%d bytes of workspace: %q %q %v", len(ws), gotWS, data, ok)
		}
		if ws == "" && entry[0] != '{' {
			t.Errorf("an entry of no workspace has a header: %q", entry)
		}
	}
	for _, bad := range []string{"\x00", "\x00\x00{}", "\x00\x05abc", "\x00\xff", "\x00\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01"} {
		if _, _, ok := splitEntry([]byte(bad)); ok {
			t.Errorf("%q read as an entry", bad)
		}
	}
}

// FuzzSplitEntry: any stored bytes split without panicking, into parts of the entry.
func FuzzSplitEntry(f *testing.F) {
	f.Add([]byte("\x00\x01w{}"))
	f.Add([]byte(`{"a":1}`))
	f.Add([]byte("\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"))
	f.Fuzz(func(t *testing.T, entry []byte) {
		ws, data, ok := splitEntry(entry)
		if !ok {
			return
		}
		if len(ws)+len(data) > len(entry) {
			t.Fatalf("parts longer than the entry: %q %q of %q", ws, data, entry)
		}
		if len(ws) == 0 && string(data) != string(entry) {
			t.Fatalf("an entry of no workspace changed: %q of %q", data, entry)
		}
	})
}

// TestEffectEventTruncated: an event over the limit keeps each effect's type, ids, status and
// count, marked "truncated": true, as many effects as fit; one that does not fit even without its
// effects is refused, saying so; one within the limit, or with no limit, is left whole.
func TestEffectEventTruncated(t *testing.T) {
	req := &contract.ActionRequest{AgentSlug: "s", Action: "artifact.get", RequestID: "r-1"}
	three := 3
	report := strings.Repeat("x", 900_000)
	effects := []contract.Effect{
		{Type: "artifact.loaded", JobID: "job-1", ArtifactID: "report-1", Status: "ok", Message: "Report loaded",
			Data: map[string]any{"content": report}},
		{Type: "resource.listed", Resource: "leads", CaseID: "c", StepID: "s", Dataset: "d", Count: &three,
			Items: []map[string]any{{"id": "a"}}, Summary: map[string]any{"n": 3}, Extra: contract.Extra{"note": []byte(`"x"`)}},
	}
	whole, tr, err := encodeEffectEvent(req, "ws-1", effects, 0)
	if err != nil || tr != nil || len(whole) < 900_000 {
		t.Fatalf("no limit: %d bytes, %+v, %v", len(whole), tr, err)
	}
	if again, tr, err := encodeEffectEvent(req, "ws-1", effects, int64(len(whole))); err != nil || tr != nil || string(again) != string(whole) {
		t.Fatalf("an event of exactly the limit was changed: %+v, %v", tr, err)
	}
	const reduced = `{"agent_slug":"s","action":"artifact.get","request_id":"r-1","effects":[` +
		`{"type":"artifact.loaded","job_id":"job-1","artifact_id":"report-1","status":"ok","truncated":true},` +
		`{"type":"resource.listed","case_id":"c","step_id":"s","resource":"leads","dataset":"d","count":3,"truncated":true}]}`
	for _, tc := range []struct {
		limit int64
		want  string
		kept  int
	}{
		{64 << 10, reduced, 2},
		{int64(len(whole)) - 1, reduced, 2},
		{int64(len(reduced) + 6), reduced, 2}, // the header: NUL, length, "ws-1"
		{int64(len(reduced) + 5), `{"agent_slug":"s","action":"artifact.get","request_id":"r-1","effects":[` +
			`{"type":"artifact.loaded","job_id":"job-1","artifact_id":"report-1","status":"ok","truncated":true}]}`, 1},
		{80, `{"agent_slug":"s","action":"artifact.get","request_id":"r-1","effects":[]}`, 0},
	} {
		entry, tr, err := encodeEffectEvent(req, "ws-1", effects, tc.limit)
		if err != nil || tr == nil || int64(len(entry)) > tc.limit {
			t.Fatalf("limit %d: %d bytes, %+v, %v", tc.limit, len(entry), tr, err)
		}
		ws, data, ok := splitEntry(entry)
		if !ok || string(ws) != "ws-1" || string(data) != tc.want || *tr != (truncation{bytes: len(whole), effects: 2, kept: tc.kept}) {
			t.Errorf("limit %d: %q %s %+v\nwant %s, %d effects kept", tc.limit, ws, data, *tr, tc.want, tc.kept)
		}
	}
	_, tr, err = encodeEffectEvent(req, "ws-1", effects, 79)
	if !errors.Is(err, errEventTooLarge) || tr != nil ||
		!strings.Contains(err.Error(), "and 80 without its effects, over the limit of 79 (SUPERVAIZER_EVENT_MAX_BYTES)") {
		t.Fatalf("nothing fits: %+v, %v", tr, err)
	}
}

// TestEffectTooLargeNotRecorded: an event that does not fit EventMaxBytes even without its
// effects is not appended (no empty entry in its place), and the failure is logged.
func TestEffectTooLargeNotRecorded(t *testing.T) {
	var logs strings.Builder
	e := newEffectLog(Config{EventMaxBytes: 10}, slog.New(slog.NewTextHandler(&logs, nil)), make(chan struct{}))
	req := &contract.ActionRequest{AgentSlug: "s", Action: "job.start", RequestID: "a-request-id-longer-than-the-limit"}
	e.appendEffects(context.Background(), req, "", []contract.Effect{{Type: "job.started"}})
	r, err := e.log.ReadLog(context.Background(), e.name, 0, 10)
	if err != nil || r.Last != 0 {
		t.Fatalf("the log after an event too large: %+v, %v; want nothing appended", r, err)
	}
	if !strings.Contains(logs.String(), `level=ERROR msg="effect event not recorded`) || !strings.Contains(logs.String(), "too large to be recorded even truncated") {
		t.Fatalf("logs: %s", logs.String())
	}
}
