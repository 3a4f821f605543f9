//go:build !svz_nolocal

package platform

import (
	"runtime/debug"
	"testing"
)

// TestSVZInstall: the banner's way to get the CLI never says "@latest", which exists only once svz
// is released: the version the agent requires when it is a published one, else a checkout's
// go install; always with where it lands.
func TestSVZInstall(t *testing.T) {
	const onPath = " puts it in $(go env GOPATH)/bin, which must be on your PATH"
	dep := func(version string, replace *debug.Module) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Path: "example.com/my-agent"},
			Deps: []*debug.Module{{Path: "github.com/other/mod", Version: "v1.0.0"}, {Path: svzModule, Version: version, Replace: replace}}}
	}
	checkout := "svz, the CLI: in your svz checkout, go install ./cmd/svz" + onPath
	for name, tc := range map[string]struct {
		info *debug.BuildInfo
		want string
	}{
		"the svz repository": {&debug.BuildInfo{Main: debug.Module{Path: svzModule, Version: "(devel)"}},
			"svz, the CLI: in this svz repository, go install ./cmd/svz" + onPath + " (or go run ./cmd/svz)"},
		"a release":        {dep("v1.4.2", nil), "svz, the CLI: go install github.com/supervaize/svz/cmd/svz@v1.4.2" + onPath},
		"a pseudo-version": {dep("v0.0.0-20261205101010-0123456789ab", nil), "svz, the CLI: go install github.com/supervaize/svz/cmd/svz@v0.0.0-20261205101010-0123456789ab" + onPath},
		"a replace":        {dep("v0.0.0", &debug.Module{Path: "../svz"}), checkout},
		"devel":            {dep("(devel)", nil), checkout},
		"no version":       {dep("", nil), checkout},
		"no svz at all":    {&debug.BuildInfo{Main: debug.Module{Path: "example.com/x"}}, checkout},
		"no build info":    {nil, checkout},
	} {
		if got := svzInstall(tc.info); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", name, got, tc.want)
		}
	}
}
