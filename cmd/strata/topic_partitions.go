package main

// strata topic add-partitions: raise a topic's partition count.

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/strata-log/strata/client"
)

func newTopicAddPartitionsCommand(f *clientFlags) *cobra.Command {
	var to int32
	cmd := &cobra.Command{
		Use:   "add-partitions NAME --to N",
		Short: "Raise a topic's partition count",
		Long: `Raise a topic's partition count to N and print the topic as "strata topic
describe" does. The count only grows: partitions are never removed.

Existing partitions, their records and their offsets are untouched; the new
partitions start empty. What changes is where keys go: a record with a key
is written to partition hash(key) mod N, so once producers see the new
count, a key may go to another partition than its earlier records, and
per-key order holds only among the records written after the change.
Consumer groups rebalance to take the new partitions in once they see the
new count; clients see it at their next metadata refresh.`,
		Example: `  strata topic add-partitions events --to 12`,
		Args:    exactArgs("name"),
		RunE: run(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("to") && !cmd.Flags().Changed("count") {
				return usageErrorf("--to is required: the partition count wanted, above the current one")
			}
			if to < 1 {
				return usageErrorf("--to %d: want a partition count above the current one", to)
			}
			return f.admin(ctx, func(ctx context.Context, c *client.Client) error {
				desc, err := c.AddPartitions(ctx, args[0], to)
				if err != nil {
					return err
				}
				return printTopic(cmd.OutOrStdout(), desc)
			})
		}),
	}
	cmd.Flags().Int32Var(&to, "to", 0, "the partition count wanted (more than the topic has)")
	cmd.Flags().Int32Var(&to, "count", 0, "the same as --to")
	return cmd
}
