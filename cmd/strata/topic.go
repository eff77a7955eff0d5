package main

// strata topic: create, list, describe, alter and delete topics.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/internal/human"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

func init() { clientCommands = append(clientCommands, newTopicCommand) }

func newTopicCommand() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:   "topic",
		Short: "Create, list, describe, alter and delete topics",
		Long: `Manage topics. A topic is a named log split into partitions; order holds
within a partition. Per-topic settings keep Kafka's names (retention.ms,
segment.bytes, ...); sizes and durations may be written the human way
("90d", "128MiB"). "strata topic configs" lists every setting with its
default; "strata topic describe" shows a topic's.`,
		Example: `  strata topic create events --partitions 6 --config retention.ms=90d
  strata topic list
  strata topic describe events
  strata topic alter events --set retention.ms=30d --delete segment.bytes
  strata topic add-partitions events --to 12
  strata topic delete events
  strata topic restore events`,
	}
	cmd.AddCommand(newTopicConfigsCommand())
	cmd.RunE = groupRun
	f.register(cmd)
	cmd.AddCommand(newTopicCreateCommand(&f), newTopicListCommand(&f), newTopicDescribeCommand(&f),
		newTopicAlterCommand(&f), newTopicDeleteCommand(&f), newTopicRestoreCommand(&f), newTopicAddPartitionsCommand(&f))
	return cmd
}

func newTopicCreateCommand(f *clientFlags) *cobra.Command {
	var (
		partitions, replication int32
		settings                []string
	)
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a topic",
		Long: `Create a topic and print it as "strata topic describe" does.

--config sets per-topic settings; it may be repeated or given a
comma-separated list. Settings not given keep the broker's defaults.
A list setting keeps its commas: --config cleanup.policy=compact,delete.
Every record a compacted topic (cleanup.policy compact) takes needs a key;
with remote storage its objects in the bucket are compacted too.`,
		Example: `  strata topic create demo --partitions 3
  strata topic create orders -p 12 -r 3
  strata topic create audit --replication-factor 3 --config retention.ms=-1
  strata topic create clicks --config retention.ms=7d,segment.bytes=256MiB
  strata topic create users --config cleanup.policy=compact`,
		Args: exactArgs("name"),
		RunE: run(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			if partitions < 1 {
				return usageErrorf("--partitions %d: want at least 1", partitions)
			}
			if replication < 0 {
				return usageErrorf("--replication-factor %d: want at least 1, or 0 for the broker's default", replication)
			}
			cfg, err := parseKeyValues("--config", settings)
			if err != nil {
				return err
			}
			return f.admin(ctx, func(ctx context.Context, c *client.Client) error {
				desc, err := c.CreateTopic(ctx, args[0], partitions, replication, cfg)
				if err != nil {
					return err
				}
				return printTopic(cmd.OutOrStdout(), desc)
			})
		}),
	}
	cmd.Flags().Int32VarP(&partitions, "partitions", "p", 1, "number of partitions")
	cmd.Flags().Int32VarP(&replication, "replication-factor", "r", 0, "replicas of each partition (0: the broker's default)")
	cmd.Flags().StringArrayVar(&settings, "config", nil, "a topic setting as key=value (repeatable, or comma-separated)")
	return cmd
}

func newTopicListCommand(f *clientFlags) *cobra.Command {
	var format outputFlag
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List topics with their partitions and replication factor",
		Long:    "List topics with their partitions and replication factor, by name.\n--format json writes one JSON array instead (docs/CLI.md).",
		Example: "  strata topic list\n  strata topic list --format json",
		Args:    exactArgs(),
		RunE: run(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
			if err := format.check(); err != nil {
				return err
			}
			return f.admin(ctx, func(ctx context.Context, c *client.Client) error {
				topics, err := c.ListTopics(ctx)
				if err != nil {
					return err
				}
				sort.Slice(topics, func(i, j int) bool { return topics[i].GetName() < topics[j].GetName() })
				if format == outputJSON {
					return writeJSON(cmd.OutOrStdout(), topicListJSON(topics))
				}
				tw := newTable(cmd.OutOrStdout())
				fmt.Fprintln(tw, "NAME\tPARTITIONS\tREPLICATION")
				for _, t := range topics {
					fmt.Fprintf(tw, "%s\t%d\t%d\n", t.GetName(), t.GetPartitions(), t.GetReplicationFactor())
				}
				return tw.Flush()
			})
		}),
	}
	addOutputFlag(cmd, &format)
	return cmd
}

