package contract

import (
	"encoding/json"
	"testing"
)

// BenchmarkWire measures the one-pass encoder and the request decoder on Hello World's job.start
// shapes, beside encoding/json doing the same work on plain maps (its floor).
func BenchmarkWire(b *testing.B) {
	res := wireSamples()["wire_action_result_full.json"].(*ActionResult)
	encoded, err := AppendJSON(nil, res)
	if err != nil {
		b.Fatal(err)
	}
	var generic any
	if err := json.Unmarshal(encoded, &generic); err != nil {
		b.Fatal(err)
	}
	params := []byte(`{"request_id":"req-1","actor":{"user_id":"user-1"},"workspace":{"id":"workspace-1"},"mission_id":"mission-1",` +
		`"agent_slug":"hello-world-ai-agent","surface":"job.start","action":"job.start","job_id":"job-1","input":{"count":3}}`)
	b.Run("encode/result", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(encoded)))
		buf := make([]byte, 0, 8192)
		for b.Loop() {
			if _, err := AppendJSON(buf[:0], res); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode/encoding-json-map", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(encoded)))
		for b.Loop() {
			if _, err := json.Marshal(generic); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/request", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(params)))
		for b.Loop() {
			if _, err := DecodeActionRequest(params); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/encoding-json-map", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(params)))
		for b.Loop() {
			var m map[string]any
			if err := json.Unmarshal(params, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}
