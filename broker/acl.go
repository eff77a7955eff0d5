package broker

// ACL admin. ACLs live in the cluster metadata, so writes go through the
// controller like topic admin; a broker that is not the controller passes
// them on to it (controller.go) and returns once it has applied them too.
// Reads are local: every broker holds the whole metadata.

import (
	"context"
	"errors"
	"slices"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/security"
)

// AddACLs stores ACLs after those already stored; one that is stored
// already is skipped, so a retried call is harmless. All are stored or
// none: an invalid ACL, or more than cluster.MaxACLs in all, refuses the
// call with INVALID_REQUEST. On success the ACLs are in force on the
// controller; the other brokers apply them as the metadata reaches them.
func (b *Broker) AddACLs(ctx context.Context, acls []security.ACL) error {
	_, err := forward(b, ctx, func() (struct{}, error) {
		return struct{}{}, b.addACLs(ctx, acls)
	}, func(c ControllerClient) (struct{}, error) {
		if err := c.AddACLs(ctx, acls); err != nil {
			return struct{}{}, err
		}
		b.aclsApplied(ctx, acls, true)
		return struct{}{}, nil
	})
	return err
}

func (b *Broker) addACLs(ctx context.Context, acls []security.ACL) error {
	return b.role.addACLs(ctx, acls)
}

func (b clusterMember) addACLs(ctx context.Context, acls []security.ACL) error {
	if err := checkACLs(acls); err != nil {
		return err
	}
	if err := b.meta.AddACLs(ctx, acls); err != nil {
		return aclError(err)
	}
	return nil
}

// RemoveACLs removes the stored ACLs equal to those given and returns how
// many it removed; one that is not stored is not an error. An invalid ACL
// refuses the call with INVALID_REQUEST and removes nothing.
func (b *Broker) RemoveACLs(ctx context.Context, acls []security.ACL) (int, error) {
	return forward(b, ctx, func() (int, error) {
		return b.removeACLs(ctx, acls)
	}, func(c ControllerClient) (int, error) {
		n, err := c.RemoveACLs(ctx, acls)
		if err == nil {
			b.aclsApplied(ctx, acls, false)
		}
		return n, err
	})
}

func (b *Broker) removeACLs(ctx context.Context, acls []security.ACL) (int, error) {
	return b.role.removeACLs(ctx, acls)
}

func (b clusterMember) removeACLs(ctx context.Context, acls []security.ACL) (int, error) {
	if err := checkACLs(acls); err != nil {
		return 0, err
	}
	n, err := b.meta.RemoveACLs(ctx, acls)
	if err != nil {
		return 0, aclError(err)
	}
	return n, nil
}

// ACLs returns the stored ACLs in the order they were added, only those
// whose principal is exactly principal when it is not empty ("*" gives the
// ACLs granted to every principal, not every ACL). The slice is the
// caller's.
func (b *Broker) ACLs(principal string) []security.ACL {
	return b.role.acls(principal)
}

func (b clusterMember) acls(principal string) []security.ACL {
	all := b.meta.Metadata().ACLs()
	if principal == "" {
		return slices.Clone(all)
	}
	out := []security.ACL{}
	for _, a := range all {
		if a.Principal == principal {
			out = append(out, a)
		}
	}
	return out
}

// checkACLs refuses a call that names no ACL: a client bug more likely
// than an intent. Each ACL's own rules are the cluster's to check (before
// it asks for the controller, so a bad call is answered where it arrives
// rather than forwarded).
func checkACLs(acls []security.ACL) error {
	if len(acls) == 0 {
		return refuse(ReasonInvalidRequest, nil, "no ACLs given: name at least one")
	}
	return nil
}

// aclError translates the metadata group's refusals of an ACL change.
func aclError(err error) error {
	switch {
	case errors.Is(err, cluster.ErrInvalidACL):
		return refuse(ReasonInvalidRequest, err, "%v", err)
	case errors.Is(err, cluster.ErrTooManyACLs):
		return refuse(ReasonInvalidRequest, err, "%v", err).with("limit", itoa(cluster.MaxACLs))
	}
	return clusterError(err)
}

// ACLsInForce returns the ACLs every request is checked against, without
// copying them: the slice is shared and must not be changed.
func (b *Broker) ACLsInForce() []security.ACL {
	return b.role.aclsInForce()
}

func (b clusterMember) aclsInForce() []security.ACL {
	return b.meta.Metadata().ACLs()
}