func newTopicDescribeCommand(f *clientFlags) *cobra.Command {
	var format outputFlag
	cmd := &cobra.Command{
		Use:   "describe NAME",
		Short: "Show a topic's id, settings and partitions",
		Long: `Show a topic: its id, every setting in force (raw value, human form, and
*override where the topic sets it rather than inheriting the default), then
one row per partition: leader, leader epoch, replicas, in-sync replicas, log
start offset (the first readable, in either tier), high watermark, log end
offset, then the tiers as the answering broker sees them (zero where it holds
no replica): where the local log starts, its bytes and segments on disk, the
bytes and segments in the object store, the sealed data still waiting for
upload, and RECOVERY-POINT: the offset up to which the object store holds
the partition (what a restore from the bucket alone brings back) and, from
the partition's leader, how long the oldest acknowledged record not yet there
has waited ("current" when none waits; remote.max.lag.ms bounds it). A broker
that has not yet read a partition's cold tier since it started shows
"loading" in the columns that depend on it, rather than figures of the local
log alone.

--format json writes the same as one JSON document (docs/CLI.md).

The topic settings, with their built-in defaults (a broker's topic_defaults
may change them; "strata topic configs" lists them too):

` + topicSettingsText(),
		Example: "  strata topic describe demo\n  strata topic describe demo --format json",
		Args:    exactArgs("name"),
		RunE: run(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			if err := format.check(); err != nil {
				return err
			}
			return f.admin(ctx, func(ctx context.Context, c *client.Client) error {
				desc, err := c.DescribeTopic(ctx, args[0])
				if err != nil {
					return topicError(args[0], err)
				}
				if format == outputJSON {
					return writeJSON(cmd.OutOrStdout(), topicJSON(desc))
				}
				return printTopic(cmd.OutOrStdout(), desc)
			})
		}),
	}
	addOutputFlag(cmd, &format)
	return cmd
}

func newTopicAlterCommand(f *clientFlags) *cobra.Command {
	var set, del []string
	cmd := &cobra.Command{
		Use:   "alter NAME",
		Short: "Change a topic's settings",
		Long: `Change a topic's settings; they take effect without a restart. --set
gives a setting a value, --delete returns it to the default. Both may be
repeated or given a comma-separated list. Prints the settings after the
change.

For a topic with a cold tier the command returns once every partition's
manifest in the object store records the change, so that a restore from the
bucket brings the new settings back. If that takes longer than --timeout (the
store is down, a partition has no leader), it fails naming the partitions
whose manifests lack the change: the change is in force all the same, and
running the command again waits for the bucket again.`,
		Example: `  strata topic alter demo --set retention.ms=90d
  strata topic alter demo --set retention.bytes=500GiB,segment.ms=1h --delete flush.policy`,
		Args: exactArgs("name"),
		RunE: run(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			setMap, err := parseKeyValues("--set", set)
			if err != nil {
				return err
			}
			delKeys := splitList(del)
			if len(setMap) == 0 && len(delKeys) == 0 {
				return usageErrorf("nothing to change: give --set key=value or --delete key")
			}
			for _, k := range delKeys {
				if _, ok := setMap[k]; ok {
					return usageErrorf("%s is both set and deleted", k)
				}
			}
			return f.admin(ctx, func(ctx context.Context, c *client.Client) error {
				desc, err := c.AlterTopicConfig(ctx, args[0], setMap, delKeys)
				if err != nil {
					return topicError(args[0], err)
				}
				tw := newTable(cmd.OutOrStdout())
				printSettings(tw, desc)
				return tw.Flush()
			})
		}),
	}
	cmd.Flags().StringArrayVar(&set, "set", nil, "set a setting, key=value (repeatable, or comma-separated)")
	cmd.Flags().StringArrayVar(&del, "delete", nil, "return a setting to its default (repeatable, or comma-separated)")
	return cmd
}

func newTopicDeleteCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a topic and all its data, in both tiers",
		Long: `Delete a topic and all its data: its partitions on every broker and, when
the cluster has an object store, its objects in the bucket, which the
controller deletes in the background once the topic is gone.

There is no undo once those objects are gone: "strata topic restore" brings
a topic back from its objects in the bucket, so it can restore a deleted
topic only while they remain (a cluster without an object store has none;
"strata bucket ls" shows what the bucket still holds).`,
		Example: "  strata topic delete demo",
		Args:    exactArgs("name"),
		RunE: run(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			return f.admin(ctx, func(ctx context.Context, c *client.Client) error {
				if err := c.DeleteTopic(ctx, args[0]); err != nil {
					return topicError(args[0], err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "deleted topic %s\n", args[0])
				return nil
			})
		}),
	}
}

func newTopicRestoreCommand(f *clientFlags) *cobra.Command {
	var id, as, toTime string
	var toOffset int64
	var replication int32
	cmd := &cobra.Command{
		Use:   "restore NAME [--as NEW] [--to-time T | --to-offset P]",
		Short: "Bring a topic back from the object store",
		Long: `Bring a topic back from the cold tier alone, after the brokers that held it
lost their disks: the
topic is created again under the id its objects are stored under, with the
partition count and settings its manifests recorded, and its whole history
replays from the bucket. New records continue its offsets.

A deleted topic can be restored only while its objects remain in the
bucket: "strata topic delete" deletes them too, in the background, so a
restore after a delete finds them only if that deletion has not run or
failed ("strata bucket ls" shows what the bucket holds). Data a topic had
only on local disk, not yet uploaded, is not in the bucket either: the
recovery point (strata topic describe) says up to where a restore reaches.

When the bucket holds several topics of that name (one deleted and created
again), the most recently written is restored unless --id names another.

--as NEW restores into a new topic NEW beside NAME, which may still exist
and keep running (a live NAME is the one copied). --to-time T and
--to-offset P cut every partition's restored log:

  --to-time T    the records before the first one whose timestamp is after
                 T: every record up to and including T (to the millisecond),
                 by the records' own timestamps, as consumers' --from reads
                 them. T is RFC 3339, a date, a date-time without a zone (UTC)
                 or @epoch-milliseconds.
  --to-offset P  the records with offsets below P.

The restored records keep their offsets and timestamps; new records
continue after the cut. A restore with any of these flags is a copy: the
new topic gets its own topic id and its own objects in the bucket (the one
segment the cut falls inside is rewritten to end exactly there), so
retention or deletion of either topic never touches the other's data.
Without --as the cut copy takes the name NAME, which the cluster must no
longer have; the old objects stay in the bucket under the old id until you
delete them (strata bucket ls shows them). A cut that keeps no record at
all (T before the first record, P 0) is refused.`,
		Example: `  strata topic restore events
  strata topic restore events --id 9f2c0d6e8b1a4c7d9e0f1a2b3c4d5e6f
  strata topic restore events --as events-before-deploy --to-time 2026-11-30T14:05:00Z
  strata topic restore events --as events-upto --to-offset 1200000`,
		Args: exactArgs("name"),
		RunE: run(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			var opts []client.RestoreOption
			if as != "" {
				opts = append(opts, client.RestoreAs(as))
			}
			timeSet, offsetSet := cmd.Flags().Changed("to-time"), cmd.Flags().Changed("to-offset")
			if timeSet && offsetSet {
				return usageErrorf("--to-time and --to-offset cut at one point: give one of them")
			}
			if timeSet {
				t, err := parseTime(toTime)
				if err != nil {
					return usageErrorf("--to-time %v", err)
				}
				opts = append(opts, client.RestoreToTime(t))
			}
			if offsetSet {
				if toOffset < 0 {
					return usageErrorf("--to-offset %d: an offset is 0 or more", toOffset)
				}
				opts = append(opts, client.RestoreToOffset(toOffset))
			}
			return f.admin(ctx, func(ctx context.Context, c *client.Client) error {
				desc, err := c.RestoreTopic(ctx, args[0], id, replication, opts...)
				if err != nil {
					// The broker's own words: not found here means not in
					// the bucket, and a live topic is refused as existing.
					return err
				}
				return printTopic(cmd.OutOrStdout(), desc)
			})
		}),
	}
	cmd.Flags().StringVar(&id, "id", "", "topic id to restore when the bucket holds several of that name")
	cmd.Flags().Int32Var(&replication, "replication-factor", 0, "replicas per partition (0: the broker's default)")
	cmd.Flags().StringVar(&as, "as", "", "restore into a new topic of this name (a copy with its own topic id)")
	cmd.Flags().StringVar(&toTime, "to-time", "", "keep the records up to and including this time (RFC 3339, a date, a UTC date-time, @epoch-ms)")
	cmd.Flags().Int64Var(&toOffset, "to-offset", 0, "keep the records with offsets below this one")
	return cmd
}

