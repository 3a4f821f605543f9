package contract_test

import (
	"testing"

	"github.com/supervaize/svz/core/contract"
)

func TestRequestIDAccessors(t *testing.T) {
	base := `"request_id":"r","actor":{"user_id":"u"},"workspace":{"id":"w"},"mission_id":"m","agent_slug":"a","surface":"s"`
	full := `,"job_id":"j","case_id":"c","step_id":"st","draft_session_id":"d"`
	for _, tc := range []struct {
		name, extra                    string
		job, cas, step, draft, idemKey string
	}{
		{name: "absent"},
		{name: "null", extra: `,"job_id":null,"case_id":null,"step_id":null,"draft_session_id":null,"idempotency_key":null`},
		{name: "set", extra: full + `,"idempotency_key":"k"`, job: "j", cas: "c", step: "st", draft: "d", idemKey: "k"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := contract.DecodeActionRequest([]byte(`{` + base + `,"action":"x"` + tc.extra + `}`))
			if err != nil {
				t.Fatal(err)
			}
			got := [5]string{a.Job(), a.Case(), a.Step(), a.DraftSession(), a.Idempotency()}
			if want := [5]string{tc.job, tc.cas, tc.step, tc.draft, tc.idemKey}; got != want {
				t.Errorf("action request accessors = %q, want %q", got, want)
			}
			extra := tc.extra
			if tc.idemKey != "" {
				extra = full
			} else if tc.name == "null" {
				extra = `,"job_id":null,"case_id":null,"step_id":null,"draft_session_id":null`
			}
			s, err := contract.DecodeSurfaceRequest([]byte(`{` + base + extra + `}`))
			if err != nil {
				t.Fatal(err)
			}
			gotS := [4]string{s.Job(), s.Case(), s.Step(), s.DraftSession()}
			if want := [4]string{tc.job, tc.cas, tc.step, tc.draft}; gotS != want {
				t.Errorf("surface request accessors = %q, want %q", gotS, want)
			}
		})
	}
}
