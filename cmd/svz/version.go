package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/supervaize/svz/internal/buildinfo"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the svz version: module version, source revision, Go version and platform",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, _ := debug.ReadBuildInfo()
			return printVersion(cmd.OutOrStdout(), info, buildinfo.Version(), buildinfo.Revision())
		},
	}
}

// printVersion prints what the build recorded: the version and revision stamped by the Makefile's
// build (make build; mk/stamp.mk), else the module version (a release such as v0.3.0 when
// installed with go install …@version, "(devel)" for a build from a checkout) and the revision
// and time of the source when the build recorded them (-buildvcs); then the toolchain.
func printVersion(w io.Writer, info *debug.BuildInfo, stampedVersion, stampedRevision string) error {
	version, goVersion := "unknown", runtime.Version()
	settings := map[string]string{}
	if info != nil {
		if info.Main.Version != "" {
			version = info.Main.Version
		}
		goVersion = info.GoVersion
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
	}
	if stampedVersion != "" {
		version = stampedVersion
	}
	if _, err := fmt.Fprintf(w, "svz %s\n", version); err != nil {
		return err
	}
	rev := settings["vcs.revision"]
	if rev != "" && settings["vcs.modified"] == "true" {
		rev += " (modified)"
	}
	if stampedRevision != "" {
		rev = stampedRevision
	}
	if rev != "" {
		fmt.Fprintf(w, "  revision  %s\n", rev)
	}
	if t := settings["vcs.time"]; t != "" {
		fmt.Fprintf(w, "  time      %s\n", t)
	}
	_, err := fmt.Fprintf(w, "  go        %s %s/%s\n", goVersion, runtime.GOOS, runtime.GOARCH)
	return err
}
