package main

// strata consume --group: print a topic's records as a member of a consumer
// group.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strata-log/strata/client"
)

// consumeAsMember reads the partitions the group gives this member. It
// commits what it printed (never more: --max may stop inside a batch), so
// it commits by hand: every --commit-interval, for partitions it gives up
// before they go, and when it stops.
func consumeAsMember(ctx context.Context, cmd *cobra.Command, f *clientFlags, o *consumeOptions, c *client.Client,
	topic string, from startPosition, format recordFormat) error {
	if _, err := partitionsToRead(ctx, c, f, topic, -1); err != nil {
		return err // the topic must exist: fail fast with its reason
	}
	stderr := cmd.ErrOrStderr()
	next := map[client.TopicPartition]int64{} // positions printed
	var g *client.GroupConsumer
	commit := func(ctx context.Context, tps []client.TopicPartition) error {
		offsets := map[client.TopicPartition]int64{}
		for _, tp := range tps {
			if off, ok := next[tp]; ok {
				offsets[tp] = off
			}
		}
		// Also after Ctrl-C: the positions reached are what to keep.
		cctx, cancel := f.withTimeout(context.WithoutCancel(ctx))
		defer cancel()
		return g.CommitOffsets(cctx, offsets)
	}
	// A committed position that retention has since deleted resumes at
	// --from (earliest for an offset) rather than failing.
	reset := from.spec
	if from.isOffset {
		reset = client.Earliest()
	}
	host, _ := os.Hostname()
	var err error
	g, err = c.NewGroupConsumer(o.group, []string{topic},
		client.WithAutoCommitInterval(0),
		client.WithSessionTimeout(o.session),
		client.WithAssignor(o.assignor),
		client.WithGroupStartAt(from.spec),
		client.WithGroupClientID(fmt.Sprintf("strata-consume@%s/%d", host, os.Getpid())),
		client.WithConsumerOptions(client.WithStopAtEnd(!o.follow), client.WithResetOnOutOfRange(reset),
			client.WithOnFetchRetry(newReconnectNotice(cmd.ErrOrStderr()).fetchRetry)),
		client.WithOnAssigned(func(_ context.Context, tps []client.TopicPartition) {
			fmt.Fprintf(stderr, "%s group %s: assigned %s\n", stamp(), o.group, partitionList(tps))
		}),
		client.WithOnRevoked(func(ctx context.Context, tps []client.TopicPartition) {
			if err := commit(ctx, tps); err != nil {
				fmt.Fprintf(stderr, "strata: commit before giving up %s: %v\n", partitionList(tps), err)
			}
			for _, tp := range tps {
				delete(next, tp)
			}
			fmt.Fprintf(stderr, "%s group %s: revoked %s\n", stamp(), o.group, partitionList(tps))
		}),
		client.WithOnLost(func(_ context.Context, tps []client.TopicPartition) {
			for _, tp := range tps {
				delete(next, tp)
			}
			fmt.Fprintf(stderr, "%s group %s: lost %s (membership expired; joining again)\n", stamp(), o.group, partitionList(tps))
		}),
	)
	if err != nil {
		return err
	}
	closeMember := func() error {
		cctx, cancel := f.withTimeout(context.WithoutCancel(ctx))
		defer cancel()
		return g.Close(cctx)
	}

	out := bufio.NewWriterSize(cmd.OutOrStdout(), 64<<10)
	lastCommit := time.Now()
	var printed int64
	var pollErr error
	for o.max == 0 || printed < o.max {
		// A Poll waits at most until the next commit is due, so a member
		// that caught up still commits what it printed last.
		pctx, cancel := context.WithDeadline(ctx, lastCommit.Add(o.commitEvery))
		recs, err := g.Poll(pctx)
		due := pctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err != nil && !due {
			if !errors.Is(err, io.EOF) && ctx.Err() == nil {
				pollErr = err
			}
			break
		}
		for _, r := range recs {
			format(out, r)
			next[client.TopicPartition{Topic: r.Topic, Partition: r.Partition}] = r.Offset + 1
			printed++
			if o.max > 0 && printed >= o.max {
				break
			}
		}
		// Flush before committing: a commit never covers a record that is
		// not out.
		if err := out.Flush(); err != nil {
			_ = closeMember()
			return fmt.Errorf("write output: %w", err)
		}
		if time.Since(lastCommit) >= o.commitEvery {
			// A member the coordinator no longer knows hears so on its
			// next heartbeat and says "lost"; no need to say it twice.
			if err := commit(ctx, g.Assignment()); err != nil && !errors.Is(err, client.ErrUnknownMember) {
				fmt.Fprintf(stderr, "strata: commit: %v\n", err)
			}
			lastCommit = time.Now()
		}
	}
	if err := out.Flush(); err != nil {
		_ = closeMember()
		return fmt.Errorf("write output: %w", err)
	}
	err = commit(ctx, g.Assignment())
	return errors.Join(pollErr, err, closeMember())
}

// stamp is the time at the head of a membership line on stderr.
func stamp() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000Z") }

func partitionList(tps []client.TopicPartition) string {
	parts := make([]string, len(tps))
	for i, tp := range tps {
		parts[i] = tp.String()
	}
	return strings.Join(parts, " ")
}
