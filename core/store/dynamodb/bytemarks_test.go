package dynamodb

import (
	"errors"
	"reflect"
	"testing"
)

// TestBytesRetained pins the byte bound of a head at its boundaries: an entry up to a mark (or up
// to the claim before the newest) goes when keepb bytes or more were claimed after it; a claim
// entering another eighth of keepb becomes a mark; the newest entry stays whatever its size.
func TestBytesRetained(t *testing.T) {
	base := logHead{exists: true, seq: 10, pseq: 9, first: 1, gone: 1, keepb: 800}
	for _, tc := range []struct {
		name       string
		sum, psum  int64
		bmarks     []logMark
		wantFirst  uint64
		wantBmarks []logMark
	}{
		{"a mark 800 bytes back goes, one 799 back stays", 1050, 1010, []logMark{{1, 100}, {2, 250}, {3, 251}}, 3, []logMark{{3, 251}}},
		{"a claim entering another eighth is a mark", 1000, 900, []logMark{{1, 100}}, 2, []logMark{{9, 900}}},
		{"within the same eighth, no mark", 1050, 1010, nil, 1, nil},
		{"the claim before the newest, 800 bytes back", 1000, 200, []logMark{{1, 100}}, 10, nil},
		{"the claim before the newest, 799 bytes back", 1000, 201, nil, 1, []logMark{{9, 201}}},
		{"a newest entry larger than the bound stays alone", 5000, 100, []logMark{{1, 50}}, 10, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := base
			h.sum, h.psum, h.bmarks = tc.sum, tc.psum, tc.bmarks
			r := h.kept()
			if r.first != tc.wantFirst || len(r.bmarks)+len(tc.wantBmarks) > 0 && !reflect.DeepEqual(r.bmarks, tc.wantBmarks) {
				t.Fatalf("kept: first %d, byte marks %v; want %d, %v", r.first, r.bmarks, tc.wantFirst, tc.wantBmarks)
			}
		})
	}
	// Without a byte bound, sums mean nothing; the count and age rules are the same as before.
	h := base
	h.keepb, h.sum, h.psum, h.bmarks = 0, 100000, 10, []logMark{{5, 10}}
	if r := h.kept(); r.first != 1 || !reflect.DeepEqual(r.bmarks, []logMark{{5, 10}}) || h.byteMarkDue() {
		t.Fatalf("without a byte bound: %+v", r)
	}
}

// TestDecodeHeadBytes: a head written before the byte bound reads with no bytes claimed; the
// byte fields are read as written, and a malformed one is refused.
func TestDecodeHeadBytes(t *testing.T) {
	old := `{"k":{"S":"\u0000log\u0000x"},"ep":{"S":"e"},"tok":{"S":"t"},"seq":{"N":"3"},"pseq":{"N":"2"},"first":{"N":"1"},"gone":{"N":"1"},"mv":{"N":"0"},` +
		`"at":{"N":"5"},"pat":{"N":"4"},"keepn":{"N":"0"},"keepage":{"N":"0"}`
	h, err := decodeHead(parseItem(t, old+`}`))
	if err != nil || h.sum != 0 || h.psum != 0 || h.keepb != 0 || h.bmarks != nil {
		t.Fatalf("an older head: %+v, %v", h, err)
	}
	h, err = decodeHead(parseItem(t, old+`,"sum":{"N":"900"},"psum":{"N":"800"},"keepb":{"N":"640"},"bmarks":{"S":"1:80,2:160"}}`))
	if err != nil || h.sum != 900 || h.psum != 800 || h.keepb != 640 || !reflect.DeepEqual(h.bmarks, []logMark{{1, 80}, {2, 160}}) {
		t.Fatalf("a head with bytes: %+v, %v", h, err)
	}
	if got := encodeMarks(h.bmarks); got != "1:80,2:160" {
		t.Errorf("encodeMarks: %q", got)
	}
	for _, bad := range []string{`,"sum":{"S":"900"}}`, `,"psum":{"N":"1.5"}}`, `,"bmarks":{"S":"1:x"}}`, `,"keepb":{"N":"99999999999999999999"}}`} {
		if _, err := decodeHead(parseItem(t, old+bad)); !errors.Is(err, errCorrupt) {
			t.Errorf("%s: %v, want errCorrupt", bad, err)
		}
	}
}

// TestCountRetained: the count bound keeps the keepn newest entries, all of a log that holds
// fewer, and never passes what the head says went already.
func TestCountRetained(t *testing.T) {
	for _, tc := range []struct {
		name             string
		seq, first, gone uint64
		keepn            int64
		wantFirst        uint64
	}{
		{"fewer entries than the bound", 3, 1, 1, 10, 1},
		{"as many as the bound", 10, 1, 1, 10, 1},
		{"one more than the bound", 11, 1, 1, 10, 2},
		{"many more", 100, 1, 1, 10, 91},
		{"gone past the bound", 100, 1, 95, 10, 95},
		{"no count bound", 100, 1, 1, 0, 1},
	} {
		h := logHead{exists: true, seq: tc.seq, pseq: tc.seq - 1, first: tc.first, gone: tc.gone, keepn: tc.keepn}
		if r := h.kept(); r.first != tc.wantFirst {
			t.Errorf("%s: first %d, want %d", tc.name, r.first, tc.wantFirst)
		}
	}
}
