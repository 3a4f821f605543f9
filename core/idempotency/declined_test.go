package idempotency_test

import (
	"testing"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/idempotency"
)

func TestDeclined(t *testing.T) {
	for _, tc := range []struct {
		res  *contract.ActionResult
		want bool
	}{
		{nil, false},
		{contract.OK(), false},
		{&contract.ActionResult{Status: "error", Effects: []contract.Effect{}, Errors: []contract.ResultError{{Code: idempotency.CodeConflict}}}, true},
		{&contract.ActionResult{Status: "error", Effects: []contract.Effect{}, Errors: []contract.ResultError{{Code: idempotency.CodeInProgress}}}, true},
		{&contract.ActionResult{Status: "error", Effects: []contract.Effect{}, Errors: []contract.ResultError{{Code: idempotency.CodeUnrecordable}}}, true},
		{&contract.ActionResult{Status: "error", Effects: []contract.Effect{}, Errors: []contract.ResultError{{Code: "quota_exceeded"}}}, false},
		{&contract.ActionResult{Status: "error", Effects: []contract.Effect{{Type: "x"}}, Errors: []contract.ResultError{{Code: idempotency.CodeConflict}}}, false},
		{&contract.ActionResult{Status: "error", Effects: []contract.Effect{}, Errors: []contract.ResultError{{Code: idempotency.CodeConflict}, {Code: "x"}}}, false},
	} {
		if got := idempotency.Declined(tc.res); got != tc.want {
			t.Errorf("Declined(%+v) = %v, want %v", tc.res, got, tc.want)
		}
	}
}
