package rpc

// SCRAM credential admin (UserService): straight translations to the
// broker. A set or delete that reaches a broker other than the controller
// comes back as UNAVAILABLE naming the controller, and the forwarding
// interceptor re-issues it there, as for ACLs.

import (
	"context"
	"maps"
	"slices"

	"github.com/strata-log/strata/broker"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

type userService struct {
	stratav1.UnimplementedUserServiceServer
	b *broker.Broker
}

func (s *userService) SetSCRAMCredential(ctx context.Context, req *stratav1.SetSCRAMCredentialRequest) (*stratav1.SetSCRAMCredentialResponse, error) {
	err := s.b.SetSCRAMCredential(ctx, req.GetUser(), req.GetMechanism(), req.GetSalt(), int(req.GetIterations()), req.GetSaltedPassword())
	if err != nil {
		return nil, toStatus(err)
	}
	return &stratav1.SetSCRAMCredentialResponse{}, nil
}

func (s *userService) DeleteSCRAMCredential(ctx context.Context, req *stratav1.DeleteSCRAMCredentialRequest) (*stratav1.DeleteSCRAMCredentialResponse, error) {
	if err := s.b.DeleteSCRAMCredential(ctx, req.GetUser(), req.GetMechanism()); err != nil {
		return nil, toStatus(err)
	}
	return &stratav1.DeleteSCRAMCredentialResponse{}, nil
}

func (s *userService) ListSCRAMUsers(context.Context, *stratav1.ListSCRAMUsersRequest) (*stratav1.ListSCRAMUsersResponse, error) {
	users := s.b.SCRAMUsers()
	resp := &stratav1.ListSCRAMUsersResponse{}
	for _, u := range slices.Sorted(maps.Keys(users)) {
		resp.Users = append(resp.Users, &stratav1.SCRAMUser{User: u, Mechanisms: users[u]})
	}
	return resp, nil
}
