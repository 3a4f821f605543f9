package contract

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

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
