package core

import (
	"strconv"
	"testing"
)

// A slow reader loses the oldest queued events, never the newest, and never blocks publishers.
func TestSubscriberDropsOldest(t *testing.T) {
	h := newEventHub(8, 2)
	s, replay, from := h.subscribe("")
	if replay != nil || from != h.instance+"-0" {
		t.Fatalf("replay without Last-Event-ID: %v from %s", replay, from)
	}
	for i := 1; i <= 5; i++ {
		h.publish(EventEffect, []byte(strconv.Itoa(i)))
	}
	var got []string
	for len(s.ch) > 0 {
		got = append(got, string((<-s.ch).data))
	}
	if len(got) != 2 || got[0] != "4" || got[1] != "5" {
		t.Errorf("queued %v, want [4 5]", got)
	}
	h.unsubscribe(s)
	h.publish(EventEffect, []byte("6"))
	if len(s.ch) != 0 {
		t.Error("an unsubscribed reader still receives events")
	}
}

func TestEventBufferWraps(t *testing.T) {
	h := newEventHub(3, 1)
	for i := 1; i <= 7; i++ {
		h.publish(EventEffect, []byte(strconv.Itoa(i)))
	}
	_, replay, from := h.subscribe(h.instance + "-0")
	if from != h.instance+"-0" {
		t.Errorf("stream resumes from %s, want %s-0", from, h.instance)
	}
	var got []uint64
	for _, ev := range replay {
		got = append(got, ev.seq)
	}
	if len(got) != 3 || got[0] != 5 || got[2] != 7 {
		t.Errorf("buffer replays %v, want [5 6 7]", got)
	}
	if _, replay, _ := h.subscribe(h.instance + "-7"); len(replay) != 0 {
		t.Errorf("nothing is newer than the last id, got %d events", len(replay))
	}
	for _, bad := range []string{"", "garbage", h.instance + "-x", "other-3", h.instance, h.instance + "-99"} {
		if _, replay, from := h.subscribe(bad); replay != nil || from != h.instance+"-7" {
			t.Errorf("Last-Event-ID %q replays %d events from %s, want none from the live position", bad, len(replay), from)
		}
	}
}
