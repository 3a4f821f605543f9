package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the svz version: module version, source revision, Go version and platform",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, _ := debug.ReadBuildInfo()
			return printVersion(cmd.OutOrStdout(), info)
		},
	}
}

// printVersion prints what the build recorded: the module version (a release such as v0.3.0 when
// installed with go install …@version, "(devel)" for a build from a checkout), the revision and
// time of the source when the build recorded them (-buildvcs), and the toolchain.
func printVersion(w io.Writer, info *debug.BuildInfo) error {
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
	if _, err := fmt.Fprintf(w, "svz %s\n", version); err != nil {
		return err
	}
	if rev := settings["vcs.revision"]; rev != "" {
		if settings["vcs.modified"] == "true" {
			rev += " (modified)"
		}
		fmt.Fprintf(w, "  revision  %s\n", rev)
	}
	if t := settings["vcs.time"]; t != "" {
		fmt.Fprintf(w, "  time      %s\n", t)
	}
	_, err := fmt.Fprintf(w, "  go        %s %s/%s\n", goVersion, runtime.GOOS, runtime.GOARCH)
	return err
}
