package config

import (
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Validate checks every broker setting and the rules between them, and
// returns the first violation as an *Error whose Key is the YAML path.
// Secrets are never echoed in errors.
func (b Broker) Validate() error {
	if b.NodeID < 0 {
		return &Error{Key: "node_id", Value: strconv.Itoa(int(b.NodeID)), Allowed: "an integer from 0 to 2147483647"}
	}
	if strings.TrimSpace(b.DataDir) == "" {
		return &Error{Key: "data_dir", Value: b.DataDir, Allowed: "a directory path", Reason: "required"}
	}
	if err := b.validateAddresses(); err != nil {
		return err
	}
	if !b.ReadReplica { // a read-only replica gossips with no one
		if err := b.Gossip.validate(); err != nil {
			return err
		}
	}
	if err := b.validateSecurity(); err != nil {
		return err
	}
	if err := b.validateKafkaSASL(); err != nil {
		return err
	}
	if err := b.ObjectStore.validate(); err != nil {
		return err
	}
	if err := b.validateReadReplica(); err != nil {
		return err
	}
	topic, err := b.TopicDefaults()
	if err != nil {
		return err
	}
	if b.Storage.SharedSyncAfter < 0 {
		return &Error{Key: "storage.shared_sync_after", Value: strconv.Itoa(b.Storage.SharedSyncAfter), Allowed: "fsyncs at once, 1 or more, or 0 to turn sharing off"}
	}
	if b.Storage.MinFreeBytes < 0 {
		return &Error{Key: "storage.min_free_bytes", Value: b.Storage.MinFreeBytes.String(), Allowed: "a size such as 64MiB, or 0 to disable"}
	}
	if err := b.Tiering.validate(topic); err != nil {
		return err
	}
	if b.Tiering.OrphanGrace <= 0 {
		return &Error{Key: "tiering.orphan_grace", Value: b.Tiering.OrphanGrace.String(), Allowed: "a positive duration such as 10m"}
	}
	if b.Tiering.RetiredGrace <= 0 {
		return &Error{Key: "tiering.retired_grace", Value: b.Tiering.RetiredGrace.String(), Allowed: "a positive duration such as 5m"}
	}
	if b.Tiering.ColdCleanerIOMaxBytesPerSecond < 0 {
		return &Error{Key: "tiering.cold_cleaner_io_max_bytes_per_second", Value: b.Tiering.ColdCleanerIOMaxBytesPerSecond.String(), Allowed: "a size per second such as 25MiB, or 0 for unlimited"}
	}
	if b.Cleaner.IOMaxBytesPerSecond < 0 {
		return &Error{Key: "cleaner.io_max_bytes_per_second", Value: b.Cleaner.IOMaxBytesPerSecond.String(), Allowed: "a size per second such as 50MiB, or 0 for unlimited"}
	}
	if b.Cleaner.DedupeBufferSize < 1<<20 {
		return &Error{Key: "cleaner.dedupe_buffer_size", Value: b.Cleaner.DedupeBufferSize.String(), Allowed: "a size of at least 1MiB, such as 128MiB"}
	}
	if b.Cleaner.Backoff <= 0 {
		return &Error{Key: "cleaner.backoff", Value: b.Cleaner.Backoff.String(), Allowed: "a positive duration such as 15s"}
	}
	// Followers send their position at least every half second: a shorter
	// lag would take live but idle followers out of the ISR.
	if b.Replica.LagTimeMax < Duration(time.Second) {
		return &Error{Key: "replica.lag_time_max", Value: b.Replica.LagTimeMax.String(), Allowed: "a duration of at least 1s, such as 30s"}
	}
	if b.Controller.DeadBrokerTimeout <= 0 {
		return &Error{Key: "controller.dead_broker_timeout", Value: b.Controller.DeadBrokerTimeout.String(), Allowed: "a positive duration such as 5m"}
	}
	if err := b.Kafka.validate(); err != nil {
		return err
	}
	if err := b.Limits.validate(); err != nil {
		return err
	}
	if err := b.Quotas.validate(); err != nil {
		return err
	}
	if !oneOf(b.Log.Level, "debug", "info", "warn", "error") {
		return &Error{Key: "log.level", Value: b.Log.Level, Allowed: "debug, info, warn or error"}
	}
	if !oneOf(b.Log.Format, "text", "json") {
		return &Error{Key: "log.format", Value: b.Log.Format, Allowed: "text or json"}
	}
	return nil
}

const (
	allowedListen    = "host:port such as 127.0.0.1:7400 or 0.0.0.0:7400"
	allowedAdvertise = "empty (the listen address) or a host:port others can reach, such as broker1:7400"
)

// validateAddresses checks the listeners, what they advertise, and that no
// two listeners want the same port.
func (b Broker) validateAddresses() error {
	listeners := []struct{ key, addr, advKey, adv string }{
		{"listen", b.Listen, "advertise", b.Advertise},
		{"raft.listen", b.Raft.Listen, "raft.advertise", b.Raft.Advertise},
		{"gossip.listen", b.Gossip.Listen, "gossip.advertise", b.Gossip.Advertise},
		{"admin.listen", b.Admin.Listen, "", ""},
		{"kafka.listen", b.Kafka.Listen, "kafka.advertise", b.Kafka.Advertise},
	}
	if b.ReadReplica {
		// A read-only replica opens neither Raft nor gossip: their
		// addresses are neither checked nor held against the others, so
		// a replica beside a broker with the default ports can start with
		// only listen and admin.listen moved.
		listeners = slices.DeleteFunc(listeners, func(l struct{ key, addr, advKey, adv string }) bool {
			return strings.HasPrefix(l.key, "raft.") || strings.HasPrefix(l.key, "gossip.")
		})
	}
	for _, l := range listeners {
		if l.addr == "" && (l.key == "admin.listen" || l.key == "kafka.listen") {
			continue // no admin endpoint, no Kafka listener
		}
		if err := checkHostPort(l.key, l.addr, allowedListen, false); err != nil {
			return err
		}
		if l.adv != "" {
			if err := checkHostPort(l.advKey, l.adv, allowedAdvertise, true); err != nil {
				return err
			}
			continue
		}
		// Peers and clients dial what is advertised: a wildcard address is
		// not something they can dial. memberlist picks a concrete address
		// by itself, so gossip is exempt.
		host, _, _ := net.SplitHostPort(l.addr)
		if l.advKey != "" && l.advKey != "gossip.advertise" && isWildcard(host) {
			return &Error{Key: l.advKey, Value: "", Allowed: "a host:port others can reach, such as broker1:7400",
				Reason: l.key + " is " + l.addr + ", which others cannot dial; set " + l.advKey}
		}
	}
	for i, a := range listeners {
		for _, c := range listeners[:i] {
			if a.addr != "" && c.addr != "" && sameListener(a.addr, c.addr) {
				return &Error{Key: a.key, Value: a.addr, Allowed: "a port no other listener uses",
					Reason: "conflicts with " + c.key + " (" + c.addr + ")"}
			}
		}
	}
	return nil
}

// validateSecurity checks the TLS files come as a set and that a broker
// without them stays on loopback unless told otherwise.
func (b Broker) validateSecurity() error {
	s := b.Security
	files := []struct{ key, path string }{
		{"security.tls.ca_file", s.TLS.CAFile}, {"security.tls.cert_file", s.TLS.CertFile}, {"security.tls.key_file", s.TLS.KeyFile},
	}
	set := 0
	for _, f := range files {
		if f.path != "" {
			set++
		}
	}
	if set != 0 && set != len(files) {
		for _, f := range files {
			if f.path == "" {
				return &Error{Key: f.key, Allowed: "a PEM file path", Reason: "TLS needs the CA, certificate and key files together"}
			}
		}
	}
	if s.ClusterName == "" || strings.ContainsAny(s.ClusterName, " /\t\n") {
		return &Error{Key: "security.cluster_name", Value: s.ClusterName, Allowed: "a DNS label such as strata"}
	}
	for _, p := range s.Superusers {
		if name, ok := strings.CutPrefix(p, "User:"); !ok || name == "" {
			return &Error{Key: "security.superusers", Value: p, Allowed: "principals such as User:admin"}
		}
	}
	if !s.Enabled() {
		if s.TokensFile != "" {
			return &Error{Key: "security.tokens_file", Value: s.TokensFile, Allowed: "empty without TLS",
				Reason: "tokens sent in plaintext could be read off the wire; set security.tls.*"}
		}
		if s.AllowPlaintext {
			return nil
		}
		for _, l := range []struct{ key, addr string }{
			{"listen", b.Listen}, {"raft.listen", b.Raft.Listen}, {"gossip.listen", b.Gossip.Listen}, {"admin.listen", b.Admin.Listen},
			{"kafka.listen", b.Kafka.Listen},
		} {
			if b.ReadReplica && (l.key == "raft.listen" || l.key == "gossip.listen") {
				continue // not opened by a read-only replica
			}
			if host, _, err := net.SplitHostPort(l.addr); err == nil && !isLoopback(host) {
				return &Error{Key: l.key, Value: l.addr, Allowed: "a loopback address without TLS",
					Reason: "without TLS anyone who reaches it may do anything; set security.tls.* (strata dev certs makes a development set) or security.allow_plaintext"}
			}
		}
		return nil
	}
	if b.Gossip.SecretKey == "" && !b.ReadReplica { // a read replica gossips with no one
		return &Error{Key: "gossip.secret_key", Allowed: "base64 of a 16, 24 or 32-byte key",
			Reason: "with TLS gossip must be encrypted too (strata dev certs writes a key to gossip.key)"}
	}
	return nil
}

// isLoopback reports whether host is only reachable from this machine.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkHostPort checks host:port syntax; dialable also demands a concrete
// host and port, as an advertised or seed address must have.
func checkHostPort(key, addr, allowed string, dialable bool) *Error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return &Error{Key: key, Value: addr, Allowed: allowed, Reason: "not host:port"}
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return &Error{Key: key, Value: addr, Allowed: allowed, Reason: "port must be a number from 0 to 65535"}
	}
	if dialable && isWildcard(host) {
		return &Error{Key: key, Value: addr, Allowed: allowed, Reason: "needs a host others can dial, not a wildcard"}
	}
	if dialable && p == 0 {
		return &Error{Key: key, Value: addr, Allowed: allowed, Reason: "needs a port others can dial, not 0"}
	}
	return nil
}

