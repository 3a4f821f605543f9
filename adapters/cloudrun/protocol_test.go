package cloudrun

import (
	"net/http"
	"strings"
	"testing"

	"github.com/supervaize/svz/adapters/adaptertest"
	"github.com/supervaize/svz/adapters/internal/testkit"
)

// TestProtocol runs the protocol suite through Serve.
func TestProtocol(t *testing.T) {
	log, _ := testkit.Logger()
	base, _ := serve(t, adaptertest.Handler(t), nil, WithLogger(log))
	adaptertest.Run(t, &http.Client{}, base)
}

// TestProtocolFunctionsFramework runs the protocol suite through the Functions Framework, which
// serves what Register registers through a ServeMux: a path that is not clean is redirected to
// its clean form before the controller sees it.
func TestProtocolFunctionsFramework(t *testing.T) {
	adaptertest.Run(t, &http.Client{}, framework(t, adaptertest.Handler(t)), adaptertest.CleansPaths())
}

// TestProtocolData runs the DataResource suite through Serve and through the Functions Framework.
func TestProtocolData(t *testing.T) {
	log, _ := testkit.Logger()
	base, _ := serve(t, adaptertest.DataHandler(t), nil, WithLogger(log))
	adaptertest.RunData(t, &http.Client{}, base)
	t.Run("FunctionsFramework", func(t *testing.T) {
		adaptertest.RunData(t, &http.Client{}, framework(t, adaptertest.DataHandler(t)), adaptertest.CleansPaths())
	})
}

// TestHostileInput: bounded headers, and no connection held by a keyless caller (adaptertest).
// Serve sets no read timeout at all: Cloud Run's front end bounds requests.
func TestHostileInput(t *testing.T) {
	log, _ := testkit.Logger()
	base, _ := serve(t, adaptertest.Handler(t), nil, WithLogger(log))
	adaptertest.RunHostile(t, strings.TrimPrefix(base, "http://"))
}