// splitList flattens repeated flag values that may each be a
// comma-separated list, dropping empty items.
func splitList(values []string) []string {
	var out []string
	for _, v := range values {
		for _, item := range strings.Split(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				out = append(out, item)
			}
		}
	}
	return out
}

// parseKeyValues reads key=value items (repeated flags, each possibly a
// comma-separated list). A key given twice is an error rather than a
// silent choice. A list value keeps its commas: an item without "=" after
// a key=value continues that value, so cleanup.policy=compact,delete is
// one setting, and Kafka's bracketed spelling cleanup.policy=[compact,delete]
// reads the same.
func parseKeyValues(flag string, values []string) (map[string]string, error) {
	out := map[string]string{}
	last := ""
	for _, item := range splitList(values) {
		k, v, ok := strings.Cut(item, "=")
		k = strings.TrimSpace(k)
		if !ok && last != "" {
			out[last] += "," + item
			continue
		}
		if !ok || k == "" {
			return nil, usageErrorf("%s %q: want key=value, such as retention.ms=7d", flag, item)
		}
		if _, dup := out[k]; dup {
			return nil, usageErrorf("%s: %s is given twice", flag, k)
		}
		out[k] = strings.TrimSpace(v)
		last = k
	}
	for k, v := range out {
		if strings.HasPrefix(v, "[") && strings.HasSuffix(v, "]") {
			out[k] = strings.TrimSpace(v[1 : len(v)-1])
		}
	}
	return out, nil
}

// table aligns columns like text/tabwriter and drops the padding that
// empty last cells would leave at the end of lines.
type table struct {
	*tabwriter.Writer
	buf bytes.Buffer
	out io.Writer
}

// newTable is the writer of every table the commands print; Flush writes
// what was buffered.
func newTable(w io.Writer) *table {
	t := &table{out: w}
	t.Writer = tabwriter.NewWriter(&t.buf, 0, 0, 2, ' ', 0)
	return t
}

func (t *table) Flush() error {
	if err := t.Writer.Flush(); err != nil {
		return err
	}
	for line := range strings.Lines(t.buf.String()) {
		if _, err := io.WriteString(t.out, strings.TrimRight(line, " \n")+"\n"); err != nil {
			return err
		}
	}
	t.buf.Reset()
	return nil
}

