package cloudrun

import (
	"net/http"
	"testing"

	"github.com/supervaize/svz/adapters/adaptertest"
	"github.com/supervaize/svz/adapters/internal/testkit"
)

// TestProtocol runs the protocol suite through the Functions Framework.
func TestProtocol(t *testing.T) {
	log, _ := testkit.Logger()
	base, _ := serve(t, adaptertest.Handler(t), nil, WithLogger(log))
	adaptertest.Run(t, &http.Client{}, base)
}
