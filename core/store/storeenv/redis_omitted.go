//go:build svz_noredis

package storeenv

import (
	"context"

	"github.com/supervaize/svz/core/store"
)

func openRedis(context.Context, func(string) string) (store.Store, error) {
	return nil, omitted("redis")
}
