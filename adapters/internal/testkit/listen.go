// Package testkit holds the adapters' test helpers: loopback listeners on ports the kernel picks,
// the address a server under test logs, the Lambda Runtime Interface Emulator started on free
// ports, a request whose response stays unwritten until the test lets it (UnfinishedPost), a
// connection the server closed (ClosedByServer), a logger whose output tests can read, and
// request deadlines checked against the times a test took around the request (WantDeadline).
//
// No port is chosen in advance: a port found free and then bound by the server under test can be
// taken in between by another process (a second copy of the tests, another package), which makes
// tests flaky. Servers get a listener (Listen), or port 0 and log the address they bound
// (ServingAddr). Only servers that can do neither get a port picked just before (FreePort, RIE):
// the test then checks that the server answering there is its own, and retries on another port
// when another process took it first.
package testkit

import (
	"bufio"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"
)

// Listen returns a listener on 127.0.0.1 at a port the kernel picks; it is closed when the test
// ends.
func Listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.1: %v", err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln
}

// FreePort returns a port of 127.0.0.1 that was free a moment ago, for a server that binds its
// port itself and cannot report it. Another process may take it first: check that the server
// answering there is the one under test.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	return port
}

// freePort returns a port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	return port, ln.Close()
}

// ServingAddr waits until logs holds a JSON line with an "addr" attribute, which the adapters
// log once they listen, and returns it: a server started on port 0 tells its port this way.
func ServingAddr(t testing.TB, logs *LogBuffer) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		sc := bufio.NewScanner(strings.NewReader(logs.String()))
		for sc.Scan() {
			var line struct {
				Addr string `json:"addr"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Addr != "" {
				return line.Addr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server never logged the address it listens on:\n%s", logs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
