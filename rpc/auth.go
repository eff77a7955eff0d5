package rpc

// Authentication and authorization of every call, translated: the rules
// are the broker's (broker/auth.go, broker/authz.go, broker/visibility.go).
// Here a call's credentials are read off the wire (the TLS peer
// certificate, the "authorization: Bearer" header, the principal a broker
// forwards for) and each request message is translated, by its method,
// into what it needs (rules, below); listings are then filtered to what
// the broker says the caller may see.

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/strata-log/strata/broker"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"github.com/strata-log/strata/security"
)

// principalHeader carries, on a call a broker forwards to the controller,
// the principal of the client it forwards for. Only a broker may send it.
const principalHeader = "strata-principal"

// Auth authenticates and authorizes a server's callers. Its fields, but
// Material, configure the broker's rules (broker.Auth), built from them at
// the first call: set them before serving.
type Auth struct {
	// Material is the broker's TLS identity and CA.
	Material *security.Material
	// Tokens admits clients by bearer token; nil admits none that way.
	Tokens *security.Tokens
	// Cluster is the cluster name in brokers' certificates.
	Cluster string
	// Superusers pass every ACL check.
	Superusers []string
	// ACLs returns the ACLs in force (the cluster metadata's).
	ACLs func() []security.ACL
	// Log receives denials, at most one per principal, operation and
	// resource a minute.
	Log *slog.Logger
	// OnDenied, when set, is called with the principal of every request
	// refused by a rule or an ACL (the broker counts them for its metrics;
	// Log's are rate-limited, these are not).
	OnDenied func(principal string)

	once sync.Once
	core *broker.Auth
}

// policy returns the broker's rules, configured by a's fields.
func (a *Auth) policy() *broker.Auth {
	a.once.Do(func() {
		a.core = &broker.Auth{Cluster: a.Cluster, Tokens: a.Tokens, Superusers: a.Superusers,
			ACLs: a.ACLs, Log: a.Log, OnDenied: a.OnDenied}
	})
	return a.core
}

// Policy is the broker's rules as this Auth configures them, for the
// other front ends of the same broker (the Kafka listener), so that every
// listener is held to one copy: one denial log, one count.
func (a *Auth) Policy() *broker.Auth { return a.policy() }

// principal returns who is calling.
func (a *Auth) principal(ctx context.Context) (security.Principal, error) {
	var c broker.Credentials
	if pr, ok := peer.FromContext(ctx); ok {
		if info, ok := pr.AuthInfo.(credentials.TLSInfo); ok && len(info.State.PeerCertificates) > 0 {
			// The handshake has verified the chain (security.ServerConfig).
			c.Cert = info.State.PeerCertificates[0]
		}
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if auth := md.Get("authorization"); len(auth) > 0 {
		// A header that is not "Bearer <token>" holds no token: Token "".
		token, ok := strings.CutPrefix(auth[0], "Bearer ")
		c.TokenGiven = true
		if ok {
			c.Token = token
		}
	}
	if on := md.Get(principalHeader); len(on) > 0 {
		c.OnBehalfOf = on[0]
		if c.OnBehalfOf == "" {
			c.OnBehalfOf = security.AnonymousName
		}
	}
	return a.policy().Authenticate(c)
}

// unary authenticates and authorizes a unary call, then filters what the
// answer lists down to what the caller may see.
func (a *Auth) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	p, err := a.principal(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	if err := a.authorize(p, info.FullMethod, req); err != nil {
		return nil, toStatus(err)
	}
	resp, err := handler(security.WithPrincipal(ctx, p), req)
	if err == nil {
		a.filter(p, resp)
	}
	return resp, err
}

// stream authenticates a streaming call and authorizes each message the
// caller sends on it.
func (a *Auth) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	p, err := a.principal(ss.Context())
	if err != nil {
		return toStatus(err)
	}
	if _, ok := rules[info.FullMethod]; !ok && !openMethod(info.FullMethod) {
		return toStatus(a.policy().NoRule(p, info.FullMethod))
	}
	return handler(srv, &authorizedStream{ServerStream: ss, a: a, p: p, method: info.FullMethod,
		ctx: security.WithPrincipal(ss.Context(), p)})
}

type authorizedStream struct {
	grpc.ServerStream
	a      *Auth
	p      security.Principal
	method string
	ctx    context.Context
}

func (s *authorizedStream) Context() context.Context { return s.ctx }

func (s *authorizedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if err := s.a.authorize(s.p, s.method, m); err != nil {
		return toStatus(err)
	}
	return nil
}

