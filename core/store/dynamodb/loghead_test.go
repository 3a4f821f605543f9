package dynamodb

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestDecodeHeadBounds: a head is read only when its positions hold together: seq, first and gone
// at least 1, and gone at most seq + 1 (every claimed entry deleted); one past is corrupt.
func TestDecodeHeadBounds(t *testing.T) {
	head := func(seq, first, gone int) item {
		it := item{"ep": {"S": json.RawMessage(`"e1"`)}, "tok": {"S": json.RawMessage(`"t1"`)}}
		for k, v := range map[string]int{"seq": seq, "pseq": 0, "first": first, "gone": gone, "mv": 0, "at": 5, "pat": 5, "keepn": 0, "keepage": 0} {
			it[k] = map[string]json.RawMessage{"N": json.RawMessage(fmt.Sprintf(`"%d"`, v))}
		}
		return it
	}
	for _, tc := range []struct {
		seq, first, gone int
		ok               bool
	}{
		{1, 1, 1, true},
		{3, 2, 4, true},
		{3, 2, 5, false},
		{0, 1, 1, false},
		{3, 0, 1, false},
		{3, 1, 0, false},
	} {
		h, err := decodeHead(head(tc.seq, tc.first, tc.gone))
		if tc.ok != (err == nil) || err != nil && !errors.Is(err, errCorrupt) {
			t.Errorf("seq %d first %d gone %d: %+v, %v", tc.seq, tc.first, tc.gone, h, err)
		}
		if tc.ok && (h.seq != uint64(tc.seq) || h.gone != uint64(tc.gone) || !h.exists) {
			t.Errorf("seq %d first %d gone %d read as %+v", tc.seq, tc.first, tc.gone, h)
		}
	}
}

// TestDecodeHeadRefusals: a head with an attribute missing, of another type or that does not
// parse is corrupt, and the error names the attribute: never a head read as zero there.
func TestDecodeHeadRefusals(t *testing.T) {
	good := func() item {
		it := item{"ep": {"S": json.RawMessage(`"e1"`)}, "tok": {"S": json.RawMessage(`"t1"`)}}
		for k, v := range map[string]int{"seq": 3, "pseq": 1, "first": 1, "gone": 1, "mv": 0, "at": 5, "pat": 5, "keepn": 0, "keepage": 0} {
			it[k] = map[string]json.RawMessage{"N": json.RawMessage(fmt.Sprintf(`"%d"`, v))}
		}
		return it
	}
	if _, err := decodeHead(good()); err != nil {
		t.Fatalf("the good head: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(item)
		want string
	}{
		{"no ep", func(it item) { delete(it, "ep") }, `"ep" must be a non-empty string`},
		{"ep of another type", func(it item) { it["ep"] = map[string]json.RawMessage{"N": json.RawMessage(`"1"`)} }, `attribute "ep" is not of type S`},
		{"no mv", func(it item) { delete(it, "mv") }, `"mv" must be a number`},
		{"mv of another type", func(it item) { it["mv"] = map[string]json.RawMessage{"S": json.RawMessage(`"0"`)} }, `attribute "mv" is not of type N`},
		{"mv not a number", func(it item) { it["mv"] = map[string]json.RawMessage{"N": json.RawMessage(`"x"`)} }, `mv "x"`},
		{"keepn not a number", func(it item) { it["keepn"] = map[string]json.RawMessage{"N": json.RawMessage(`"1.5"`)} }, `keepn "1.5"`},
		{"keepb (optional) of another type", func(it item) { it["keepb"] = map[string]json.RawMessage{"S": json.RawMessage(`"1"`)} }, `attribute "keepb" is not of type N`},
		{"keepb's digits not a string", func(it item) { it["keepb"] = map[string]json.RawMessage{"N": json.RawMessage(`1`)} }, `"keepb" must be a number`},
		{"keepb not a number", func(it item) { it["keepb"] = map[string]json.RawMessage{"N": json.RawMessage(`"x"`)} }, `keepb "x"`},
		{"marks not a string", func(it item) { it["marks"] = map[string]json.RawMessage{"S": json.RawMessage(`5`)} }, `"marks" must be a string`},
		{"marks of another type", func(it item) { it["marks"] = map[string]json.RawMessage{"N": json.RawMessage(`"1"`)} }, `attribute "marks" is not of type S`},
		{"a mark's position", func(it item) { it["marks"] = map[string]json.RawMessage{"S": json.RawMessage(`"2:5,x:5"`)} }, `marks mark "x:5"`},
		{"a mark's time", func(it item) { it["bmarks"] = map[string]json.RawMessage{"S": json.RawMessage(`"2:x"`)} }, `bmarks mark "2:x"`},
	} {
		it := good()
		tc.edit(it)
		h, err := decodeHead(it)
		if err == nil || !errors.Is(err, errCorrupt) || err.Error() != errCorrupt.Error()+": "+tc.want {
			t.Errorf("%s: %+v, %v; want the error %q", tc.name, h, err, tc.want)
		}
	}
}

// TestWithLogPollInterval: the option sets the interval the waiters' poll reads (its effect is
// real time, which no test waits on).
func TestWithLogPollInterval(t *testing.T) {
	var s Store
	WithLogPollInterval(7 * time.Second)(&s)
	if s.logPoll != 7*time.Second {
		t.Fatalf("logPoll %s, want 7s", s.logPoll)
	}
}
