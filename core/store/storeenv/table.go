//go:build !svz_nopostgres || !svz_nodynamodb

package storeenv

import (
	"fmt"
	"strings"
)

// tableSetting returns SUPERVAIZER_STORE_TABLE, refusing a value with an '@' or "://" without
// echoing it: that is a connection URL in the wrong variable, and the backends quote table names
// in their errors.
func tableSetting(getenv func(string) string, kind, example string) (string, error) {
	v, err := setting(getenv, Table, kind, example)
	if err == nil && (strings.Contains(v, "@") || strings.Contains(v, "://")) {
		err = fmt.Errorf("%s: looks like a URL, not a table name (the value is not shown)", Table)
	}
	return v, err
}
