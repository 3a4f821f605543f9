//go:build !svz_nobolt

package storeenv

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/bolt"
)

func openBolt(ctx context.Context, getenv func(string) string) (store.Store, error) {
	dir, _ := setting(getenv, DataDir, "bolt", "")
	if dir == "" {
		dir = DefaultDataDir
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", DataDir, err)
	}
	s, err := bolt.Open(filepath.Join(dir, BoltFile))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", DataDir, err)
	}
	return s, nil
}
