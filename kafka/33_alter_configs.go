package kafka

// AlterConfigs, v0 to v2: replaces a topic's settings with those given,
// as Kafka does: every override not given is removed (back to the
// broker's default), through broker.AlterTopicConfig as in
// IncrementalAlterConfigs (same rules, refusals, validate_only and
// authorization). replication.factor is not among the settings replaced:
// it is fixed at creation, so its override stays unless given (and giving
// another value is refused by the broker). A null value is INVALID_CONFIG.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleAlterConfigs(ctx context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range req.Resources {
		r := kmsg.NewAlterConfigsResponseResource()
		r.ResourceType, r.ResourceName = rr.ResourceType, rr.ResourceName
		if code, msg := replaceConfigs(ctx, c, rr, req.ValidateOnly); code != 0 {
			r.ErrorCode, r.ErrorMessage = code, &msg
		}
		resp.Resources = append(resp.Resources, r)
	}
	return resp, nil
}

func replaceConfigs(ctx context.Context, c *conn, rr kmsg.AlterConfigsRequestResource, validateOnly bool) (int16, string) {
	if code, msg := alterable(c, "AlterConfigs", rr.ResourceType, rr.ResourceName); code != 0 {
		return code, msg
	}
	names := make([]string, len(rr.Configs))
	values := make([]*string, len(rr.Configs))
	for i, rc := range rr.Configs {
		names[i], values[i] = rc.Name, rc.Value
	}
	set, refusal := topicSettings(names, values)
	if refusal != nil {
		return refusal.code, refusal.msg
	}
	d, err := c.s.b.DescribeTopic(rr.ResourceName)
	if err != nil {
		return codeOf(err), err.Error()
	}
	var del []string
	for k := range d.Overrides {
		if _, given := set[k]; !given && !readOnlyTopicKeys[k] {
			del = append(del, k)
		}
	}
	return alterTopic(ctx, c, rr.ResourceName, set, del, validateOnly)
}
