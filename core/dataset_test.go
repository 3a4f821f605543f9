package core_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/svztest"
)

type run struct {
	JobID  string  `json:"job_id"`
	Status string  `json:"status"`
	Cost   float64 `json:"cost"`
	Secret string  `json:"secret"` // not a declared column: never sent
}

func datasetAgent(t *testing.T, columns []string) *core.Agent {
	t.Helper()
	reg, err := contract.BuildRegistration(contract.RegistrationSpec{
		AgentSlug: "ds", DisplayName: "DS", A2UICatalogVersion: "ds.1",
		Datasets: []contract.DatasetDefinition{{ID: "runs", Label: "Runs", Display: &contract.ResourceDisplay{Columns: columns}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := core.NewAgent(core.AgentConfig{Name: "DS", Registration: reg})
	if err != nil {
		t.Fatal(err)
	}
	core.ServeDataset(a, "runs", func(_ context.Context, req *contract.ActionRequest) ([]run, error) {
		var rows []run
		for _, id := range []string{"j1", "j2", "j3", "j4", "j5"} {
			if req.Job() == "" || req.Job() == id {
				rows = append(rows, run{JobID: id, Status: "completed", Cost: 1.5, Secret: "s"})
			}
		}
		return rows, nil
	})
	return a
}

func TestServeDataset(t *testing.T) {
	h := svztest.New(t, datasetAgent(t, []string{"job_id", "status", "label"}))
	for _, tc := range []struct {
		name  string
		input map[string]any
		opts  []svztest.Option
		want  string
	}{
		{"first page", map[string]any{"limit": 2},
			nil, `{"type":"dataset.queried","dataset":"runs","count":5,"rows":[{"job_id":"j1","status":"completed","label":null},{"job_id":"j2","status":"completed","label":null}],"data":{"next_offset":2}}`},
		{"last page", map[string]any{"limit": "2", "offset": 4},
			nil, `{"type":"dataset.queried","dataset":"runs","count":5,"rows":[{"job_id":"j5","status":"completed","label":null}]}`},
		{"past the end", map[string]any{"offset": 9},
			nil, `{"type":"dataset.queried","dataset":"runs","count":5,"rows":[]}`},
		{"one job", nil, []svztest.Option{svztest.JobID("j3")},
			`{"type":"dataset.queried","dataset":"runs","count":1,"rows":[{"job_id":"j3","status":"completed","label":null}]}`},
	} {
		res := h.Invoke(t, "dataset.runs.query", tc.input, tc.opts...)
		var wire struct{ Effects json.RawMessage } // as answered: the columns' order kept
		if err := json.Unmarshal(res.JSON, &wire); err != nil || string(wire.Effects) != "["+tc.want+"]" {
			t.Errorf("%s: effects = %s\nwant [%s]", tc.name, wire.Effects, tc.want)
		}
	}
	for _, in := range []map[string]any{{"limit": 0}, {"limit": 1001}, {"offset": -1}, {"limit": "many"}} {
		if res := h.Invoke(t, "dataset.runs.query", in); !res.Refusal() || !strings.HasPrefix(res.Errors[0].Code, "input_") {
			t.Errorf("input %v = %s; want a refusal", in, res.JSON)
		}
	}

	// Without declared columns, rows go as the function returns them.
	h = svztest.New(t, datasetAgent(t, nil))
	res := h.Invoke(t, "dataset.runs.query", map[string]any{"limit": 1})
	if b, _ := json.Marshal(res.Effects[0].Rows); string(b) != `[{"cost":1.5,"job_id":"j1","secret":"s","status":"completed"}]` {
		t.Errorf("rows = %s", b)
	}
}

func TestServeDatasetOfAnUndeclaredDataset(t *testing.T) {
	a := newAgent(t, handlers{})
	core.ServeDataset(a, "runs", func(context.Context, *contract.ActionRequest) ([]run, error) { return nil, nil })
	if _, err := core.New(core.Config{APIKey: testKey, Authorizer: grant.LocalBypass{}}, a); err == nil || !strings.Contains(err.Error(), `ServeDataset: no dataset "runs" is declared`) {
		t.Errorf("New = %v", err)
	}
}