// isWildcard reports whether host means "every interface".
func isWildcard(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// sameListener reports whether two listen addresses would fight over one
// port. Port 0 asks the kernel for a free port, so it never conflicts.
func sameListener(a, b string) bool {
	ha, pa, _ := net.SplitHostPort(a)
	hb, pb, _ := net.SplitHostPort(b)
	if pa != pb || pa == "0" {
		return false
	}
	return ha == hb || isWildcard(ha) || isWildcard(hb)
}

// validate checks gossip seeds, key and bootstrap count.
func (g Gossip) validate() error {
	for _, seed := range g.Join {
		if err := checkHostPort("gossip.join", seed, "host:port seed addresses such as broker1:7402", true); err != nil {
			return err
		}
	}
	if g.SecretKey != "" {
		key, err := g.SecretKeyBytes()
		if err != nil || (len(key) != 16 && len(key) != 24 && len(key) != 32) {
			return &Error{Key: "gossip.secret_key", Value: g.SecretKey.String(),
				Allowed: "base64 of a 16, 24 or 32-byte key, e.g. from `openssl rand -base64 32`"}
		}
	}
	if g.BootstrapExpect < 1 {
		return &Error{Key: "gossip.bootstrap_expect", Value: strconv.Itoa(g.BootstrapExpect), Allowed: "an integer of at least 1"}
	}
	if !oneOf(g.Profile, "lan", "local") {
		return &Error{Key: "gossip.profile", Value: g.Profile, Allowed: "lan or local"}
	}
	return nil
}

// validate checks the object store settings its type needs.
func (o ObjectStore) validate() error {
	if !oneOf(o.Type, ObjectStoreFS, ObjectStoreS3, ObjectStoreNone) {
		return &Error{Key: "object_store.type", Value: o.Type, Allowed: "fs, s3 or none"}
	}
	if err := o.validatePrefix(); err != nil {
		return err
	}
	if o.Type != ObjectStoreS3 {
		return nil
	}
	if reason := bucketNameProblem(o.Bucket); reason != "" {
		return &Error{Key: "object_store.bucket", Value: o.Bucket, Reason: reason,
			Allowed: "an S3 bucket name (3 to 63 characters: a-z, 0-9, '.' and '-')"}
	}
	if o.Region == "" {
		return &Error{Key: "object_store.region", Value: o.Region, Allowed: "an S3 region such as us-east-1", Reason: "required for s3"}
	}
	if reason := endpointProblem(o.Endpoint); reason != "" {
		return &Error{Key: "object_store.endpoint", Value: o.Endpoint, Reason: reason, Allowed: allowedEndpoint}
	}
	if (o.AccessKey == "") != (o.SecretKey == "") {
		key := "object_store.secret_key" // the one that is missing
		if o.AccessKey == "" {
			key = "object_store.access_key"
		}
		return &Error{Key: key, Value: "", Reason: "access_key and secret_key go together",
			Allowed: "both set (static credentials) or both empty (the standard AWS chain)"}
	}
	return nil
}

// validatePrefix checks object_store.prefix by the rule every object key
// obeys (ObjectKeyProblem): each key the broker writes starts with it, so a
// prefix such as "../escaped" or "a//b" would otherwise start the broker
// and fail every manifest read and upload.
func (o ObjectStore) validatePrefix() error {
	if o.Prefix == "" {
		return nil
	}
	const allowed = "empty, or a key prefix such as prod/strata: segments separated by single slashes, none of them . or .., without leading or trailing /"
	if strings.HasSuffix(o.Prefix, "/") {
		return &Error{Key: "object_store.prefix", Value: o.Prefix, Allowed: allowed, Reason: "trailing slash"}
	}
	if reason := ObjectKeyProblem(o.Prefix); reason != "" {
		return &Error{Key: "object_store.prefix", Value: o.Prefix, Allowed: allowed, Reason: reason}
	}
	return nil
}

const allowedEndpoint = "empty (AWS) or an http or https URL such as http://127.0.0.1:9000"

// endpointProblem returns why endpoint cannot be an S3 endpoint, or "".
// The S3 client would take some of these and fail at the first request
// (no host), or drop part of them silently (credentials, a query): either
// way the broker would start and upload nothing.
func endpointProblem(endpoint string) string {
	if endpoint == "" {
		return ""
	}
	u, err := url.Parse(endpoint)
	switch {
	case err != nil:
		return "not a URL"
	case u.Scheme != "http" && u.Scheme != "https":
		return "the scheme must be http or https"
	case u.Host == "" || u.Hostname() == "":
		return "no host"
	case u.User != nil:
		return "credentials go in object_store.access_key and secret_key, not in the URL"
	case u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(endpoint, "?") || strings.HasSuffix(endpoint, "#"):
		return "a query or fragment is not allowed"
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
			return "the port must be a number from 1 to 65535"
		}
	}
	return ""
}

