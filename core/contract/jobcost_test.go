package contract_test

import (
	"encoding/json"
	"testing"

	"github.com/supervaize/svz/core/contract"
)

func TestJobCost(t *testing.T) {
	job := contract.Job{ID: "j", AgentSlug: "a", MissionID: "m", Status: "completed",
		Source: contract.JobSource{Type: contract.SourceFreshStart}, Information: contract.Cost(3.5)}
	const want = `{"id":"j","agent_slug":"a","mission_id":"m","status":"completed","source":{"type":"fresh_start"},"information":{"cost":{"total_cost":3.5}}}`
	b, err := json.Marshal(job)
	if err != nil || string(b) != want {
		t.Fatalf("Marshal = %s, %v\nwant %s", b, err, want)
	}
	var back contract.Job
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Information == nil || back.Information.Cost == nil || back.Information.Cost.TotalCost != 3.5 || len(back.Extra) != 0 {
		t.Errorf("decoded %+v: want the cost in Information, nothing in Extra", back)
	}
	// A zero cost is a cost: it is written.
	job.Information = contract.Cost(0)
	if b, _ := json.Marshal(job); string(b) != `{"id":"j","agent_slug":"a","mission_id":"m","status":"completed","source":{"type":"fresh_start"},"information":{"cost":{"total_cost":0}}}` {
		t.Errorf("zero cost: %s", b)
	}
	// The cost's currency, when the agent names it, is written after the total and read back.
	job.Information = contract.CostIn(12.5, "EUR")
	b, _ = json.Marshal(job)
	if string(b) != `{"id":"j","agent_slug":"a","mission_id":"m","status":"completed","source":{"type":"fresh_start"},"information":{"cost":{"total_cost":12.5,"currency":"EUR"}}}` {
		t.Errorf("cost in EUR: %s", b)
	}
	back = contract.Job{}
	if err := json.Unmarshal(b, &back); err != nil || back.Information.Cost.Currency != "EUR" || len(back.Information.Cost.Extra) != 0 {
		t.Errorf("decoded %+v, %v: want the currency in Currency, nothing in Extra", back.Information.Cost, err)
	}
	// The form of earlier versions, the block in Extra, is still written in its place.
	job.Information = nil
	job.Extra = contract.Extra{"information": json.RawMessage(`{"cost":{"total_cost":2}}`)}
	if b, _ := json.Marshal(job); string(b) != `{"id":"j","agent_slug":"a","mission_id":"m","status":"completed","source":{"type":"fresh_start"},"information":{"cost":{"total_cost":2}}}` {
		t.Errorf("cost in Extra: %s", b)
	}
}
