package contract

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// update rewrites the golden files of this package: go test ./core/contract -run X -update
var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got (JSON) with testdata/name, indented; -update rewrites the file.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, got, "", "  "); err != nil {
		t.Fatalf("%s: output is not JSON: %v\n%s", name, err, got)
	}
	buf.WriteByte('\n')
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("%s differs from the golden file (run with -update after checking the diff)\ngot:\n%s", name, buf.Bytes())
	}
}

// readTestdata returns testdata/name.
func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// compactJSON returns b without insignificant whitespace.
func compactJSON(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return buf.Bytes()
}

func ptr[T any](v T) *T { return &v }

// readFile returns testdata/name, for fuzz seeds.
func readFile(name string) ([]byte, error) { return os.ReadFile(filepath.Join("testdata", name)) }
