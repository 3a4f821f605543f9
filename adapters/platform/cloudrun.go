//go:build !svz_nocloudrun

package platform

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/supervaize/svz/adapters/cloudrun"
	"github.com/supervaize/svz/adapters/internal/httpkit"
)

// cloudRunServer returns the Cloud Run function server. In local mode (a local emulation of Cloud
// Run, see package localmode) it listens on loopback only and refuses, on every route, a Host
// that is not loopback (DNS rebinding), as local mode's plain server does.
func cloudRunServer(getenv func(string) string, log *slog.Logger, local bool) (func(context.Context, http.Handler) error, error) {
	opts := []cloudrun.Option{cloudrun.WithPort(getenv("PORT")), cloudrun.WithLogger(log)}
	if local {
		opts = append(opts, cloudrun.WithHost("127.0.0.1"))
	}
	return func(ctx context.Context, h http.Handler) error {
		if local {
			h = httpkit.LoopbackOnly(h, log)
		}
		return cloudrun.Serve(ctx, h, opts...)
	}, nil
}
