package contract_test

import (
	"encoding/json"
	"testing"

	"github.com/supervaize/svz/core/contract"
)

func TestHelpInput(t *testing.T) {
	req, err := contract.DecodeActionRequest([]byte(`{"request_id":"r","actor":{"user_id":"u"},"workspace":{"id":"w"},"mission_id":"m",
		"agent_slug":"a","surface":"job.start","action":"region.suggest","input":{"field":"region","values":{
		"industry":"retail","leads":"3","review":"yes","budget":"lots","count":12,"ratio":-1.5e3,"on":true,"none":null,
		"tags":["a"],"obj":{"k":1},"unknown":"kept"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	in := req.HelpInput()
	if in.Field != "region" || len(in.Values) != 11 {
		t.Fatalf("HelpInput = %+v", in)
	}
	for name, want := range map[string]string{"industry": "retail", "leads": "3", "count": "12", "ratio": "-1.5e3", "on": "true",
		"none": "", "tags": "", "obj": "", "missing": ""} {
		if got := in.Text(name); got != want {
			t.Errorf("Text(%q) = %q, want %q", name, got, want)
		}
	}

	fields := []contract.FieldDefinition{
		{ID: "industry", Label: "Industry", Type: contract.FieldSelect, Options: []contract.FieldOption{{Value: "retail", Label: "Retail"}}},
		{ID: "leads", Label: "Leads", Type: contract.FieldInteger, Required: true},
		{ID: "review", Label: "Review", Type: contract.FieldBoolean},
		{ID: "budget", Label: "Budget", Type: contract.FieldNumber},
		{ID: "region", Label: "Region", Required: true}, // missing from the draft: not an error
	}
	var setup struct {
		Industry string  `json:"industry"`
		Leads    int     `json:"leads"`
		Review   bool    `json:"review"`
		Budget   float64 `json:"budget"`
		Tags     []int   `json:"tags"` // cannot hold ["a"]: left out, the rest decodes
		Unknown  string  `json:"unknown"`
	}
	dropped := in.DecodeValues(&setup, fields)
	if setup.Industry != "retail" || setup.Leads != 3 || !setup.Review || setup.Budget != 0 || setup.Tags != nil || setup.Unknown != "kept" {
		t.Errorf("decoded %+v", setup)
	}
	b, _ := json.Marshal(dropped)
	if want := `[{"code":"input_type","message":"Input should be a valid number, unable to parse string as a number","field":"budget"}]`; string(b) != want {
		t.Errorf("dropped = %s\nwant %s", b, want)
	}

	// A malformed input is an empty draft, never an error.
	req.Input = json.RawMessage(`{"field":3,"values":[1]}`)
	if in := req.HelpInput(); in.Field != "" || in.Values != nil || in.Text("x") != "" {
		t.Errorf("malformed input = %+v", in)
	}
}
