package rpc

// Forwarding to the controller. Writes to the cluster metadata (topic admin,
// offset commits, producer ids) must be proposed by the controller; any
// other broker answers them by forwarding the call there, so clients never
// need to know which broker is the controller. A forwarded call carries a
// header so it is never forwarded twice.

import (
	"context"
	"sync"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/rpc/grpcmem"
	"github.com/strata-log/strata/security"
)

const forwardedHeader = "strata-forwarded"

// callerHostHeader carries, on a forwarded call, the address the client
// called from, so the controller can show it (group members' host). It is
// for display only: nothing trusts it.
const callerHostHeader = "strata-caller-host"

// forwarder re-issues calls that need the controller at the controller.
// With TLS it calls as this broker, naming the client it calls for in
// principalHeader; the controller checks that client's permissions again.
type forwarder struct {
	creds grpc.DialOption

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

// interceptor forwards a unary call whose handler answered that this broker
// is not the controller (UNAVAILABLE naming the controller's address).
func (f *forwarder) interceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if err == nil {
		return resp, nil
	}
	addr := controllerAddress(err)
	if addr == "" {
		return nil, err
	}
	if md, _ := metadata.FromIncomingContext(ctx); len(md.Get(forwardedHeader)) > 0 {
		return nil, err // forwarded once already: the controller moved meanwhile
	}
	out, ok := newResponse(info.FullMethod)
	if !ok {
		return nil, err
	}
	conn, cerr := f.conn(addr)
	if cerr != nil {
		return nil, err
	}
	fctx := metadata.AppendToOutgoingContext(ctx, forwardedHeader, "1", callerHostHeader, callerHost(ctx))
	if p, ok := security.PrincipalFrom(ctx); ok && !p.Broker {
		fctx = metadata.AppendToOutgoingContext(fctx, principalHeader, p.Name)
	}
	if ferr := conn.Invoke(fctx, info.FullMethod, req, out); ferr != nil {
		return nil, ferr
	}
	return out, nil
}

// controllerAddress returns the controller's address from a not-the-
// controller error, or "".
func controllerAddress(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return ""
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Reason == string(broker.ReasonUnavailable) {
			return info.Metadata["controller_address"]
		}
	}
	return ""
}

// newResponse makes an empty response message of a method, from the
// registry of generated types.
func newResponse(fullMethod string) (any, bool) {
	// "/strata.v1.AdminService/CreateTopic" names strata.v1.AdminService.CreateTopic.
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(replaceLastSlash(fullMethod[1:])))
	if err != nil {
		return nil, false
	}
	m, ok := d.(protoreflect.MethodDescriptor)
	if !ok {
		return nil, false
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(m.Output().FullName())
	if err != nil {
		return nil, false
	}
	return mt.New().Interface(), true
}

func replaceLastSlash(s string) string {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			return s[:i] + "." + s[i+1:]
		}
	}
	return s
}

func (f *forwarder) conn(addr string) (*grpc.ClientConn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.conns[addr]; ok {
		return c, nil
	}
	creds := f.creds
	if creds == nil {
		creds = grpc.WithTransportCredentials(insecure.NewCredentials())
	}
	c, err := grpc.NewClient(addr, append([]grpc.DialOption{creds}, grpcmem.DialOptions()...)...)
	if err != nil {
		return nil, err
	}
	if f.conns == nil {
		f.conns = map[string]*grpc.ClientConn{}
	}
	f.conns[addr] = c
	return c, nil
}

func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for addr, c := range f.conns {
		c.Close()
		delete(f.conns, addr)
	}
}
