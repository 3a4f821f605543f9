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

func openRedis(ctx context.Context, getenv func(string) string, set settings) (store.Store, error) {
	raw, err := setting(getenv, URL, "redis", redisExample)
	if err != nil {
		return nil, err
	}
	if err := checkURL(URL, raw); err != nil {
		return nil, err
	}
	opts, err := goredis.ParseURL(raw)
	if err != nil {
		return nil, badURL("Redis", raw, redisExample)
	}
	// The store timeout must reach socket reads; dialing may not outlast it.
	opts.ContextTimeoutEnabled = true
	if opts.DialTimeout <= 0 || opts.DialTimeout > set.timeout {
		opts.DialTimeout = set.timeout
	}
	s, err := redis.New(ctx, goredis.NewClient(opts), redis.WithTimeout(set.timeout), redis.WithLogger(set.log))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", URL, err)
	}
	return s, nil
}
