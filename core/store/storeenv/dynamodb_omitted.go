//go:build svz_nodynamodb

package storeenv

import (
	"context"

	"github.com/supervaize/svz/core/store"
)

func openDynamoDB(context.Context, func(string) string) (store.Store, error) {
	return nil, omitted("dynamodb")
}
