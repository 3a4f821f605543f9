package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// TestBootstrapSizeBudget: the Lambda bootstrap (mk/lambda.mk's LAMBDA_TAGS, what make
// build-ControllerFunction builds) stays within 1.5x the size of an aws-lambda-go hello world,
// both stripped linux/amd64 binaries as scripts/sizes builds them (docs/observability.md). A
// ratio of two builds by the same toolchain: no machine makes it flaky. It fails when a change
// links something new into the bootstrap; scripts/sizes and go tool nm -size say what.
func TestBootstrapSizeBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries")
	}
	mk, err := os.ReadFile("../../mk/lambda.mk")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^LAMBDA_TAGS \?= (\S+)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("no LAMBDA_TAGS in mk/lambda.mk")
	}
	dir := t.TempDir()
	size := func(name, tags, pkg string) int64 {
		out := filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-tags", tags, "-o", out, pkg)
		cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
		fi, err := os.Stat(out)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	bootstrap := size("bootstrap", string(m[1]), ".")
	hello := size("hello", "lambda.norpc", "../../scripts/bench-lambda/hello")
	ratio := float64(bootstrap) / float64(hello)
	t.Logf("bootstrap %d bytes, hello world %d bytes: %.3fx", bootstrap, hello, ratio)
	if ratio > 1.5 {
		t.Errorf("the Lambda bootstrap is %.3fx an aws-lambda-go hello world (%d vs %d bytes), over the 1.5x budget", ratio, bootstrap, hello)
	}
}
