package kafka

// A connection: frames in, one request at a time, answers in request
// order, as Kafka serves a connection (the next request is read once the
// last is answered, so order holds without bookkeeping).
//
// A frame is a 4-byte big-endian size and that many bytes. A size below
// the smallest request header, or above MaxRequestBytes, closes the
// connection without reading further (a client cannot make the broker
// hold more than the limit). Waiting for the next request is bounded by
// IdleTimeout; once a frame's size has come, its bytes must come within
// RequestTimeout (a client that sends half a frame and stalls is closed),
// and so must the response's write.
//
// The request header (v1, or v2 with tagged fields for flexible versions)
// is read with franz-go's kbin and the body with kmsg. An API key not in
// apis, or a version outside its range, closes the connection, as Kafka
// does, except for ApiVersions: a version newer than served is answered in
// ApiVersions v0's format with UNSUPPORTED_VERSION and the supported list,
// so a client can pick a version it shares. A body that does not decode
// closes the connection. Response headers are v0, or v1 (tagged fields)
// for flexible versions, except ApiVersions' which is always v0.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
)

// minFrame is the smallest request frame: API key, version, correlation
// id and a client id's length.
const minFrame = 2 + 2 + 4 + 2

var (
	errFrameTooLarge   = errors.New("kafka: request frame larger than the limit")
	errFrameTooSmall   = errors.New("kafka: request frame smaller than a request header")
	errTruncated       = errors.New("kafka: truncated request header")
	errUnknownAPI      = errors.New("kafka: unknown API key")
	errVersion         = errors.New("kafka: unsupported API version")
	errMalformed       = errors.New("kafka: request does not decode")
	errCloseConnection = errors.New("kafka: close the connection") // a handler's way to end it (acks=0 errors)
)

// readFrame reads one frame from r: its size, checked against max, then
// its bytes.
func readFrame(r io.Reader, max int) ([]byte, error) {
	return readSizedFrame(r, minFrame, max)
}

// readSizedFrame reads a frame of min to max bytes.
func readSizedFrame(r io.Reader, min, max int) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	switch {
	case n < int32(min):
		return nil, fmt.Errorf("%w: %d bytes", errFrameTooSmall, n)
	case int64(n) > int64(max):
		return nil, fmt.Errorf("%w: %d bytes, limit %d", errFrameTooLarge, n, max)
	}
	frame := make([]byte, n)
	if _, err := io.ReadFull(r, frame); err != nil {
		return nil, err
	}
	return frame, nil
}

// request is a decoded request with its header.
type request struct {
	key         int16
	version     int16
	correlation int32
	clientID    *string
	req         kmsg.Request // nil when the version is not served
}

// parseRequest decodes a frame. An ApiVersions request of a version not
// served comes back with its header, req nil and errVersion.
func parseRequest(frame []byte) (request, error) {
	r := kbin.Reader{Src: frame}
	rq := request{key: r.Int16(), version: r.Int16(), correlation: r.Int32(), clientID: r.NullableString()}
	if !r.Ok() {
		return rq, errTruncated
	}
	a, ok := apis[rq.key]
	if !ok {
		return rq, fmt.Errorf("%w %d", errUnknownAPI, rq.key)
	}
	if rq.version < a.min || rq.version > a.max {
		return rq, fmt.Errorf("%w: %s v%d (served: v%d to v%d)", errVersion, kmsg.NameForKey(rq.key), rq.version, a.min, a.max)
	}
	req := kmsg.RequestForKey(rq.key)
	req.SetVersion(rq.version)
	if req.IsFlexible() {
		kmsg.SkipTags(&r)
		if !r.Ok() {
			return rq, errTruncated
		}
	}
	if err := req.ReadFrom(r.Src); err != nil {
		return rq, fmt.Errorf("%w: %s v%d: %v", errMalformed, kmsg.NameForKey(rq.key), rq.version, err)
	}
	rq.req = req
	return rq, nil
}

type conn struct {
	s   *Server
	nc  net.Conn
	br  *bufio.Reader
	out []byte
	// lent are the buffers this request's fetches read the log into
	// (lend), which its answer refers to until it is written.
	lent [][]byte
	// held are the cold reads this request's answer refers to, released
	// with what was lent.
	held []broker.FetchResult
	// clientID is the client id of the request being served (its header's).
	clientID string
	// auth is what the connection has proved (auth.go).
	auth connAuth
	// ctx is done once the connection closes: what lives longer than one
	// request, such as a cold fetch's read-ahead (01_fetch.go), lives
	// this long.
	ctx context.Context
}

func (c *conn) serve() {
	ctx, cancel := context.WithCancel(c.s.ctx)
	defer cancel()
	c.ctx = ctx
	c.br = bufio.NewReaderSize(c.nc, 64<<10)
	if !c.start() { // TLS and authentication (auth.go)
		return
	}
	for {
		c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
		if _, err := c.br.Peek(1); err != nil {
			return // gone, idle, or closed by the server
		}
		c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.RequestTimeout))
		frame, err := c.readFrame()
		if err != nil {
			c.s.log.Debug("kafka: closing connection", "remote", c.nc.RemoteAddr(), "err", err)
			return
		}
		c.nc.SetReadDeadline(time.Time{})
		if err := c.handle(frame); err != nil {
			c.s.log.Debug("kafka: closing connection", "remote", c.nc.RemoteAddr(), "err", err)
			return
		}
	}
}

