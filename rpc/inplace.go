package rpc

// Decoding a message in place: a large bytes field is left in the buffer
// gRPC received the message in (grpcmem.Frame) instead of copied out of
// it, as proto.Unmarshal would. The other fields, few and small, still go
// through proto.Unmarshal.

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// unmarshalInPlace decodes b into m as proto.Unmarshal does, except for
// the bytes field numbered field, which it returns as a slice of b (nil
// if absent) and leaves unset in m. As for any scalar field, the last
// occurrence on the wire wins.
func unmarshalInPlace(b []byte, field protowire.Number, m proto.Message) ([]byte, error) {
	var rest []byte // every other field, as it came
	var kept []byte
	for in := b; len(in) > 0; {
		num, typ, n := protowire.ConsumeTag(in)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		v := protowire.ConsumeFieldValue(num, typ, in[n:])
		if v < 0 {
			return nil, protowire.ParseError(v)
		}
		if num == field && typ == protowire.BytesType {
			val, k := protowire.ConsumeBytes(in[n:])
			if k < 0 {
				return nil, protowire.ParseError(k)
			}
			kept = val
		} else {
			rest = append(rest, in[:n+v]...)
		}
		in = in[n+v:]
	}
	if err := proto.Unmarshal(rest, m); err != nil {
		return nil, err
	}
	return kept, nil
}
