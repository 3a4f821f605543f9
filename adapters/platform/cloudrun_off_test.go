//go:build svz_nocloudrun

package platform

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
)

const withCloudRun = false

func TestNoCloudRun(t *testing.T) {
	built := false
	err := Run(context.Background(), func(context.Context, func(string) string, *slog.Logger) (http.Handler, error) {
		built = true
		return http.NotFoundHandler(), nil
	}, WithEnv(envOf(map[string]string{"K_SERVICE": "svz"})), WithOutput(io.Discard, io.Discard))
	if err == nil || err.Error() != "platform: this binary was built without Cloud Run support (build tag svz_nocloudrun)" || built {
		t.Fatalf("run: %v (built %v)", err, built)
	}
}
