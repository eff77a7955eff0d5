package kafka

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"maps"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawConn is a test's own connection to a Kafka listener.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (c *rawConn) send(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

func frameOf(req kmsg.Request, version int16, correlation int32) []byte {
	req.SetVersion(version)
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("test")).AppendRequest(nil, req, correlation)
}

// recv reads one response frame: its correlation id and the rest.
func (c *rawConn) recv() (int32, []byte) {
	c.t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(c.br, size[:]); err != nil {
		c.t.Fatalf("read response: %v", err)
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.br, b); err != nil {
		c.t.Fatalf("read response: %v", err)
	}
	return int32(binary.BigEndian.Uint32(b)), b[4:]
}

// closed asserts the server closes the connection without answering.
func (c *rawConn) closed(within time.Duration) {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(within))
	n, err := c.br.Read(make([]byte, 1))
	var ne net.Error
	switch {
	case err == nil:
		c.t.Fatalf("read %d bytes, want the connection closed", n)
	case errors.As(err, &ne) && ne.Timeout():
		c.t.Fatalf("the connection is still open after %v", within)
	}
}

func wantKeys(t *testing.T, keys []kmsg.ApiVersionsResponseApiKey) {
	t.Helper()
	want := []kmsg.ApiVersionsResponseApiKey{}
	for _, k := range slices.Sorted(maps.Keys(apis)) { // the table is the truth; ApiVersions must match it
		want = append(want, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: apis[k].min, MaxVersion: apis[k].max})
	}
	if !slices.EqualFunc(keys, want, func(a, b kmsg.ApiVersionsResponseApiKey) bool {
		return a.ApiKey == b.ApiKey && a.MinVersion == b.MinVersion && a.MaxVersion == b.MaxVersion
	}) {
		t.Errorf("api keys = %+v, want %+v", keys, want)
	}
}

// TestApiVersions: every served version lists exactly the APIs served; a
// version newer than served gets the v0 answer UNSUPPORTED_VERSION with
// the list; answers come in request order on one connection.
func TestApiVersions(t *testing.T) {
	tb := startBroker(t)
	c := dialRaw(t, tb.addr)
	var pipelined []byte
	for v := int16(0); v <= apis[apiVersionsKey].max; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
		pipelined = append(pipelined, frameOf(req, v, int32(100+v))...)
	}
	pipelined = append(pipelined, frameOf(kmsg.NewPtrApiVersionsRequest(), 99, 7)...)
	c.send(pipelined)
	for v := int16(0); v <= apis[apiVersionsKey].max; v++ {
		corr, body := c.recv()
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = v
		if err := resp.ReadFrom(body); err != nil || corr != int32(100+v) || resp.ErrorCode != 0 {
			t.Fatalf("v%d: correlation %d, error code %d, %v", v, corr, resp.ErrorCode, err)
		}
		wantKeys(t, resp.ApiKeys)
	}
	corr, body := c.recv()
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if err := resp.ReadFrom(body); err != nil || corr != 7 || resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("v99: correlation %d, error code %d, %v", corr, resp.ErrorCode, err)
	}
	wantKeys(t, resp.ApiKeys)
}

// TestConnectionRules: what closes a connection without an answer.
func TestConnectionRules(t *testing.T) {
	tb := startBroker(t, func(c *Config) {
		c.MaxRequestBytes = 4096
		c.IdleTimeout = 300 * time.Millisecond
		c.RequestTimeout = 300 * time.Millisecond
	})
	metadata := frameOf(kmsg.NewPtrMetadataRequest(), 12, 1)
	cases := map[string][]byte{
		"unknown API key":       frameOf(kmsg.NewPtrCreateTopicsRequest(), 7, 1),
		"version below served":  frameOf(kmsg.NewPtrFetchRequest(), 3, 1),
		"version above served":  frameOf(kmsg.NewPtrProduceRequest(), 13, 1),
		"frame over the limit":  binary.BigEndian.AppendUint32(nil, 4097),
		"negative frame size":   binary.BigEndian.AppendUint32(nil, 0x80000000),
		"frame under a header":  {0, 0, 0, 3, 0, 3, 0},
		"truncated body":        append(binary.BigEndian.AppendUint32(nil, uint32(len(metadata)-4-2)), metadata[4:len(metadata)-2]...),
		"half a frame, stalled": metadata[:len(metadata)-3],
		"idle":                  nil,
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			c := dialRaw(t, tb.addr)
			c.send(b)
			c.closed(5 * time.Second)
		})
	}
	// A connection that behaves is served; the limit is on size, not on
	// how many requests it sends.
	c := dialRaw(t, tb.addr)
	for i := range 3 {
		c.send(metadata)
		if corr, _ := c.recv(); corr != 1 {
			t.Fatalf("request %d: correlation %d", i, corr)
		}
	}
}

// FuzzRequest: the frame reader and request decoding never panic on any
// bytes, and a request they accept encodes back to bytes that decode to
// the same request. The seed corpus, in testdata/fuzz/FuzzRequest, holds a
// request of each API served at its lowest and highest version and what
// fuzzing found worth keeping; the same requests are added here too, so
// the seeds follow apis when it changes.
func FuzzRequest(f *testing.F) {
	for key, a := range apis {
		for _, v := range []int16{a.min, a.max, a.max + 1} {
			req := kmsg.RequestForKey(key)
			if d, ok := req.(interface{ Default() }); ok {
				d.Default()
			}
			f.Add(frameOf(req, v, 1))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		frame, err := readFrame(bytes.NewReader(data), 1<<20)
		if err != nil {
			return
		}
		if len(frame) > len(data)-4 {
			t.Fatalf("frame of %d bytes from %d bytes of input", len(frame), len(data))
		}
		rq, err := parseRequest(frame)
		if err != nil {
			return
		}
		again := rq.req.AppendTo(nil)
		req2 := kmsg.RequestForKey(rq.key)
		req2.SetVersion(rq.version)
		if err := req2.ReadFrom(again); err != nil {
			t.Fatalf("%s v%d re-encoded does not decode: %v", kmsg.NameForKey(rq.key), rq.version, err)
		}
		if b := req2.AppendTo(nil); string(b) != string(again) {
			t.Fatalf("%s v%d does not encode the same twice", kmsg.NameForKey(rq.key), rq.version)
		}
	})
}

// TestFetchEmptyRecordSet: a partition without records is answered with an
// empty record set, not a null one, which librdkafka refuses.
func TestFetchEmptyRecordSet(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic(t, "empty", 1)
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "empty"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	c := dialRaw(t, tb.addr)
	c.send(frameOf(req, 11, 3))
	_, body := c.recv()
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 11
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.RecordBatches == nil || p.HighWatermark != 0 {
		t.Errorf("empty partition: error %d, records %v (nil %v), hw %d", p.ErrorCode, p.RecordBatches, p.RecordBatches == nil, p.HighWatermark)
	}
}
