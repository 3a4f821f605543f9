//go:build svz_nodynamodb

package storeenv

import (
	"context"

	"github.com/supervaize/svz/core/store"
)

func openDynamoDB(context.Context, func(string) string, settings) (store.Store, error) {
	return nil, omitted("dynamodb")
}
