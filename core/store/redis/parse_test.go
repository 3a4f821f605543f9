package redis

import (
	"errors"
	"strconv"
	"testing"
)

// FuzzParse feeds arbitrary hash fields to parse: it must never panic, and what it accepts must
// be exactly what the fields say.
func FuzzParse(f *testing.F) {
	f.Add("value", "42", "1700000000000")
	f.Add("", "9223372036854775807", "-1")
	f.Add("v", "0", "1")
	f.Add("v", "9223372036854775808", "1")
	f.Add("v", "1", "1e3")
	f.Fuzz(func(t *testing.T, value, ver, exp string) {
		rec, ms, err := parse([]any{value, ver, exp})
		if err != nil {
			if !errors.Is(err, errCorrupt) {
				t.Fatalf("parse error %v is not errCorrupt", err)
			}
			return
		}
		if string(rec.Value) != value || strconv.FormatUint(rec.Version, 10) != ver || strconv.FormatInt(ms, 10) != exp ||
			rec.Version == 0 || rec.ExpiresAt.UnixMilli() != ms {
			t.Fatalf("parse(%q, %q, %q) = %+v, %d", value, ver, exp, rec, ms)
		}
	})
}

func TestParseRejectsMissingFields(t *testing.T) {
	for name, fields := range map[string][]any{
		"two fields":   {"v", "1"},
		"nil version":  {"v", nil, "1"},
		"int version":  {"v", int64(1), "1"},
		"nil expiry":   {"v", "1", nil},
		"four fields":  {"v", "1", "1", "x"},
		"nil value":    {nil, "1", "1"},
		"zero version": {"v", "0", "1"},
	} {
		if _, _, err := parse(fields); !errors.Is(err, errCorrupt) {
			t.Errorf("%s: error = %v, want errCorrupt", name, err)
		}
	}
}

func TestParseList(t *testing.T) {
	page, err := parseList([]any{"p/c", int64(1), "p/a", "va", "7", "1700000000000", "p/b", "vb", "8", "9223372036854775807"}, 3)
	if err != nil || len(page.Items) != 2 || page.Next != "p/c" || page.Items[1].Key != "p/b" || !page.Items[1].ExpiresAt.IsZero() ||
		string(page.Items[0].Value) != "va" || page.Items[0].Version != 7 {
		t.Errorf("parseList = %+v, %v", page, err)
	}
	if page, err := parseList([]any{"p/c", int64(0)}, 3); err != nil || len(page.Items) != 0 || page.Next != "" {
		t.Errorf("parseList of an empty last page = %+v, %v", page, err)
	}
	for name, res := range map[string][]any{
		"empty":           {},
		"no flag":         {"p/c"},
		"ragged":          {"p/c", int64(0), "p/a", "va", "7"},
		"more than limit": {"p/c", int64(0), "a", "v", "1", "1", "b", "v", "1", "1"},
		"key not string":  {"p/c", int64(0), int64(3), "v", "1", "1"},
		"corrupt record":  {"p/c", int64(0), "a", "v", "x", "1"},
		"flag not int":    {"p/c", "1"},
	} {
		limit := 1
		if _, err := parseList(res, limit); !errors.Is(err, errCorrupt) {
			t.Errorf("%s: error = %v, want errCorrupt", name, err)
		}
	}
}
