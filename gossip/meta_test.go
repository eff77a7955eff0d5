package gossip

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

func sampleMeta() Meta {
	return Meta{
		BrokerID:  7,
		GRPCAddr:  "10.0.0.7:9092",
		RaftAddr:  "10.0.0.7:9093",
		AdminAddr: "10.0.0.7:9094",
		Rack:      "eu-west-1a",
		Version:   "v0.3.1",
	}
}

func TestMetaRoundTrip(t *testing.T) {
	cases := map[string]nodeMeta{
		"sample":   {Meta: sampleMeta()},
		"leaving":  {Meta: sampleMeta(), Leaving: true},
		"zero":     {},
		"negative": {Meta: Meta{BrokerID: -5, Rack: "r"}},
		"extremes": {Meta: Meta{BrokerID: math.MaxInt32, GRPCAddr: "[::1]:1", Version: "ünïcode"}},
		"min id":   {Meta: Meta{BrokerID: math.MinInt32}},
		"kafka":    {Meta: Meta{BrokerID: 3, GRPCAddr: "10.0.0.3:7410", KafkaAddr: "10.0.0.3:9092"}, Leaving: true},
	}
	for name, m := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := m.encode()
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			got, err := decodeNodeMeta(b)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if got != m {
				t.Fatalf("round trip: got %+v, want %+v", got, m)
			}
		})
	}
}

func TestMetaCompact(t *testing.T) {
	b, err := nodeMeta{Meta: sampleMeta()}.encode()
	if err != nil {
		t.Fatal(err)
	}
	// The sample's strings are 55 bytes; the framing adds 8 (version, flags,
	// id, five lengths). JSON would need about 150.
	if len(b) != 63 {
		t.Fatalf("encoded size %d, want 63", len(b))
	}
}

func TestMetaTooLarge(t *testing.T) {
	m := nodeMeta{Meta: sampleMeta()}
	m.Version = strings.Repeat("x", MetaMaxSize)
	if _, err := m.encode(); !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("encode oversized: got %v, want ErrMetaTooLarge", err)
	}
	if _, err := decodeNodeMeta(make([]byte, MetaMaxSize+1)); !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("decode oversized: got %v, want ErrMetaTooLarge", err)
	}
	// The largest Meta that fits still round-trips.
	m.Version = ""
	b, _ := m.encode()
	m.Version = strings.Repeat("x", MetaMaxSize-len(b)-1) // -1: the length uvarint grows to 2 bytes
	b, err := m.encode()
	if err != nil {
		t.Fatalf("encode at limit: %v", err)
	}
	if len(b) != MetaMaxSize {
		t.Fatalf("size %d, want exactly %d", len(b), MetaMaxSize)
	}
	if got, err := decodeNodeMeta(b); err != nil || got != m {
		t.Fatalf("decode at limit: %v", err)
	}
}

func TestMetaEncodeRefusesInvalidUTF8(t *testing.T) {
	m := nodeMeta{Meta: sampleMeta()}
	m.Rack = "\xff"
	if _, err := m.encode(); !errors.Is(err, ErrBadMeta) {
		t.Fatalf("got %v, want ErrBadMeta", err)
	}
}

func TestDecodeMetaGarbage(t *testing.T) {
	valid, err := nodeMeta{Meta: sampleMeta()}.encode()
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"nil":           nil,
		"version 0":     {0, 0, 2, 0, 0, 0, 0, 0},
		"only version":  {1},
		"no id":         {1, 0},
		"unknown flag":  {1, 2, 2, 0, 0, 0, 0, 0},
		"truncated id":  {1, 0, 0x80},
		"id overflow":   {1, 0, 0xff, 0xff, 0xff, 0xff, 0x1f, 0, 0, 0, 0, 0}, // about 2^35
		"huge length":   {1, 0, 2, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"length > rest": {1, 0, 2, 5, 'a', 'b'},
		"bad utf8":      {1, 0, 2, 1, 0xff, 0, 0, 0, 0},
		"trailing v1":   append(bytes.Clone(valid), 0),
		"truncated":     valid[:len(valid)-1],
		"json":          []byte(`{"BrokerID":1}`),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			m, err := decodeNodeMeta(b)
			if !errors.Is(err, ErrBadMeta) && !errors.Is(err, ErrMetaTooLarge) {
				t.Fatalf("got %+v, %v; want ErrBadMeta", m, err)
			}
			if m != (nodeMeta{}) {
				t.Fatalf("failed decode returned non-zero meta %+v", m)
			}
		})
	}
}

// A newer broker may append fields and flags; this decoder keeps the ones it
// knows.
func TestDecodeMetaNewerVersion(t *testing.T) {
	want := nodeMeta{Meta: sampleMeta(), Leaving: true}
	want.KafkaAddr = "10.0.0.7:9095"
	b, err := want.encode()
	if err != nil {
		t.Fatal(err)
	}
	if b[0] != metaVersion2 {
		t.Fatalf("a Meta with a Kafka address encodes as version %d, want 2", b[0])
	}
	b[0] = 3
	b[1] |= 0x80
	b = append(b, 3, 'n', 'e', 'w')
	got, err := decodeNodeMeta(b)
	if err != nil {
		t.Fatalf("decode v3: %v", err)
	}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// FuzzDecodeMeta checks that decoding never panics, fails only with this
// package's errors, and that whatever decodes encodes back to the same Meta.
// The seed corpus is in testdata/fuzz/FuzzDecodeMeta.
func FuzzDecodeMeta(f *testing.F) {
	if b, err := (nodeMeta{Meta: sampleMeta()}).encode(); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeNodeMeta(b)
		if err != nil {
			if !errors.Is(err, ErrBadMeta) && !errors.Is(err, ErrMetaTooLarge) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		again, err := m.encode()
		if err != nil {
			t.Fatalf("decoded %+v but cannot re-encode: %v", m, err)
		}
		if len(again) > len(b) && b[0] == metaVersion1 {
			t.Fatalf("re-encoding grew from %d to %d bytes", len(b), len(again))
		}
		m2, err := decodeNodeMeta(again)
		if err != nil || m2 != m {
			t.Fatalf("re-decode: got %+v, %v; want %+v", m2, err, m)
		}
	})
}

// A broker of version 1's decoder reads a version 2 Meta (with a Kafka
// address) as a newer one: the five fields it knows, the rest ignored.
// Here the same holds for this decoder reading a version 1 Meta: no Kafka
// address, and the trailing-byte rule of version 1 still applies.
func TestDecodeMetaV1HasNoKafkaAddr(t *testing.T) {
	m := nodeMeta{Meta: sampleMeta()}
	b, err := m.encode()
	if err != nil {
		t.Fatal(err)
	}
	if b[0] != metaVersion1 {
		t.Fatalf("a Meta without a Kafka address encodes as version %d, want 1", b[0])
	}
	got, err := decodeNodeMeta(b)
	if err != nil || got != m || got.KafkaAddr != "" {
		t.Fatalf("got %+v, %v; want %+v", got, err, m)
	}
	v2 := append(bytes.Clone(b), 4, 'h', ':', '9', '2')
	v2[0] = metaVersion2
	got, err = decodeNodeMeta(v2)
	if err != nil || got.KafkaAddr != "h:92" {
		t.Fatalf("version 2: got %+v, %v; want Kafka address h:92", got, err)
	}
	if _, err := decodeNodeMeta(append(v2, 0)); !errors.Is(err, ErrBadMeta) {
		t.Fatalf("version 2 with a trailing byte: got %v, want ErrBadMeta", err)
	}
}