// openMethod reports whether anyone may call method: health checks (load
// balancers and orchestrators ask without credentials) and reflection
// (the schema is public; it serves no data).
func openMethod(method string) bool {
	return strings.HasPrefix(method, "/grpc.health.v1.Health/") ||
		strings.HasPrefix(method, "/grpc.reflection.")
}

// rule translates a request of one method into what it needs of its
// caller (broker.Authorize applies it).
type rule func(req any) broker.Access

// The rules, by full method name: each says what a request needs, in the
// broker's terms.
var rules = map[string]rule{
	"/strata.v1.ProduceService/Produce": func(req any) broker.Access {
		return broker.Needs(broker.TopicNeed(req.(*stratav1.ProduceRequest).GetTopic(), security.OpWrite))
	},
	// Any authenticated principal may get a producer id: it only numbers
	// the writes the principal is then allowed, topic by topic.
	"/strata.v1.ProduceService/InitProducer": authenticated,
	"/strata.v1.FetchService/Fetch": func(req any) broker.Access {
		return broker.Needs(broker.TopicNeed(req.(*stratav1.FetchRequest).GetTopic(), security.OpRead))
	},
	"/strata.v1.FetchService/ListOffsets": func(req any) broker.Access {
		return broker.Needs(broker.TopicNeed(req.(*stratav1.ListOffsetsRequest).GetTopic(), security.OpRead))
	},
	// Listings are filtered to what the caller may see (Auth.filter); a
	// topic asked for by name that the caller may not see is refused, so a
	// client learns why rather than waiting for it to appear.
	"/strata.v1.MetadataService/GetMetadata": func(req any) broker.Access {
		var needs []broker.Need
		for _, t := range req.(*stratav1.GetMetadataRequest).GetTopics() {
			needs = append(needs, broker.TopicNeed(t, broker.OpSee))
		}
		return broker.Needs(needs...)
	},
	"/strata.v1.AdminService/ListTopics": authenticated,
	"/strata.v1.AdminService/DescribeTopic": func(req any) broker.Access {
		return broker.Needs(broker.TopicNeed(req.(*stratav1.DescribeTopicRequest).GetName(), broker.OpSee))
	},
	"/strata.v1.AdminService/CreateTopic": func(req any) broker.Access {
		return broker.Needs(broker.TopicNeed(req.(*stratav1.CreateTopicRequest).GetName(), security.OpAdmin))
	},
	"/strata.v1.AdminService/DeleteTopic": func(req any) broker.Access {
		return broker.Needs(broker.TopicNeed(req.(*stratav1.DeleteTopicRequest).GetName(), security.OpAdmin))
	},
	"/strata.v1.AdminService/AlterTopicConfig": func(req any) broker.Access {
		return broker.Needs(broker.TopicNeed(req.(*stratav1.AlterTopicConfigRequest).GetName(), security.OpAdmin))
	},
	"/strata.v1.AdminService/AddPartitions": func(req any) broker.Access {
		return broker.Needs(broker.TopicNeed(req.(*stratav1.AddPartitionsRequest).GetName(), security.OpAdmin))
	},
	"/strata.v1.AdminService/RestoreTopic": func(req any) broker.Access {
		return broker.Needs(broker.TopicNeed(req.(*stratav1.RestoreTopicRequest).GetName(), security.OpAdmin))
	},
	"/strata.v1.AdminService/CreateACLs": clusterAdmin,
	"/strata.v1.AdminService/DeleteACLs": clusterAdmin,
	"/strata.v1.AdminService/ListACLs":   clusterAdmin,
	// SCRAM credentials for Kafka logins (users.go): cluster admin, like
	// ACLs, since a credential makes a principal.
	"/strata.v1.UserService/SetSCRAMCredential":    clusterAdmin,
	"/strata.v1.UserService/DeleteSCRAMCredential": clusterAdmin,
	"/strata.v1.UserService/ListSCRAMUsers":        clusterAdmin,
	// Any authenticated principal may read the cluster's status: brokers
	// and partition health, as anyone can see in the metadata, with the
	// partitions listed filtered to topics it may see (rpc/status.go).
	"/strata.v1.AdminService/ClusterStatus": authenticated,
	"/strata.v1.OffsetService/CommitOffsets": func(req any) broker.Access {
		r := req.(*stratav1.CommitOffsetsRequest)
		needs := []broker.Need{broker.GroupNeed(r.GetGroup(), security.OpRead)}
		for _, o := range r.GetOffsets() {
			needs = append(needs, broker.TopicNeed(o.GetTopic(), security.OpRead))
		}
		return broker.Needs(needs...)
	},
	"/strata.v1.OffsetService/FetchOffsets": func(req any) broker.Access {
		r := req.(*stratav1.FetchOffsetsRequest)
		needs := []broker.Need{broker.GroupNeed(r.GetGroup(), security.OpRead)}
		for _, tp := range r.GetPartitions() {
			needs = append(needs, broker.TopicNeed(tp.GetTopic(), security.OpRead))
		}
		return broker.Needs(needs...)
	},
	// Consumer groups: a member needs read on its group and on every topic
	// it subscribes to; removing a group's members or offsets by force, or
	// deleting it, needs admin on the group.
	"/strata.v1.GroupService/GroupHeartbeat": func(req any) broker.Access {
		r := req.(*stratav1.GroupHeartbeatRequest)
		needs := []broker.Need{broker.GroupNeed(r.GetGroup(), security.OpRead)}
		for _, t := range r.GetTopics() {
			needs = append(needs, broker.TopicNeed(t, security.OpRead))
		}
		return broker.Needs(needs...)
	},
	"/strata.v1.GroupService/ListGroups": authenticated, // filtered to readable groups
	"/strata.v1.GroupService/DescribeGroup": func(req any) broker.Access {
		return broker.Needs(broker.GroupNeed(req.(*stratav1.DescribeGroupRequest).GetGroup(), security.OpRead))
	},
	"/strata.v1.GroupService/ResetGroupOffsets": func(req any) broker.Access {
		r := req.(*stratav1.ResetGroupOffsetsRequest)
		op := security.OpRead
		if r.GetForce() {
			op = security.OpAdmin
		}
		needs := []broker.Need{broker.GroupNeed(r.GetGroup(), op)}
		for _, o := range r.GetOffsets() {
			needs = append(needs, broker.TopicNeed(o.GetTopic(), security.OpRead))
		}
		return broker.Needs(needs...)
	},
	"/strata.v1.GroupService/DeleteGroup": func(req any) broker.Access {
		return broker.Needs(broker.GroupNeed(req.(*stratav1.DeleteGroupRequest).GetGroup(), security.OpAdmin))
	},
	// The replication plane: brokers only, each speaking for itself.
	"/strata.v1.ReplicationService/Replicate": func(req any) broker.Access {
		return broker.BrokerAs(req.(*stratav1.ReplicateRequest).GetFollowerId(), "follower")
	},
	"/strata.v1.ReplicationService/EndOffsetForEpoch": anyBroker,
	"/strata.v1.ReplicationService/AlterISR": func(req any) broker.Access {
		return broker.BrokerAs(req.(*stratav1.AlterISRRequest).GetLeaderId(), "leader")
	},
	"/strata.v1.ReplicationService/NewLeaderEpoch": func(req any) broker.Access {
		return broker.BrokerAs(req.(*stratav1.NewLeaderEpochRequest).GetLeaderId(), "leader")
	},
	"/strata.v1.ReplicationService/Identify": anyBroker,
}

