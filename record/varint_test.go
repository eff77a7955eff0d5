package record

import (
	"bytes"
	"math"
	"testing"
)

func TestVarints(t *testing.T) {
	cases := []struct {
		v   int64
		enc []byte
	}{
		{0, []byte{0x00}},
		{-1, []byte{0x01}},
		{1, []byte{0x02}},
		{-64, []byte{0x7f}},
		{64, []byte{0x80, 0x01}},
		{300, []byte{0xd8, 0x04}},
		{math.MaxInt32, []byte{0xfe, 0xff, 0xff, 0xff, 0x0f}},
		{math.MinInt32, []byte{0xff, 0xff, 0xff, 0xff, 0x0f}},
	}
	for _, c := range cases {
		got := appendVarint(nil, c.v)
		if !bytes.Equal(got, c.enc) {
			t.Errorf("appendVarint(%d) = % x, want % x", c.v, got, c.enc)
		}
		if n := varintSize(c.v); n != len(c.enc) {
			t.Errorf("varintSize(%d) = %d, want %d", c.v, n, len(c.enc))
		}
		v, pos, ok := readVarint(c.enc, 0)
		if !ok || int64(v) != c.v || pos != len(c.enc) {
			t.Errorf("readVarint(% x) = %d, %d, %v", c.enc, v, pos, ok)
		}
	}
	for _, v := range []int64{math.MaxInt64, math.MinInt64, 1 << 40, -(1 << 40)} {
		enc := appendVarint(nil, v)
		if len(enc) != varintSize(v) {
			t.Errorf("varintSize(%d) = %d, encoded %d bytes", v, varintSize(v), len(enc))
		}
		got, pos, ok := readVarlong(enc, 0)
		if !ok || got != v || pos != len(enc) {
			t.Errorf("readVarlong round trip of %d: %d, %v", v, got, ok)
		}
		if _, _, ok := readVarint(enc, 0); ok {
			t.Errorf("readVarint accepted %d, outside int32", v)
		}
	}
	for _, bad := range [][]byte{
		{},                                   // empty
		{0x80},                               // truncated
		{0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, // 6 bytes: too long for a varint
		{0xff, 0xff, 0xff, 0xff, 0x1f},       // over 32 bits
	} {
		if _, _, ok := readVarint(bad, 0); ok {
			t.Errorf("readVarint accepted % x", bad)
		}
	}
}
