package config

import (
	"cmp"
	"context"
	"log/slog"
	"strings"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/idempotency"
	"github.com/supervaize/svz/core/store/storeenv"
	"github.com/supervaize/svz/core/telemetry"
)

// attachStore opens the store chosen by SUPERVAIZER_STORE (bolt under SUPERVAIZER_DATA_DIR by
// default) and puts the idempotency gate on cfg; closing the controller closes the store.
func attachStore(ctx context.Context, getenv func(string) string, log *slog.Logger, cfg *core.Config) error {
	s, err := storeenv.Open(ctx, getenv, storeenv.WithLogger(log))
	if err != nil {
		return err
	}
	backend := strings.ToLower(strings.TrimSpace(getenv(storeenv.Kind)))
	s = measured(s, cmp.Or(backend, storeenv.DefaultKind), telemetry.FromContext(ctx))
	cfg.Store = s
	cfg.Gate = idempotency.New(s, idempotency.WithLogger(log))
	cfg.OnClose = s.Close
	return nil
}
