package kafka

// DescribeConfigs, v1 to v4 (v0 left Kafka in 4.0, KIP-896): settings by
// resource, under Kafka's names (configs.go).
//
//   - TOPIC: every topic setting with its value in force, its source
//     (DYNAMIC_TOPIC_CONFIG for the topic's override, STATIC_BROKER_CONFIG
//     for the broker's topic_defaults, DEFAULT_CONFIG), read-only for
//     replication.factor; synonyms (the
//     override, the broker default under its Kafka broker name, the
//     built-in default) when asked; type and documentation (v3+) when
//     asked. Needs any permission on the topic (TOPIC_AUTHORIZATION_FAILED);
//     an unknown topic is UNKNOWN_TOPIC_OR_PARTITION.
//   - BROKER, named by this broker's id or "" (cluster-wide, answered with
//     this broker's): its start-time settings that have Kafka names, all
//     read-only. Another broker's id is INVALID_REQUEST (ask that broker).
//     Needs admin on the cluster (CLUSTER_AUTHORIZATION_FAILED).
//   - Any other resource type is INVALID_REQUEST.
//
// config_names, when given, picks settings by name; names not known are
// left out, as Kafka does.

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/security"
)

func handleDescribeConfigs(_ context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		r := kmsg.NewDescribeConfigsResponseResource()
		r.ResourceType, r.ResourceName = rr.ResourceType, rr.ResourceName
		entries, code, msg := describeConfigs(c, rr)
		if code != 0 {
			r.ErrorCode, r.ErrorMessage = code, &msg
			resp.Resources = append(resp.Resources, r)
			continue
		}
		for _, e := range entries {
			if len(rr.ConfigNames) > 0 && !slices.Contains(rr.ConfigNames, e.name) {
				continue
			}
			rc := kmsg.NewDescribeConfigsResponseResourceConfig()
			v := e.value
			rc.Name, rc.Value, rc.ReadOnly, rc.Source = e.name, &v, e.readOnly, e.source
			rc.IsDefault = e.source == sourceDefault
			rc.ConfigType = e.typ
			if req.IncludeSynonyms {
				for _, s := range e.synonyms {
					rs := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
					sv := s.value
					rs.Name, rs.Value, rs.Source = s.name, &sv, s.source
					rc.ConfigSynonyms = append(rc.ConfigSynonyms, rs)
				}
			}
			if req.IncludeDocumentation {
				doc := e.doc
				rc.Documentation = &doc
			}
			r.Configs = append(r.Configs, rc)
		}
		resp.Resources = append(resp.Resources, r)
	}
	return resp, nil
}

func describeConfigs(c *conn, rr kmsg.DescribeConfigsRequestResource) ([]configEntry, int16, string) {
	switch rr.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
		if code, err := c.authorize("DescribeConfigs", security.ResourceTopic, broker.TopicNeed(rr.ResourceName, broker.OpSee)); err != nil {
			return nil, code, err.Error()
		}
		d, err := c.s.b.DescribeTopic(rr.ResourceName)
		if err != nil {
			return nil, codeOf(err), err.Error()
		}
		return topicConfigs(c.s.b.TopicDefaults(), d), 0, ""
	case kmsg.ConfigResourceTypeBroker:
		if code, err := c.authorize("DescribeConfigs", security.ResourceCluster, broker.ClusterAdmin()); err != nil {
			return nil, code, err.Error()
		}
		if code, msg := thisBroker(c, rr.ResourceName); code != 0 {
			return nil, code, msg
		}
		return brokerConfigs(c.s.b, c.s.cfg), 0, ""
	}
	return nil, kerr.InvalidRequest.Code, fmt.Sprintf("resource type %d: Strata has settings for topics (2) and brokers (4) only", rr.ResourceType)
}

// thisBroker refuses a broker resource named by another broker's id.
func thisBroker(c *conn, name string) (int16, string) {
	if name == "" || name == strconv.Itoa(int(c.s.b.ID())) {
		return 0, ""
	}
	return kerr.InvalidRequest.Code, fmt.Sprintf("this is broker %d: broker %q's settings are described by that broker", c.s.b.ID(), name)
}
