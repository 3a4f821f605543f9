package adaptertest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// RunHostile sends hostile HTTP input to the server at addr (host:port), which serves Handler
// through the adapter under test, and checks that it neither holds memory nor connections for a
// caller that has proved nothing:
//   - 400 connections each sending an unfinished 1 MiB header are answered 431 and closed, and
//     the heap does not keep their headers (net/http's default limit, 1 MiB, would hold them all);
//   - a call without an API key that announces a body and never sends it is answered 401 and its
//     connection closed at once, not when the read timeout ends;
//   - connections cut by their client in every state (an event stream open, a body or a chunk
//     half sent, an unfinished header) leave no goroutine behind.
//
// The server must have a read timeout of a minute or more, so that only an answer that does not
// wait for the body passes.
func RunHostile(t *testing.T, addr string) {
	t.Run("header flood", func(t *testing.T) { headerFlood(t, addr) })
	t.Run("keyless call promising a body", func(t *testing.T) { promisedBody(t, addr) })
	t.Run("cut connections", func(t *testing.T) { cutConnections(t, addr) })
}

func cutConnections(t *testing.T, addr string) {
	const rounds = 20
	key := "X-API-Key: " + APIKey + "\r\n"
	requests := []struct {
		wire   string
		answer bool // the server answers before the request ends: read its first line before cutting
	}{
		{"GET /a2a/events HTTP/1.1\r\nHost: svz.test\r\n" + key + "\r\n", true},
		{"GET /a2a/events HTTP/1.1\r\nHost: svz.test\r\n" + key + "Last-Event-ID: 0-0\r\n\r\n", true},
		{"POST /a2a HTTP/1.1\r\nHost: svz.test\r\n" + key + "Content-Length: 100\r\n\r\n{\"id\":", false},
		{"POST /a2a HTTP/1.1\r\nHost: svz.test\r\n" + key + "Transfer-Encoding: chunked\r\n\r\n5\r\n{\"id\"", false},
		{"POST /a2a HTTP/1.1\r\nHost: svz.test\r\nContent-Length: 100\r\n\r\n", true}, // keyless: 401 at once
		{"GET /.well-known/health HTTP/1.1\r\nHost: svz.test\r\nX-Unfinished: ", false},
	}
	runtime.GC()
	before := runtime.NumGoroutine()
	var wg sync.WaitGroup
	for range rounds {
		for _, r := range requests {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			wg.Go(func() {
				defer c.Close()
				if _, err := io.WriteString(c, r.wire); err != nil {
					t.Errorf("write: %v", err)
					return
				}
				if r.answer {
					if line := firstLineOrEnd(c); !strings.HasPrefix(line, "HTTP/1.1 ") {
						t.Errorf("%q: first line %q", r.wire, line)
					}
				}
			})
		}
	}
	wg.Wait()
	// A goroutine per cut connection left behind would be far above this margin; the runtime's
	// and the server's own come and go within it.
	const margin = 8
	deadline := time.Now().Add(60 * time.Second) // generous for a loaded machine: the condition is positive
	for {
		n := runtime.NumGoroutine()
		if n <= before+margin {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines a minute after %d cut connections (%d before):\n%s", n, rounds*len(requests), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func headerFlood(t *testing.T, addr string) {
	const conns = 400
	header := bytes.Repeat([]byte("a"), 1<<20)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	var wg sync.WaitGroup
	answers := make(chan string, conns)
	opened := make([]net.Conn, 0, conns)
	for range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		opened = append(opened, c)
		wg.Go(func() {
			// Each write fails once the server has answered and closed: that is the point.
			_, _ = io.WriteString(c, "GET /.well-known/health HTTP/1.1\r\nHost: svz.test\r\nX-Flood: ")
			_, _ = c.Write(header)
		})
	}
	wg.Wait() // every header is sent, or cut by the server
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	// The 400 MiB sent must not be held: what the connections may hold at once is bounded by
	// the header limit (64 KiB each, 25 MiB in all), plus the runtime's own noise.
	if grown := int64(after.HeapInuse) - int64(before.HeapInuse); grown > 64<<20 {
		t.Errorf("the heap grew by %d MiB while %d connections sent unfinished 1 MiB headers", grown>>20, conns)
	}
	for _, c := range opened {
		wg.Go(func() {
			defer c.Close()
			answers <- firstLineOrEnd(c)
		})
	}
	wg.Wait()
	close(answers)
	counts := map[string]int{}
	for a := range answers {
		counts[a]++
	}
	for a, n := range counts {
		// A connection reset before the client read the answer is as good as the answer.
		if a != "HTTP/1.1 431 Request Header Fields Too Large" && a != "closed" {
			t.Errorf("%d connection(s) got %q, want 431 or a closed connection (all answers: %v)", n, a, counts)
		}
	}
}

// firstLineOrEnd returns the status line the server sent on c, or "closed" when the connection
// ended (or was reset) without one. Its deadline only stops a broken server from hanging the test.
func firstLineOrEnd(c net.Conn) string {
	_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return "no answer within 60 s"
		}
		return "closed"
	}
	return strings.TrimRight(line, "\r\n")
}

func promisedBody(t *testing.T, addr string) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := fmt.Fprintf(c, "POST /a2a HTTP/1.1\r\nHost: svz.test\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// Generous for a loaded machine, far below the server's read timeout.
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to a keyless call that never sends its body: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusUnauthorized || string(body) != `{"detail":"Invalid or missing API key"}` || !resp.Close {
		t.Fatalf("answer %d %q (close %v), want 401 and the connection closed", resp.StatusCode, body, resp.Close)
	}
	if n, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("the connection stayed open after the answer: read %v, %v", n, err)
	}
}
