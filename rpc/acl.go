package rpc

// ACL admin: straight translations, like the topic admin in admin.go. A
// create or delete that reaches a broker other than the controller is
// passed on to the controller by the broker (broker/controller.go).

import (
	"context"

	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"github.com/strata-log/strata/security"
)

func (s *adminService) CreateACLs(ctx context.Context, req *stratav1.CreateACLsRequest) (*stratav1.CreateACLsResponse, error) {
	if err := s.b.AddACLs(ctx, fromProtoACLs(req.Acls)); err != nil {
		return nil, toStatus(err)
	}
	return &stratav1.CreateACLsResponse{}, nil
}

func (s *adminService) DeleteACLs(ctx context.Context, req *stratav1.DeleteACLsRequest) (*stratav1.DeleteACLsResponse, error) {
	n, err := s.b.RemoveACLs(ctx, fromProtoACLs(req.Acls))
	if err != nil {
		return nil, toStatus(err)
	}
	return &stratav1.DeleteACLsResponse{Removed: int32(n)}, nil // at most MaxACLs
}

func (s *adminService) ListACLs(ctx context.Context, req *stratav1.ListACLsRequest) (*stratav1.ListACLsResponse, error) {
	acls := s.b.ACLs(req.Principal)
	resp := &stratav1.ListACLsResponse{Acls: make([]*stratav1.ACL, len(acls))}
	for i, a := range acls {
		resp.Acls[i] = &stratav1.ACL{
			Principal: a.Principal, ResourceType: string(a.Resource), Name: a.Name, Prefix: a.Prefix, Operation: string(a.Op),
		}
	}
	return resp, nil
}

// fromProtoACLs converts without checking: the strings go through as they
// are, and the broker refuses what ACL.Validate does not accept, naming it.
// A nil entry (a client may send one) is an empty ACL, refused the same way.
func fromProtoACLs(in []*stratav1.ACL) []security.ACL {
	out := make([]security.ACL, len(in))
	for i, a := range in {
		out[i] = security.ACL{
			Principal: a.GetPrincipal(),
			Resource:  security.ResourceType(a.GetResourceType()),
			Name:      a.GetName(),
			Prefix:    a.GetPrefix(),
			Op:        security.Operation(a.GetOperation()),
		}
	}
	return out
}
