package kafka

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/rpc"
	"github.com/strata-log/strata/security"
)

// syncBuffer is a log a test reads while connections write to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// secureBroker is a broker whose Kafka listener speaks TLS with the
// certificates of a development CA (broker 1, clients alice, bob and
// admin), authenticates, and holds clients to the ACLs.
type secureBroker struct {
	*testBroker
	dir      string
	grpcAddr string // the broker's gRPC listener, with the same rules
	log      *syncBuffer
	tokens   map[string]string // principal -> token
}

// startSecureBroker starts one; sasl are the mechanisms offered (none:
// client certificates only, required at the handshake).
func startSecureBroker(t *testing.T, mechanisms ...string) *secureBroker {
	t.Helper()
	dir := t.TempDir()
	if err := security.WriteDevCerts(dir, security.DevCerts{Brokers: 1, Clients: []string{"alice", "bob", "admin"}}); err != nil {
		t.Fatal(err)
	}
	m, err := security.LoadMaterial(security.Files{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "broker-1.pem"), Key: filepath.Join(dir, "broker-1-key.pem")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sb := &secureBroker{dir: dir, log: &syncBuffer{}, tokens: map[string]string{}}
	var lines []string
	for _, p := range []string{"User:alice", "User:bob"} {
		token, line, err := security.NewToken(p)
		if err != nil {
			t.Fatal(err)
		}
		sb.tokens[p] = token
		lines = append(lines, line)
	}
	tokensFile := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokensFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := security.LoadTokens(tokensFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(sb.log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var b atomic.Pointer[broker.Broker] // set before any client connects
	// As strata serve wires it: the gRPC listener's rules, shared.
	rpcAuth := &rpc.Auth{Material: m, Tokens: tokens, Cluster: security.DefaultCluster, Superusers: []string{"User:admin"},
		ACLs: func() []security.ACL { return b.Load().ACLsInForce() }, Log: logger}
	sb.testBroker = startBroker(t, func(c *Config) {
		c.Auth, c.SASL, c.Logger = rpcAuth.Policy(), mechanisms, logger
		c.TLS = m.ServerConfig(len(mechanisms) == 0, nil)
	})
	b.Store(sb.Broker)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	grpcSrv := rpc.NewServer(sb.Broker, rpcAuth)
	go grpcSrv.Serve(lis)
	t.Cleanup(grpcSrv.Stop) // runs before the broker closes (cleanups run last first)
	sb.grpcAddr = lis.Addr().String()
	return sb
}

// grpcClient is a gRPC client of sb with the client certificate of name.
func (sb *secureBroker) grpcClient(t *testing.T, name string) *client.Client {
	t.Helper()
	cfg, err := client.TLSConfig(filepath.Join(sb.dir, "ca.pem"), filepath.Join(sb.dir, "client-"+name+".pem"), filepath.Join(sb.dir, "client-"+name+"-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(testCtx(t), []string{sb.grpcAddr}, client.WithTLS(cfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// tlsConfig is a client's TLS configuration, with the client certificate
// of name ("" for none).
func (sb *secureBroker) tlsConfig(t *testing.T, name string) *tls.Config {
	t.Helper()
	caPEM, err := os.ReadFile(filepath.Join(sb.dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cfg := &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}
	if name != "" {
		cert, err := tls.LoadX509KeyPair(filepath.Join(sb.dir, "client-"+name+".pem"), filepath.Join(sb.dir, "client-"+name+"-key.pem"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg
}

// grant adds ACLs giving principal ops on topic.
func (sb *secureBroker) grant(t *testing.T, principal, topic string, ops ...security.Operation) {
	t.Helper()
	var acls []security.ACL
	for _, op := range ops {
		acls = append(acls, security.ACL{Principal: principal, Resource: security.ResourceTopic, Name: topic, Op: op})
	}
	if err := sb.AddACLs(testCtx(t), acls); err != nil {
		t.Fatal(err)
	}
}

// tlsClient is a kgo client over TLS with the client certificate of name.
func (sb *secureBroker) tlsClient(t *testing.T, name string, opts ...kgo.Opt) *kgo.Client {
	return sb.client(t, append([]kgo.Opt{kgo.DialTLSConfig(sb.tlsConfig(t, name)), kgo.RetryTimeout(3 * time.Second)}, opts...)...)
}

// produceConsume produces a record to topic and reads it back.
func produceConsume(t *testing.T, sb *secureBroker, cl *kgo.Client, topic string) {
	t.Helper()
	ctx := testCtx(t)
	want := fmt.Appendf(nil, "secret value %d", time.Now().UnixNano())
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: want}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}})
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		for _, e := range fs.Errors() {
			t.Fatalf("consume: %v", e.Err)
		}
		for _, r := range fs.Records() {
			if bytes.Equal(r.Value, want) {
				return
			}
		}
	}
}

// TestTLSClientCertificate: over TLS, a client certificate is the
// principal gRPC would make of it (User:alice), held to the ACLs: with
// read and write on a topic, kgo produces and consumes; a client without a
// certificate is refused at the handshake when only certificates
// authenticate.
func TestTLSClientCertificate(t *testing.T) {
	sb := startSecureBroker(t)
	sb.createTopic(t, "orders", 1)
	sb.grant(t, "User:alice", "orders", security.OpRead, security.OpWrite)
	produceConsume(t, sb, sb.tlsClient(t, "alice", kgo.DisableIdempotentWrite()), "orders")
	// Idempotent: InitProducerId as alice, then the produce.
	produceConsume(t, sb, sb.tlsClient(t, "alice"), "orders")

	anon := sb.tlsClient(t, "")
	if err := anon.Ping(testCtx(t)); err == nil {
		t.Fatal("a client without a certificate reached the broker")
	}
	plainCl := sb.client(t, kgo.RetryTimeout(time.Second)) // no TLS at all
	if err := plainCl.Ping(testCtx(t)); err == nil {
		t.Fatal("a plaintext client reached the TLS listener")
	}
}

// TestKafkaACLDenial: a principal without an ACL on a topic gets
// TOPIC_AUTHORIZATION_FAILED for produce, fetch and list offsets, nothing
// is written, and the topic is hidden from its Metadata as gRPC hides it
// (broker.Visibility), while a superuser sees it; the denial is logged by
// the broker's rules, as gRPC's are.
func TestKafkaACLDenial(t *testing.T) {
	sb := startSecureBroker(t)
	secret := sb.createTopic(t, "secret", 1)
	sb.createTopic(t, "open", 1)
	sb.grant(t, "User:bob", "open", security.OpRead)
	ctx := testCtx(t)
	bob := sb.tlsClient(t, "bob", kgo.DisableIdempotentWrite())

	err := bob.ProduceSync(ctx, &kgo.Record{Topic: "secret", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce to secret: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	raw := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := bob.Broker(1).Request(ctx, req) // to the broker itself: kgo would ask Metadata first
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	produce := kmsg.NewPtrProduceRequest()
	produce.Acks, produce.TimeoutMillis = -1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "secret"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = []byte("not even a batch: refused before it is read")
	pt.Partitions = append(pt.Partitions, pp)
	produce.Topics = append(produce.Topics, pt)
	if code := raw(produce).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("produce to secret: code %d", code)
	}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(11)
	fetch.MaxBytes = 1 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = "secret", topicID(secret.ID) // kgo sends the newest version, by id
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	if code := raw(fetch).(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("fetch of secret: code %d", code)
	}
	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "secret"
	lt.Partitions = append(lt.Partitions, kmsg.NewListOffsetsRequestTopicPartition())
	lo.Topics = append(lo.Topics, lt)
	if code := raw(lo).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("list offsets of secret: code %d", code)
	}
	// Kafka's special times too: -3 would tell the largest timestamp.
	for _, ts := range []int64{-3, -4, -5} {
		lo.Topics[0].Partitions[0].Timestamp = ts
		if p := raw(lo).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.TopicAuthorizationFailed.Code {
			t.Fatalf("list offsets %d of secret: code %d, offset %d, timestamp %d", ts, p.ErrorCode, p.Offset, p.Timestamp)
		}
	}

	names := func(cl *kgo.Client) []string {
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, mt := range resp.Topics {
			out = append(out, *mt.Topic)
		}
		return out
	}
	if got := names(bob); strings.Join(got, ",") != "open" {
		t.Fatalf("bob's metadata lists %v, want only open", got)
	}
	// gRPC shows bob the same: one rule for both front ends.
	md, err := sb.grpcClient(t, "bob").Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(md.GetTopics()) != 1 || md.GetTopics()[0].GetName() != "open" {
		t.Fatalf("bob's gRPC metadata lists %v, want only open", md.GetTopics())
	}
	if got := names(sb.tlsClient(t, "admin")); len(got) != 2 {
		t.Fatalf("the superuser's metadata lists %v, want both topics", got)
	}
	named := kmsg.NewPtrMetadataRequest()
	for _, n := range []string{"secret", "no-such-topic", "open"} {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(n)
		named.Topics = append(named.Topics, mt)
	}
	resp := raw(named).(*kmsg.MetadataResponse)
	for i, want := range []int16{kerr.TopicAuthorizationFailed.Code, kerr.TopicAuthorizationFailed.Code, 0} {
		if resp.Topics[i].ErrorCode != want {
			t.Fatalf("metadata of %s: code %d, want %d", *resp.Topics[i].Topic, resp.Topics[i].ErrorCode, want)
		}
	}
	if res, err := sb.Fetch(ctx, broker.FetchRequest{Topic: "secret", MaxBytes: 1 << 20}); err != nil || res.HighWatermark != 0 {
		t.Fatalf("secret after denied produces: %+v %v", res, err)
	}
	if !strings.Contains(sb.log.String(), `msg="request denied" principal=User:bob operation=write resource="topic secret"`) {
		t.Fatalf("the denial is not logged as the broker logs denials:\n%s", sb.log)
	}
}

// TestSASLPlainToken: SASL/PLAIN takes a Strata token as the password;
// the user name may be empty or the token's own; a wrong token, or another
// user's name, fails with SASL_AUTHENTICATION_FAILED, logged once with the
// remote address and never the token.
func TestSASLPlainToken(t *testing.T) {
	sb := startSecureBroker(t, "PLAIN")
	sb.createTopic(t, "orders", 1)
	sb.grant(t, "User:alice", "orders", security.OpRead, security.OpWrite)
	token := sb.tokens["User:alice"]
	// (An empty user name is tested raw in TestSASLStates: kgo sends none.)
	for _, user := range []string{"alice", "User:alice"} {
		cl := sb.tlsClient(t, "", kgo.SASL(plain.Auth{User: user, Pass: token}.AsMechanism()))
		produceConsume(t, sb, cl, "orders")
	}
	for _, bad := range []plain.Auth{
		{User: "alice", Pass: "not-a-token"},
		{User: "bob", Pass: token}, // alice's token under bob's name
	} {
		cl := sb.tlsClient(t, "", kgo.SASL(bad.AsMechanism()))
		if err := cl.Ping(testCtx(t)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("PLAIN %s: %v, want SASL_AUTHENTICATION_FAILED", bad.User, err)
		}
	}
	log := sb.log.String()
	if strings.Contains(log, token) || strings.Contains(log, "not-a-token") {
		t.Fatalf("the log holds a secret:\n%s", log)
	}
	if n := strings.Count(log, `msg="kafka: authentication failed"`); n < 2 || !strings.Contains(log, "remote=127.0.0.1:") || !strings.Contains(log, "mechanism=PLAIN user=bob") {
		t.Fatalf("%d failures logged, want each with its remote address and user:\n%s", n, log)
	}
}

// TestSASLSCRAM: SCRAM-SHA-256 and SCRAM-SHA-512 against credentials the
// cluster stores: the right password produces and consumes as User:<name>,
// a wrong one or an unknown user fails with SASL_AUTHENTICATION_FAILED,
// and a deleted credential stops working.
func TestSASLSCRAM(t *testing.T) {
	sb := startSecureBroker(t, "SCRAM-SHA-256", "SCRAM-SHA-512")
	sb.createTopic(t, "orders", 1)
	sb.grant(t, "User:carol", "orders", security.OpRead, security.OpWrite)
	ctx := testCtx(t)
	for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		salt := security.NewSCRAMSalt()
		salted, err := security.SCRAMSaltedPassword(mech, "carol's password", salt, 4096)
		if err != nil {
			t.Fatal(err)
		}
		if err := sb.SetSCRAMCredential(ctx, "carol", mech, salt, 4096, salted); err != nil {
			t.Fatal(err)
		}
	}
	mechOf := func(mech, user, pass string) sasl.Mechanism {
		a := scram.Auth{User: user, Pass: pass}
		if mech == "SCRAM-SHA-256" {
			return a.AsSha256Mechanism()
		}
		return a.AsSha512Mechanism()
	}
	for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		produceConsume(t, sb, sb.tlsClient(t, "", kgo.SASL(mechOf(mech, "carol", "carol's password"))), "orders")
		for _, bad := range [][2]string{{"carol", "wrong"}, {"dave", "carol's password"}} {
			cl := sb.tlsClient(t, "", kgo.SASL(mechOf(mech, bad[0], bad[1])))
			if err := cl.Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("%s %s/%s: %v, want SASL_AUTHENTICATION_FAILED", mech, bad[0], bad[1], err)
			}
		}
	}
	if err := sb.DeleteSCRAMCredential(ctx, "carol", "SCRAM-SHA-512"); err != nil {
		t.Fatal(err)
	}
	if err := sb.tlsClient(t, "", kgo.SASL(mechOf("SCRAM-SHA-512", "carol", "carol's password"))).Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a deleted credential: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	produceConsume(t, sb, sb.tlsClient(t, "", kgo.SASL(mechOf("SCRAM-SHA-256", "carol", "carol's password"))), "orders")
	if strings.Contains(sb.log.String(), "carol's password") {
		t.Fatalf("the log holds a password:\n%s", sb.log)
	}
}

// tlsRaw is a raw connection over TLS without a client certificate.
func (sb *secureBroker) tlsRaw(t *testing.T) *rawConn {
	c := dialRaw(t, sb.addr)
	tc := tls.Client(c.nc, sb.tlsConfig(t, ""))
	c.nc = tc
	c.br.Reset(tc)
	return c
}

// recvRaw reads one size-prefixed raw frame.
func (c *rawConn) recvRaw() []byte {
	c.t.Helper()
	var size [4]byte
	if _, err := c.br.Read(size[:1]); err != nil {
		c.t.Fatalf("read raw answer: %v", err)
	}
	if _, err := c.br.Read(size[1:]); err != nil {
		c.t.Fatalf("read raw answer: %v", err)
	}
	b := make([]byte, int(size[0])<<24|int(size[1])<<16|int(size[2])<<8|int(size[3]))
	if _, err := c.br.Read(b); err != nil && len(b) > 0 {
		c.t.Fatalf("read raw answer: %v", err)
	}
	return b
}

// TestSASLStates: before authentication only ApiVersions and SASL are
// served (anything else closes the connection) in frames of at most 512
// KiB; a mechanism not offered is UNSUPPORTED_SASL_MECHANISM, and
// SaslAuthenticate without a handshake ILLEGAL_SASL_STATE, each answered
// and the connection closed; a v0 handshake followed by a raw PLAIN token
// authenticates, as old clients do.
func TestSASLStates(t *testing.T) {
	sb := startSecureBroker(t, "PLAIN")
	sb.createTopic(t, "orders", 1)
	sb.grant(t, "User:alice", "orders", security.OpRead)

	c := sb.tlsRaw(t)
	c.send(frameOf(kmsg.NewPtrApiVersionsRequest(), 3, 1))
	if _, body := c.recv(); len(body) == 0 {
		t.Fatal("no ApiVersions answer before authentication")
	}
	c.send(frameOf(kmsg.NewPtrMetadataRequest(), 4, 2))
	c.closed(5 * time.Second)

	c = sb.tlsRaw(t)
	big := make([]byte, 4)
	big[1] = 0x08 // 512 KiB + 1 after the next byte
	big[3] = 0x01
	c.send(big)
	c.closed(5 * time.Second)

	c = sb.tlsRaw(t)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "SCRAM-SHA-256"
	c.send(frameOf(hs, 1, 3))
	_, body := c.recv()
	hr := kmsg.NewPtrSASLHandshakeResponse()
	hr.Version = 1
	if err := hr.ReadFrom(body); err != nil || hr.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(hr.SupportedMechanisms, ",") != "PLAIN" {
		t.Fatalf("handshake for a mechanism not offered: %+v %v", hr, err)
	}
	c.closed(5 * time.Second)

	c = sb.tlsRaw(t)
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.SASLAuthBytes = []byte("\x00alice\x00" + sb.tokens["User:alice"])
	c.send(frameOf(au, 1, 4))
	_, body = c.recv()
	ar := kmsg.NewPtrSASLAuthenticateResponse()
	ar.Version = 1
	if err := ar.ReadFrom(body); err != nil || ar.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslAuthenticate without a handshake: %+v %v", ar, err)
	}
	c.closed(5 * time.Second)

	// v0: the token follows raw; the answer is an empty raw frame. The
	// user name may be empty.
	c = sb.tlsRaw(t)
	hs.Mechanism = "PLAIN"
	c.send(frameOf(hs, 0, 5))
	_, body = c.recv()
	hr.Version = 0
	if err := hr.ReadFrom(body); err != nil || hr.ErrorCode != 0 {
		t.Fatalf("v0 handshake: %+v %v", hr, err)
	}
	token := []byte("\x00\x00" + sb.tokens["User:alice"])
	c.send(append([]byte{0, 0, 0, byte(len(token))}, token...))
	if answer := c.recvRaw(); len(answer) != 0 {
		t.Fatalf("raw PLAIN answer %q, want empty", answer)
	}
	c.send(frameOf(kmsg.NewPtrMetadataRequest(), 4, 6))
	_, body = c.recv()
	mr := kmsg.NewPtrMetadataResponse()
	mr.Version = 4
	if err := mr.ReadFrom(body); err != nil || len(mr.Topics) != 1 || *mr.Topics[0].Topic != "orders" {
		t.Fatalf("metadata after a raw PLAIN login: %+v %v", mr, err)
	}

	// A wrong raw token closes the connection without an answer.
	c = sb.tlsRaw(t)
	c.send(frameOf(hs, 0, 7))
	c.recv()
	bad := []byte("\x00alice\x00wrong")
	c.send(append([]byte{0, 0, 0, byte(len(bad))}, bad...))
	c.closed(5 * time.Second)

	// v1: a wrong token is SASL_AUTHENTICATION_FAILED, then the
	// connection closes.
	c = sb.tlsRaw(t)
	c.send(frameOf(hs, 1, 8))
	c.recv()
	au.SASLAuthBytes = bad
	c.send(frameOf(au, 2, 9))
	_, body = c.recv()
	ar.Version = 2
	// Flexible: past the response header's tags.
	if err := ar.ReadFrom(body[1:]); err != nil || ar.ErrorCode != kerr.SaslAuthenticationFailed.Code || ar.ErrorMessage == nil || strings.Contains(*ar.ErrorMessage, "wrong") {
		t.Fatalf("SaslAuthenticate with a wrong token: %+v %v", ar, err)
	}
	c.closed(5 * time.Second)

	// Each refused connection is logged once, as a warning with its
	// remote address: the request before authentication, the mechanism not
	// offered, the authenticate without a handshake, the wrong raw token,
	// the wrong v1 token.
	var failures []string
	for _, line := range strings.Split(sb.log.String(), "\n") {
		if strings.Contains(line, `msg="kafka: authentication failed"`) {
			failures = append(failures, line)
		}
	}
	if len(failures) != 5 {
		t.Fatalf("%d failures logged, want 5:\n%s", len(failures), strings.Join(failures, "\n"))
	}
	for _, line := range failures {
		if !strings.Contains(line, "level=WARN") || !strings.Contains(line, "remote=127.0.0.1:") || strings.Contains(line, "wrong") {
			t.Errorf("failure logged as %s", line)
		}
	}
}

// TestNoAuthenticationWithoutTLS: a Config with Auth needs TLS, and SASL
// needs Auth, so a listener never takes credentials in the clear or
// offers SASL it cannot check.
func TestNoAuthenticationWithoutTLS(t *testing.T) {
	if _, err := NewServer(nil, Config{Advertise: "127.0.0.1:9092", Auth: &broker.Auth{}}); err == nil {
		t.Fatal("Auth without TLS accepted")
	}
	if _, err := NewServer(nil, Config{Advertise: "127.0.0.1:9092", SASL: []string{"PLAIN"}}); err == nil {
		t.Fatal("SASL without Auth accepted")
	}
	if _, err := NewServer(nil, Config{Advertise: "127.0.0.1:9092", Auth: &broker.Auth{}, TLS: &tls.Config{}, SASL: []string{"GSSAPI"}}); err == nil {
		t.Fatal("an unknown mechanism accepted")
	}
}

// TestTLSConnectionsForgotten: a TLS connection that ends is forgotten by
// the server like a plaintext one (the server tracks the connection under
// the TLS layer, and must untrack that one).
func TestTLSConnectionsForgotten(t *testing.T) {
	sb := startSecureBroker(t)
	cl := sb.tlsClient(t, "admin")
	if err := cl.Ping(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	c := sb.tlsRaw(t) // no certificate: refused at the handshake
	c.closed(5 * time.Second)
	testutil.Eventually(t, 10*time.Second, "no connection tracked", func() error {
		sb.srv.mu.Lock()
		n := len(sb.srv.mu.conns)
		sb.srv.mu.Unlock()
		if n != 0 {
			return fmt.Errorf("%d connections still tracked after every client left", n)
		}
		return nil
	})
}

// TestEveryAPIHasARule: every API served says how it is authorized
// (auth.go), and the table names nothing that is not served; an API
// without a rule would be refused on a listener that authenticates.
func TestEveryAPIHasARule(t *testing.T) {
	for key := range apis {
		if _, ok := authorization[key]; !ok {
			t.Errorf("%s (%d) is served but has no rule in authorization", kmsg.NameForKey(key), key)
		}
	}
	for key := range authorization {
		if _, ok := apis[key]; !ok {
			t.Errorf("authorization has a rule for %s (%d), which is not served", kmsg.NameForKey(key), key)
		}
	}
	for key := range preAuth {
		if _, ok := apis[key]; !ok {
			t.Errorf("%d is served before authentication but not at all", key)
		}
	}
}

// TestNoSASLOnPlaintext: a listener without authentication (a plaintext
// development broker) offers no SASL mechanism: a handshake is answered
// UNSUPPORTED_SASL_MECHANISM with an empty list and the connection closes.
func TestNoSASLOnPlaintext(t *testing.T) {
	tb := startBroker(t)
	c := dialRaw(t, tb.addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "PLAIN"
	c.send(frameOf(hs, 1, 1))
	_, body := c.recv()
	hr := kmsg.NewPtrSASLHandshakeResponse()
	hr.Version = 1
	if err := hr.ReadFrom(body); err != nil || hr.ErrorCode != kerr.UnsupportedSaslMechanism.Code || len(hr.SupportedMechanisms) != 0 {
		t.Fatalf("handshake on a plaintext listener: %+v %v", hr, err)
	}
	c.closed(5 * time.Second)
}
