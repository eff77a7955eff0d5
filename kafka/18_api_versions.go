package kafka

// ApiVersions, v0 to v4: the APIs and version ranges of apis (apis.go),
// exactly those and no more, sorted by key. A request of a version newer
// than v4 is answered in v0's format with UNSUPPORTED_VERSION and the same
// list (conn.go), as Kafka answers, so a newer client retries with a
// version both know. No features (v3+ SupportedFeatures,
// FinalizedFeatures) are advertised, and no throttling.

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleApiVersions(_ context.Context, _ *conn, req kmsg.Request) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = apiKeys()
	return resp, nil
}

// apiVersionsTooNew is the v0 answer to an ApiVersions request of a
// version not served.
func apiVersionsTooNew() *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = apiKeys()
	return resp
}

func apiKeys() []kmsg.ApiVersionsResponseApiKey {
	var keys []kmsg.ApiVersionsResponseApiKey
	for key, a := range apis {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = key, a.min, a.max
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b kmsg.ApiVersionsResponseApiKey) int { return int(a.ApiKey) - int(b.ApiKey) })
	return keys
}
