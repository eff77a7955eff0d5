package kafka

// Kafka ACL bindings and Strata's ACLs (security.ACL), for DescribeAcls,
// CreateAcls and DeleteAcls. Strata's model is smaller than Kafka's, and a
// binding it cannot express is refused with a message saying why, never
// stored as something wider:
//
//	Kafka                              Strata
//	principal User:<name>              User:<name>
//	principal User:*                   * (every authenticated principal)
//	host *                             (no host: any other host is refused)
//	ALLOW                              (ACLs only allow: DENY is refused)
//	TOPIC, GROUP                       topic, group
//	CLUSTER kafka-cluster              cluster
//	LITERAL <name>                     <name>
//	LITERAL *                          prefix "" (every name)
//	PREFIXED <prefix>                  prefix <prefix>
//	READ, WRITE                        read, write
//	ALL                                admin (which implies read and write)
//
// Other resource types (TRANSACTIONAL_ID, DELEGATION_TOKEN, USER) and
// operations (CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ...) have
// no Strata equivalent: each Strata operation grants more than they do, so
// they are refused. Which operations a resource takes (no write on a
// group; only ALL on the cluster) is the broker's rule (ACL.Validate),
// refused with its message.

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/security"
)

// clusterName is the name Kafka gives the cluster resource.
const clusterName = "kafka-cluster"

// binding is a Kafka ACL binding.
type binding struct {
	resource   kmsg.ACLResourceType
	name       string
	pattern    kmsg.ACLResourcePatternType
	principal  string
	host       string
	op         kmsg.ACLOperation
	permission kmsg.ACLPermissionType
}

// bindingOf is a Strata ACL as Kafka shows it.
func bindingOf(a security.ACL) binding {
	b := binding{principal: a.Principal, host: "*", permission: kmsg.ACLPermissionTypeAllow,
		name: a.Name, pattern: kmsg.ACLResourcePatternTypeLiteral}
	if a.Principal == security.AnyPrincipal {
		b.principal = "User:*"
	}
	switch a.Resource {
	case security.ResourceTopic:
		b.resource = kmsg.ACLResourceTypeTopic
	case security.ResourceGroup:
		b.resource = kmsg.ACLResourceTypeGroup
	case security.ResourceCluster:
		b.resource, b.name = kmsg.ACLResourceTypeCluster, clusterName
	}
	switch {
	case a.Prefix && a.Name == "":
		b.name = "*"
	case a.Prefix:
		b.pattern = kmsg.ACLResourcePatternTypePrefixed
	}
	switch a.Op {
	case security.OpRead:
		b.op = kmsg.ACLOperationRead
	case security.OpWrite:
		b.op = kmsg.ACLOperationWrite
	case security.OpAdmin:
		b.op = kmsg.ACLOperationAll
	}
	return b
}

// aclOf is the Strata ACL a Kafka binding stands for, or why there is
// none.
func aclOf(b binding) (security.ACL, error) {
	var a security.ACL
	if b.permission != kmsg.ACLPermissionTypeAllow {
		return a, fmt.Errorf("permission %s: Strata's ACLs only allow (whatever no ACL allows is denied), so only ALLOW can be stored", b.permission)
	}
	if b.host != "*" {
		return a, fmt.Errorf("host %q: Strata's ACLs do not name hosts; give host *", b.host)
	}
	a.Principal = b.principal
	if b.principal == "User:*" {
		a.Principal = security.AnyPrincipal
	}
	switch b.resource {
	case kmsg.ACLResourceTypeTopic:
		a.Resource = security.ResourceTopic
	case kmsg.ACLResourceTypeGroup:
		a.Resource = security.ResourceGroup
	case kmsg.ACLResourceTypeCluster:
		if b.name != clusterName || b.pattern != kmsg.ACLResourcePatternTypeLiteral {
			return a, fmt.Errorf("the cluster resource is LITERAL %q", clusterName)
		}
		a.Resource = security.ResourceCluster
	default:
		return a, fmt.Errorf("resource type %s: Strata's ACLs are on topics, groups and the cluster", b.resource)
	}
	if a.Resource != security.ResourceCluster {
		switch {
		case b.pattern == kmsg.ACLResourcePatternTypeLiteral && b.name == "*":
			a.Prefix = true
		case b.pattern == kmsg.ACLResourcePatternTypeLiteral:
			a.Name = b.name
		case b.pattern == kmsg.ACLResourcePatternTypePrefixed && b.name != "":
			a.Name, a.Prefix = b.name, true
		default:
			return a, fmt.Errorf("pattern %s %q: want LITERAL (a name, or * for every name) or PREFIXED (a non-empty prefix)", b.pattern, b.name)
		}
	}
	switch b.op {
	case kmsg.ACLOperationRead:
		a.Op = security.OpRead
	case kmsg.ACLOperationWrite:
		a.Op = security.OpWrite
	case kmsg.ACLOperationAll:
		a.Op = security.OpAdmin
	default:
		return a, fmt.Errorf("operation %s: Strata's ACLs grant READ, WRITE or ALL; %s alone cannot be expressed without granting more", b.op, b.op)
	}
	return a, nil
}

// aclFilter is a Kafka ACL filter (DescribeAcls, DeleteAcls); nil fields
// match anything.
type aclFilter struct {
	resource   kmsg.ACLResourceType
	name       *string
	pattern    kmsg.ACLResourcePatternType
	principal  *string
	host       *string
	op         kmsg.ACLOperation
	permission kmsg.ACLPermissionType
}

// check refuses a filter with values Kafka does not define (UNKNOWN, or
// out of range), as Kafka does.
func (f aclFilter) check() error {
	switch {
	case f.resource < kmsg.ACLResourceTypeAny || f.resource > kmsg.ACLResourceTypeUser:
		return fmt.Errorf("filter resource type %d is not a Kafka resource type", f.resource)
	case f.pattern < kmsg.ACLResourcePatternTypeAny || f.pattern > kmsg.ACLResourcePatternTypePrefixed:
		return fmt.Errorf("filter pattern type %d is not a Kafka pattern type", f.pattern)
	case f.op < kmsg.ACLOperationAny || f.op > kmsg.ACLOperationDescribeTokens:
		return fmt.Errorf("filter operation %d is not a Kafka operation", f.op)
	case f.permission < kmsg.ACLPermissionTypeAny || f.permission > kmsg.ACLPermissionTypeAllow:
		return fmt.Errorf("filter permission type %d is not a Kafka permission type", f.permission)
	}
	return nil
}

// matches reports whether b passes the filter.
func (f aclFilter) matches(b binding) bool {
	if f.resource != kmsg.ACLResourceTypeAny && f.resource != b.resource {
		return false
	}
	if f.principal != nil && *f.principal != b.principal {
		return false
	}
	if f.host != nil && *f.host != b.host {
		return false
	}
	if f.op != kmsg.ACLOperationAny && f.op != b.op {
		return false
	}
	if f.permission != kmsg.ACLPermissionTypeAny && f.permission != b.permission {
		return false
	}
	switch f.pattern {
	case kmsg.ACLResourcePatternTypeAny:
		return f.name == nil || *f.name == b.name
	case kmsg.ACLResourcePatternTypeMatch:
		// Every binding that applies to the resource named.
		if f.name == nil {
			return true
		}
		switch b.pattern {
		case kmsg.ACLResourcePatternTypeLiteral:
			return b.name == *f.name || b.name == "*"
		case kmsg.ACLResourcePatternTypePrefixed:
			return strings.HasPrefix(*f.name, b.name)
		}
		return false
	}
	return f.pattern == b.pattern && (f.name == nil || *f.name == b.name)
}
