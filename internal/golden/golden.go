// Package golden compares test output with files under testdata/. Run a test with -update to
// rewrite its golden files from the current output (then review the diff before committing).
package golden

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/ with the current output")

// JSON compares got, a JSON document, with testdata/<name>. Both are indented the same way
// before comparing, so the files stay readable while member order and values must match exactly.
func JSON(t testing.TB, name string, got []byte) {
	t.Helper()
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, got, "", "  "); err != nil {
		t.Fatalf("golden %s: output is not JSON: %v\n%s", name, err, got)
	}
	pretty.WriteByte('\n')
	Bytes(t, name, pretty.Bytes())
}

// Bytes compares got with testdata/<name> byte for byte.
func Bytes(t testing.TB, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden %s: %v (run the test with -update to create it)", name, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("golden %s differs (run with -update after checking the change)\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}
