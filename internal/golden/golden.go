// Package golden compares test output with files under testdata/: the one golden-file helper of
// the module and the one -update flag. Run a test with -update to rewrite its golden files from the
// current output (then review the diff before committing). A golden file that the tests of several
// packages compare with (Shared) is rewritten by one of them only.
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
	Bytes(t, name, Indent(t, name, got))
}

// Indent returns got indented as JSON golden files are, with a final newline.
func Indent(t testing.TB, name string, got []byte) []byte {
	t.Helper()
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, got, "", "  "); err != nil {
		t.Fatalf("golden %s: output is not JSON: %v\n%s", name, err, got)
	}
	pretty.WriteByte('\n')
	return pretty.Bytes()
}

// Bytes compares got with testdata/<name> byte for byte.
func Bytes(t testing.TB, name string, got []byte) {
	t.Helper()
	File(t, filepath.Join("testdata", name), got)
}

// File compares got with the golden file at path byte for byte; -update rewrites it.
func File(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		write(t, path, got)
		return
	}
	compare(t, path, got, "run the test with -update")
}

// Shared compares got with the golden file at path, which the tests of several packages compare
// with. Only the package writer names (e.g. "./adapters/httpserver", whose answers are the
// reference) rewrites it, when isWriter is true; with -update, the test of any other package fails
// and names the command that does.
func Shared(t testing.TB, path string, got []byte, writer string, isWriter bool) {
	t.Helper()
	hint := "go test " + writer + " -update"
	switch {
	case *update && isWriter:
		write(t, path, got)
	case *update:
		t.Fatalf("golden %s is shared: only %s rewrites it (%s)", path, writer, hint)
	default:
		compare(t, path, got, hint)
	}
}

func write(t testing.TB, path string, got []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, got, 0o644); err != nil {
		t.Fatal(err)
	}
}

func compare(t testing.TB, path string, got []byte, hint string) {
	t.Helper()
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden %s: %v (%s to create it)", path, err, hint)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("golden %s differs (%s after checking the change)\n--- got\n%s\n--- want\n%s", path, hint, got, want)
	}
}
