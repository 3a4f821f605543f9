package cloudrun

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/supervaize/svz/adapters/internal/testkit"
)

// TestServePortRange: ports 0 (any free port) and 65535 are in range: Serve listens (or finds the
// port taken) instead of refusing the setting. The context is done before Serve starts, so it
// returns as soon as it has listened.
func TestServePortRange(t *testing.T) {
	t.Setenv("CLOUD_RUN_TIMEOUT_SECONDS", "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, port := range []string{"0", "65535"} {
		log, _ := testkit.Logger()
		err := Serve(ctx, http.NotFoundHandler(), WithHost("127.0.0.1"), WithPort(port), WithLogger(log))
		if err != nil && (strings.Contains(err.Error(), "must be a number") || !strings.Contains(err.Error(), "choose a free port with PORT")) {
			t.Errorf("port %s: %v", port, err)
		}
	}
}
