// Package testkit holds the adapters' test helpers: loopback listeners and ports from the range
// reserved for the adapters' tests (57000-57099), so they never collide with other servers on the
// machine, and a logger whose output tests can read.
package testkit

import (
	"fmt"
	"net"
	"strconv"
	"testing"
)

// Range reserved for the adapters' tests. Each package takes its own slice so that packages
// tested in parallel do not race for the same ports.
const (
	First = 57000
	Last  = 57099
)

// Slices of the range, one per test package; 57090-57099 is left to make bench-lambda.
const (
	HTTPServer = 57000 // 57000-57019
	CloudRun   = 57020 // 57020-57039
	Lambda     = 57040 // 57040-57079
	Platform   = 57080 // 57080-57089
)

// Listen returns a listener on 127.0.0.1 at the first free port of the slice starting at base;
// it is closed when the test ends.
func Listen(t testing.TB, base int) net.Listener {
	t.Helper()
	for p := base; p < base+width(base) && p <= Last; p++ {
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err == nil {
			t.Cleanup(func() { _ = ln.Close() })
			return ln
		}
	}
	t.Fatalf("no free port in %d-%d", base, base+width(base)-1)
	return nil
}

// Port returns a port of the slice at base that was free a moment ago, for servers that bind
// it themselves (a subprocess, the functions framework). Tests of one package run their
// servers one after another, so the moment is safe.
func Port(t testing.TB, base int) int {
	t.Helper()
	ln := Listen(t, base)
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		t.Fatalf("release port %d: %v", port, err)
	}
	return port
}

// Ports returns n distinct ports of the slice at base, free a moment ago.
func Ports(t testing.TB, base, n int) []int {
	t.Helper()
	var lns []net.Listener
	var ports []int
	for p := base; p < base+width(base) && len(ports) < n; p++ {
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		lns = append(lns, ln)
		ports = append(ports, p)
	}
	for _, ln := range lns {
		_ = ln.Close()
	}
	if len(ports) < n {
		t.Fatalf("only %d free ports in %d-%d, need %d", len(ports), base, base+width(base)-1, n)
	}
	return ports
}

// Addr formats a loopback address for port.
func Addr(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }

func width(base int) int {
	switch base {
	case Lambda:
		return 40
	case Platform:
		return 10
	}
	return 20
}