// bucketNameProblem returns why name is not a valid S3 bucket name, or "".
// It catches the usual mistakes (empty, "s3://bucket", upper case) early
// instead of at the first upload.
func bucketNameProblem(name string) string {
	switch {
	case name == "":
		return "required for s3"
	case len(name) < 3 || len(name) > 63:
		return "must be 3 to 63 characters"
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-') {
			return "only a-z, 0-9, '.' and '-' are allowed"
		}
	}
	if first, last := name[0], name[len(name)-1]; first == '.' || first == '-' || last == '.' || last == '-' {
		return "must start and end with a letter or digit"
	}
	// The rest of S3's naming rules: names AWS refuses to create, and
	// which MinIO refuses too, so they fail only once the broker runs.
	switch {
	case strings.Contains(name, ".."):
		return "must not contain two adjacent periods"
	case net.ParseIP(name) != nil:
		return "must not be formatted as an IP address"
	case strings.HasPrefix(name, "xn--") || strings.HasPrefix(name, "sthree-"):
		return "must not start with xn-- or sthree- (reserved by S3)"
	case strings.HasSuffix(name, "-s3alias") || strings.HasSuffix(name, "--ol-s3"):
		return "must not end with -s3alias or --ol-s3 (reserved by S3)"
	}
	return ""
}

