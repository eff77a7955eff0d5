package main

// strata group: list, describe, reset and delete consumer groups.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strata-log/strata/client"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

func init() { clientCommands = append(clientCommands, newGroupCommand) }

func newGroupCommand() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:   "group",
		Short: "List, describe, reset and delete consumer groups",
		Long: `Manage consumer groups. A group's members (strata consume --group, or
client.NewGroupConsumer) share the partitions of the topics they read; the
group's committed offsets say where each partition resumes.`,
		Example: `  strata group list
  strata group describe billing
  strata group reset billing --to 2026-06-01 --dry-run
  strata group reset billing --to earliest --topic orders
  strata group delete billing`,
	}
	cmd.RunE = groupRun
	f.register(cmd)
	cmd.AddCommand(newGroupListCommand(&f), newGroupDescribeCommand(&f), newGroupResetCommand(&f), newGroupDeleteCommand(&f))
	return cmd
}

func newGroupListCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the groups with members or committed offsets",
		Long: `List the consumer groups that have members or committed offsets, with
their state: empty (offsets, no members), stable (every member owns its
share) or reconciling (partitions moving between members).`,
		Example: "  strata group list",
		Args:    exactArgs(),
		RunE: run(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
			return f.admin(ctx, func(ctx context.Context, c *client.Client) error {
				groups, err := c.ListGroups(ctx)
				if err != nil {
					return err
				}
				tw := newTable(cmd.OutOrStdout())
				fmt.Fprintln(tw, "GROUP\tSTATE\tMEMBERS\tASSIGNOR")
				for _, g := range groups {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", g.GetGroup(), g.GetState(), g.GetMembers(), orDash(g.GetAssignor()))
				}
				return tw.Flush()
			})
		}),
	}
}

func newGroupDescribeCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "describe GROUP",
		Short: "Show a group's members, their partitions, and the lag of each partition",
		Long: `Show a consumer group: its state and assignor, one row per member (its id,
client id, the address it calls from, and the partitions it owns; a
partition it is giving up is marked -, one waiting for another member to
give it up +), then one row per partition of the topics it reads: the
member that owns it, the committed offset, the log end (high watermark) and
the lag between them.`,
		Example: "  strata group describe billing",
		Args:    exactArgs("group"),
		RunE: run(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			return f.admin(ctx, func(ctx context.Context, c *client.Client) error {
				d, err := c.DescribeGroup(ctx, args[0])
				if err != nil {
					return groupError(args[0], err)
				}
				return printGroup(ctx, c, cmd.OutOrStdout(), d)
			})
		}),
	}
}

func groupError(group string, err error) error {
	switch {
	case errors.Is(err, client.ErrGroupNotFound):
		return usageErrorf("consumer group %q not found: it has no members and no committed offsets (GROUP_NOT_FOUND)", group)
	case errors.Is(err, client.ErrGroupNotEmpty):
		return usageErrorf("consumer group %q has members: stop them first, or add --force to remove them "+
			"(they join again and start from the new positions) (GROUP_NOT_EMPTY)", group)
	}
	return err
}

