package security

import (
	"fmt"
	"slices"
	"strings"
)

// The kinds of resource an ACL grants on.
type ResourceType string

const (
	// ResourceTopic is a topic, named literally or by prefix.
	ResourceTopic ResourceType = "topic"
	// ResourceGroup is a consumer group, named literally or by prefix.
	ResourceGroup ResourceType = "group"
	// ResourceCluster is the cluster itself: ACLs, broker-wide settings. It
	// has no name.
	ResourceCluster ResourceType = "cluster"
)

// Operation is what an ACL allows on its resource.
type Operation string

const (
	// OpRead reads a topic (fetch, list offsets) or uses a group (commit and
	// fetch its offsets).
	OpRead Operation = "read"
	// OpWrite produces to a topic.
	OpWrite Operation = "write"
	// OpAdmin creates, deletes, alters and restores a topic; on a group, it
	// deletes the group or resets it by force; on the cluster, it manages
	// ACLs. It implies read and write on the same resource.
	OpAdmin Operation = "admin"
)

// AnyPrincipal in an ACL's Principal grants to every authenticated
// principal (never to an anonymous caller).
const AnyPrincipal = "*"

// ACL allows one principal one operation on a resource. ACLs only allow:
// whatever no ACL grants is denied.
type ACL struct {
	// Principal is "User:<name>" or AnyPrincipal.
	Principal string
	// Resource is the kind of resource.
	Resource ResourceType
	// Name is the topic or group name, or with Prefix its prefix; "" (with
	// Prefix) matches every name. Empty for the cluster.
	Name string
	// Prefix makes Name match every name that starts with it.
	Prefix bool
	// Op is the operation allowed.
	Op Operation
}

// maxACLName bounds the name of an ACL's resource, as topic and group names
// are bounded.
const maxACLName = 249

// Validate says what is wrong with a, or nil.
func (a ACL) Validate() error {
	if a.Principal != AnyPrincipal {
		name, ok := strings.CutPrefix(a.Principal, "User:")
		if !ok || name == "" || len(a.Principal) > 256 || strings.ContainsAny(name, " \t\r\n") {
			return fmt.Errorf("security: ACL principal %q: want User:<name> or %s", a.Principal, AnyPrincipal)
		}
	}
	switch a.Resource {
	case ResourceTopic, ResourceGroup:
		if a.Name == "" && !a.Prefix {
			return fmt.Errorf("security: ACL on a %s needs a name, or a prefix (an empty prefix means every %s)", a.Resource, a.Resource)
		}
		if len(a.Name) > maxACLName {
			return fmt.Errorf("security: ACL %s name is %d bytes; at most %d", a.Resource, len(a.Name), maxACLName)
		}
		allowed := []Operation{OpRead, OpWrite, OpAdmin}
		if a.Resource == ResourceGroup {
			allowed = []Operation{OpRead, OpAdmin}
		}
		if !slices.Contains(allowed, a.Op) {
			return fmt.Errorf("security: ACL operation %q on a %s: want one of %v", a.Op, a.Resource, allowed)
		}
	case ResourceCluster:
		if a.Name != "" || a.Prefix {
			return fmt.Errorf("security: an ACL on the cluster takes no name")
		}
		if a.Op != OpAdmin {
			return fmt.Errorf("security: ACL operation %q on the cluster: want %s", a.Op, OpAdmin)
		}
	default:
		return fmt.Errorf("security: ACL resource %q: want topic, group or cluster", a.Resource)
	}
	return nil
}

// grants reports whether a allows principal op on the named resource.
func (a ACL) grants(principal string, res ResourceType, name string, op Operation) bool {
	if a.Principal != AnyPrincipal && a.Principal != principal {
		return false
	}
	if a.Resource != res || (a.Op != op && a.Op != OpAdmin) {
		return false
	}
	if a.Prefix {
		return strings.HasPrefix(name, a.Name)
	}
	return a.Name == name
}

// String is the ACL as `strata acl list` prints it.
func (a ACL) String() string {
	res := string(a.Resource)
	switch {
	case a.Resource == ResourceCluster:
	case a.Prefix:
		res += ":" + a.Name + "*"
	default:
		res += ":" + a.Name
	}
	return fmt.Sprintf("%s %s %s", a.Principal, a.Op, res)
}

// Allowed reports whether p may do op on the named resource under acls.
// Brokers and superusers may do everything; an anonymous caller nothing.
func Allowed(acls []ACL, p Principal, res ResourceType, name string, op Operation) bool {
	switch {
	case p.Broker || p.Superuser:
		return true
	case p.Anonymous():
		return false
	}
	for _, a := range acls {
		if a.grants(p.Name, res, name, op) {
			return true
		}
	}
	return false
}

// AllowedAny reports whether p may do anything at all on the named
// resource: whether it may see that the resource exists.
func AllowedAny(acls []ACL, p Principal, res ResourceType, name string) bool {
	return Allowed(acls, p, res, name, OpRead) || Allowed(acls, p, res, name, OpWrite)
}
