package core

import (
	"testing"

	"github.com/supervaize/svz/core/contract"
)

// Which actions a retry may not run twice: the mutating ones and always the confirm; never the
// preview (Studio re-previews with the confirm's key) nor help or read-only actions.
func TestGatedActions(t *testing.T) {
	reg, err := contract.BuildRegistration(contract.RegistrationSpec{
		AgentSlug: "s", DisplayName: "S", A2UICatalogVersion: "1",
		Actions: []contract.ActionSpec{
			contract.ActionDefinition{ID: "job.start", Label: "Start"}, // a label alone keeps it mutating
			contract.ActionID("job.start.preview"),
			contract.ActionDefinition{ID: "goal.suggest", ReadOnly: true, Kind: contract.KindHelp, TargetField: "goal"},
			contract.ActionDefinition{ID: "report.read", ReadOnly: true},
			contract.ActionID("job.stop"),
		},
		Datasets: []contract.DatasetDefinition{{ID: "metrics", Label: "Metrics"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := gatedActions(reg)
	for id, want := range map[string]bool{
		"job.start": true, "job.stop": true, "job.start.preview": false, "goal.suggest": false,
		"report.read": false, "dataset.metrics.query": false,
	} {
		if got[id] != want {
			t.Errorf("gated[%s] = %v, want %v", id, got[id], want)
		}
	}

	readOnlyStart, err := contract.BuildRegistration(contract.RegistrationSpec{
		AgentSlug: "s", DisplayName: "S", A2UICatalogVersion: "1",
		Actions: []contract.ActionSpec{contract.ActionDefinition{ID: "job.start", ReadOnly: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !gatedActions(readOnlyStart)["job.start"] {
		t.Error("job.start declared read-only must still be protected")
	}
}