func authenticated(any) broker.Access { return broker.Access{} }

func clusterAdmin(any) broker.Access { return broker.Needs(broker.ClusterAdmin()) }

func anyBroker(any) broker.Access { return broker.AnyBroker() }

// authorize checks req of method against its rule, with the broker.
func (a *Auth) authorize(p security.Principal, method string, req any) error {
	if openMethod(method) {
		return nil
	}
	r, ok := rules[method]
	if !ok {
		return a.policy().NoRule(p, method)
	}
	return a.policy().Authorize(p, method, r(req))
}

// filter removes from listings what the caller may not see
// (broker.Visibility).
func (a *Auth) filter(p security.Principal, resp any) {
	v := a.policy().VisibleTo(p)
	if v.All() {
		return
	}
	switch r := resp.(type) {
	case *stratav1.ListTopicsResponse:
		r.Topics = slices.DeleteFunc(r.Topics, func(t *stratav1.TopicSummary) bool { return !v.Topic(t.GetName()) })
	case *stratav1.GetMetadataResponse:
		r.Topics = slices.DeleteFunc(r.Topics, func(t *stratav1.TopicMetadata) bool { return !v.Topic(t.GetName()) })
	case *stratav1.ListGroupsResponse:
		r.Groups = slices.DeleteFunc(r.Groups, func(g *stratav1.GroupSummary) bool { return !v.Group(g.GetGroup()) })
	case *stratav1.DescribeGroupResponse:
		r.Offsets = slices.DeleteFunc(r.Offsets, func(o *stratav1.CommittedOffset) bool { return !v.Offset(o.GetTopic()) })
	case *stratav1.FetchOffsetsResponse:
		r.Offsets = slices.DeleteFunc(r.Offsets, func(o *stratav1.CommittedOffset) bool { return !v.Offset(o.GetTopic()) })
	}
}
