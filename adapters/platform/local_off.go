//go:build svz_nolocal

package platform

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// serveLocal fails: the Lambda bootstrap leaves local mode's server out (build tag svz_nolocal).
func serveLocal(context.Context, BuildFunc, func(string) string, *slog.Logger, *options, time.Time) error {
	return errors.New("platform: this binary was built without local mode (build tag svz_nolocal)")
}
