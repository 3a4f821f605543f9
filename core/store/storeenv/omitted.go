//go:build svz_nobolt || svz_nodynamodb || svz_nopostgres || svz_noredis

package storeenv

import "fmt"

// omitted is the error for a backend this binary was built without.
func omitted(kind string) error {
	return fmt.Errorf("%s: %s support was left out of this binary (built with tag svz_no%s)", Kind, kind, kind)
}
