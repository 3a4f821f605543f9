//go:build !svz_nobolt

package storeenv

import (
	"context"
	"errors"
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
	if errors.Is(err, bolt.ErrLocked) {
		other := filepath.Clean(dir) + "-2"
		return nil, fmt.Errorf("%s: another process (another svz server?) uses the data directory %s: stop it, or give this one its own, e.g. %s=%s (%w)",
			DataDir, dir, DataDir, other, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", DataDir, err)
	}
	return s, nil
}
