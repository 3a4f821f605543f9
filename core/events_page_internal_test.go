package core

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
)

// limitLog is a memory store that records the limit of each ReadLog (one goroutine reads).
type limitLog struct {
	*memory.Store
	limits *[]int
}

func (l limitLog) ReadLog(ctx context.Context, name string, after uint64, limit int) (store.LogRange, error) {
	*l.limits = append(*l.limits, limit)
	return l.Store.ReadLog(ctx, name, after, limit)
}

// TestReadPage: a page asks the store for as many events as pageBytes holds at the largest size
// seen, keeps those that fit the bytes it took from the replay budget (learning their sizes),
// takes the rest of a single larger event's bytes when the budget has them, and otherwise reads
// that event alone again with what the budget can give.
func TestReadPage(t *testing.T) {
	const page = 25
	for _, tc := range []struct {
		name         string
		budget, seen int64 // the replay budget, the largest event seen before
		events       []int // sizes of the events in the log
		limits       []int // of the store reads
		seqs         []uint64
		held         int64
	}{
		// Five of 5 bytes would fit: five are read, two of their 10 bytes kept.
		{"what fits the page", 1 << 20, 5, []int{10, 10, 10, 10, 10}, []int{5}, []uint64{1, 2}, page},
		{"a larger event, the budget has its bytes", 1 << 20, 10, []int{40, 10}, []int{2}, []uint64{1}, 40},
		{"a larger event than the budget", 30, 10, []int{40, 10}, []int{2, 1}, []uint64{1}, 30},
	} {
		var limits []int
		e := newEffectLog(Config{Store: limitLog{memory.New(), &limits}, EventReplayBytes: tc.budget, EventPageBytes: page},
			slog.New(slog.DiscardHandler), make(chan struct{}))
		for _, n := range tc.events {
			if _, err := e.log.AppendLog(context.Background(), e.name, []byte(strings.Repeat("x", n)), e.keep); err != nil {
				t.Fatal(err)
			}
		}
		e.maxEvent.Store(tc.seen)
		s := &eventStream{e: e, budget: 100}
		r, err := s.readPage(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var seqs []uint64
		for _, ev := range r.Entries {
			seqs = append(seqs, ev.Seq)
		}
		held, _ := e.replay.usage()
		if !slices.Equal(seqs, tc.seqs) || r.Through != tc.seqs[len(tc.seqs)-1] || s.held != tc.held || held != tc.held ||
			!slices.Equal(limits, tc.limits) || e.maxEvent.Load() != int64(slices.Max(tc.events[:len(tc.seqs)])) {
			t.Errorf("%s: page %v through %d holding %d (the budget %d), reads of %v, largest %d; want %v holding %d, reads of %v",
				tc.name, seqs, r.Through, s.held, held, limits, e.maxEvent.Load(), tc.seqs, tc.held, tc.limits)
		}
	}
}

// TestReplayPageReleasedBeforeFollowing: a stream that caught up gives its page's bytes back to
// the replay budget before it follows the log: a stream open for hours holds none of them. So
// does one that read the store while following: here the log's first events, appended once the
// stream started on the log never appended to (a new epoch: the follower's events do not
// continue the stream's position, the stream reads them from the store).
func TestReplayPageReleasedBeforeFollowing(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after int // events appended before the stream starts, and once it is connected
	}{
		{"the request's replay", 2, 0},
		{"a replay while following", 0, 2},
	} {
		c, addr := bigEventController(t, Config{EventReplayBytes: 1 << 20, EventPageBytes: 1 << 16, EventWriteTimeout: time.Hour}, tc.before, 100)
		conn := openStream(t, addr)
		_ = conn.SetReadDeadline(time.Now().Add(time.Minute)) // a bound on failure, not a timing
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		// The replay is flushed once written and its page released: its events read, the stream
		// follows the log.
		lines := bufio.NewScanner(resp.Body)
		for effects := 0; effects < 2; {
			if !lines.Scan() {
				t.Fatalf("%s: the stream ended before its two events: %v", tc.name, lines.Err())
			}
			switch lines.Text() {
			case "event: " + EventConnected: // the stream has read the log
				for range tc.after {
					c.events.appendEffects(context.Background(), &contract.ActionRequest{AgentSlug: "s", Action: "job.start", RequestID: "r"}, "",
						[]contract.Effect{{Type: "job.started"}})
				}
			case "event: " + EventEffect:
				effects++
			}
		}
		if held, peak := c.events.replay.usage(); held != 0 || peak == 0 || c.events.streams.Load() != 1 {
			t.Fatalf("%s: a stream following the log holds %d bytes of the replay budget (peak %d, %d streams); want none", tc.name, held, peak, c.events.streams.Load())
		}
	}
}

