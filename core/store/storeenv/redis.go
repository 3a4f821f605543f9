//go:build !svz_noredis

package storeenv

import (
	"context"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/redis"
)

const redisExample = "redis://:password@host:6379/0"

func openRedis(ctx context.Context, getenv func(string) string) (store.Store, error) {
	raw, err := setting(getenv, URL, "redis", redisExample)
	if err != nil {
		return nil, err
	}
	opts, err := goredis.ParseURL(raw)
	if err != nil {
		return nil, badURL("Redis", raw, redisExample)
	}
	s, err := redis.New(ctx, goredis.NewClient(opts))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", URL, err)
	}
	return s, nil
}
