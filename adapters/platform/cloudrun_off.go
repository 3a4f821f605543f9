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
