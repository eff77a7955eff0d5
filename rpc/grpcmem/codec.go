package grpcmem

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// Shared is the pool every Strata server and client connection uses.
var Shared = &Pool{}

// ServerOptions make a gRPC server read and write messages with Shared.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ForceServerCodecV2(Codec{}), experimental.BufferPool(Shared)}
}

// DialOptions make a client connection read and write messages with
// Shared.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.ForceCodecV2(Codec{})), experimental.WithBufferPool(Shared)}
}

// Codec is gRPC's proto codec (same name, same bytes on the wire) with its
// buffers from Shared instead of gRPC's default pool.
type Codec struct{}

var _ encoding.CodecV2 = Codec{}

// Name is the content subtype, "proto", as for gRPC's own codec.
func (Codec) Name() string { return "proto" }

// Marshal encodes v into a buffer from Shared, or a buffer of its own when
// it is too small for gRPC to pool; an *Encoded is sent as it is.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	if e, ok := v.(*Encoded); ok {
		return marshalEncoded(e), nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("grpcmem: cannot marshal %T, not a proto.Message", v)
	}
	// UseCachedSize reuses what Size just computed; nothing changes m
	// between the two.
	size := proto.Size(m)
	opts := proto.MarshalOptions{UseCachedSize: true}
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := opts.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	buf := Shared.Get(size)
	b, err := opts.MarshalAppend((*buf)[:0], m)
	if err != nil {
		Shared.Put(buf)
		return nil, err
	}
	*buf = b
	return mem.BufferSlice{mem.NewBuffer(buf, Shared)}, nil
}

// Unmarshal decodes data into v. proto.Unmarshal copies the bytes it
// keeps, so the buffer goes back to Shared at once. A *Frame keeps the
// bytes undecoded instead.
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	if f, ok := v.(*Frame); ok {
		f.Free()
		f.buf = data.MaterializeToBuffer(Shared)
		return nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("grpcmem: cannot unmarshal into %T, not a proto.Message", v)
	}
	buf := data.MaterializeToBuffer(Shared)
	defer buf.Free()
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}

// Frame receives a message without decoding it: Codec.Unmarshal keeps the
// message's bytes in a buffer from Shared (the one gRPC read them into, or
// a copy), for a receiver that decodes them itself and keeps slices of
// them, where proto.Unmarshal would copy every bytes field. The receiver
// calls Free once it is done with those slices.
type Frame struct {
	buf mem.Buffer
}

// Bytes are the message's encoded bytes, valid until Free.
func (f *Frame) Bytes() []byte {
	if f.buf == nil {
		return nil
	}
	return f.buf.ReadOnlyData()
}

// Free gives the buffer back to Shared. Calling it twice is harmless.
func (f *Frame) Free() {
	if f.buf != nil {
		f.buf.Free()
		f.buf = nil
	}
}

// Encoded is a message its sender encoded itself, sent as Head followed by
// Body without a copy into a buffer of the codec's: a large bytes field
// written last (protobuf takes fields in any order), whose buffer the
// sender lends. gRPC writes Body from that buffer, possibly after SendMsg
// returned, and Release (once, if set) tells the sender it may reuse it:
// when gRPC frees the message, a failed send included. Should gRPC drop
// it without freeing it, the buffer is only not reused.
type Encoded struct {
	Head, Body []byte
	Release    func()
}

// releaser is the BufferPool of one lent Body: gRPC gives the buffer back
// to it once written, and it calls the sender's Release.
type releaser struct{ release func() }

func (r releaser) Get(int) *[]byte { panic("grpcmem: an Encoded body's pool lends no buffers") }
func (r releaser) Put(*[]byte)     { r.release() }

// marshalEncoded frames e for gRPC. A Body too small for gRPC to count
// references to is copied after Head and released at once.
func marshalEncoded(e *Encoded) mem.BufferSlice {
	release := e.Release
	if release == nil {
		release = func() {}
	}
	if len(e.Body) == 0 || mem.IsBelowBufferPoolingThreshold(cap(e.Body)) {
		out := append(append(make([]byte, 0, len(e.Head)+len(e.Body)), e.Head...), e.Body...)
		release()
		return mem.BufferSlice{mem.SliceBuffer(out)}
	}
	body := e.Body
	return mem.BufferSlice{mem.SliceBuffer(e.Head), mem.NewBuffer(&body, releaser{release})}
}
