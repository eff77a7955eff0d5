package main

import (
	"github.com/spf13/cobra"
)

// defaultBroker is where client commands connect unless told otherwise: the
// listen address `strata serve` uses by default.
const defaultBroker = "127.0.0.1:7400"

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "strata",
		Short: "Strata: a commit log with tiered storage",
		Long: `Strata is a distributed, partitioned, append-only commit log. Each partition
keeps its hot tail on local disk and its history in S3-compatible object
storage, so any consumer can replay any offset or point in time.

Run a broker with "strata serve"; the other commands talk to one over gRPC,
except "strata bucket", which reads the object store itself.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// A mistyped command comes here rather than to cobra's own
		// message, so that it is one line with a suggestion.
		Args: cobra.ArbitraryArgs,
		RunE: groupRun,
	}
	root.AddCommand(newServeCommand(), newVersionCommand(), newDevCommand())
	for _, add := range clientCommands {
		root.AddCommand(add())
	}
	for _, add := range storeCommands {
		root.AddCommand(add())
	}
	enableSuggestions(root)
	return root
}

// clientCommands builds the commands that talk to a broker; each file that
// defines one adds itself here.
var clientCommands []func() *cobra.Command

// storeCommands builds the commands that read the object store directly,
// with serve's object_store settings and no broker (bucket); each file that
// defines one adds itself here.
var storeCommands []func() *cobra.Command
