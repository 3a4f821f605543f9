package core

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/supervaize/svz/core/store"
)

func TestParsePosition(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want position
		ok   bool
	}{
		{"0-0", position{}, true},
		{"abc-0", position{"abc", 0}, true},
		{" 0123456789abcdef-42 ", position{"0123456789abcdef", 42}, true},
		{"0-7", position{"0", 7}, true}, // a foreign epoch
		{"A_z-18446744073709551615", position{"A_z", 1<<64 - 1}, true},
		{"09azAZ_-1", position{"09azAZ_", 1}, true}, // each end of each range
		{"/-1", position{}, false},                  // and the byte beyond it
		{":-1", position{}, false},
		{"`-1", position{}, false},
		{"{-1", position{}, false},
		{"@-1", position{}, false},
		{"[-1", position{}, false},
		{"", position{}, false},
		{"abc", position{}, false},
		{"abc-", position{}, false},
		{"-1", position{}, false},
		{"abc-01", position{}, false},
		{"abc--1", position{}, false},
		{"a.b-1", position{}, false},
		{"abc-18446744073709551616", position{}, false},
		{"abc-1x", position{}, false},
		{strings.Repeat("e", 64) + "-1", position{strings.Repeat("e", 64), 1}, true}, // the longest epoch
		{strings.Repeat("e", 65) + "-1", position{}, false},
	} {
		got, err := parsePosition(tc.id)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parsePosition(%q) = %+v, %v; want %+v, ok %v", tc.id, got, err, tc.want, tc.ok)
		}
		if err == nil && got.id() != tc.want.id() {
			t.Errorf("%q round trip: %s", tc.id, got.id())
		}
	}
}

func TestResolve(t *testing.T) {
	log := store.LogRange{Epoch: "e", First: 5, Last: 9}
	for _, tc := range []struct {
		at     position
		r      store.LogRange
		want   position
		reason string
	}{
		{position{"e", 4}, log, position{"e", 4}, ""},
		{position{"e", 9}, log, position{"e", 9}, ""},
		{position{"e", 3}, log, position{"e", 4}, lostExpired},
		{position{}, log, position{"e", 4}, lostExpired},
		{position{}, store.LogRange{Epoch: "e", First: 1, Last: 9}, position{"e", 0}, ""},
		{position{"e", 10}, log, position{"e", 4}, lostUnknown},
		{position{"f", 6}, log, position{"e", 4}, lostUnknown},
		{position{"f", 6}, store.LogRange{First: 1}, position{}, lostUnknown},
		{position{}, store.LogRange{First: 1}, position{}, ""},
	} {
		s := &eventStream{at: tc.at}
		lost, reason := s.resolve(tc.r)
		if s.at != tc.want || reason != tc.reason || lost != (tc.reason != "") {
			t.Errorf("resolve(%+v in %+v) = %+v, %v %q; want %+v %q", tc.at, tc.r, s.at, lost, reason, tc.want, tc.reason)
		}
	}
}

func FuzzParsePosition(f *testing.F) {
	for _, s := range []string{"0-0", "abc-1", "a-b", "-", "x-18446744073709551615"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		p, err := parsePosition(id)
		if err != nil {
			return
		}
		again, err := parsePosition(p.id())
		if err != nil || again != p {
			t.Fatalf("%q parsed as %+v, whose id %q parses as %+v, %v", id, p, p.id(), again, err)
		}
	})
}

// TestSSEEventOneAllocation: a small event is laid out in one buffer of the right size (one
// allocation, one write); a larger one is written in three pieces, its data never copied.
func TestSSEEventOneAllocation(t *testing.T) {
	for _, tc := range []struct {
		data   int
		writes int
		allocs float64
	}{{0, 1, 1}, {100, 1, 1}, {4 << 10, 1, 1}, {4<<10 + 1, 3, 1}} {
		e := sseEvent{id: "0123456789abcdef-18446744073709551615", name: "supervaizer.effect", data: []byte(strings.Repeat("x", tc.data))}
		var w countingWriter
		if err := e.writeTo(&w); err != nil {
			t.Fatal(err)
		}
		want := "id: " + e.id + "\nevent: " + e.name + "\ndata: " + string(e.data) + "\n\n"
		if w.writes != tc.writes || w.buf.String() != want {
			t.Errorf("%d bytes of data: %d writes of %q", tc.data, w.writes, w.buf.String())
		}
		if n := testing.AllocsPerRun(20, func() { _ = e.writeTo(io.Discard) }); n != tc.allocs {
			t.Errorf("%d bytes of data: %v allocations, want %v", tc.data, n, tc.allocs)
		}
	}
}

type countingWriter struct {
	buf    strings.Builder
	writes int
}

func (w *countingWriter) Write(b []byte) (int, error) {
	w.writes++
	return w.buf.Write(b)
}

// TestSSEEventIDAlone: an event without a name is an id line and the blank line that ends it,
// nothing more (no empty event: or data: line a client would dispatch).
func TestSSEEventIDAlone(t *testing.T) {
	var w countingWriter
	if err := (sseEvent{id: "e-3"}).writeTo(&w); err != nil || w.buf.String() != "id: e-3\n\n" || w.writes != 1 {
		t.Fatalf("an id alone: %q in %d writes, %v", w.buf.String(), w.writes, err)
	}
}

// failWriter fails its write number fail (from 1) and every write after it.
type failWriter struct{ writes, fail int }

var errClientGone = errors.New("the client is gone")

func (w *failWriter) Write(b []byte) (int, error) {
	if w.writes++; w.writes >= w.fail {
		return 0, errClientGone
	}
	return len(b), nil
}

// TestSSEEventWriteFails: whichever write of an event fails (the one of an id alone or of a
// small event, each of the three of a large one), writeTo returns its error and writes no more.
func TestSSEEventWriteFails(t *testing.T) {
	large := []byte(strings.Repeat("x", 4<<10+1))
	for _, tc := range []struct {
		name string
		ev   sseEvent
		fail int
	}{
		{"id alone", sseEvent{id: "e-1"}, 1},
		{"small", sseEvent{id: "e-1", name: EventEffect, data: []byte("{}")}, 1},
		{"large, its head", sseEvent{id: "e-1", name: EventEffect, data: large}, 1},
		{"large, its data", sseEvent{id: "e-1", name: EventEffect, data: large}, 2},
		{"large, its end", sseEvent{id: "e-1", name: EventEffect, data: large}, 3},
	} {
		w := &failWriter{fail: tc.fail}
		if err := tc.ev.writeTo(w); err != errClientGone || w.writes != tc.fail {
			t.Errorf("%s, write %d failing: %v after %d writes; want %v after %d", tc.name, tc.fail, err, w.writes, errClientGone, tc.fail)
		}
	}
}
