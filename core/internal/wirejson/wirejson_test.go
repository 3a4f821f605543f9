package wirejson

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"unicode/utf8"
)

var samples = []string{
	`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `1.5e-7`, `-12.5E+3`, `"a"`, `""`,
	` { "a" : [ 1 , 2 , { "b" : null } ] , "c" : "d\"e\\f\/g\b\f\n\r\t\u00e9\ud83d\ude00" } `,
	`{"html":"<a href='x'>&amp;</a>","sep":"` + "\u2028\u2029" + `","uni":"é€😀"}`,
	`{"lone":"\ud800","lowfirst":"\udc00\ud800x","pair":"\uD83D\uDE00"}`,
	`[1,[2,[3,[4]]]]`, `{"a":{"b":{"c":{}}}}`, `1e400`, `123456789012345678901234567890`,
	// invalid
	``, ` `, `{`, `}`, `[1,]`, `{"a":1,}`, `{"a"}`, `{a:1}`, `01`, `1.`, `.5`, `-`, `1e`, `1e+`,
	`+1`, `tru`, `nul`, `"abc`, `"\x"`, `"\u12"`, `"\u12G4"`, "\"a\tb\"", "\"\x01\"", `[1 2]`,
	`{"a":1 "b":2}`, `1 2`, `"` + "\xff" + `"`, `"` + "\xed\xa0\x80" + `"`, `"` + "\xc3" + `"`,
	"\xef\xbb\xbf{}", `[` + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth+1),
	strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth),
	`{"a":"b"}x`, `nullx`, `[true false]`,
}

func TestValidMatchesEncodingJSON(t *testing.T) {
	for _, s := range samples {
		checkValid(t, []byte(s))
	}
}

func checkValid(t *testing.T, data []byte) {
	t.Helper()
	want := json.Valid(data) && utf8.Valid(data)
	if got := Valid(data); got != want {
		t.Fatalf("Valid(%q) = %v, want %v", trunc(data), got, want)
	}
	out, err := AppendCompact([]byte("prefix"), data, true)
	if (err == nil) != want {
		t.Fatalf("AppendCompact(%q) error %v, want valid=%v", trunc(data), err, want)
	}
	if !want {
		if string(out) != "prefix" {
			t.Fatalf("AppendCompact(%q) changed dst on error: %q", trunc(data), out)
		}
		return
	}
	// encoding/json writes a json.RawMessage compacted and HTML-escaped: the same bytes.
	v1, err := json.Marshal(json.RawMessage(data))
	if err != nil {
		t.Fatalf("json.Marshal(%q): %v", trunc(data), err)
	}
	if string(out) != "prefix"+string(v1) {
		t.Fatalf("AppendCompact(%q, html)\n got %q\nwant %q", trunc(data), out[6:], v1)
	}
	var plain bytes.Buffer
	_ = json.Compact(&plain, data)
	if out, _ := AppendCompact(nil, data, false); !bytes.Equal(out, plain.Bytes()) {
		t.Fatalf("AppendCompact(%q)\n got %q\nwant %q", trunc(data), out, plain.Bytes())
	}
	checkReaders(t, out)
	checkReaders(t, data)
}

// checkReaders compares Members, Elements, Kind and Unquote with encoding/json on valid data.
func checkReaders(t *testing.T, data []byte) {
	t.Helper()
	switch Kind(data) {
	case '{':
		var want map[string]json.RawMessage
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		got := map[string]json.RawMessage{}
		text := NewText(data)
		for name, v := range Members(data) {
			s, ok := Unquote(name)
			if !ok || string(Name(name)) != s {
				t.Fatalf("member name %q: Unquote %q, Name %q", name, s, Name(name))
			}
			got[s] = v
			if Kind(v) == '"' { // a string read as a slice of the document's text
				var want string
				_ = json.Unmarshal(v, &want)
				if str, ok := text.String(v); !ok || str != want {
					t.Fatalf("Text.String(%q) = %q, want %q", v, str, want)
				}
			}
		}
		if len(got) != len(want) {
			t.Fatalf("Members(%q): %d members, want %d", trunc(data), len(got), len(want))
		}
		for k, v := range want {
			if !bytes.Equal(bytes.TrimSpace(v), got[k]) {
				t.Fatalf("Members(%q)[%q] = %q, want %q", trunc(data), k, got[k], v)
			}
		}
	case '[':
		var want []json.RawMessage
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		i := 0
		for v := range Elements(data) {
			if i >= len(want) || !bytes.Equal(bytes.TrimSpace(want[i]), v) {
				t.Fatalf("Elements(%q)[%d] = %q", trunc(data), i, v)
			}
			i++
		}
		if i != len(want) {
			t.Fatalf("Elements(%q): %d elements, want %d", trunc(data), i, len(want))
		}
	case '"':
		var want string
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		if got, ok := Unquote(bytes.TrimSpace(data)); !ok || got != want {
			t.Fatalf("Unquote(%q) = %q, want %q", data, got, want)
		}
	}
}

func trunc(b []byte) []byte {
	if len(b) > 80 {
		return b[:80]
	}
	return b
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `q"b\s`, "\x00\x01\x08\x0c\n\r\t\x1f\x7f", "<script>&</script>",
		"\u2028\u2029", "é€😀", "\xff\xfe", "a\xc3", "\xed\xa0\x80", "/"} {
		want, _ := json.Marshal(s)
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
		}
	}
}

func TestAppendFloatMatchesEncodingJSON(t *testing.T) {
	for _, f := range []float64{0, math.Copysign(0, -1), 1, -1.5, 1e-6, 9.99e-7, 1e20, 1e21, 123456789.125, 1e-9,
		math.MaxFloat64, math.SmallestNonzeroFloat64, 0.1, 2.5e-310} {
		want, _ := json.Marshal(f)
		if got, ok := AppendFloat(nil, f, 64); !ok || string(got) != string(want) {
			t.Errorf("AppendFloat(%g) = %s, want %s", f, got, want)
		}
		want32, err := json.Marshal(float32(f))
		got, ok := AppendFloat(nil, float64(float32(f)), 32)
		if ok != (err == nil) {
			t.Errorf("AppendFloat(float32 %g): ok %v, encoding/json error %v", f, ok, err)
		} else if ok && string(got) != string(want32) {
			t.Errorf("AppendFloat(float32 %g) = %s, want %s", f, got, want32)
		}
	}
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, ok := AppendFloat(nil, f, 64); ok {
			t.Errorf("AppendFloat(%g) accepted", f)
		}
	}
}

func TestValidNumber(t *testing.T) {
	for s, want := range map[string]bool{"0": true, "-0": true, "1.5e+3": true, "12": true, "": false, "-": false,
		"01": false, "1.": false, "1e": false, "+1": false, "1 ": false, "0x1": false, "Infinity": false} {
		if got := ValidNumber(s); got != want {
			t.Errorf("ValidNumber(%q) = %v, want %v", s, got, want)
		}
	}
}

// FuzzRead checks the reader against encoding/json: same verdict on validity (plus strict UTF-8),
// the same compact and HTML-escaped output, the same members, elements and strings.
func FuzzRead(f *testing.F) {
	for _, s := range samples {
		if len(s) < 1000 {
			f.Add([]byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkValid(t, data) })
}

// FuzzAppendString checks string escaping against encoding/json.
func FuzzAppendString(f *testing.F) {
	f.Add("<a>&\u2028\xff\x00\"\\")
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
	})
}