// validate checks the tiering sizes; topic is the broker's topic defaults.
func (t Tiering) validate(topic Topic) error {
	if t.ChunkBytes < 64<<10 || t.ChunkBytes > 1<<30 {
		return &Error{Key: "tiering.chunk_bytes", Value: t.ChunkBytes.String(), Allowed: "a size from 64KiB to 1GiB"}
	}
	if t.CacheBytes < t.ChunkBytes {
		return &Error{Key: "tiering.cache_bytes", Value: t.CacheBytes.String(), Allowed: "a size of at least tiering.chunk_bytes",
			Reason: "the cache must hold at least one chunk (" + t.ChunkBytes.String() + ")"}
	}
	if t.UploadParallelism < 1 || t.UploadParallelism > 64 {
		return &Error{Key: "tiering.upload_parallelism", Value: strconv.Itoa(t.UploadParallelism), Allowed: "an integer from 1 to 64"}
	}
	if t.ColdReadMaxGets < 1 || t.ColdReadMaxGets > 1024 {
		return &Error{Key: "tiering.cold_read_max_gets", Value: strconv.Itoa(t.ColdReadMaxGets), Allowed: "an integer from 1 to 1024"}
	}
	if t.ColdReadBytesPerSec < 0 {
		return &Error{Key: "tiering.cold_read_bytes_per_sec", Value: t.ColdReadBytesPerSec.String(), Allowed: "a size per second, or 0 for unlimited"}
	}
	if t.ColdReadGetsPerSec < 0 {
		return &Error{Key: "tiering.cold_read_gets_per_sec", Value: strconv.Itoa(t.ColdReadGetsPerSec), Allowed: "a number of GETs per second, or 0 for unlimited"}
	}
	// Only sealed segments are uploaded; a bound below one segment would
	// throttle producers before their segment could even be sealed.
	if int64(t.MaxUnuploadedBytes) < topic.SegmentBytes {
		return &Error{Key: "tiering.max_unuploaded_bytes", Value: t.MaxUnuploadedBytes.String(),
			Allowed: "a size of at least the default segment.bytes",
			Reason:  "below segment.bytes (" + FormatBytes(topic.SegmentBytes) + "), so producers would stall before a segment seals"}
	}
	return nil
}

