//go:build !svz_nodynamodb

package storeenv

import (
	"testing"

	"github.com/supervaize/svz/core/idempotency"
)

// TestUnlistedAreTheIdempotencyRecords: the prefix kept out of the DynamoDB index is the gate's.
func TestUnlistedAreTheIdempotencyRecords(t *testing.T) {
	if len(unlistedPrefixes) != 1 || unlistedPrefixes[0] != idempotency.KeyPrefix {
		t.Fatalf("unlisted prefixes %q, want [%q]", unlistedPrefixes, idempotency.KeyPrefix)
	}
}
