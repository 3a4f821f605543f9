// Command svz is the svz command-line tool: `svz init` writes a new agent module, `svz deploy`
// builds, deploys and checks a controller on Lambda, App Runner or Cloud Run, `svz studio register`
// links a controller to Studio, `svz jobs` lists, inspects, retries and cancels background jobs,
// `svz dev` holds local development tools (workspace-grant keys and tokens, a local Studio
// stand-in), `svz version` says which svz this is and `svz completion` writes shell completion
// scripts.
//
//	go install github.com/supervaize/svz/cmd/svz@latest
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "svz:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "svz",
		Short:         "Build, run and deploy Supervaizer v2 controllers written in Go",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newDeployCmd(), newDevCmd(), newInitCmd(), newVersionCmd(), newStudioCmd(), newJobsCmd(os.Getenv))
	return root
}
