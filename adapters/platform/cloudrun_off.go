//go:build svz_nocloudrun

package platform

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
)

// cloudRunServer fails: the Lambda build leaves the Functions Framework out (build tag
// svz_nocloudrun), as it adds about 2 MB to the bootstrap.
func cloudRunServer(func(string) string, *slog.Logger, bool) (func(context.Context, http.Handler) error, error) {
	return nil, errors.New("platform: this binary was built without Cloud Run support (build tag svz_nocloudrun)")
}

// cloudRunJobs is never reached in this build (cloudRunServer fails first).
func cloudRunJobs(ctx context.Context, _ func(string) string, _ *slog.Logger) (context.Context, func(http.Handler) http.Handler) {
	return ctx, func(h http.Handler) http.Handler { return h }
}
