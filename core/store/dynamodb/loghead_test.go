package dynamodb

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
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
