package kafka

// IncrementalAlterConfigs, v0 to v1: SET and DELETE of topic settings
// through broker.AlterTopicConfig, on any broker (one that is not the
// controller passes it on), under their Kafka names (configs.go); the
// broker's rules apply and its refusals come back as they are (an invalid
// value, an unknown key, turning remote.storage.enable off while the
// bucket holds the topic's data: INVALID_CONFIG with the broker's
// message). A topic's settings change together or not at all.
//
// APPEND and SUBTRACT work on the one list setting, cleanup.policy, as in
// Kafka: the items given are added to or taken from the topic's value in
// force (SUBTRACT of every item is INVALID_CONFIG: the list cannot be
// empty); on any other setting they are INVALID_CONFIG; so is DELETE of replication.factor, which is fixed at creation. A
// name given twice for one resource, or an unknown operation, is
// INVALID_REQUEST. validate_only checks as the change would
// (broker.ValidateTopicConfig) and changes nothing. Broker settings are
// read-only here (INVALID_CONFIG): they are set in the broker's config.
// Topics need admin on them (TOPIC_AUTHORIZATION_FAILED), brokers admin
// on the cluster.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/security"
)

func handleIncrementalAlterConfigs(ctx context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range req.Resources {
		r := kmsg.NewIncrementalAlterConfigsResponseResource()
		r.ResourceType, r.ResourceName = rr.ResourceType, rr.ResourceName
		if code, msg := incrementalAlter(ctx, c, rr, req.ValidateOnly); code != 0 {
			r.ErrorCode, r.ErrorMessage = code, &msg
		}
		resp.Resources = append(resp.Resources, r)
	}
	return resp, nil
}

func incrementalAlter(ctx context.Context, c *conn, rr kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) (int16, string) {
	if code, msg := alterable(c, "IncrementalAlterConfigs", rr.ResourceType, rr.ResourceName); code != 0 {
		return code, msg
	}
	var names, del []string
	var values []*string
	seen := map[string]bool{}
	for _, rc := range rr.Configs {
		if seen[rc.Name] {
			return kerr.InvalidRequest.Code, fmt.Sprintf("setting %q is given more than once", rc.Name)
		}
		seen[rc.Name] = true
		switch rc.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			names, values = append(names, rc.Name), append(values, rc.Value)
		case kmsg.IncrementalAlterConfigOpDelete:
			if readOnlyTopicKeys[rc.Name] {
				return kerr.InvalidConfig.Code, fmt.Sprintf("%s is read-only: it is fixed when the topic is created", rc.Name)
			}
			del = append(del, rc.Name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			if !listTopicKeys[rc.Name] {
				return kerr.InvalidConfig.Code, fmt.Sprintf("%s on %q: only a list setting (cleanup.policy) takes it; use SET", rc.Op, rc.Name)
			}
			v, code, msg := listEdit(c, rr.ResourceName, rc)
			if code != 0 {
				return code, msg
			}
			names, values = append(names, rc.Name), append(values, &v)
		default:
			return kerr.InvalidRequest.Code, fmt.Sprintf("unknown operation %d on %q", rc.Op, rc.Name)
		}
	}
	set, refusal := topicSettings(names, values)
	if refusal != nil {
		return refusal.code, refusal.msg
	}
	return alterTopic(ctx, c, rr.ResourceName, set, del, validateOnly)
}

// alterable checks that a resource's settings may be altered by the
// caller: a topic it has admin on; never a broker's.
func alterable(c *conn, call string, typ kmsg.ConfigResourceType, name string) (int16, string) {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if code, err := c.authorize(call, security.ResourceTopic, broker.TopicNeed(name, security.OpAdmin)); err != nil {
			return code, err.Error()
		}
		return 0, ""
	case kmsg.ConfigResourceTypeBroker:
		if code, err := c.authorize(call, security.ResourceCluster, broker.ClusterAdmin()); err != nil {
			return code, err.Error()
		}
		return kerr.InvalidConfig.Code, "broker settings are read-only through Kafka: set them in the broker's config file, environment or flags"
	}
	return kerr.InvalidRequest.Code, fmt.Sprintf("resource type %d: Strata has settings for topics (2) and brokers (4) only", typ)
}

// alterTopic makes (or, validateOnly, checks) a change of a topic's
// settings.
func alterTopic(ctx context.Context, c *conn, name string, set map[string]string, del []string, validateOnly bool) (int16, string) {
	var err error
	switch {
	case len(set) == 0 && len(del) == 0: // nothing to change
		_, err = c.s.b.DescribeTopic(name)
	case validateOnly:
		err = c.s.b.ValidateTopicConfig(ctx, name, set, del)
	default:
		_, err = c.s.b.AlterTopicConfig(ctx, name, set, del)
	}
	if err != nil {
		return codeOf(err), err.Error()
	}
	return 0, ""
}

// listTopicKeys are the topic settings whose values are lists.
var listTopicKeys = map[string]bool{"cleanup.policy": true}

// listEdit is the value of list setting rc.Name of topic after rc's
// APPEND or SUBTRACT of its comma-separated items, in the order the value
// in force has them, appended ones after.
func listEdit(c *conn, topic string, rc kmsg.IncrementalAlterConfigsRequestResourceConfig) (string, int16, string) {
	if rc.Value == nil {
		return "", kerr.InvalidConfig.Code, fmt.Sprintf("%s on %q with a null value: give the items", rc.Op, rc.Name)
	}
	d, err := c.s.b.DescribeTopic(topic)
	if err != nil {
		return "", codeOf(err), err.Error()
	}
	items := func(s string) []string {
		var out []string
		for _, it := range strings.Split(s, ",") {
			if it = strings.ToLower(strings.TrimSpace(it)); it != "" && !slices.Contains(out, it) {
				out = append(out, it)
			}
		}
		return out
	}
	cur, given := items(d.Config[rc.Name]), items(*rc.Value)
	var next []string
	if rc.Op == kmsg.IncrementalAlterConfigOpAppend {
		next = cur
		for _, it := range given {
			if !slices.Contains(next, it) {
				next = append(next, it)
			}
		}
	} else {
		for _, it := range cur {
			if !slices.Contains(given, it) {
				next = append(next, it)
			}
		}
		if len(next) == 0 {
			return "", kerr.InvalidConfig.Code, fmt.Sprintf("SUBTRACT %q from %s=%s leaves it empty: a topic needs a cleanup policy", *rc.Value, rc.Name, d.Config[rc.Name])
		}
	}
	return strings.Join(next, ","), 0, ""
}