func printGroup(ctx context.Context, c *client.Client, w io.Writer, d *stratav1.DescribeGroupResponse) error {
	fmt.Fprintf(w, "Group %s: %s, %d members", d.GetGroup(), d.GetState(), len(d.GetMembers()))
	if d.GetAssignor() != "" {
		fmt.Fprintf(w, ", assignor %s, epoch %d", d.GetAssignor(), d.GetGroupEpoch())
	}
	fmt.Fprintln(w)

	owner := map[client.TopicPartition]string{}
	topics := map[string]bool{}
	if len(d.GetMembers()) > 0 {
		fmt.Fprintln(w)
		tw := newTable(w)
		fmt.Fprintln(tw, "MEMBER\tCLIENT\tHOST\tEPOCH\tPARTITIONS")
		for _, m := range d.GetMembers() {
			var parts []string
			revoking := map[string]bool{}
			for _, tp := range m.GetRevoking() {
				revoking[tpString(tp)] = true
			}
			for _, tp := range m.GetOwned() {
				s := tpString(tp)
				owner[client.TopicPartition{Topic: tp.GetTopic(), Partition: tp.GetPartition()}] = m.GetMemberId()
				if revoking[s] {
					s = "-" + s
				}
				parts = append(parts, s)
			}
			for _, tp := range m.GetPending() {
				parts = append(parts, "+"+tpString(tp))
			}
			for _, t := range m.GetTopics() {
				topics[t] = true
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", m.GetMemberId(), orDash(m.GetClientId()), orDash(m.GetHost()), m.GetMemberEpoch(), orDash(strings.Join(parts, " ")))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	committed := map[client.TopicPartition]int64{}
	for _, o := range d.GetOffsets() {
		committed[client.TopicPartition{Topic: o.GetTopic(), Partition: o.GetPartition()}] = o.GetOffset()
		topics[o.GetTopic()] = true
	}
	fmt.Fprintln(w)
	tw := newTable(w)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tMEMBER\tCOMMITTED\tLOG-END\tLAG")
	for _, topic := range slices.Sorted(maps.Keys(topics)) {
		desc, err := c.DescribeTopic(ctx, topic)
		if err != nil {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\n", topic)
			continue
		}
		for i := range int32(len(desc.GetPartitions())) {
			tp := client.TopicPartition{Topic: topic, Partition: i}
			end, err := c.ListOffsets(ctx, topic, i, client.Latest())
			endS, lag := "-", "-"
			if err == nil {
				endS = fmt.Sprint(end)
			}
			off, ok := committed[tp]
			offS := "-"
			if ok {
				offS = fmt.Sprint(off)
				if err == nil {
					lag = fmt.Sprint(max(end-off, 0))
				}
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", topic, i, orDash(owner[tp]), offS, endS, lag)
		}
	}
	return tw.Flush()
}

func tpString(tp *stratav1.TopicPartition) string {
	return fmt.Sprintf("%s/%d", tp.GetTopic(), tp.GetPartition())
}

type groupResetOptions struct {
	to     string
	topics []string
	dryRun bool
	force  bool
}

func newGroupResetCommand(f *clientFlags) *cobra.Command {
	var o groupResetOptions
	cmd := &cobra.Command{
		Use:   "reset GROUP --to POSITION",
		Short: "Move a group's committed offsets",
		Long: `Set where a consumer group resumes, in every partition of the topics it
has committed (or of the topics named with --topic). --to is earliest,
latest, an offset (it must lie between the partition's log start and log
end), or a time: ` + timeHelp + `, or a duration ago such as 2h or 7d
(the first record at or after it; a time in the future is refused). The
partitions' history may be in either tier.

The plan (current and new offset per partition) is printed first; with
--dry-run nothing else happens. A reset is refused while the group has
members; --force removes them first, and they join again and start from
the new positions.`,
		Example: `  strata group reset billing --to earliest --dry-run
  strata group reset billing --to 2026-06-01 --topic orders
  strata group reset billing --to 12000 --topic orders
  strata group reset billing --to 6h --force`,
		Args: exactArgs("group"),
		RunE: run(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			return f.admin(ctx, func(ctx context.Context, c *client.Client) error {
				return resetGroup(ctx, c, cmd.OutOrStdout(), args[0], &o)
			})
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&o.to, "to", "", "the new position: earliest, latest, an offset, or a time (required)")
	fl.StringSliceVarP(&o.topics, "topic", "t", nil, "reset only these topics (default: every topic the group has committed)")
	fl.BoolVar(&o.dryRun, "dry-run", false, "print the plan and change nothing")
	fl.BoolVar(&o.force, "force", false, "remove the group's members first (they join again)")
	return cmd
}

// resetPlan is one partition's move.
type resetPlan struct {
	tp       client.TopicPartition
	current  int64 // -1: none committed
	next     int64
	from, to int64 // the partition's log start and end
}

func resetGroup(ctx context.Context, c *client.Client, w io.Writer, group string, o *groupResetOptions) error {
	if o.to == "" {
		return usageErrorf("--to is required: earliest, latest, an offset, or a time")
	}
	now := time.Now()
	to, err := parseFrom(o.to, now)
	if err != nil {
		return usageErrorf("--to: %v", strings.TrimPrefix(err.Error(), "--from "))
	}
	if !to.at.IsZero() && to.at.After(now) {
		return usageErrorf("--to %s is in the future (now is %s): no record can be there yet", to.at.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	committed, err := c.FetchOffsets(ctx, group)
	if err != nil {
		return err
	}
	topics := o.topics
	if len(topics) == 0 {
		seen := map[string]bool{}
		for tp := range committed {
			seen[tp.Topic] = true
		}
		topics = slices.Sorted(maps.Keys(seen))
		if len(topics) == 0 {
			return usageErrorf("consumer group %q has no committed offsets: name the topics to reset with --topic", group)
		}
	}
	var plan []resetPlan
	for _, topic := range topics {
		desc, err := c.DescribeTopic(ctx, topic)
		if err != nil {
			return topicError(topic, err)
		}
		for i := range int32(len(desc.GetPartitions())) {
			tp := client.TopicPartition{Topic: topic, Partition: i}
			p := resetPlan{tp: tp, current: -1}
			if off, ok := committed[tp]; ok {
				p.current = off
			}
			if p.from, err = c.ListOffsets(ctx, topic, i, client.Earliest()); err != nil {
				return err
			}
			if p.to, err = c.ListOffsets(ctx, topic, i, client.Latest()); err != nil {
				return err
			}
			switch {
			case to.isOffset:
				if to.offset < p.from || to.offset > p.to {
					return usageErrorf("--to %d is outside %s, which holds offsets %d to %d (OFFSET_OUT_OF_RANGE)", to.offset, tp, p.from, p.to)
				}
				p.next = to.offset
			default:
				if p.next, err = c.ListOffsets(ctx, topic, i, to.spec); err != nil {
					return err
				}
			}
			plan = append(plan, p)
		}
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCURRENT\tNEW\tLOG-START\tLOG-END")
	offsets := map[client.TopicPartition]int64{}
	for _, p := range plan {
		cur := "-"
		if p.current >= 0 {
			cur = fmt.Sprint(p.current)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\n", p.tp.Topic, p.tp.Partition, cur, p.next, p.from, p.to)
		offsets[p.tp] = p.next
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if o.dryRun {
		fmt.Fprintln(w, "Dry run: nothing changed.")
		return nil
	}
	removed, err := c.ResetGroupOffsets(ctx, group, offsets, o.force)
	if err != nil {
		return groupError(group, err)
	}
	if removed > 0 {
		fmt.Fprintf(w, "Removed %d members from group %s; they join again from the new positions.\n", removed, group)
	}
	fmt.Fprintf(w, "Reset group %s: %d partitions.\n", group, len(plan))
	return nil
}

func newGroupDeleteCommand(f *clientFlags) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "delete GROUP",
		Short: "Delete a group's committed offsets",
		Long: `Delete a consumer group: its committed offsets are removed. It is refused
while the group has members; --force removes them first.`,
		Example: "  strata group delete billing",
		Args:    exactArgs("group"),
		RunE: run(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			return f.admin(ctx, func(ctx context.Context, c *client.Client) error {
				removed, err := c.DeleteGroup(ctx, args[0], force)
				if err != nil {
					return groupError(args[0], err)
				}
				if removed > 0 {
					fmt.Fprintf(cmd.OutOrStdout(), "Removed %d members.\n", removed)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Deleted group %s.\n", args[0])
				return nil
			})
		}),
	}
	cmd.Flags().BoolVar(&force, "force", false, "remove the group's members first")
	return cmd
}
