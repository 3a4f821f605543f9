package contract

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeActionRequest: a decoded request re-encodes and decodes to the same request, and a
// rejected one always says why.
func FuzzDecodeActionRequest(f *testing.F) {
	for _, s := range []string{
		`{"request_id":"r","actor":{"user_id":"u","x":1},"workspace":{"id":"w","slug":"s"},"mission_id":"m","agent_slug":"a","surface":"s","action":"job.start","input":{"count":2},"idempotency_key":"k","extra":[1]}`,
		`{"request_id":"r","actor":{"user_id":"u"},"workspace":{"id":"w"},"mission_id":"m","agent_slug":"a","surface":"s","action":"x","mission":{"id":"m","name":null,"metadata":{"a":"b"}},"workspace_authorization":{"grant_id":"g"}}`,
		`{"request_id":1}`, `[]`, `null`, `{"actor":[]}`, `{"input":"{}"}`,
		`{"request_id":"r","actor":{"user_id":"u"},"workspace":{"id":"w"},"mission_id":"m","agent_slug":"a","surface":"s","action":"x","workspace_authorization":"tok"}`,
		`{"request_id":"r","actor":{"user_id":"u"},"workspace":{"id":"w"},"mission_id":"m","agent_slug":"a","surface":"s","action":"x","workspace_authorization":{"grant_id":"g","workspace_id":"w","agent_id":"a","agent_slug":"a","server_id":"s","scopes":["x",1]}}`,
		"{\"request_id\":\"r\xff\"}", `{"request_id":"\u00e9\ud800","request_id":"again","job_id":""}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := DecodeActionRequest(data)
		if err == nil && !utf8.Valid(data) {
			t.Fatal("a request that is not valid UTF-8 was accepted")
		}
		if err != nil {
			fe, ok := err.(FieldErrors)
			if !ok || len(fe) == 0 {
				t.Fatalf("rejection without field errors: %v", err)
			}
			return
		}
		if req.WorkspaceAuthorization != nil || req.Extra["workspace_authorization"] != nil {
			t.Fatal("a caller-supplied workspace_authorization survived decoding")
		}
		out, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("decoded request does not encode: %v", err)
		}
		again, err := DecodeActionRequest(out)
		if err != nil {
			t.Fatalf("re-encoded request %s is rejected: %v", out, err)
		}
		out2, _ := json.Marshal(again)
		if string(out) != string(out2) {
			t.Fatalf("round trip is not stable:\n%s\n%s", out, out2)
		}
	})
}
