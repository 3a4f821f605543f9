//go:build svz_nopostgres

package storeenv

import (
	"context"

	"github.com/supervaize/svz/core/store"
)

func openPostgres(context.Context, func(string) string, settings) (store.Store, error) {
	return nil, omitted("postgres")
}
