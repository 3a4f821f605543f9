package testkit

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// UnfinishedPost is a request whose response stays unwritten after its handler returns, until
// the test lets it be written. Its body is announced longer than what is sent at first: a handler
// that ignores the body returns at once, but net/http reads (to discard) the rest of a small
// body before writing the response, and so waits for the client. It stands for every response
// net/http is still writing when its handler has returned, such as the end of a large one that a
// slow client is reading.
type UnfinishedPost struct {
	conn net.Conn
}

// StartUnfinishedPost sends the headers and half of the body of POST path to addr.
func StartUnfinishedPost(t testing.TB, addr, path string) *UnfinishedPost {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := io.WriteString(conn, "POST "+path+" HTTP/1.1\r\nHost: svz.test\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\n12345"); err != nil {
		t.Fatalf("send the request: %v", err)
	}
	return &UnfinishedPost{conn: conn}
}

// Finish sends the rest of the body, which lets the response be written.
func (p *UnfinishedPost) Finish() error {
	_, err := io.WriteString(p.conn, "67890")
	return err
}

// Response reads the response: its status and body, or the error that cut it.
func (p *UnfinishedPost) Response() (int, string, error) {
	if err := p.conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return 0, "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(p.conn), nil)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
