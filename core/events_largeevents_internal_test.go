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
// whole budget while it is held (never more, never on less than it can have). A mutation sample
// found this path of readPage untested (issue 30).
func TestLargeEventsReplayed(t *testing.T) {
	const budget, page, size, n = 8 << 10, 1 << 10, 12_000, 4
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
	if _, peak := c.events.replay.usage(); peak != budget {
		t.Fatalf("the replay budget's peak is %d bytes, want the whole budget (%d) for an event larger than it", peak, budget)
	}
}
