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
	var format outputFlag
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the groups with members or committed offsets",
		Long: `List the consumer groups that have members or committed offsets, with
their state: empty (offsets, no members), stable (every member owns its
share) or reconciling (partitions moving between members).
--format json writes one JSON array instead (docs/CLI.md).`,
		Example: "  strata group list\n  strata group list --format json",
		Args:    exactArgs(),
		RunE: run(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
			if err := format.check(); err != nil {
				return err
			}
			return f.admin(ctx, func(ctx context.Context, c *client.Client) error {
				groups, err := c.ListGroups(ctx)
				if err != nil {
					return err
				}
				if format == outputJSON {
					out := []groupListDoc{}
					for _, g := range groups {
						out = append(out, groupListDoc{Group: g.GetGroup(), State: g.GetState(), Members: g.GetMembers(), Assignor: g.GetAssignor()})
					}
					return writeJSON(cmd.OutOrStdout(), out)
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
	addOutputFlag(cmd, &format)
	return cmd
}

// groupListDoc is one group in group list --format json.
type groupListDoc struct {
	Group    string `json:"group"`
	State    string `json:"state"`
	Members  int32  `json:"members"`
	Assignor string `json:"assignor"`
}

func newGroupDescribeCommand(f *clientFlags) *cobra.Command {
	var format outputFlag
	cmd := &cobra.Command{
		Use:   "describe GROUP",
		Short: "Show a group's members, their partitions, and the lag of each partition",
		Long: `Show a consumer group: its state and assignor, one row per member (its id,
client id, the address it calls from, and the partitions it owns; a
partition it is giving up is marked -, one waiting for another member to
give it up +), then one row per partition of the topics it reads: the
member that owns it, the committed offset, the log end (high watermark) and
the lag between them.

--format json writes the same as one JSON document (docs/CLI.md).`,
		Example: "  strata group describe billing\n  strata group describe billing --format json",
		Args:    exactArgs("group"),
		RunE: run(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			if err := format.check(); err != nil {
				return err
			}
			return f.admin(ctx, func(ctx context.Context, c *client.Client) error {
				d, err := c.DescribeGroup(ctx, args[0])
				if err != nil {
					return groupError(args[0], err)
				}
				doc := describeGroup(ctx, c, d)
				if format == outputJSON {
					return writeJSON(cmd.OutOrStdout(), doc)
				}
				return printGroup(cmd.OutOrStdout(), doc)
			})
		}),
	}
	addOutputFlag(cmd, &format)
	return cmd
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

// The document of group describe --format json (docs/CLI.md); the text
// form is printed from it too.
type (
	groupDoc struct {
		Group      string              `json:"group"`
		State      string              `json:"state"`
		Assignor   string              `json:"assignor"`
		GroupEpoch int32               `json:"group_epoch"`
		Members    []groupMemberDoc    `json:"members"`
		Partitions []groupPartitionDoc `json:"partitions"`
		// Unreadable are the topics whose partitions could not be
		// described, with why.
		Unreadable []groupUnreadableDoc `json:"unreadable_topics"`
	}
	groupMemberDoc struct {
		MemberID    string   `json:"member_id"`
		ClientID    string   `json:"client_id"`
		Host        string   `json:"host"`
		MemberEpoch int32    `json:"member_epoch"`
		Topics      []string `json:"topics"`
		// Owned are the partitions it owns; Revoking those of them it is
		// giving up; Pending those it waits for another to give up.
		Owned    []tpDoc `json:"owned"`
		Revoking []tpDoc `json:"revoking"`
		Pending  []tpDoc `json:"pending"`
	}
	tpDoc struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
	}
	// groupPartitionDoc: null committed_offset, log_end_offset or lag
	// when not known (nothing committed, the end could not be read).
	groupPartitionDoc struct {
		Topic           string `json:"topic"`
		Partition       int32  `json:"partition"`
		Member          string `json:"member"`
		CommittedOffset *int64 `json:"committed_offset"`
		LogEndOffset    *int64 `json:"log_end_offset"`
		Lag             *int64 `json:"lag"`
	}
	groupUnreadableDoc struct {
		Topic string `json:"topic"`
		Error string `json:"error"`
	}
)

func tpDocs(tps []*stratav1.TopicPartition) []tpDoc {
	out := []tpDoc{}
	for _, tp := range tps {
		out = append(out, tpDoc{Topic: tp.GetTopic(), Partition: tp.GetPartition()})
	}
	return out
}

// describeGroup gathers what group describe shows: the members, and every
// partition of the topics the group reads with its committed offset, log
// end and lag.
func describeGroup(ctx context.Context, c *client.Client, d *stratav1.DescribeGroupResponse) groupDoc {
	doc := groupDoc{Group: d.GetGroup(), State: d.GetState(), Assignor: d.GetAssignor(), GroupEpoch: d.GetGroupEpoch(),
		Members: []groupMemberDoc{}, Partitions: []groupPartitionDoc{}, Unreadable: []groupUnreadableDoc{}}
	owner := map[client.TopicPartition]string{}
	topics := map[string]bool{}
	for _, m := range d.GetMembers() {
		for _, tp := range m.GetOwned() {
			owner[client.TopicPartition{Topic: tp.GetTopic(), Partition: tp.GetPartition()}] = m.GetMemberId()
		}
		for _, t := range m.GetTopics() {
			topics[t] = true
		}
		doc.Members = append(doc.Members, groupMemberDoc{MemberID: m.GetMemberId(), ClientID: m.GetClientId(), Host: m.GetHost(),
			MemberEpoch: m.GetMemberEpoch(), Topics: orEmpty(m.GetTopics()),
			Owned: tpDocs(m.GetOwned()), Revoking: tpDocs(m.GetRevoking()), Pending: tpDocs(m.GetPending())})
	}
	committed := map[client.TopicPartition]int64{}
	for _, o := range d.GetOffsets() {
		committed[client.TopicPartition{Topic: o.GetTopic(), Partition: o.GetPartition()}] = o.GetOffset()
		topics[o.GetTopic()] = true
	}
	for _, topic := range slices.Sorted(maps.Keys(topics)) {
		desc, err := c.DescribeTopic(ctx, topic)
		if err != nil {
			doc.Unreadable = append(doc.Unreadable, groupUnreadableDoc{Topic: topic, Error: explain(err).Error()})
			continue
		}
		for i := range int32(len(desc.GetPartitions())) {
			tp := client.TopicPartition{Topic: topic, Partition: i}
			p := groupPartitionDoc{Topic: topic, Partition: i, Member: owner[tp]}
			end, err := c.ListOffsets(ctx, topic, i, client.Latest())
			if err == nil {
				p.LogEndOffset = &end
			}
			if off, ok := committed[tp]; ok {
				p.CommittedOffset = &off
				if err == nil {
					lag := max(end-off, 0)
					p.Lag = &lag
				}
			}
			doc.Partitions = append(doc.Partitions, p)
		}
	}
	return doc
}

func printGroup(w io.Writer, d groupDoc) error {
	fmt.Fprintf(w, "Group %s: %s, %d members", d.Group, d.State, len(d.Members))
	if d.Assignor != "" {
		fmt.Fprintf(w, ", assignor %s, epoch %d", d.Assignor, d.GroupEpoch)
	}
	fmt.Fprintln(w)

	if len(d.Members) > 0 {
		fmt.Fprintln(w)
		tw := newTable(w)
		fmt.Fprintln(tw, "MEMBER\tCLIENT\tHOST\tEPOCH\tPARTITIONS")
		for _, m := range d.Members {
			var parts []string
			revoking := map[tpDoc]bool{}
			for _, tp := range m.Revoking {
				revoking[tp] = true
			}
			for _, tp := range m.Owned {
				s := fmt.Sprintf("%s/%d", tp.Topic, tp.Partition)
				if revoking[tp] {
					s = "-" + s
				}
				parts = append(parts, s)
			}
			for _, tp := range m.Pending {
				parts = append(parts, fmt.Sprintf("+%s/%d", tp.Topic, tp.Partition))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", m.MemberID, orDash(m.ClientID), orDash(m.Host), m.MemberEpoch, orDash(strings.Join(parts, " ")))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	fmt.Fprintln(w)
	tw := newTable(w)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tMEMBER\tCOMMITTED\tLOG-END\tLAG")
	// By topic, the unreadable ones among the others as before.
	unreadable := map[string]bool{}
	for _, u := range d.Unreadable {
		unreadable[u.Topic] = true
	}
	byTopic := map[string][]groupPartitionDoc{}
	for _, p := range d.Partitions {
		byTopic[p.Topic] = append(byTopic[p.Topic], p)
	}
	for _, topic := range slices.Sorted(maps.Keys(mergeKeys(byTopic, unreadable))) {
		if unreadable[topic] {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\n", topic)
			continue
		}
		for _, p := range byTopic[topic] {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", p.Topic, p.Partition, orDash(p.Member), optInt(p.CommittedOffset), optInt(p.LogEndOffset), optInt(p.Lag))
		}
	}
	return tw.Flush()
}

// mergeKeys is the set of keys of a and b.
func mergeKeys(a map[string][]groupPartitionDoc, b map[string]bool) map[string]bool {
	out := maps.Clone(b)
	for k := range a {
		out[k] = true
	}
	return out
}

// optInt is the number, or "-" when not known.
func optInt(v *int64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
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
