package broker

// Passing calls on to the controller. Writes to the cluster metadata (topic
// admin, ACLs, offset commits, producer ids) and the consumer groups, which
// the controller coordinates, are the controller's to answer. A broker that
// is not the controller finds out from the metadata group's refusal
// (cluster.NotControllerError, naming the controller) and makes the same
// call of the controller, through Peers.Controller, so every front end's
// clients can call any broker. The rules:
//
//   - One hop only. The controller serves a passed-on call with a context
//     marked Forwarded, and a broker never passes on such a call again: if
//     the controller moved meanwhile, the refusal goes back to the client,
//     which retries.
//   - The caller is checked twice. The broker's front end has authorized
//     the call; the controller authorizes it again as the same principal
//     (security.PrincipalFrom), which the transport names on the call. Only
//     a broker may name another principal (broker.Auth.Authenticate), so a
//     broker's certificate forwards only for a named client.
//   - The caller's host (group members' host, shown by describe) travels
//     with a heartbeat for display; nothing trusts it.
//   - Errors come back as the controller's *Error, with its reason,
//     message and metadata.
//   - A call that changes the metadata returns once this broker has
//     applied the change too (awaitApplied), as when it is the controller:
//     a topic created through it is ready for produce here.

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/security"
)

// ControllerClient makes calls of the controller on behalf of a caller of
// this broker. Each method is the Broker method of the same name, as the
// controller answers it; the principal and, for heartbeats, the caller's
// host come from ctx and the heartbeat.
type ControllerClient interface {
	CreateTopic(ctx context.Context, name string, partitions, replicationFactor int32, overrides map[string]string) (TopicDescription, error)
	DeleteTopic(ctx context.Context, name string) error
	AlterTopicConfig(ctx context.Context, name string, set map[string]string, del []string) (TopicDescription, error)
	AddPartitions(ctx context.Context, name string, count int32, assignment [][]int32) (TopicDescription, error)
	// RestoreTopic is RestoreTopicCopy when rc.Copies(), else RestoreTopic.
	RestoreTopic(ctx context.Context, name, id string, replicationFactor int32, rc RestoreCopy) (TopicDescription, error)
	CommitOffsets(ctx context.Context, group, memberID string, memberEpoch int32, offsets []CommittedOffset) error
	FetchOffsets(ctx context.Context, group string, partitions []TopicPartition) ([]CommittedOffset, error)
	GroupHeartbeat(ctx context.Context, hb Heartbeat) (GroupAnswer, error)
	ListGroups(ctx context.Context) ([]GroupSummary, error)
	DescribeGroup(ctx context.Context, name string) (GroupDescription, error)
	ResetGroupOffsets(ctx context.Context, name string, offsets []CommittedOffset, force bool) (int, error)
	DeleteGroup(ctx context.Context, name string, force bool) (int, error)
	InitProducer(ctx context.Context) (id int64, epoch int16, err error)
	AddACLs(ctx context.Context, acls []security.ACL) error
	RemoveACLs(ctx context.Context, acls []security.ACL) (int, error)
	SetSCRAMCredential(ctx context.Context, user, mechanism string, salt []byte, iterations int, saltedPassword []byte) error
	DeleteSCRAMCredential(ctx context.Context, user, mechanism string) error
}

type forwardedKey struct{}

// Forwarded marks ctx as a call another broker passed on to this one: it
// is not passed on again.
func Forwarded(ctx context.Context) context.Context {
	return context.WithValue(ctx, forwardedKey{}, true)
}

// IsForwarded reports whether ctx is a call another broker passed on.
func IsForwarded(ctx context.Context) bool {
	v, _ := ctx.Value(forwardedKey{}).(bool)
	return v
}

// controllerFor returns the client to pass a call on with when err is this
// broker's refusal as not the controller and the call may be passed on; nil
// otherwise (err then stands).
func (b *Broker) controllerFor(ctx context.Context, err error) ControllerClient {
	var nc *cluster.NotControllerError
	if err == nil || !errors.As(err, &nc) || nc.ControllerID < 0 || nc.Addr == "" || IsForwarded(ctx) {
		return nil
	}
	if nc.ControllerID == b.id {
		return nil // the metadata lags this broker's own election: retry
	}
	c, cerr := b.peers.Controller(Peer{ID: nc.ControllerID, Addr: nc.Addr})
	if cerr != nil {
		b.log.Debug("cannot reach the controller to pass a call on", "controller", nc.ControllerID, "addr", nc.Addr, "err", cerr)
		return nil
	}
	return c
}

// forward runs call here and, when this broker is not the controller,
// again at the controller.
func forward[T any](b *Broker, ctx context.Context, here func() (T, error), there func(ControllerClient) (T, error)) (T, error) {
	v, err := here()
	if c := b.controllerFor(ctx, err); c != nil {
		return there(c)
	}
	return v, err
}

// awaitApplied waits until this broker's metadata satisfies done and its
// partitions reflect it, or ctx ends (the change is made either way: the
// controller has answered).
func (b *Broker) awaitApplied(ctx context.Context, done func(*cluster.Metadata) bool) {
	for {
		b.mu.RLock()
		ch := b.reconciledCh
		b.mu.RUnlock()
		if m := b.meta.Metadata(); done(m) {
			_ = b.waitReconciled(ctx, m.Version)
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// describeApplied waits until this broker has the topic the controller
// described, then describes it from here (its local figures are this
// broker's, as for any describe); the controller's description if the
// wait ends first.
func (b *Broker) describeApplied(ctx context.Context, d TopicDescription) TopicDescription {
	var t *cluster.TopicInfo
	b.awaitApplied(ctx, func(m *cluster.Metadata) bool {
		var ok bool
		t, ok = m.Topic(d.Name)
		return ok && t.ID == d.ID && maps.Equal(t.Config, d.Overrides)
	})
	if t == nil || t.ID != d.ID || !maps.Equal(t.Config, d.Overrides) {
		return d
	}
	return b.describe(t)
}

// aclsApplied waits until this broker's ACLs hold (present) or lack every
// one of acls, so a list here right after a change shows it.
func (b *Broker) aclsApplied(ctx context.Context, acls []security.ACL, present bool) {
	b.awaitApplied(ctx, func(m *cluster.Metadata) bool {
		in := m.ACLs()
		for _, a := range acls {
			if slices.Contains(in, a) != present {
				return false
			}
		}
		return true
	})
}
