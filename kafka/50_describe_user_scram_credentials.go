package kafka

// DescribeUserScramCredentials, v0: which SCRAM mechanisms each user has a
// credential for, and their iteration counts (never a salt or key), from
// the cluster metadata (broker.SCRAMUsers; strata user list shows the
// same). Users null or empty describes every user with a credential,
// sorted. A user asked for by name without any credential is
// RESOURCE_NOT_FOUND; one named twice is DUPLICATE_RESOURCE. Needs admin
// on the cluster (Kafka's DESCRIBE on CLUSTER; Strata has only admin
// there): otherwise the request-level error is
// CLUSTER_AUTHORIZATION_FAILED and no user is listed. Any broker answers
// (every broker holds the metadata).

import (
	"context"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/cluster"
)

// scramMechanismTypes are Kafka's numbers for the SCRAM mechanisms.
var scramMechanismTypes = map[int8]string{1: cluster.SCRAMSHA256, 2: cluster.SCRAMSHA512}

func scramMechanismType(name string) int8 {
	for t, n := range scramMechanismTypes {
		if n == name {
			return t
		}
	}
	return 0
}

func handleDescribeSCRAM(_ context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if err := c.allow("DescribeUserScramCredentials", broker.Needs(broker.ClusterAdmin())); err != nil {
		resp.ErrorCode, resp.ErrorMessage = clusterCodeOf(err), messageOf(err)
		return resp, nil
	}
	all := c.s.b.SCRAMUsers()
	names := slices.Sorted(maps.Keys(all))
	if len(req.Users) > 0 {
		names = names[:0]
		for _, u := range req.Users {
			names = append(names, u.Name)
		}
	}
	seen := map[string]int{}
	for _, n := range names {
		seen[n]++
	}
	answered := map[string]bool{}
	for _, name := range names {
		if answered[name] {
			continue // answered once, as a duplicate
		}
		answered[name] = true
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = name
		switch mechs, ok := all[name]; {
		case seen[name] > 1:
			r.ErrorCode = kerr.DuplicateResource.Code
			r.ErrorMessage = kmsg.StringPtr("user named more than once")
		case !ok:
			r.ErrorCode = kerr.ResourceNotFound.Code
			r.ErrorMessage = kmsg.StringPtr("no SCRAM credential for this user")
		default:
			for _, m := range mechs {
				cred, ok := c.s.b.SCRAMCredential(name, m)
				if !ok {
					continue // deleted meanwhile
				}
				info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				info.Mechanism, info.Iterations = scramMechanismType(m), int32(cred.Iterations)
				r.CredentialInfos = append(r.CredentialInfos, info)
			}
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}
