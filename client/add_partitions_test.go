package client

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// lostAnswerBroker makes an increase whose first answer is lost: the first
// AddPartitions fails in transport after the change (Unavailable, no
// details), the next is refused as a count not above the current one, and
// the topic has have partitions.
type lostAnswerBroker struct {
	stratav1.UnimplementedAdminServiceServer
	stratav1.UnimplementedMetadataServiceServer
	calls atomic.Int32
	have  int
}

func (b *lostAnswerBroker) GetMetadata(context.Context, *stratav1.GetMetadataRequest) (*stratav1.GetMetadataResponse, error) {
	return &stratav1.GetMetadataResponse{}, nil
}

func (b *lostAnswerBroker) AddPartitions(_ context.Context, req *stratav1.AddPartitionsRequest) (*stratav1.AddPartitionsResponse, error) {
	if b.calls.Add(1) == 1 {
		return nil, status.Error(codes.Unavailable, "connection lost")
	}
	st, err := status.New(codes.InvalidArgument, "must be more").WithDetails(&errdetails.ErrorInfo{
		Domain: ErrorDomain, Reason: "INVALID_REQUEST", Metadata: map[string]string{"field": "partitions", "retriable": "false"},
	})
	if err != nil {
		return nil, err
	}
	return nil, st.Err()
}

func (b *lostAnswerBroker) DescribeTopic(_ context.Context, req *stratav1.DescribeTopicRequest) (*stratav1.DescribeTopicResponse, error) {
	d := &stratav1.TopicDescription{Name: req.Name}
	for range b.have {
		d.Partitions = append(d.Partitions, &stratav1.PartitionDescription{})
	}
	return &stratav1.DescribeTopicResponse{Topic: d}, nil
}

// TestAddPartitionsLostAnswer: a retry refused because the lost attempt
// made the increase answers with the topic; a refusal that is not about
// this call's own increase (the topic has another count) stays an error.
func TestAddPartitionsLostAnswer(t *testing.T) {
	for _, tc := range []struct {
		have int
		ok   bool
	}{{have: 4, ok: true}, {have: 5, ok: false}} {
		fake := &lostAnswerBroker{have: tc.have}
		srv := grpc.NewServer()
		stratav1.RegisterAdminServiceServer(srv, fake)
		stratav1.RegisterMetadataServiceServer(srv, fake)
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(lis)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := New(ctx, []string{lis.Addr().String()})
		if err != nil {
			t.Fatal(err)
		}
		d, err := c.AddPartitions(ctx, "grow", 4)
		switch {
		case tc.ok && (err != nil || len(d.GetPartitions()) != 4):
			t.Errorf("topic with 4 partitions after a lost answer: %v, %v", d, err)
		case !tc.ok && !errors.Is(err, ErrInvalidRequest):
			t.Errorf("topic with %d partitions: %v, want ErrInvalidRequest", tc.have, err)
		}
		if n := fake.calls.Load(); n != 2 {
			t.Errorf("%d AddPartitions calls, want 2", n)
		}
		c.Close()
		cancel()
		srv.Stop()
	}
}
