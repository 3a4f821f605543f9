//go:build !svz_nodynamodb

package storeenv

import (
	"slices"
	"testing"

	"github.com/supervaize/svz/core/idempotency"
	"github.com/supervaize/svz/core/jobs"
)

// TestUnlistedAreTheRecordsNobodyLists: the prefixes kept out of the DynamoDB index are the
// idempotency gate's and the jobs' task records.
func TestUnlistedAreTheRecordsNobodyLists(t *testing.T) {
	if want := []string{idempotency.KeyPrefix, jobs.TaskKeyPrefix}; !slices.Equal(unlistedPrefixes, want) {
		t.Fatalf("unlisted prefixes %q, want %q", unlistedPrefixes, want)
	}
}