// printTopic writes a topic description: id, settings, partitions.
func printTopic(w io.Writer, d *stratav1.TopicDescription) error {
	tw := newTable(w)
	fmt.Fprintf(tw, "Topic:\t%s\n", d.GetName())
	fmt.Fprintf(tw, "ID:\t%s\n", d.GetId())
	fmt.Fprintf(tw, "Partitions:\t%d\n", len(d.GetPartitions()))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	printSettings(tw, d)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	fmt.Fprintln(tw, "PARTITION\tLEADER\tEPOCH\tREPLICAS\tISR\tLOG-START\tHIGH-WATERMARK\tLOG-END\tLOCAL-START\tLOCAL-SIZE\tSEGMENTS\tCOLD-SIZE\tCOLD-SEGMENTS\tUPLOAD-LAG\tRECOVERY-POINT")
	parts := slices.Clone(d.GetPartitions())
	sort.Slice(parts, func(i, j int) bool {
		return parts[i].GetMetadata().GetPartition() < parts[j].GetMetadata().GetPartition()
	})
	for _, p := range parts {
		m := p.GetMetadata()
		leader := "none"
		if m.GetLeader() >= 0 {
			leader = strconv.Itoa(int(m.GetLeader()))
		}
		// Until the broker has read the cold tier, the figures that depend
		// on it would be the local log's alone: a log start above the
		// true one, an empty cold tier.
		logStart, coldSize, coldSegs, lag, recovery := "loading", "loading", "loading", "loading", "loading"
		if !p.GetColdLoading() {
			logStart = strconv.FormatInt(p.GetLogStartOffset(), 10)
			coldSize, coldSegs = human.Bytes(p.GetColdBytes()), strconv.Itoa(int(p.GetColdSegments()))
			lag, recovery = uploadLag(p), recoveryPoint(p)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%d\t%s\t%s\t%s\t%s\n",
			m.GetPartition(), leader, m.GetLeaderEpoch(), joinIDs(m.GetReplicas()), joinIDs(m.GetIsr()),
			logStart, p.GetHighWatermark(), p.GetLogEndOffset(), p.GetLocalStartOffset(),
			human.Bytes(p.GetLocalBytes()), p.GetLocalSegments(),
			coldSize, coldSegs, lag, recovery)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range parts {
		// A read-only replica serves what the head it last read lists:
		// say how stale that may be.
		if g := p.GetHeadGeneration(); g > 0 {
			fmt.Fprintf(w, "partition %d: read replica serving manifest head generation %d, read %s ago\n", p.GetMetadata().GetPartition(), g, humanMillis(max(p.GetHeadAgeMs(), 0)))
		}
	}
	for _, p := range parts {
		if e := p.GetTieringError(); e != "" {
			fmt.Fprintf(w, "partition %d: tiering is failing and will retry: %s\n", p.GetMetadata().GetPartition(), e)
		}
	}
	return nil
}

// uploadLag is the sealed bytes and segments not yet in the cold tier.
func uploadLag(p *stratav1.PartitionDescription) string {
	if p.GetUploadLagSegments() == 0 {
		return "0"
	}
	return fmt.Sprintf("%s (%d segments)", human.Bytes(p.GetUploadLagBytes()), p.GetUploadLagSegments())
}

// recoveryPoint is where the cold tier ends (what a restore from the
// bucket alone brings back) and, from the leader, how long the oldest
// acknowledged record not yet there has waited: "1200 (current)",
// "1200 (42s behind)", "none (3s behind)" before the first upload, just
// the offset from a broker that does not lead the partition, "-" where
// there is no cold tier.
func recoveryPoint(p *stratav1.PartitionDescription) string {
	end, lag := p.GetColdEndOffset(), p.GetUploadLagMs()
	at := "none"
	if end >= 0 {
		at = strconv.FormatInt(end, 10)
	}
	switch {
	case lag == 0:
		return at + " (current)"
	case lag > 0:
		return fmt.Sprintf("%s (%s behind)", at, humanMillis(lag))
	case end >= 0:
		return at
	}
	return "-"
}

// humanMillis renders a wait for reading: "250ms", "42s", "3m20s".
func humanMillis(ms int64) string {
	if ms < 1000 {
		return fmt.Sprintf("%dms", ms)
	}
	return (time.Duration(ms) * time.Millisecond).Round(time.Second).String()
}

// printSettings writes one row per setting in force: key, value as stored,
// its human form where that differs, and *override where the topic sets
// it. Known keys come in config.TopicKeys order, unknown ones after.
func printSettings(tw *table, d *stratav1.TopicDescription) {
	fmt.Fprintln(tw, "SETTING\tVALUE\t\t")
	inForce, overrides := d.GetConfig(), d.GetOverrides()
	known := map[string]bool{}
	row := func(key, value, human string) {
		if human == value {
			human = ""
		} else {
			human = "(" + human + ")"
		}
		mark := ""
		if _, ok := overrides[key]; ok {
			mark = "*override"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", key, value, human, mark)
	}
	for _, k := range config.TopicKeys() {
		known[k.Name] = true
		v, ok := inForce[k.Name]
		if !ok {
			if v, ok = overrides[k.Name]; !ok {
				continue
			}
		}
		row(k.Name, v, k.Display(v))
	}
	rest := slices.Sorted(maps.Keys(inForce))
	for k := range overrides {
		if _, ok := inForce[k]; !ok {
			rest = append(rest, k)
		}
	}
	for _, k := range rest {
		if known[k] {
			continue
		}
		v, ok := inForce[k]
		if !ok {
			v = overrides[k]
		}
		row(k, v, v)
	}
}

func joinIDs(ids []int32) string {
	if len(ids) == 0 {
		return "-"
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ",")
}
