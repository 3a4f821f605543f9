package httpserver

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/adapters/adaptertest"
	"github.com/supervaize/svz/adapters/internal/testkit"
	"github.com/supervaize/svz/examples/helloworld/hello"
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

// TestEncodedSlashRawPath sends raw request lines (the %2F on the wire, as curl sends it) to the
// DataResource controller through Serve: an encoded slash is 404 on every route and never a
// redirect. Decoded, secret-a%2F is an item with a trailing slash, whose 307 pointed at the URL
// asked (curl -L looped).
func TestEncodedSlashRawPath(t *testing.T) {
	log, _ := testkit.Logger()
	base, _ := serve(t, adaptertest.DataHandler(t), WithLogger(log))
	addr := strings.TrimPrefix(base, "http://")
	data := "/api/agents/" + hello.Slug + "/data/greetings/"
	for _, target := range []string{
		data + "secret-a%2F",
		data + "secret-a%2f",
		data + "secret-a%2F?limit=5",
		data + "a%2Fb",
		"/api/agents/" + hello.Slug + "%2Fdata/greetings/",
		"/a2a%2Fevents", // sent as a POST: today's GET of /a2a/events streams until the write timeout
		"/.well-known%2Fhealth",
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		method := "GET"
		if strings.HasPrefix(target, "/a2a") {
			method = "POST"
		}
		_, err = io.WriteString(conn, method+" "+target+" HTTP/1.1\r\nHost: "+addr+"\r\nX-API-Key: "+adaptertest.APIKey+"\r\nConnection: close\r\n\r\n")
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s %s: %v", method, target, err)
		}
		b, _ := io.ReadAll(resp.Body)
		conn.Close()
		if resp.StatusCode != http.StatusNotFound || string(b) != `{"detail":"Not Found"}` || resp.Header.Get("Location") != "" {
			t.Errorf("%s %s: %d Location %q %s, want 404 {\"detail\":\"Not Found\"}", method, target, resp.StatusCode, resp.Header.Get("Location"), b)
		}
	}
}
