package core

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/supervaize/svz/core/contract"
)

// Dataset query limits: the page size when the query sets none, and the largest it may set.
const (
	DatasetDefaultLimit = 100
	DatasetMaxLimit     = 1000
)

// ServeDataset registers the handler of dataset.<id>.query for the declared dataset id: rows
// returns every row of the query (a slice of anything that encodes as a JSON object; restrict
// them to req.Job() when the query carries a job, as job.analytics does), and svz answers one
// page of them:
//
//	{"limit", "offset"} → dataset.queried {dataset, count, rows, data.next_offset}
//
// limit is 1 to DatasetMaxLimit (DatasetDefaultLimit when absent) and offset 0 or more, checked
// before rows runs; other members of the input (filters) are the function's to read. count is
// the number of rows over every page; data.next_offset, present when more rows follow, is the
// next page's offset. When the dataset declares Display.Columns, each row carries exactly those
// members, in that order (null for a column the row lacks).
func ServeDataset[R any](a *Agent, id string, rows func(ctx context.Context, req *contract.ActionRequest) ([]R, error)) {
	var def *contract.DatasetDefinition
	for i := range a.cfg.Registration.Datasets {
		if a.cfg.Registration.Datasets[i].ID == id {
			def = &a.cfg.Registration.Datasets[i]
		}
	}
	if def == nil {
		a.errs = append(a.errs, fmt.Errorf("agent %q: ServeDataset: no dataset %q is declared", a.slug, id))
		return
	}
	var columns []string
	if def.Display != nil {
		columns = def.Display.Columns
	}
	action := "dataset." + id + ".query"
	a.HandleAction(action, ActionFunc(func(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
		var in struct {
			Limit  int `json:"limit"`
			Offset int `json:"offset"`
		}
		if err := req.DecodeInput(&in); err != nil {
			return nil, err
		}
		if in.Limit == 0 {
			in.Limit = DatasetDefaultLimit
		}
		all, err := rows(ctx, req)
		if err != nil {
			return nil, err
		}
		page := dataWindow(all, DataPage{Skip: in.Offset, Limit: in.Limit})
		out := make([]json.RawMessage, len(page))
		for i := range page {
			if out[i], err = datasetRow(page[i], columns); err != nil {
				return nil, fmt.Errorf("dataset %s: row %d: %w", id, in.Offset+i, err)
			}
		}
		count := len(all)
		e := contract.Effect{Type: contract.EffectDatasetQueried, Dataset: id, Count: &count, Rows: out}
		if next := in.Offset + len(page); next < count {
			e.Data = map[string]any{"next_offset": next}
		}
		return contract.OK(e), nil
	}))
	one := 1.0
	max, zero := float64(DatasetMaxLimit), 0.0
	a.DeclareInput(action, []contract.FieldDefinition{
		{ID: "limit", Label: "Limit", Type: contract.FieldInteger, Validation: &contract.FieldValidation{Min: &one, Max: &max}},
		{ID: "offset", Label: "Offset", Type: contract.FieldInteger, Validation: &contract.FieldValidation{Min: &zero}},
	})
}

// datasetRow encodes row, a JSON object, keeping only columns (in their order) when there are.
func datasetRow(row any, columns []string) (json.RawMessage, error) {
	b, err := encodeDataObject(row)
	if err != nil || len(columns) == 0 {
		return b, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, c := range columns {
		if i > 0 {
			buf.WriteByte(',')
		}
		name, _ := json.Marshal(c)
		buf.Write(name)
		buf.WriteByte(':')
		if v, ok := m[c]; ok {
			buf.Write(v)
		} else {
			buf.WriteString("null")
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}
