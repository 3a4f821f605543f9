package core

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLargeEventsReplayed: events larger than a page, and one larger than the whole replay
// budget, are each read alone and delivered, in order; the one larger than the budget takes the
// whole budget while it is held (never more, never on less than it can have), one within the
// budget what it needs; every byte is given back when the stream ends. A mutation sample
// found this path of readPage untested (issue 30).
func TestLargeEventsReplayed(t *testing.T) {
	const page, size, n = 1 << 10, 12_000, 4
	// An event larger than the budget is read with the whole budget; one within it takes what it
	// needs (its bytes in the log), no more.
	for _, budget := range []int64{8 << 10, 64 << 10} {
		c, addr := bigEventController(t, Config{EventReplayBytes: budget, EventPageBytes: page, EventWriteTimeout: time.Hour}, n, size)
		conn := openStream(t, addr)
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // a bound on failure, not a timing
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(resp.Body)
		lines.Buffer(make([]byte, 64<<10), 64<<10)
		var ids []string
		id := ""
		for len(ids) < n && lines.Scan() {
			line := lines.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				id = strings.TrimPrefix(line, "id: ")
			case line == "event: "+EventEffect:
				ids = append(ids, id)
			case strings.HasPrefix(line, "data: ") && len(line) < size && strings.Contains(line, "resource.contacts.list"):
				t.Fatalf("an event cut short: %d bytes", len(line))
			}
		}
		if len(ids) != n {
			t.Fatalf("%d events delivered (%v), want %d: %v", len(ids), ids, n, lines.Err())
		}
		for i, got := range ids {
			if !strings.HasSuffix(got, "-"+strconv.Itoa(i+1)) {
				t.Fatalf("events out of order: %v", ids)
			}
		}
		if _, peak := c.events.replay.usage(); peak != min(budget, c.events.maxEvent.Load()) {
			t.Fatalf("budget %d: the replay budget's peak is %d bytes, want %d", budget, peak, min(budget, c.events.maxEvent.Load()))
		}
		conn.Close()
		waitFor(t, "the stream ended", func() bool { return c.events.streams.Load() == 0 })
		if held, _ := c.events.replay.usage(); held != 0 {
			t.Fatalf("budget %d: %d bytes still held after the stream ended", budget, held)
		}
	}
}
