package core

import (
	"strings"
	"testing"

	"github.com/supervaize/svz/core/contract"
)

// TestEffectEntryHeader: the stored header round-trips, an entry without one (written before
// workspaces were kept) is of no workspace, and a malformed one is sent to no stream.
func TestEffectEntryHeader(t *testing.T) {
	req := &contract.ActionRequest{AgentSlug: "s", Action: "job.start", RequestID: "r"}
	for _, ws := range []string{"", "w", strings.Repeat("x", 300)} {
		entry, err := encodeEffectEvent(req, ws, nil)
		if err != nil {
			t.Fatal(err)
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
