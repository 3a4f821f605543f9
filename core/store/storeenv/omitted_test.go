//go:build svz_nobolt && svz_nodynamodb && svz_nopostgres && svz_noredis

package storeenv_test

import (
	"context"
	"testing"

	"github.com/supervaize/svz/core/store/storeenv"
)

// Run with -tags svz_nobolt,svz_nodynamodb,svz_nopostgres,svz_noredis.
func TestOmittedBackends(t *testing.T) {
	for _, kind := range []string{"bolt", "dynamodb", "postgres", "redis"} {
		_, err := storeenv.Open(context.Background(), env(storeenv.Kind, kind, storeenv.URL, "x://y", storeenv.Table, "t"))
		want := "SUPERVAIZER_STORE: " + kind + " support was left out of this binary (built with tag svz_no" + kind + ")"
		if err == nil || err.Error() != want {
			t.Errorf("%s: error = %v, want %q", kind, err, want)
		}
	}
	if _, err := storeenv.Open(context.Background(), env()); err == nil {
		t.Error("the default (bolt) opened without bolt support")
	}
}
