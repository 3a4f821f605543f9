// Package lambdaemu plays AWS Lambda for deploy tests: it pulls a pushed image, extracts the
// controller binary, runs it as the bootstrap under the AWS Lambda Runtime Interface Emulator with
// the function's environment, and turns HTTP requests into Function URL invocations (and the
// responses back, buffered or in the RESPONSE_STREAM framing), the way a Function URL does.
package lambdaemu

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/supervaize/svz/deploy/image"
	"github.com/supervaize/svz/internal/syncbuf"
)

// Ports of this package's emulators (the deploy tests' range).
const (
	firstPort = 57100
	lastPort  = 57199
)

// FreePorts returns n loopback ports of the range that nothing listens on now.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	for p := firstPort; p <= lastPort && len(ports) < n; p++ {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		l.Close()
		ports = append(ports, p)
	}
	if len(ports) < n {
		t.Fatalf("no %d free ports in %d-%d", n, firstPort, lastPort)
	}
	return ports
}

// Pull fetches an image by reference from a registry.
func Pull(ctx context.Context, ref string) (v1.Image, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, err
	}
	return remote.Image(r, remote.WithContext(ctx))
}

// ExtractBinary writes the image's entrypoint file to dir and returns its path.
func ExtractBinary(img v1.Image, dir string) (string, error) {
	layers, err := img.Layers()
	if err != nil {
		return "", err
	}
	want := strings.TrimPrefix(image.Entrypoint, "/")
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return "", err
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				rc.Close()
				return "", err
			}
			if h.Name != want {
				continue
			}
			path := filepath.Join(dir, "bootstrap")
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777)
			if err != nil {
				rc.Close()
				return "", err
			}
			_, err = io.Copy(f, tr)
			rc.Close()
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			return path, err
		}
		rc.Close()
	}
	return "", fmt.Errorf("%s not found in the image", image.Entrypoint)
}

// Emulator is one aws-lambda-rie process running a bootstrap.
type Emulator struct {
	URL  string // invocation endpoint
	logs *syncbuf.Buffer
}

// Logs returns what the emulator and the bootstrap printed.
func (e *Emulator) Logs() string { return e.logs.String() }

// Start runs bootstrap under the emulator at rie with exactly env (plus what the emulator adds),
// stopping it with SIGTERM when the test ends.
func Start(t testing.TB, rie, bootstrap string, env []string) *Emulator {
	t.Helper()
	ports := FreePorts(t, 2)
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	cmd := exec.Command(rie,
		"--runtime-interface-emulator-address", addr,
		"--runtime-api-address", fmt.Sprintf("127.0.0.1:%d", ports[1]),
		bootstrap)
	cmd.Env = env
	logs := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", rie, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("emulator output:\n%s", logs)
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the emulator does not listen on %s: %v\n%s", addr, err, logs)
		}
	}
	return &Emulator{URL: "http://" + addr + "/2015-03-31/functions/function/invocations", logs: logs}
}

// streamDelimiter separates the prelude from the body in the RESPONSE_STREAM framing.
var streamDelimiter = []byte{0, 0, 0, 0, 0, 0, 0, 0}

// Do sends req as a Function URL event and converts the function's answer into a response.
func (e *Emulator) Do(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		body = b
	}
	headers := map[string]string{}
	for k, v := range req.Header {
		headers[strings.ToLower(k)] = strings.Join(v, ",")
	}
	headers["host"] = req.URL.Host
	ev := events.LambdaFunctionURLRequest{
		Version: "2.0", RawPath: req.URL.EscapedPath(), RawQueryString: req.URL.RawQuery, Headers: headers,
		Body: base64.StdEncoding.EncodeToString(body), IsBase64Encoded: true,
		RequestContext: events.LambdaFunctionURLRequestContext{
			AccountID: "123456789012", RequestID: fmt.Sprintf("req-%d", time.Now().UnixNano()), APIID: "emu",
			DomainName: req.URL.Host, DomainPrefix: "emu", TimeEpoch: time.Now().UnixMilli(),
			Time: time.Now().UTC().Format("02/Jan/2006:15:04:05 +0000"),
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{
				Method: req.Method, Path: req.URL.Path, Protocol: "HTTP/1.1", SourceIP: "127.0.0.1", UserAgent: req.UserAgent(),
			},
		},
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	inv, err := http.NewRequestWithContext(req.Context(), http.MethodPost, e.URL, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(inv)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		// Lambda answers a failed invocation (init error, crash) with 502 on the URL.
		return &http.Response{StatusCode: http.StatusBadGateway, Body: io.NopCloser(bytes.NewReader(out)), Header: http.Header{}, Request: req}, nil
	}
	var fr events.LambdaFunctionURLResponse
	var respBody []byte
	if prelude, rest, ok := bytes.Cut(out, streamDelimiter); ok && bytes.HasPrefix(prelude, []byte("{")) {
		if err := json.Unmarshal(prelude, &fr); err != nil {
			return nil, fmt.Errorf("streaming prelude: %w", err)
		}
		respBody = rest
	} else {
		if err := json.Unmarshal(out, &fr); err != nil {
			return nil, fmt.Errorf("function URL response: %w: %s", err, out)
		}
		respBody = []byte(fr.Body)
		if fr.IsBase64Encoded {
			if respBody, err = base64.StdEncoding.DecodeString(fr.Body); err != nil {
				return nil, err
			}
		}
	}
	h := http.Header{}
	for k, v := range fr.Headers {
		h.Set(k, v)
	}
	if fr.StatusCode == 0 {
		fr.StatusCode = http.StatusOK
	}
	return &http.Response{StatusCode: fr.StatusCode, Header: h, Body: io.NopCloser(bytes.NewReader(respBody)), Request: req}, nil
}
