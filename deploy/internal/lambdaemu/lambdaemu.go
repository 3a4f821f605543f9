// Package lambdaemu plays AWS Lambda for deploy tests: it pulls a pushed image, extracts the
// controller binary, and runs it as the bootstrap under the Lambda Runtime Interface Emulator
// (deploy/rie) with the function's environment, behind a Function URL, until the test ends.
package lambdaemu

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/supervaize/svz/deploy/image"
	"github.com/supervaize/svz/deploy/rie"
)

// Pull fetches an image by reference from a registry.
func Pull(ctx context.Context, ref string) (v1.Image, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, err
	}
	return remote.Image(r, remote.WithContext(ctx))
}

// ExtractBinary writes the image's entrypoint file to dir as an executable bootstrap and returns
// its path.
func ExtractBinary(img v1.Image, dir string) (string, error) {
	b, err := image.Binary(img)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "bootstrap")
	return path, os.WriteFile(path, b, 0o755)
}

// Emulator is a bootstrap running under the emulator behind a Function URL.
type Emulator struct {
	emu *rie.Emulator
	url *rie.FunctionURL
}

// Start runs bootstrap under the emulator at rieBin with exactly env, until the test ends; the
// emulator's output is logged when the test fails.
func Start(t testing.TB, rieBin, bootstrap string, env []string) *Emulator {
	t.Helper()
	emu, err := rie.Start(context.Background(), rie.Options{RIE: rieBin, Bootstrap: bootstrap, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = emu.Stop()
		if t.Failed() {
			t.Logf("emulator output:\n%s", emu.Output())
		}
	})
	return &Emulator{emu: emu, url: &rie.FunctionURL{Emulator: emu}}
}

// Do sends req as a Function URL event and converts the function's answer into a response.
func (e *Emulator) Do(req *http.Request) (*http.Response, error) { return e.url.RoundTrip(req) }
