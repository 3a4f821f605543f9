package httpserver

import (
	"net/http"
	"testing"
	"time"

	"github.com/supervaize/svz/adapters/adaptertest"
	"github.com/supervaize/svz/adapters/internal/testkit"
)

// TestProtocol runs the protocol suite through Serve. Its answers are the reference the other
// adapters are held to: -update rewrites the golden files from them.
func TestProtocol(t *testing.T) {
	log, _ := testkit.Logger()
	base, _ := serve(t, adaptertest.Handler(t), WithLogger(log))
	adaptertest.Run(t, &http.Client{}, base, adaptertest.Reference())
}

// TestProtocolData runs the DataResource suite through Serve; -update rewrites its golden files.
func TestProtocolData(t *testing.T) {
	log, _ := testkit.Logger()
	base, _ := serve(t, adaptertest.DataHandler(t), WithLogger(log))
	adaptertest.RunData(t, &http.Client{}, base, adaptertest.Reference())
}

// TestHostileInput: bounded headers, and no connection held by a keyless caller (adaptertest).
func TestHostileInput(t *testing.T) {
	log, _ := testkit.Logger()
	ln := testkit.Listen(t)
	_, _ = serveOn(t, ln, adaptertest.Handler(t), WithLogger(log), WithTimeouts(Timeouts{Read: 10 * time.Minute, ReadHeader: 10 * time.Minute}))
	adaptertest.RunHostile(t, ln.Addr().String())
}
