package checkpoint

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestCanonicalMatchesPython: the context hash is the reference's, byte for byte. The cases of
// testdata/canonical.json were produced by Python itself (testdata/canonical.py):
// json.dumps(json.loads(in), sort_keys=True, separators=(",", ":")) and its SHA-256.
func TestCanonicalMatchesPython(t *testing.T) {
	b, err := os.ReadFile("testdata/canonical.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct{ In, Out, SHA256 string }
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 10 {
		t.Fatalf("%d cases", len(cases))
	}
	for _, c := range cases {
		got, err := canonicalize([]byte(c.In))
		if err != nil {
			t.Errorf("%s: %v", c.In, err)
			continue
		}
		if string(got) != c.Out {
			t.Errorf("canonical(%s)\n got %s\nwant %s", c.In, got, c.Out)
		}
		if h := contextHash(got); h != c.SHA256 {
			t.Errorf("hash(%s) = %s, want %s", c.In, h, c.SHA256)
		}
	}
}

// TestCanonicalOfGoValues: a Go value (struct field order, HTML characters Go would escape) hashes
// as the same document written by Python.
func TestCanonicalOfGoValues(t *testing.T) {
	type inner struct {
		Z string  `json:"z"`
		A float64 `json:"a"`
	}
	v := struct {
		Op    string `json:"operation"`
		In    inner  `json:"inner"`
		Count int    `json:"count"`
	}{"a<b&c>", inner{"é", 1}, 3}
	got, err := canonicalJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	// Go encodes A as 1, an integer literal: Python would read the same JSON as an int too.
	const want = `{"count":3,"inner":{"a":1,"z":"\u00e9"},"operation":"a<b&c>"}`
	if string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// FuzzCanonical: whatever JSON comes in, the canonical form is valid JSON of the same value,
// canonical again unchanged, ASCII only.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,2.5,-0,1e400,"é\u2028<"]}`, `[{"b":null,"a":true}]`, `"\ud83d\ude00"`, `1E-7`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) {
			return
		}
		out, err := canonicalize([]byte(in))
		if err != nil {
			return // e.g. several values: refused, never mangled
		}
		for _, c := range out {
			if c > '~' || (c < ' ') {
				t.Fatalf("non-ASCII byte in %q", out)
			}
		}
		if strings.Contains(string(out), "Infinity") || strings.Contains(string(out), "NaN") {
			return // Python's extension for overflowing numbers: not JSON
		}
		var a, b any
		if err := json.Unmarshal([]byte(in), &a); err != nil {
			return
		}
		if err := json.Unmarshal(out, &b); err != nil {
			t.Fatalf("canonical form %s is not JSON: %v", out, err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("value changed: %s → %s", in, out)
		}
		again, err := canonicalize(out)
		if err != nil || string(again) != string(out) {
			t.Fatalf("not stable: %s → %s (%v)", out, again, err)
		}
	})
}

// TestPyRepr: the reference's messages quote ids as Python's repr of a str (values from
// Python 3: repr(s)).
func TestPyRepr(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain", `'plain'`},
		{"it's", `"it's"`},
		{`it's "x"`, `'it\'s "x"'`},
		{`"q"`, `'"q"'`},
		{`a\b`, `'a\\b'`},
		{"tab\t\n\r", `'tab\t\n\r'`},
	} {
		if got := pyRepr(tc.in); got != tc.want {
			t.Errorf("pyRepr(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
