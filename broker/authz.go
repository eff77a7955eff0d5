package broker

// Authorization: may principal P make a call that needs operation O on
// resource R. A front end translates each of its calls into an Access (the
// permissions it needs, or that only brokers may make it) and asks
// Auth.Authorize; a call it has no translation for is refused (NoRule), so
// a new call is closed until someone writes down what it needs. The rules,
// in the order they apply:
//
//  1. An anonymous caller may make no call: UNAUTHENTICATED.
//  2. A brokers-only call (the replication plane) admits brokers, each
//     speaking for itself: a client, or a broker claiming another broker's
//     id, is PERMISSION_DENIED.
//  3. Brokers and superusers may do everything else.
//  4. Anyone else needs an ACL for every permission the call needs
//     (security.Allowed: admin implies read and write); OpSee is any
//     permission at all on the resource. The first one missing is
//     PERMISSION_DENIED, naming it and the `strata acl add` that grants it.
//
// Every refusal by rules 2 and 4 is logged (at most once per principal,
// operation and resource a minute) and reported to OnDenied.

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/strata-log/strata/security"
)

// OpSee stands for "any permission at all" on a resource: enough to learn
// that a topic exists and how it is set up.
const OpSee security.Operation = "see"

// Need is one permission a call needs: an operation on a resource.
type Need struct {
	Resource security.ResourceType
	// Name is the topic or group; "" for the cluster.
	Name string
	Op   security.Operation
}

// TopicNeed is op on the topic name.
func TopicNeed(name string, op security.Operation) Need {
	return Need{security.ResourceTopic, name, op}
}

// GroupNeed is op on the consumer group name.
func GroupNeed(name string, op security.Operation) Need {
	return Need{security.ResourceGroup, name, op}
}

// ClusterAdmin is admin on the cluster: managing ACLs.
func ClusterAdmin() Need { return Need{security.ResourceCluster, "", security.OpAdmin} }

// Access is what one call needs of its caller, as its front end reads it
// off the request. The zero Access needs an authenticated caller only.
type Access struct {
	// Needs are the permissions the call needs, every one of them.
	Needs []Need
	// BrokersOnly admits brokers only; with BrokerID >= 0 only the broker
	// of that id, which the call claims to be (as its Role: "leader",
	// "follower").
	BrokersOnly bool
	BrokerID    int32
	Role        string
}

// Needs is an Access needing every one of needs.
func Needs(needs ...Need) Access { return Access{Needs: needs} }

// AnyBroker is an Access for brokers only, whichever they are.
func AnyBroker() Access { return Access{BrokersOnly: true, BrokerID: -1} }

// BrokerAs is an Access for broker id only, which the call names as its
// role.
func BrokerAs(id int32, role string) Access {
	return Access{BrokersOnly: true, BrokerID: id, Role: role}
}

// Authorize returns nil when p may make call, which needs acc, or the error
// that refuses it (UNAUTHENTICATED or PERMISSION_DENIED). call is the front
// end's name of the call, for messages and the log.
func (a *Auth) Authorize(p security.Principal, call string, acc Access) error {
	if p.Anonymous() {
		return Unauthenticated("%s needs credentials: a client certificate or a bearer token", call)
	}
	if acc.BrokersOnly {
		if err := brokerAs(p, acc.BrokerID, acc.Role); err != nil {
			a.denied(p, call, "")
			return err
		}
		return nil
	}
	if p.Broker || p.Superuser {
		return nil
	}
	acls := a.acls()
	for _, n := range acc.Needs {
		var ok bool
		if n.Op == OpSee {
			ok = security.AllowedAny(acls, p, n.Resource, n.Name)
		} else {
			ok = security.Allowed(acls, p, n.Resource, n.Name, n.Op)
		}
		if !ok {
			return a.deny(p, n)
		}
	}
	return nil
}

// NoRule refuses call, for which its front end knows no Access.
func (a *Auth) NoRule(p security.Principal, call string) error {
	return PermissionDenied("%s may not call %s", p.Name, call)
}

// AdminEndpoint returns nil when p may read the admin endpoint (metrics,
// profiler): brokers, superusers and principals with admin on the cluster
// may. An anonymous caller is UNAUTHENTICATED; anyone else is
// PERMISSION_DENIED, logged like other denials but not counted (the
// counters are what the endpoint serves).
func (a *Auth) AdminEndpoint(p security.Principal) error {
	if p.Anonymous() {
		return Unauthenticated("the admin endpoint needs a client certificate or a bearer token")
	}
	if !security.Allowed(a.acls(), p, security.ResourceCluster, "", security.OpAdmin) {
		a.denials.note(a.Log, p, string(security.OpAdmin), "cluster (admin endpoint)")
		return PermissionDenied("%s may not read the admin endpoint: it needs admin on the cluster (strata acl add --principal %s --cluster --operation admin)", p.Name, p.Name).
			With("principal", p.Name)
	}
	return nil
}

// brokerAs refuses a caller that is not a broker, or (id >= 0) that is a
// broker claiming to be another one.
func brokerAs(p security.Principal, id int32, role string) error {
	if !p.Broker {
		return PermissionDenied("%s may not use the replication service: it is for brokers, which prove their id with their certificate", p.Name).
			With("principal", p.Name)
	}
	if id >= 0 && id != p.BrokerID {
		return PermissionDenied("broker %d's certificate cannot speak as %s %d", p.BrokerID, role, id).
			With("principal", p.Name)
	}
	return nil
}

func (a *Auth) deny(p security.Principal, n Need) error {
	resource := string(n.Resource)
	if n.Name != "" {
		resource += " " + n.Name
	}
	op := string(n.Op)
	if n.Op == OpSee {
		op = "read, write or admin"
	}
	a.denied(p, op, resource)
	hint := fmt.Sprintf("strata acl add --principal %s --%s %s --operation %s", p.Name, n.Resource, n.Name, n.Op)
	if n.Resource == security.ResourceCluster {
		hint = fmt.Sprintf("strata acl add --principal %s --cluster --operation %s", p.Name, n.Op)
	} else if n.Op == OpSee {
		hint = fmt.Sprintf("strata acl add --principal %s --%s %s --operation read", p.Name, n.Resource, n.Name)
	}
	return PermissionDenied("%s may not %s %s: no ACL grants it (an admin can: %s)", p.Name, op, resource, hint).
		With("principal", p.Name).With("operation", op).With("resource", resource)
}

// denied logs and reports a refusal.
func (a *Auth) denied(p security.Principal, op, resource string) {
	a.denials.note(a.Log, p, op, resource)
	if a.OnDenied != nil {
		a.OnDenied(p.Name)
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