// TestSendEntry: an unfiltered stream is sent every well-formed entry, a filtered one only its
// workspace's: not an entry of no workspace, even when its verified workspace is empty (local
// mode, a stream naming no workspace); an entry whose header is malformed goes to no one.
func TestSendEntry(t *testing.T) {
	of := func(ws, data string) []byte { return append(appendEntryHeader(nil, ws), data...) }
	const sent = "id: e-7\nevent: " + EventEffect + "\ndata: {\"n\":1}\n\n"
	for _, tc := range []struct {
		name      string
		filtered  bool
		workspace string
		entry     []byte
		want      string // "" for nothing sent
	}{
		{"unfiltered, of no workspace", false, "", of("", `{"n":1}`), sent},
		{"unfiltered, of a workspace", false, "", of("w1", `{"n":1}`), sent},
		{"unfiltered, malformed", false, "", []byte{entryMark, 5, 'w'}, ""},
		{"filtered, of its workspace", true, "w1", of("w1", `{"n":1}`), sent},
		{"filtered, of another", true, "w1", of("w2", `{"n":1}`), ""},
		{"filtered, of no workspace", true, "w1", of("", `{"n":1}`), ""},
		{"filtered on no workspace, of no workspace", true, "", of("", `{"n":1}`), ""},
		{"filtered, malformed", true, "w1", []byte{entryMark, 5, 'w'}, ""},
	} {
		w := httptest.NewRecorder()
		s := &eventStream{e: &effectLog{}, w: w, rc: http.NewResponseController(w), filtered: tc.filtered, workspace: tc.workspace}
		ok, err := s.sendEntry("e", store.LogEntry{Seq: 7, Data: tc.entry})
		told := position{}
		if tc.want != "" {
			told = position{"e", 7}
		}
		if err != nil || ok != (tc.want != "") || w.Body.String() != tc.want || s.told != told {
			t.Errorf("%s: sent %v, %v, %q, told %+v; want %q", tc.name, ok, err, w.Body.String(), s.told, tc.want)
		}
	}
}

// TestReadPageEndsWhileWaitingForTheBudget: a stream waiting for replay bytes other streams
// hold ends with its request or its controller, without reading the log: a stream never writes
// a page it holds no bytes for, nor after the controller closed.
func TestReadPageEndsWhileWaitingForTheBudget(t *testing.T) {
	for _, tc := range []struct {
		name   string
		closed bool // the controller closes; else the request's context ends
	}{
		{"the request ends", false},
		{"the controller closes", true},
	} {
		var limits []int
		closing := make(chan struct{})
		e := newEffectLog(Config{Store: limitLog{memory.New(), &limits}, EventReplayBytes: 100, EventPageBytes: 50},
			slog.New(slog.DiscardHandler), closing)
		if _, err := e.log.AppendLog(context.Background(), e.name, []byte("x"), e.keep); err != nil {
			t.Fatal(err)
		}
		if !e.replay.TryAcquire(100) { // other streams hold the whole budget
			t.Fatal("the budget is not free")
		}
		ctx, cancel := context.WithCancel(context.Background())
		if tc.closed {
			close(closing)
		} else {
			cancel()
		}
		s := &eventStream{e: e, budget: 100}
		r, err := s.readPage(ctx)
		cancel()
		if !errors.Is(err, context.Canceled) || len(r.Entries) != 0 || len(limits) != 0 || s.held != 0 {
			t.Errorf("%s: %d entries, %v, %d bytes held, log reads %v; want context.Canceled and no read", tc.name, len(r.Entries), err, s.held, limits)
		}
		if held, _ := e.replay.usage(); held != 100 {
			t.Errorf("%s: the budget holds %d; want the other streams' 100 alone", tc.name, held)
		}
	}
}
