package dynamodb

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

// TestMarkDue: a claim that enters another eighth of a bound makes the claim before it a mark,
// once: not when that claim is a mark already (a maintenance that lost to another's reads a head
// that recorded it), not for the first claim of a log (nothing before it), and never in a log
// without that bound.
func TestMarkDue(t *testing.T) {
	for _, tc := range []struct {
		name       string
		h          logHead
		age, bytes bool
	}{
		{"age: another eighth", logHead{keepage: 8000, seq: 3, pseq: 2, at: 3000, pat: 1500, marks: []logMark{{1, 0}}}, true, false},
		{"age: another eighth, no mark yet", logHead{keepage: 8000, seq: 2, pseq: 1, at: 1500, pat: 0}, true, false},
		{"age: the claim before is the last mark", logHead{keepage: 8000, seq: 3, pseq: 2, at: 3000, pat: 1500, marks: []logMark{{1, 0}, {2, 1500}}}, false, false},
		{"age: the same eighth", logHead{keepage: 8000, seq: 3, pseq: 2, at: 1900, pat: 1500, marks: []logMark{{1, 0}}}, false, false},
		{"no age bound", logHead{seq: 3, pseq: 2, at: 3000, pat: 1500}, false, false},
		{"bytes: another eighth", logHead{keepb: 800, seq: 3, pseq: 2, sum: 300, psum: 150, bmarks: []logMark{{1, 50}}}, false, true},
		{"bytes: the claim before is the last mark", logHead{keepb: 800, seq: 3, pseq: 2, sum: 300, psum: 150, bmarks: []logMark{{1, 50}, {2, 150}}}, false, false},
		{"bytes: the same eighth", logHead{keepb: 800, seq: 3, pseq: 2, sum: 199, psum: 150}, false, false},
		{"bytes: the first claim of a log, larger than an eighth", logHead{keepb: 800, seq: 1, sum: 200}, false, false},
		{"no byte bound", logHead{seq: 3, pseq: 2, sum: 300, psum: 150}, false, false},
	} {
		if age, bytes := tc.h.markDue(), tc.h.byteMarkDue(); age != tc.age || bytes != tc.bytes {
			t.Errorf("%s: markDue %v, byteMarkDue %v; want %v, %v", tc.name, age, bytes, tc.age, tc.bytes)
		}
	}
}

// TestDecodeHeadEmptyStrings: a head whose epoch or token is an empty string is corrupt (an empty
// epoch would read as a log never appended to).
func TestDecodeHeadEmptyStrings(t *testing.T) {
	for _, attr := range []string{"ep", "tok"} {
		it := item{"ep": {"S": json.RawMessage(`"e1"`)}, "tok": {"S": json.RawMessage(`"t1"`)}}
		for k, v := range map[string]int{"seq": 1, "pseq": 0, "first": 1, "gone": 1, "mv": 0, "at": 5, "pat": 5, "keepn": 0, "keepage": 0} {
			it[k] = map[string]json.RawMessage{"N": json.RawMessage(fmt.Sprintf(`"%d"`, v))}
		}
		if _, err := decodeHead(it); err != nil {
			t.Fatalf("the head as written: %v", err)
		}
		it[attr] = map[string]json.RawMessage{"S": json.RawMessage(`""`)}
		if h, err := decodeHead(it); !errors.Is(err, errCorrupt) {
			t.Errorf("%s empty: %+v, %v; want errCorrupt", attr, h, err)
		}
	}
}
