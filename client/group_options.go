package client

import (
	"context"
	"errors"
	"time"
)

// GroupOption configures a GroupConsumer (Client.NewGroupConsumer).
type GroupOption func(*groupConfig)

// PartitionsFunc is a rebalance callback: it runs inside Poll, on the
// caller's goroutine, with the partitions concerned, sorted.
type PartitionsFunc func(ctx context.Context, partitions []TopicPartition)

type groupConfig struct {
	sessionTimeout     time.Duration
	rebalanceTimeout   time.Duration
	assignor           string
	autoCommitInterval time.Duration
	startAt            OffsetSpec
	clientID           string
	onAssigned         PartitionsFunc
	onRevoked          PartitionsFunc
	onLost             PartitionsFunc
	consumer           []ConsumerOption
}

func defaultGroupConfig() groupConfig {
	return groupConfig{
		sessionTimeout:     10 * time.Second,
		rebalanceTimeout:   60 * time.Second,
		autoCommitInterval: 5 * time.Second,
		startAt:            Earliest(),
	}
}

func (c *groupConfig) validate() error {
	var errs []error
	if c.sessionTimeout < time.Second || c.sessionTimeout > 5*time.Minute {
		errs = append(errs, configError("WithSessionTimeout", c.sessionTimeout, "between 1s and 5m"))
	}
	if c.rebalanceTimeout < time.Second || c.rebalanceTimeout > 30*time.Minute {
		errs = append(errs, configError("WithRebalanceTimeout", c.rebalanceTimeout, "between 1s and 30m"))
	}
	switch c.assignor {
	case "", "sticky", "range", "roundrobin":
	default:
		errs = append(errs, configError("WithAssignor", c.assignor, `"sticky", "range" or "roundrobin"`))
	}
	if c.autoCommitInterval < 0 {
		errs = append(errs, configError("WithAutoCommitInterval", c.autoCommitInterval, "a duration >= 0 (0 turns auto-commit off)"))
	}
	switch c.startAt.kind {
	case specEarliest, specLatest, specTime, specOffset:
	default:
		errs = append(errs, configError("WithGroupStartAt", c.startAt, "Earliest(), Latest(), AtTime(t) or AtOffset(n)"))
	}
	return errors.Join(errs...)
}

// WithSessionTimeout sets how long the coordinator waits without hearing
// from the member before it gives the member's partitions to others; the
// member, too, gives them up when it has not reached the coordinator for
// that long. Default 10 s; between 1 s and 5 min.
func WithSessionTimeout(d time.Duration) GroupOption {
	return func(c *groupConfig) { c.sessionTimeout = d }
}

// WithRebalanceTimeout sets how long the member may take to give up a
// partition it is asked for (Poll must be called to do so) before the
// coordinator removes it from the group. Default 60 s.
func WithRebalanceTimeout(d time.Duration) GroupOption {
	return func(c *groupConfig) { c.rebalanceTimeout = d }
}

// WithAssignor chooses how the group's partitions are shared: "sticky"
// (the default: balanced, and moving as few partitions as possible),
// "range" (consecutive partitions of each topic) or "roundrobin". The
// group's first member decides; a member asking for another cannot join.
func WithAssignor(name string) GroupOption {
	return func(c *groupConfig) { c.assignor = name }
}

// WithAutoCommitInterval sets how often Poll commits the positions of the
// records earlier Polls returned; revocations and Close commit too. 0 turns
// auto-commit off: the application commits with Commit or CommitOffsets,
// including in its OnRevoked callback. Default 5 s.
func WithAutoCommitInterval(d time.Duration) GroupOption {
	return func(c *groupConfig) { c.autoCommitInterval = d }
}

// WithGroupStartAt sets where a partition the group has never committed
// starts: Earliest() (the default), Latest(), AtTime(t) or AtOffset(n).
func WithGroupStartAt(spec OffsetSpec) GroupOption {
	return func(c *groupConfig) { c.startAt = spec }
}

// WithGroupClientID names the member in DescribeGroup (strata group
// describe), for instance with the host and process that runs it.
func WithGroupClientID(id string) GroupOption {
	return func(c *groupConfig) { c.clientID = id }
}

// WithOnAssigned runs f when partitions are given to this member, after
// they have started and before Poll returns any of their records.
func WithOnAssigned(f PartitionsFunc) GroupOption {
	return func(c *groupConfig) { c.onAssigned = f }
}

// WithOnRevoked runs f when this member must give partitions up, before
// their positions are committed (auto-commit) and they stop: the place to
// finish work on them, or to commit by hand.
func WithOnRevoked(f PartitionsFunc) GroupOption {
	return func(c *groupConfig) { c.onRevoked = f }
}

// WithOnLost runs f when this member learns it had been removed from the
// group: the partitions have stopped already, may belong to other members,
// and cannot be committed.
func WithOnLost(f PartitionsFunc) GroupOption {
	return func(c *groupConfig) { c.onLost = f }
}

// WithConsumerOptions passes options to the consumer that fetches the
// member's partitions (WithFetchMaxBytes, WithMaxBufferedRecords,
// WithResetOnOutOfRange, WithServerDecode).
func WithConsumerOptions(opts ...ConsumerOption) GroupOption {
	return func(c *groupConfig) { c.consumer = append(c.consumer, opts...) }
}