// handle serves one request frame; an error closes the connection.
func (c *conn) handle(frame []byte) error {
	if c.rawTokenNext() { // a SASL token after a v0 handshake (sasl.go)
		return c.rawToken(frame)
	}
	rq, err := parseRequest(frame)
	if errors.Is(err, errVersion) && rq.key == apiVersionsKey {
		return c.write(rq, false, apiVersionsTooNew())
	}
	if err != nil {
		return err
	}
	if err := c.admit(rq.key); err != nil { // auth.go
		return err
	}
	c.clientID = ""
	if rq.clientID != nil {
		c.clientID = *rq.clientID
	}
	ctx, cancel := context.WithTimeout(c.s.ctx, c.s.cfg.RequestTimeout+requestTime(rq.req))
	defer cancel()
	start := time.Now()
	resp, err := apis[rq.key].handle(c.withPrincipal(ctx), c, rq.req)
	c.s.record(rq, resp, err, time.Since(start)) // metrics.go
	if err != nil || resp == nil {
		c.giveBack() // no answer (acks=0, or an error) refers to them
		return err
	}
	err = c.write(rq, rq.req.IsFlexible() && rq.key != apiVersionsKey, resp)
	c.giveBack() // the answer is sent: what its fetches read into is free
	if err != nil {
		return err
	}
	if c.auth.hangUp {
		return errCloseConnection
	}
	return nil
}

// requestTime is how long a request may ask the broker to wait (a
// produce's timeout, a fetch's max wait).
func requestTime(req kmsg.Request) time.Duration {
	switch r := req.(type) {
	case kmsg.TimeoutRequest:
		return time.Duration(max(r.Timeout(), 0)) * time.Millisecond
	case *kmsg.FetchRequest:
		return time.Duration(max(r.MaxWaitMillis, 0)) * time.Millisecond
	case *kmsg.JoinGroupRequest:
		// A classic group's join waits for its join phase.
		return time.Duration(max(r.RebalanceTimeoutMillis, r.SessionTimeoutMillis, 0)) * time.Millisecond
	}
	return 0
}

// write sends resp as the answer to rq, with a v1 response header
// (tagged fields) when flexible.
func (c *conn) write(rq request, flexible bool, resp kmsg.Response) error {
	out := c.out
	large := false
	if need := encodedSizeHint(resp); need > cap(out) {
		// A fetch answer of several MiB, built in one buffer of the
		// right size from the pool: growing one as kmsg appends would
		// copy its batches several times over, and a fresh one per
		// answer is garbage the collector must scan.
		out, large = largeBuffers.get(need), true
	}
	b := append(out[:0], 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(rq.correlation))
	if flexible {
		b = append(b, 0) // no tagged fields
	}
	b = resp.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.RequestTimeout))
	_, err := c.nc.Write(b)
	switch {
	case large || cap(b) > 1<<20:
		largeBuffers.put(b)
	default:
		c.out = b // keep a small buffer for the next answer
	}
	return err
}

// encodedSizeHint is about the size of resp encoded, or 0 when it is
// small: for a Fetch answer, its record batches and room for the rest.
func encodedSizeHint(resp kmsg.Response) int {
	f, ok := resp.(*kmsg.FetchResponse)
	if !ok {
		return 0
	}
	n := 1 << 10
	for _, t := range f.Topics {
		n += 64 + len(t.Topic)
		for _, p := range t.Partitions {
			n += 128 + len(p.RecordBatches) + 32*len(p.AbortedTransactions)
		}
	}
	return n
}

// lend is broker.FetchRequest.Buffer: a buffer of n bytes for a read of
// the local log, from the pool, kept until the answer is written.
func (c *conn) lend(n int) []byte {
	b := readBuffers.get(n)[:n]
	c.lent = append(c.lent, b)
	return b
}

// poisonGivenBack, set by tests, overwrites each buffer given back, so an
// answer still referring to one shows it.
var poisonGivenBack bool

// hold keeps res, until the answer is written, from handing the chunk its
// batches lie in back to the cold reader.
func (c *conn) hold(res broker.FetchResult) {
	c.held = append(c.held, res)
}

// giveBack returns what lend lent to the pool, and releases what hold
// held.
func (c *conn) giveBack() {
	for i, res := range c.held {
		res.Release()
		c.held[i] = broker.FetchResult{}
	}
	c.held = c.held[:0]
	for i, b := range c.lent {
		if poisonGivenBack {
			for j := range b {
				b[j] = 0xEE
			}
		}
		readBuffers.put(b)
		c.lent[i] = nil
	}
	c.lent = c.lent[:0]
}

// readBuffers keeps the buffers fetches read the log into, across
// connections, so that serving a fetch allocates none in the steady state.
var readBuffers bufferPool

// largeBuffers keeps answer buffers of more than 1 MiB for reuse across
// connections; the collector empties it of those nobody needs.
var largeBuffers bufferPool

type bufferPool struct{ p sync.Pool }

// maxPooledBuffer bounds what is kept: a buffer this large is rare.
const maxPooledBuffer = 64 << 20

func (bp *bufferPool) get(n int) []byte {
	if v, ok := bp.p.Get().(*[]byte); ok && cap(*v) >= n {
		return (*v)[:0]
	}
	return make([]byte, 0, n)
}

func (bp *bufferPool) put(b []byte) {
	if cap(b) <= maxPooledBuffer {
		b = b[:0]
		bp.p.Put(&b)
	}
}
