package broker

// What a principal may see named in listings: one rule for every listing
// and for the cluster status, whichever front end serves them.
//
//   - A topic, when the principal may do anything at all with it (an ACL
//     grants it read, write or admin): the same permission that lets it
//     describe the topic or ask for its metadata by name (OpSee).
//   - A consumer group, when it may read the group.
//   - A committed offset, when it may read the offset's topic.
//
// Brokers and superusers see everything, and so does a call that carries
// no principal: it comes from inside the broker, or through a front end
// that runs without authentication. A count must not tell what a listing
// hides, so the cluster status counts only what its caller may see
// (ClusterStatus.VisibleTo).

import (
	"context"

	"github.com/strata-log/strata/security"
)

// Visibility says what one caller may see named in listings.
type Visibility struct {
	all  bool
	p    security.Principal
	acls []security.ACL
}

func visibility(p security.Principal, acls []security.ACL) Visibility {
	return Visibility{all: p.Broker || p.Superuser, p: p, acls: acls}
}

// VisibleTo returns what p may see, under the ACLs in force now.
func (a *Auth) VisibleTo(p security.Principal) Visibility { return visibility(p, a.acls()) }

// Visibility returns what the caller of ctx (security.PrincipalFrom) may
// see, under the ACLs in force now; everything when ctx carries no
// principal.
func (b *Broker) Visibility(ctx context.Context) Visibility {
	p, ok := security.PrincipalFrom(ctx)
	if !ok {
		return Visibility{all: true}
	}
	return visibility(p, b.ACLsInForce())
}

// All reports whether the caller sees everything, so a listing need not
// be filtered.
func (v Visibility) All() bool { return v.all }

// Topic reports whether the caller may see that topic exists.
func (v Visibility) Topic(name string) bool {
	return v.all || security.AllowedAny(v.acls, v.p, security.ResourceTopic, name)
}

// Group reports whether the caller may see the consumer group.
func (v Visibility) Group(name string) bool {
	return v.all || security.Allowed(v.acls, v.p, security.ResourceGroup, name, security.OpRead)
}

// Offset reports whether the caller may see an offset committed on topic.
func (v Visibility) Offset(topic string) bool {
	return v.all || security.Allowed(v.acls, v.p, security.ResourceTopic, topic, security.OpRead)
}

// VisibleTo returns s with only the topics v may see in its partition
// counts and lists (the brokers and the cache figures stay: they name no
// topic).
func (s ClusterStatus) VisibleTo(v Visibility) ClusterStatus {
	if v.all {
		return s
	}
	partitions := make(map[string]int, len(s.Partitions))
	for topic, n := range s.Partitions {
		if v.Topic(topic) {
			partitions[topic] = n
		}
	}
	s.Partitions = partitions
	s.UnderReplicated = visiblePartitions(s.UnderReplicated, v)
	s.Offline = visiblePartitions(s.Offline, v)
	var lag []UploadLag
	for _, l := range s.UploadLag {
		if v.Topic(l.Topic) {
			lag = append(lag, l)
		}
	}
	s.UploadLag = lag
	return s
}

func visiblePartitions(ps []PartitionStatus, v Visibility) []PartitionStatus {
	var out []PartitionStatus
	for _, p := range ps {
		if v.Topic(p.Topic) {
			out = append(out, p)
		}
	}
	return out
}
