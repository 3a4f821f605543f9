//go:build !svz_nocloudrun

package platform

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/supervaize/svz/adapters/cloudrun"
)

// cloudRunServer returns the Cloud Run function server.
func cloudRunServer(getenv func(string) string, log *slog.Logger) (func(context.Context, http.Handler) error, error) {
	return func(ctx context.Context, h http.Handler) error {
		return cloudrun.Serve(ctx, h, cloudrun.WithPort(getenv("PORT")), cloudrun.WithLogger(log))
	}, nil
}
