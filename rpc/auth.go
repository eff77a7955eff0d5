package rpc

// Authentication and authorization of every call. A caller is who its TLS
// client certificate says (a broker when it names broker-<id>.<cluster>, else
// User:<common name>), or who its bearer token belongs to, or anonymous.
// Every request message is then checked against a rule for its method:
// ACLs for clients, the broker role for the replication plane, with the
// broker id a replication message claims held to the certificate's. A
// method without a rule is refused, so a new RPC is closed until someone
// writes down who may call it.

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

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

// Auth authenticates and authorizes a server's callers.
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

	denials denialLog
}

// principal returns who is calling.
func (a *Auth) principal(ctx context.Context) (security.Principal, error) {
	var p security.Principal
	if pr, ok := peer.FromContext(ctx); ok {
		if info, ok := pr.AuthInfo.(credentials.TLSInfo); ok && len(info.State.PeerCertificates) > 0 {
			// The handshake has verified the chain (security.ServerConfig).
			var err error
			if p, err = security.PrincipalOf(info.State.PeerCertificates[0], a.Cluster); err != nil {
				return p, broker.Unauthenticated("%v", err)
			}
		}
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if p.Name == "" {
		if auth := md.Get("authorization"); len(auth) > 0 {
			token, ok := strings.CutPrefix(auth[0], "Bearer ")
			if !ok || a.Tokens == nil {
				return p, broker.Unauthenticated("the authorization header holds no bearer token this broker accepts")
			}
			if p, ok = a.Tokens.Principal(token); !ok {
				return p, broker.Unauthenticated("the bearer token is not known (revoked, or from another cluster)")
			}
		}
	}
	if on := md.Get(principalHeader); len(on) > 0 {
		if !p.Broker {
			return p, broker.Unauthenticated("only a broker may call on behalf of another principal")
		}
		p = security.Principal{Name: on[0]}
	}
	if p.Name == "" {
		p.Name = security.AnonymousName
	}
	p.Superuser = !p.Broker && slices.Contains(a.Superusers, p.Name)
	return p, nil
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
		return toStatus(broker.PermissionDenied("%s may not call %s", p.Name, info.FullMethod))
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

// need is one permission a request requires.
type need struct {
	res  security.ResourceType
	name string
	op   security.Operation
}

// rule says what a request of one method needs; an error refuses it
// outright (a replication message claiming another broker's id).
type rule func(p security.Principal, req any) ([]need, error)

// The rules, by full method name.
var rules = map[string]rule{
	"/strata.v1.ProduceService/Produce": func(_ security.Principal, req any) ([]need, error) {
		return []need{topicNeed(req.(*stratav1.ProduceRequest).GetTopic(), security.OpWrite)}, nil
	},
	// Any authenticated principal may get a producer id: it only numbers
	// the writes the principal is then allowed, topic by topic.
	"/strata.v1.ProduceService/InitProducer": authenticated,
	"/strata.v1.FetchService/Fetch": func(_ security.Principal, req any) ([]need, error) {
		return []need{topicNeed(req.(*stratav1.FetchRequest).GetTopic(), security.OpRead)}, nil
	},
	"/strata.v1.FetchService/ListOffsets": func(_ security.Principal, req any) ([]need, error) {
		return []need{topicNeed(req.(*stratav1.ListOffsetsRequest).GetTopic(), security.OpRead)}, nil
	},
	// Listings are filtered to what the caller may see (Auth.filter); a
	// topic asked for by name that the caller may not see is refused, so a
	// client learns why rather than waiting for it to appear.
	"/strata.v1.MetadataService/GetMetadata": func(_ security.Principal, req any) ([]need, error) {
		var needs []need
		for _, t := range req.(*stratav1.GetMetadataRequest).GetTopics() {
			needs = append(needs, need{security.ResourceTopic, t, opSee})
		}
		return needs, nil
	},
	"/strata.v1.AdminService/ListTopics": authenticated,
	"/strata.v1.AdminService/DescribeTopic": func(_ security.Principal, req any) ([]need, error) {
		return []need{{security.ResourceTopic, req.(*stratav1.DescribeTopicRequest).GetName(), opSee}}, nil
	},
	"/strata.v1.AdminService/CreateTopic": func(_ security.Principal, req any) ([]need, error) {
		return []need{topicNeed(req.(*stratav1.CreateTopicRequest).GetName(), security.OpAdmin)}, nil
	},
	"/strata.v1.AdminService/DeleteTopic": func(_ security.Principal, req any) ([]need, error) {
		return []need{topicNeed(req.(*stratav1.DeleteTopicRequest).GetName(), security.OpAdmin)}, nil
	},
	"/strata.v1.AdminService/AlterTopicConfig": func(_ security.Principal, req any) ([]need, error) {
		return []need{topicNeed(req.(*stratav1.AlterTopicConfigRequest).GetName(), security.OpAdmin)}, nil
	},
	"/strata.v1.AdminService/RestoreTopic": func(_ security.Principal, req any) ([]need, error) {
		return []need{topicNeed(req.(*stratav1.RestoreTopicRequest).GetName(), security.OpAdmin)}, nil
	},
	"/strata.v1.AdminService/CreateACLs": clusterAdmin,
	"/strata.v1.AdminService/DeleteACLs": clusterAdmin,
	"/strata.v1.AdminService/ListACLs":   clusterAdmin,
	// Any authenticated principal may read the cluster's status: brokers
	// and partition health, as anyone can see in the metadata, with the
	// partitions listed filtered to topics it may see (rpc/status.go).
	"/strata.v1.AdminService/ClusterStatus": authenticated,
	"/strata.v1.OffsetService/CommitOffsets": func(_ security.Principal, req any) ([]need, error) {
		r := req.(*stratav1.CommitOffsetsRequest)
		needs := []need{{security.ResourceGroup, r.GetGroup(), security.OpRead}}
		for _, o := range r.GetOffsets() {
			needs = append(needs, topicNeed(o.GetTopic(), security.OpRead))
		}
		return needs, nil
	},
	"/strata.v1.OffsetService/FetchOffsets": func(_ security.Principal, req any) ([]need, error) {
		r := req.(*stratav1.FetchOffsetsRequest)
		needs := []need{{security.ResourceGroup, r.GetGroup(), security.OpRead}}
		for _, tp := range r.GetPartitions() {
			needs = append(needs, topicNeed(tp.GetTopic(), security.OpRead))
		}
		return needs, nil
	},
	// Consumer groups: a member needs read on its group and on every topic
	// it subscribes to; removing a group's members or offsets by force, or
	// deleting it, needs admin on the group.
	"/strata.v1.GroupService/GroupHeartbeat": func(_ security.Principal, req any) ([]need, error) {
		r := req.(*stratav1.GroupHeartbeatRequest)
		needs := []need{{security.ResourceGroup, r.GetGroup(), security.OpRead}}
		for _, t := range r.GetTopics() {
			needs = append(needs, topicNeed(t, security.OpRead))
		}
		return needs, nil
	},
	"/strata.v1.GroupService/ListGroups": authenticated, // filtered to readable groups
	"/strata.v1.GroupService/DescribeGroup": func(_ security.Principal, req any) ([]need, error) {
		return []need{{security.ResourceGroup, req.(*stratav1.DescribeGroupRequest).GetGroup(), security.OpRead}}, nil
	},
	"/strata.v1.GroupService/ResetGroupOffsets": func(_ security.Principal, req any) ([]need, error) {
		r := req.(*stratav1.ResetGroupOffsetsRequest)
		op := security.OpRead
		if r.GetForce() {
			op = security.OpAdmin
		}
		needs := []need{{security.ResourceGroup, r.GetGroup(), op}}
		for _, o := range r.GetOffsets() {
			needs = append(needs, topicNeed(o.GetTopic(), security.OpRead))
		}
		return needs, nil
	},
	"/strata.v1.GroupService/DeleteGroup": func(_ security.Principal, req any) ([]need, error) {
		return []need{{security.ResourceGroup, req.(*stratav1.DeleteGroupRequest).GetGroup(), security.OpAdmin}}, nil
	},
	// The replication plane: brokers only, each speaking for itself.
	"/strata.v1.ReplicationService/Replicate": func(p security.Principal, req any) ([]need, error) {
		return nil, brokerAs(p, req.(*stratav1.ReplicateRequest).GetFollowerId(), "follower")
	},
	"/strata.v1.ReplicationService/EndOffsetForEpoch": func(p security.Principal, _ any) ([]need, error) {
		return nil, brokerAs(p, -1, "")
	},
	"/strata.v1.ReplicationService/AlterISR": func(p security.Principal, req any) ([]need, error) {
		return nil, brokerAs(p, req.(*stratav1.AlterISRRequest).GetLeaderId(), "leader")
	},
	"/strata.v1.ReplicationService/NewLeaderEpoch": func(p security.Principal, req any) ([]need, error) {
		return nil, brokerAs(p, req.(*stratav1.NewLeaderEpochRequest).GetLeaderId(), "leader")
	},
	"/strata.v1.ReplicationService/Identify": func(p security.Principal, _ any) ([]need, error) {
		return nil, brokerAs(p, -1, "")
	},
}

// opSee stands for "any permission at all": enough to learn that a topic
// exists and how it is set up.
const opSee security.Operation = "see"

func topicNeed(name string, op security.Operation) need {
	return need{security.ResourceTopic, name, op}
}

func authenticated(security.Principal, any) ([]need, error) { return nil, nil }

func clusterAdmin(security.Principal, any) ([]need, error) {
	return []need{{security.ResourceCluster, "", security.OpAdmin}}, nil
}

// brokerAs refuses a caller that is not a broker, or (id >= 0) that is a
// broker claiming to be another one.
func brokerAs(p security.Principal, id int32, role string) error {
	if !p.Broker {
		return broker.PermissionDenied("%s may not use the replication service: it is for brokers, which prove their id with their certificate", p.Name).
			With("principal", p.Name)
	}
	if id >= 0 && id != p.BrokerID {
		return broker.PermissionDenied("broker %d's certificate cannot speak as %s %d", p.BrokerID, role, id).
			With("principal", p.Name)
	}
	return nil
}

// authorize checks req of method against the rules and ACLs.
func (a *Auth) authorize(p security.Principal, method string, req any) error {
	if openMethod(method) {
		return nil
	}
	r, ok := rules[method]
	if !ok {
		return broker.PermissionDenied("%s may not call %s", p.Name, method)
	}
	if p.Anonymous() {
		return broker.Unauthenticated("%s needs credentials: a client certificate or a bearer token", method)
	}
	needs, err := r(p, req)
	if err != nil {
		a.denials.note(a.Log, p, method, "")
		if a.OnDenied != nil {
			a.OnDenied(p.Name)
		}
		return err
	}
	if p.Broker || p.Superuser {
		return nil
	}
	acls := a.ACLs()
	for _, n := range needs {
		var ok bool
		if n.op == opSee {
			ok = security.AllowedAny(acls, p, n.res, n.name)
		} else {
			ok = security.Allowed(acls, p, n.res, n.name, n.op)
		}
		if !ok {
			return a.deny(p, n)
		}
	}
	return nil
}

func (a *Auth) deny(p security.Principal, n need) error {
	resource := string(n.res)
	if n.name != "" {
		resource += " " + n.name
	}
	op := string(n.op)
	if n.op == opSee {
		op = "read, write or admin"
	}
	a.denials.note(a.Log, p, op, resource)
	if a.OnDenied != nil {
		a.OnDenied(p.Name)
	}
	hint := fmt.Sprintf("strata acl add --principal %s --%s %s --operation %s", p.Name, n.res, n.name, n.op)
	if n.res == security.ResourceCluster {
		hint = fmt.Sprintf("strata acl add --principal %s --cluster --operation %s", p.Name, n.op)
	} else if n.op == opSee {
		hint = fmt.Sprintf("strata acl add --principal %s --%s %s --operation read", p.Name, n.res, n.name)
	}
	return broker.PermissionDenied("%s may not %s %s: no ACL grants it (an admin can: %s)", p.Name, op, resource, hint).
		With("principal", p.Name).With("operation", op).With("resource", resource)
}

// filter removes from listings what the caller may not see.
func (a *Auth) filter(p security.Principal, resp any) {
	if p.Broker || p.Superuser {
		return
	}
	acls := a.ACLs()
	visible := func(topic string) bool { return security.AllowedAny(acls, p, security.ResourceTopic, topic) }
	switch r := resp.(type) {
	case *stratav1.ListTopicsResponse:
		r.Topics = slices.DeleteFunc(r.Topics, func(t *stratav1.TopicSummary) bool { return !visible(t.GetName()) })
	case *stratav1.GetMetadataResponse:
		r.Topics = slices.DeleteFunc(r.Topics, func(t *stratav1.TopicMetadata) bool { return !visible(t.GetName()) })
	case *stratav1.ListGroupsResponse:
		r.Groups = slices.DeleteFunc(r.Groups, func(g *stratav1.GroupSummary) bool {
			return !security.Allowed(acls, p, security.ResourceGroup, g.GetGroup(), security.OpRead)
		})
	case *stratav1.DescribeGroupResponse:
		r.Offsets = slices.DeleteFunc(r.Offsets, func(o *stratav1.CommittedOffset) bool {
			return !security.Allowed(acls, p, security.ResourceTopic, o.GetTopic(), security.OpRead)
		})
	case *stratav1.FetchOffsetsResponse:
		r.Offsets = slices.DeleteFunc(r.Offsets, func(o *stratav1.CommittedOffset) bool {
			return !security.Allowed(acls, p, security.ResourceTopic, o.GetTopic(), security.OpRead)
		})
	}
}

// denialLog logs a denial once per principal, operation and resource a
// minute: enough to see who is refused what, without letting a client
// that retries in a loop flood the log.
type denialLog struct {
	mu   sync.Mutex
	last map[string]time.Time
}

const denialLogEvery = time.Minute

func (d *denialLog) note(log *slog.Logger, p security.Principal, op, resource string) {
	if log == nil {
		return
	}
	key := p.Name + "\x00" + op + "\x00" + resource
	now := time.Now()
	d.mu.Lock()
	if d.last == nil {
		d.last = map[string]time.Time{}
	}
	if now.Sub(d.last[key]) < denialLogEvery {
		d.mu.Unlock()
		return
	}
	if len(d.last) > 10000 { // many principals: forget the old entries
		for k, t := range d.last {
			if now.Sub(t) >= denialLogEvery {
				delete(d.last, k)
			}
		}
	}
	d.last[key] = now
	d.mu.Unlock()
	log.Warn("request denied", "principal", p.Name, "operation", op, "resource", resource)
}
