package broker

// SCRAM credentials for the Kafka front end's SASL/SCRAM logins: kept in
// the cluster metadata (cluster/scram.go), so writes go through the
// controller like ACL admin: a broker that is not the controller answers
// UNAVAILABLE naming it (clusterError), which the gRPC API forwards.
// Reads are local. Only the salt, iteration count, stored key and server
// key are kept (security/scram.go), never a password.

import (
	"context"
	"errors"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/security"
)

// SetSCRAMCredential stores user's credential for mechanism, made from a
// salted password (what Kafka's AlterUserScramCredentials carries, and what
// `strata user create` computes from the password it reads, so the password
// never leaves the client), replacing any stored before. A bad user name,
// mechanism, salt or iteration count is INVALID_REQUEST.
func (b *Broker) SetSCRAMCredential(ctx context.Context, user, mechanism string, salt []byte, iterations int, saltedPassword []byte) error {
	return b.role.setSCRAMCredential(ctx, user, mechanism, salt, iterations, saltedPassword)
}

func (b clusterMember) setSCRAMCredential(ctx context.Context, user, mechanism string, salt []byte, iterations int, saltedPassword []byte) error {
	if h := security.SCRAMHash(mechanism); h != nil && len(saltedPassword) != h().Size() {
		return refuse(ReasonInvalidRequest, nil, "a %s salted password is %d bytes, not %d", mechanism, h().Size(), len(saltedPassword))
	}
	stored, server, err := security.SCRAMKeys(mechanism, saltedPassword)
	if err != nil {
		return refuse(ReasonInvalidRequest, err, "%v", err)
	}
	cred := cluster.SCRAMCredential{Salt: salt, Iterations: iterations, StoredKey: stored, ServerKey: server}
	_, err = forward(b.Broker, ctx, func() (struct{}, error) {
		return struct{}{}, scramError(b.meta.SetSCRAMCredential(ctx, user, mechanism, cred))
	}, func(c ControllerClient) (struct{}, error) {
		return struct{}{}, c.SetSCRAMCredential(ctx, user, mechanism, salt, iterations, saltedPassword)
	})
	return err
}

// DeleteSCRAMCredential removes user's credential for mechanism. One that
// is not stored is INVALID_REQUEST, saying so.
func (b *Broker) DeleteSCRAMCredential(ctx context.Context, user, mechanism string) error {
	return b.role.deleteSCRAMCredential(ctx, user, mechanism)
}

func (b clusterMember) deleteSCRAMCredential(ctx context.Context, user, mechanism string) error {
	_, err := forward(b.Broker, ctx, func() (struct{}, error) {
		return struct{}{}, scramError(b.meta.DeleteSCRAMCredential(ctx, user, mechanism))
	}, func(c ControllerClient) (struct{}, error) {
		return struct{}{}, c.DeleteSCRAMCredential(ctx, user, mechanism)
	})
	return err
}

// SCRAMCredential returns user's credential for mechanism as this broker
// has the metadata.
func (b *Broker) SCRAMCredential(user, mechanism string) (cluster.SCRAMCredential, bool) {
	return b.role.scramCredential(user, mechanism)
}

func (b clusterMember) scramCredential(user, mechanism string) (cluster.SCRAMCredential, bool) {
	return b.meta.SCRAMCredential(user, mechanism)
}

// SCRAMUsers returns every user with a SCRAM credential and its
// mechanisms, sorted.
func (b *Broker) SCRAMUsers() map[string][]string {
	return b.role.scramUsers()
}

func (b clusterMember) scramUsers() map[string][]string {
	return b.meta.SCRAMUsers()
}

func scramError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, cluster.ErrInvalidSCRAM), errors.Is(err, cluster.ErrSCRAMNotFound):
		return refuse(ReasonInvalidRequest, err, "%v", err)
	}
	return clusterError(err)
}