func oneOf(s string, values ...string) bool { return slices.Contains(values, s) }

// DefaultMaxPartitionsPerBroker is limits.max_partitions_per_broker unless
// set: 20,000 idle replicas take a few hundred MiB and start in seconds.
const DefaultMaxPartitionsPerBroker = 20000

// MinFetchBytes and MaxFetchBytes bound limits.max_fetch_bytes.
const (
	MinFetchBytes = 64 << 10
	MaxFetchBytes = 1 << 30
)

// validate checks the limits: counts are not negative (0 means derived or
// unbounded, except the partition limit) and a fetch response can hold a useful amount.
func (l Limits) validate() error {
	if l.MaxPartitionsPerBroker < 1 {
		return &Error{Key: "limits.max_partitions_per_broker", Value: strconv.Itoa(l.MaxPartitionsPerBroker),
			Allowed: "a positive integer (the default is " + strconv.Itoa(DefaultMaxPartitionsPerBroker) + "); it no longer follows the open-file limit"}
	}
	if l.MaxFetchBytes < MinFetchBytes || l.MaxFetchBytes > MaxFetchBytes {
		return &Error{Key: "limits.max_fetch_bytes", Value: l.MaxFetchBytes.String(), Allowed: "a size from 64KiB to 1GiB"}
	}
	if l.MaxGroups < 0 {
		return &Error{Key: "limits.max_groups", Value: strconv.Itoa(l.MaxGroups), Allowed: "a positive integer, or 0 for no bound"}
	}
	return nil
}

// validate checks the quotas are rates or 0 (unlimited).
func (q Quotas) validate() error {
	for _, r := range []struct {
		key  string
		rate ByteSize
	}{{"quotas.produce_bytes_per_sec", q.ProduceBytesPerSec}, {"quotas.fetch_bytes_per_sec", q.FetchBytesPerSec}} {
		if r.rate < 0 {
			return &Error{Key: r.key, Value: r.rate.String(), Allowed: "bytes per second such as 10MiB, or 0 for unlimited"}
		}
	}
	return nil
}

// validateReadReplica checks what a read-only replica needs: a bucket to
// read (there is nothing else to serve) and a refresh interval.
func (b Broker) validateReadReplica() error {
	if !b.ReadReplica {
		return nil
	}
	if b.ObjectStore.Type == ObjectStoreNone {
		return &Error{Key: "object_store.type", Value: b.ObjectStore.Type, Allowed: "fs or s3",
			Reason: "read_replica serves the bucket another cluster writes, so it needs one"}
	}
	if b.ReadReplicaRefresh < Duration(100*time.Millisecond) {
		return &Error{Key: "read_replica_refresh", Value: b.ReadReplicaRefresh.String(), Allowed: "a duration of at least 100ms, such as 3s"}
	}
	return nil
}

// validate checks the Kafka listener's connection limits: not negative (0
// means no bound).
func (k Kafka) validate() error {
	if k.MaxConnections < 0 {
		return &Error{Key: "kafka.max_connections", Value: strconv.Itoa(k.MaxConnections), Allowed: "a positive integer, or 0 for no bound"}
	}
	if k.MaxConnectionsPerIP < 0 {
		return &Error{Key: "kafka.max_connections_per_ip", Value: strconv.Itoa(k.MaxConnectionsPerIP), Allowed: "a positive integer, or 0 for no bound"}
	}
	return nil
}
