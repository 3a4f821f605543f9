//go:build svz_noredis

package storeenv

import (
	"context"

	"github.com/supervaize/svz/core/store"
)

func openRedis(context.Context, func(string) string, settings) (store.Store, error) {
	return nil, omitted("redis")
}
