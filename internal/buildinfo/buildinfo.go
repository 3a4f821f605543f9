// Package buildinfo holds the version and revision a build stamps into a binary
// (-ldflags '-X github.com/supervaize/svz/internal/buildinfo.version=… -X ….revision=…'), as the
// Makefile's builds and mk/lambda.mk's do (mk/stamp.mk). A build without them (go run, go install,
// sam build's copy of the source without .git) leaves both empty; callers then fall back to what
// Go recorded (runtime/debug.ReadBuildInfo).
package buildinfo

// Written by the linker only; never changed at run time.
var (
	version  string
	revision string
)

// Version is the stamped version (git describe in the Makefile's builds), or "".
func Version() string { return version }

// Revision is the stamped source revision (the commit hash), or "".
func Revision() string { return revision }
