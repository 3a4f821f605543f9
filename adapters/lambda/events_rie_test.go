package lambda

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/supervaize/svz/adapters/adaptertest"
)

// TestEffectsPolledAcrossFunctionInstances runs two instances of the real bootstrap under the
// emulator on one DynamoDB table (moto_server), with buffered Function URL responses: a poll of
// GET /a2a/events on one instance returns the events of actions that ran on the other, in order,
// and a poll from the last id returns nothing twice.
func TestEffectsPolledAcrossFunctionInstances(t *testing.T) {
	instances := twoInstancesOnOneTable(t)
	ran, polled := instances[0], instances[1]

	job := func(em *emulator, requestID string) {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"supervaizer/action.invoke","params":{"request_id":"` + requestID + `",` +
			`"actor":{"user_id":"user-1"},"workspace":{"id":"workspace-1"},"mission_id":"mission-1","agent_slug":"hello-world-ai-agent",` +
			`"surface":"job.start","action":"job.start","job_id":"job-` + requestID + `","input":{"count":1}}}`
		ev := localFunctionURLEvent("POST", "/a2a", "", body)
		ev.Headers["x-api-key"] = adaptertest.APIKey
		status, out := em.invoke(t, payload(t, ev))
		if r, _ := decodeReply(t, out); status != http.StatusOK || r.StatusCode != http.StatusOK || !strings.Contains(r.Body, `"result":{"status":"ok"`) {
			t.Fatalf("job.start %s: %d %s", requestID, status, out)
		}
	}
	idLine := regexp.MustCompile(`(?m)^id: (\S+)$`)
	poll := func(em *emulator, lastEventID string) (string, []string) {
		t.Helper()
		ev := localFunctionURLEvent("GET", "/a2a/events", "", "")
		ev.Headers["x-api-key"] = adaptertest.APIKey
		if lastEventID != "" {
			ev.Headers["last-event-id"] = lastEventID
		}
		status, out := em.invoke(t, payload(t, ev))
		r, _ := decodeReply(t, out)
		if status != http.StatusOK || r.StatusCode != http.StatusOK || r.Headers["Content-Type"] != "text/event-stream; charset=utf-8" {
			t.Fatalf("poll: %d %s", status, out)
		}
		var ids []string
		for _, m := range idLine.FindAllStringSubmatch(r.Body, -1) {
			ids = append(ids, m[1])
		}
		return r.Body, ids
	}

	_, ids := poll(polled, "")
	if len(ids) != 1 {
		t.Fatalf("first poll: ids %v, want the connected event's only", ids)
	}
	start := ids[0]
	job(ran, "run-on-a-1")
	job(ran, "run-on-a-2")
	body, ids := poll(polled, start)
	epoch, _, _ := strings.Cut(ids[len(ids)-1], "-")
	want := "id: " + start + "\nevent: supervaizer.connected\ndata: {\"status\":\"connected\"}\n\n" +
		"id: " + epoch + "-1\nevent: supervaizer.effect\ndata: {\"agent_slug\":\"hello-world-ai-agent\",\"action\":\"job.start\",\"request_id\":\"run-on-a-1\",\"effects\":[{\"type\":\"job.started\",\"job_id\":\"job-run-on-a-1\",\"status\":\"completed\",\"message\":\"Completed 1 cases\"}]}\n\n" +
		"id: " + epoch + "-2\nevent: supervaizer.effect\ndata: {\"agent_slug\":\"hello-world-ai-agent\",\"action\":\"job.start\",\"request_id\":\"run-on-a-2\",\"effects\":[{\"type\":\"job.started\",\"job_id\":\"job-run-on-a-2\",\"status\":\"completed\",\"message\":\"Completed 1 cases\"}]}\n\n"
	if body != want {
		t.Fatalf("poll on the other instance after %s:\n%s\nwant:\n%s", start, body, want)
	}
	// From the last id, on either instance: nothing again, until the next action.
	for _, em := range []*emulator{polled, ran} {
		if _, again := poll(em, ids[2]); len(again) != 1 || again[0] != ids[2] {
			t.Fatalf("poll after the last id: %v, want only connected at %s", again, ids[2])
		}
	}
	job(polled, "run-on-b")
	if body, _ := poll(ran, ids[2]); !strings.Contains(body, "id: "+epoch+"-3\nevent: supervaizer.effect") || !strings.Contains(body, `"request_id":"run-on-b"`) {
		t.Fatalf("poll on the first instance after the second ran an action:\n%s", body)
	}
}
