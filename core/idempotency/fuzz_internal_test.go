package idempotency

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
)

// FuzzFingerprint decodes arbitrary action.invoke params the way the controller does. Whatever
// decodes must fingerprint, deterministically, ignoring the transport fields and surviving an
// encode/decode round trip (the fingerprint of a retry equals the original's).
func FuzzFingerprint(f *testing.F) {
	f.Add(`{"request_id":"r","actor":{"user_id":"u"},"workspace":{"id":"w","slug":null},"mission_id":"m","agent_slug":"s",` +
		`"surface":"job.start","action":"job.start","input":{"count":2},"idempotency_key":"k","job_id":"j"}`)
	f.Add(`{"request_id":"r","actor":{"user_id":"u","x":1},"workspace":{"id":"w"},"mission_id":"m","agent_slug":"s",` +
		`"surface":"s","action":"a","input":{"n":9007199254740993,"f":1e400,"u":"\u00e9\ud800"},"extra":[1,{"b":2,"a":1}],` +
		`"mission":{"id":"m","metadata":{"z":null}},"workspace_authorization":{"grant_id":"forged"}}`)
	f.Fuzz(func(t *testing.T, params string) {
		req, err := contract.DecodeActionRequest(json.RawMessage(params))
		if err != nil {
			return
		}
		fp, err := fingerprint(req)
		if err != nil {
			t.Fatalf("fingerprint of a decoded request: %v", err)
		}
		if again, _ := fingerprint(req); again != fp || len(fp) != 64 {
			t.Fatalf("fingerprint is not deterministic: %s then %s", fp, again)
		}
		retry := *req
		retry.RequestID += "-retry"
		retry.Actor = contract.Actor{UserID: "someone-else"}
		retry.WorkspaceAuthorization = &contract.VerifiedWorkspaceContext{GrantID: "g", WorkspaceID: "w"}
		if got, _ := fingerprint(&retry); got != fp {
			t.Fatalf("transport fields changed the fingerprint")
		}
		// Studio's current context is not part of the request's identity either.
		retry.Mission = &contract.MissionContext{ID: req.MissionID, Name: new("renamed"), Metadata: json.RawMessage(`{"v":2}`)}
		retry.Workspace.Slug = new("renamed")
		retry.DraftSessionID = new("draft-other")
		retry.Extra = contract.Extra{"unknown": json.RawMessage(`true`)}
		if got, _ := fingerprint(&retry); got != fp {
			t.Fatalf("mission, workspace slug, draft session or unknown members changed the fingerprint")
		}
		retry.JobID = new("job-other")
		if req.JobID == nil || *req.JobID != "job-other" {
			if got, _ := fingerprint(&retry); got == fp {
				t.Fatalf("another job_id kept the fingerprint")
			}
		}
		raw, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("encode a decoded request: %v", err)
		}
		back, err := contract.DecodeActionRequest(raw)
		if err != nil {
			t.Fatalf("decode an encoded request: %v", err)
		}
		if got, _ := fingerprint(back); got != fp {
			t.Fatalf("fingerprint changed across a round trip:\n%s\n%s", params, raw)
		}
	})
}

// FuzzAnswer feeds arbitrary stored bytes to answer, as a corrupted or foreign record would be:
// it must never panic, and it either fails or returns a result the controller can send.
func FuzzAnswer(f *testing.F) {
	req := &contract.ActionRequest{Action: "job.start", IdempotencyKey: new(string)}
	fp, err := fingerprint(req)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(`{"state":"done","fingerprint":"` + fp + `","result":{"status":"ok","effects":[]}}`)
	f.Add(`{"state":"running","fingerprint":"` + fp + `"}`)
	f.Add(`{"state":"unrecordable","fingerprint":"` + fp + `","result_bytes":500000}`)
	f.Add(`{"state":"done","fingerprint":"other"}`)
	f.Add(`{"state":"done","fingerprint":"` + fp + `","result":[]}`)
	f.Add(`{"state":"paused","fingerprint":"` + fp + `"}`)
	f.Add(`null`)
	f.Add(`{"state":"done","fingerprint":"` + fp + `","result":{"status":"maybe"}}`)
	now := time.Now()
	g := New(memory.New(), WithClock(func() time.Time { return now }))
	f.Fuzz(func(t *testing.T, value string) {
		res, err := g.answer(req, fp, store.Record{Value: []byte(value), Version: 1, ExpiresAt: now.Add(time.Minute)})
		if err != nil {
			return
		}
		if res == nil {
			t.Fatal("answer returned neither a result nor an error")
		}
		if err := res.Validate(); err != nil {
			t.Fatalf("answer returned an invalid result: %v", err)
		}
		if _, err := json.Marshal(res); err != nil {
			t.Fatalf("answer returned a result that does not encode: %v", err)
		}
	})
}
