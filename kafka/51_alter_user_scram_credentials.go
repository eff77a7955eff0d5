package kafka

// AlterUserScramCredentials, v0: deletes and sets (upserts) users' SCRAM
// credentials in the cluster metadata through the broker
// (broker.SetSCRAMCredential from the client's salt, iterations and salted
// password; the broker keeps only the derived keys). One result per user,
// in the order the users first appear; a user's first failure is its
// result and its other changes are not made:
//
//   - admin on the cluster is needed (Kafka's ALTER on CLUSTER): otherwise
//     every user is CLUSTER_AUTHORIZATION_FAILED and nothing changes;
//   - an empty or invalid user name, iterations outside 4096..16384, or a
//     salt or salted password the broker refuses: UNACCEPTABLE_CREDENTIAL;
//   - a mechanism other than 1 (SCRAM-SHA-256) or 2 (SCRAM-SHA-512):
//     UNSUPPORTED_SASL_MECHANISM;
//   - the same user and mechanism twice in one request:
//     DUPLICATE_RESOURCE;
//   - deleting a credential that is not stored: RESOURCE_NOT_FOUND.
//
// Deletions are made before upsertions. Credentials are controller writes,
// which any broker passes on to the controller (broker/controller.go);
// NOT_CONTROLLER is left for a change the controller could not be reached
// for.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/cluster"
)

func handleAlterSCRAM(ctx context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	var order []string
	results := map[string]*kmsg.AlterUserSCRAMCredentialsResponseResult{}
	fail := func(user string, code int16, msg string) {
		if r := results[user]; r.ErrorCode == 0 {
			r.ErrorCode, r.ErrorMessage = code, &msg
		}
	}
	failed := func(user string) bool { return results[user].ErrorCode != 0 }
	type change struct {
		user, mechanism string
		up              *kmsg.AlterUserSCRAMCredentialsRequestUpsertion
	}
	var changes []change
	for _, d := range req.Deletions {
		changes = append(changes, change{user: d.Name, mechanism: scramMechanismTypes[d.Mechanism]})
	}
	for i := range req.Upsertions {
		u := &req.Upsertions[i]
		changes = append(changes, change{user: u.Name, mechanism: scramMechanismTypes[u.Mechanism], up: u})
	}
	for _, ch := range changes {
		if _, ok := results[ch.user]; !ok {
			r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			r.User = ch.user
			results[ch.user] = &r
			order = append(order, ch.user)
		}
	}

	denied := c.allow("AlterUserScramCredentials", broker.Needs(broker.ClusterAdmin()))
	seen := map[[2]string]bool{}
	for _, ch := range changes {
		switch key := [2]string{ch.user, ch.mechanism}; {
		case denied != nil:
			fail(ch.user, clusterCodeOf(denied), denied.Error())
		case cluster.ValidateSCRAMUser(ch.user) != nil:
			fail(ch.user, kerr.UnacceptableCredential.Code, cluster.ValidateSCRAMUser(ch.user).Error())
		case ch.mechanism == "":
			fail(ch.user, kerr.UnsupportedSaslMechanism.Code, "mechanism: want 1 (SCRAM-SHA-256) or 2 (SCRAM-SHA-512)")
		case ch.up != nil && (ch.up.Iterations < cluster.MinSCRAMIterations || ch.up.Iterations > cluster.MaxSCRAMIterations):
			fail(ch.user, kerr.UnacceptableCredential.Code, "iterations: want 4096 to 16384")
		case seen[key]:
			fail(ch.user, kerr.DuplicateResource.Code, "the same user and mechanism more than once")
		}
		seen[[2]string{ch.user, ch.mechanism}] = true
	}

	for _, ch := range changes {
		if failed(ch.user) {
			continue
		}
		var err error
		if ch.up == nil {
			if _, ok := c.s.b.SCRAMCredential(ch.user, ch.mechanism); !ok {
				fail(ch.user, kerr.ResourceNotFound.Code, "no "+ch.mechanism+" credential for this user")
				continue
			}
			err = c.s.b.DeleteSCRAMCredential(ctx, ch.user, ch.mechanism)
		} else {
			err = c.s.b.SetSCRAMCredential(ctx, ch.user, ch.mechanism, ch.up.Salt, int(ch.up.Iterations), ch.up.SaltedPassword)
		}
		if err != nil {
			fail(ch.user, alterSCRAMCode(err), err.Error())
		}
	}
	for _, u := range order {
		resp.Results = append(resp.Results, *results[u])
	}
	return resp, nil
}

// alterSCRAMCode is the Kafka code of a broker's refusal of a credential
// change: NOT_CONTROLLER when this broker is not the controller and could
// not pass the change on (a Kafka admin client retries), and
// UNACCEPTABLE_CREDENTIAL for a credential the broker refuses as invalid.
func alterSCRAMCode(err error) int16 {
	var nc *cluster.NotControllerError
	switch {
	case errors.As(err, &nc):
		return kerr.NotController.Code
	case errors.Is(err, cluster.ErrSCRAMNotFound): // deleted meanwhile
		return kerr.ResourceNotFound.Code
	case broker.ReasonOf(err) == broker.ReasonInvalidRequest:
		return kerr.UnacceptableCredential.Code
	}
	return codeOf(err)
}
