package main

// strata cluster status: the operator's one screen.

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/human"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

func init() { clientCommands = append(clientCommands, newClusterCommand) }

func newClusterCommand() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Show the state of the cluster",
		Long: `Commands about the cluster as a whole. "strata cluster status" shows the
brokers, the partitions that need attention, the upload backlog and the cold
cache on one screen.`,
		Example: `  strata cluster status
  strata cluster status --broker 10.0.0.5:7400 --limit 20`,
	}
	cmd.RunE = groupRun
	f.register(cmd)
	cmd.AddCommand(newClusterStatusCommand(&f))
	return cmd
}

func newClusterStatusCommand(f *clientFlags) *cobra.Command {
	var limit int32
	var format outputFlag
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show brokers, partitions needing attention, upload lag and cache hits",
		Long: `Show the cluster on one screen:

  - the brokers: address, rack, whether the answering broker's gossip shows
    them alive, which one is the controller, and each one's upload lag and
    cold cache hit ratio (asked of every live broker in turn);
  - the under-replicated partitions (a leader, but fewer in-sync replicas
    than replicas) and the offline ones (no leader: no live in-sync
    replica), from the cluster metadata;
  - the upload lag: sealed data on the leaders' disks not yet in the object
    store, in all and for the partitions most behind;
  - the cold chunk cache's hit ratio over every broker that answered.

Lists show at most --limit partitions each and say how many more there are.
With ACLs, partitions of topics you may not see are counted, not listed.

A read replica (read_replica: true) answers as a cluster of one with no
controller, and names the bucket it serves from as its cold tier.

--format json writes the same as one JSON document (docs/CLI.md).`,
		Example: `  strata cluster status
  strata cluster status --limit 50
  STRATA_BROKER=10.0.0.5:7400 strata cluster status --tls-ca ca.pem --tls-cert me.pem --tls-key me-key.pem`,
		Args: exactArgs(),
		RunE: run(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
			if limit <= 0 {
				return usageErrorf("--limit %d: want a positive number of partitions", limit)
			}
			if err := format.check(); err != nil {
				return err
			}
			return f.admin(ctx, func(ctx context.Context, c *client.Client) error {
				st, err := collectStatus(ctx, c, limit)
				if err != nil {
					return err
				}
				if format == outputJSON {
					return writeJSON(cmd.OutOrStdout(), statusJSON(st, int(limit)))
				}
				return printStatus(cmd.OutOrStdout(), st, int(limit))
			})
		}),
	}
	cmd.Flags().Int32Var(&limit, "limit", 10, "most partitions to list in each section")
	addOutputFlag(cmd, &format)
	return cmd
}

// clusterStatus is one broker's view of the cluster, with what every other
// live broker said of itself.
type clusterStatus struct {
	*stratav1.ClusterStatusResponse
	// byBroker holds each broker's own answer (the first one's included),
	// or why it gave none.
	byBroker map[int32]*stratav1.ClusterStatusResponse
	failed   map[int32]error
}

// collectStatus asks one broker for the cluster, then every other broker
// gossip shows alive for its own upload lag and cache, all at once: the
// slowest broker, not their sum, bounds the wait.
func collectStatus(ctx context.Context, c *client.Client, limit int32) (*clusterStatus, error) {
	first, err := c.ClusterStatus(ctx, limit)
	if err != nil {
		return nil, err
	}
	st := &clusterStatus{ClusterStatusResponse: first,
		byBroker: map[int32]*stratav1.ClusterStatusResponse{first.GetBrokerId(): first}, failed: map[int32]error{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, b := range first.GetBrokers() {
		if b.GetId() == first.GetBrokerId() || !b.GetAlive() || !b.GetRegistered() || b.GetAddress() == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.BrokerStatus(ctx, b.GetAddress(), limit)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				st.failed[b.GetId()] = err
				return
			}
			st.byBroker[b.GetId()] = resp
		}()
	}
	wg.Wait()
	return st, nil
}

// uploadRow is one partition of the upload lag list, with its leader.
type uploadRow struct {
	leader int32
	lag    *stratav1.PartitionUploadLag
}

func printStatus(w io.Writer, st *clusterStatus, limit int) error {
	alive := 0
	for _, b := range st.GetBrokers() {
		if b.GetAlive() {
			alive++
		}
	}
	if st.GetReadReplica() {
		fmt.Fprintf(w, "Read replica %d of %s: a cluster of one with no controller, %s, %s; catalog version %d\n\n",
			st.GetBrokerId(), st.GetObjectStore(), nounCount(int(st.GetTopics()), "topic"), nounCount(int(st.GetPartitions()), "partition"),
			st.GetMetadataVersion())
	} else {
		controller := "none known"
		if st.GetControllerId() >= 0 {
			controller = fmt.Sprint(st.GetControllerId())
		}
		fmt.Fprintf(w, "Cluster: %s (%d alive), controller %s, %s, %s; metadata version %d, as broker %d sees it\n\n",
			nounCount(len(st.GetBrokers()), "broker"), alive, controller, nounCount(int(st.GetTopics()), "topic"), nounCount(int(st.GetPartitions()), "partition"),
			st.GetMetadataVersion(), st.GetBrokerId())
	}

	tw := newTable(w)
	fmt.Fprintln(tw, "BROKER\tADDRESS\tRACK\tVERSION\tALIVE\tCONTROLLER\tUPLOAD-LAG\tCACHE-HITS")
	for _, b := range st.GetBrokers() {
		aliveText := yesNo(b.GetAlive())
		if !b.GetRegistered() {
			aliveText += " (not registered yet)"
		}
		ctl := "-"
		if b.GetId() == st.GetControllerId() {
			ctl = "yes"
		}
		lag, hits := "-", "-"
		if own, ok := st.byBroker[b.GetId()]; ok {
			lag = human.Bytes(own.GetUploadLagBytes())
			hits = hitRatio(own)
		} else if _, failed := st.failed[b.GetId()]; failed {
			lag, hits = "?", "?"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", b.GetId(), orDash(b.GetAddress()), orDash(b.GetRack()), orDash(b.GetVersion()), aliveText, ctl, lag, hits)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	ids := make([]int32, 0, len(st.failed))
	for id := range st.failed {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		fmt.Fprintf(w, "broker %d did not answer: %v\n", id, explain(st.failed[id]))
	}

	if err := printPartitions(w, "Under-replicated partitions", st.GetUnderReplicated(), int(st.GetUnderReplicatedCount())); err != nil {
		return err
	}
	if err := printPartitions(w, "Offline partitions", st.GetOffline(), int(st.GetOfflineCount())); err != nil {
		return err
	}
	return printTier(w, st, limit)
}

// printPartitions lists partitions of one kind: count of all, rows of
// those the answer carries.
func printPartitions(w io.Writer, title string, ps []*stratav1.PartitionStatus, count int) error {
	fmt.Fprintf(w, "\n%s: %d\n", title, count)
	if len(ps) == 0 {
		if count > 0 {
			fmt.Fprintln(w, "  (none of them in topics you may see)")
		}
		return nil
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tLEADER\tREPLICAS\tISR")
	for _, p := range ps {
		m := p.GetPartition()
		leader := "-"
		if m.GetLeader() >= 0 {
			leader = fmt.Sprint(m.GetLeader())
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", p.GetTopic(), m.GetPartition(), leader, joinIDs(m.GetReplicas()), joinIDs(m.GetIsr()))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if more := count - len(ps); more > 0 {
		fmt.Fprintf(w, "... and %d more not listed\n", more)
	}
	return nil
}

// tierSummary is the cold tier over every broker that answered: the
// upload lag, most behind first, and the cold reads.
type tierSummary struct {
	rows               []uploadRow
	lagBytes           int64
	lagParts           int
	hits, misses, gets uint64
	coldBrokers        int
	stores             []string // the distinct cold tier locations, sorted
}

func summarizeTier(st *clusterStatus) tierSummary {
	var t tierSummary
	seen := map[string]bool{}
	for id, own := range st.byBroker {
		t.lagBytes += own.GetUploadLagBytes()
		t.lagParts += int(own.GetUploadLagPartitions())
		for _, l := range own.GetUploadLag() {
			t.rows = append(t.rows, uploadRow{leader: id, lag: l})
		}
		if own.GetColdTier() {
			t.coldBrokers++
			t.hits += own.GetCacheHits()
			t.misses += own.GetCacheMisses()
			t.gets += own.GetColdGets()
			if loc := own.GetObjectStore(); loc != "" && !seen[loc] {
				seen[loc] = true
				t.stores = append(t.stores, loc)
			}
		}
	}
	sort.Strings(t.stores)
	sort.Slice(t.rows, func(i, j int) bool {
		a, b := t.rows[i].lag, t.rows[j].lag
		if a.GetBytes() != b.GetBytes() {
			return a.GetBytes() > b.GetBytes()
		}
		if a.GetTopic() != b.GetTopic() {
			return a.GetTopic() < b.GetTopic()
		}
		return a.GetPartition() < b.GetPartition()
	})
	return t
}

// printTier writes the upload lag and the cold cache over every broker
// that answered.
func printTier(w io.Writer, st *clusterStatus, limit int) error {
	t := summarizeTier(st)
	if t.coldBrokers == 0 {
		fmt.Fprintf(w, "\nCold tier: none (the brokers that answered run with object_store.type none)\n")
		return nil
	}
	if len(t.stores) > 0 {
		fmt.Fprintf(w, "\nCold tier: %s\n", strings.Join(t.stores, "; "))
	}
	if st.GetReadReplica() {
		// A replica uploads nothing: the writing cluster's leaders do.
		fmt.Fprintln(w, "Upload lag: none here (a read replica uploads nothing)")
	} else {
		fmt.Fprintf(w, "\nUpload lag: %s in %s\n", human.Bytes(t.lagBytes), nounCount(t.lagParts, "partition"))
	}
	shown := min(limit, len(t.rows))
	if shown > 0 {
		tw := newTable(w)
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tLEADER\tLAG\tSEGMENTS")
		for _, r := range t.rows[:shown] {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\n", r.lag.GetTopic(), r.lag.GetPartition(), r.leader, human.Bytes(r.lag.GetBytes()), r.lag.GetSegments())
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if more := t.lagParts - shown; more > 0 {
		fmt.Fprintf(w, "... and %d more not listed\n", more)
	}
	fmt.Fprintf(w, "\nCold chunk cache: %s, over %s\n", cacheFigure(t.hits, t.misses, t.gets), nounCount(t.coldBrokers, "broker"))
	return nil
}

// cacheFigure is the cold cache's hit ratio with the GETs sent, so that a
// first cold read shows even when read-ahead fetched what it then hit.
func cacheFigure(hits, misses, gets uint64) string {
	if hits+misses == 0 {
		if gets == 0 {
			return "no cold reads yet"
		}
		return fmt.Sprintf("no chunk reads yet, %s sent", nounCount(int(gets), "GET"))
	}
	return fmt.Sprintf("%.1f%% hits (%d of %d chunk reads), %s sent", 100*float64(hits)/float64(hits+misses), hits, hits+misses, nounCount(int(gets), "GET"))
}

// hitRatio is one broker's cold cache hit ratio for the brokers table.
func hitRatio(s *stratav1.ClusterStatusResponse) string {
	if !s.GetColdTier() {
		return "no cold tier"
	}
	total := s.GetCacheHits() + s.GetCacheMisses()
	if total == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(s.GetCacheHits())/float64(total))
}

// nounCount is "1 broker", "2 brokers".
func nounCount(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func yesNo(v bool) string {
	if v {
		return "yes"
	}
	return "no"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// The JSON document of strata cluster status --format json (docs/CLI.md).
type (
	statusDoc struct {
		BrokerID             int32             `json:"broker_id"`
		ControllerID         int32             `json:"controller_id"`
		MetadataVersion      uint64            `json:"metadata_version"`
		ReadReplica          bool              `json:"read_replica"`
		Topics               int32             `json:"topics"`
		Partitions           int32             `json:"partitions"`
		Brokers              []statusBrokerDoc `json:"brokers"`
		UnderReplicatedCount int32             `json:"under_replicated_count"`
		UnderReplicated      []partitionDoc    `json:"under_replicated"`
		OfflineCount         int32             `json:"offline_count"`
		Offline              []partitionDoc    `json:"offline"`
		ColdTier             bool              `json:"cold_tier"`
		ObjectStores         []string          `json:"object_stores"`
		UploadLagBytes       int64             `json:"upload_lag_bytes"`
		UploadLagPartitions  int               `json:"upload_lag_partitions"`
		UploadLag            []statusUploadDoc `json:"upload_lag"`
		Cache                statusCacheDoc    `json:"cache"`
	}
	statusBrokerDoc struct {
		ID      int32  `json:"id"`
		Address string `json:"address"`
		Rack    string `json:"rack"`
		// Version is the software version the broker publishes; empty
		// while it is not alive.
		Version    string `json:"version"`
		Alive      bool   `json:"alive"`
		Registered bool   `json:"registered"`
		Controller bool   `json:"controller"`
		// Answered: the broker gave its own figures; Error says why not.
		Answered       bool   `json:"answered"`
		Error          string `json:"error,omitempty"`
		ColdTier       bool   `json:"cold_tier"`
		ObjectStore    string `json:"object_store"`
		UploadLagBytes int64  `json:"upload_lag_bytes"`
		CacheHits      uint64 `json:"cache_hits"`
		CacheMisses    uint64 `json:"cache_misses"`
		ColdGets       uint64 `json:"cold_gets"`
	}
	partitionDoc struct {
		Topic     string  `json:"topic"`
		Partition int32   `json:"partition"`
		Leader    int32   `json:"leader"`
		Replicas  []int32 `json:"replicas"`
		ISR       []int32 `json:"isr"`
	}
	statusUploadDoc struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Leader    int32  `json:"leader"`
		Bytes     int64  `json:"bytes"`
		Segments  int32  `json:"segments"`
	}
	statusCacheDoc struct {
		Brokers int    `json:"brokers"`
		Hits    uint64 `json:"hits"`
		Misses  uint64 `json:"misses"`
		Gets    uint64 `json:"gets"`
	}
)

func statusJSON(st *clusterStatus, limit int) statusDoc {
	t := summarizeTier(st)
	d := statusDoc{
		BrokerID: st.GetBrokerId(), ControllerID: st.GetControllerId(), MetadataVersion: st.GetMetadataVersion(),
		ReadReplica: st.GetReadReplica(), Topics: st.GetTopics(), Partitions: st.GetPartitions(),
		Brokers:              []statusBrokerDoc{},
		UnderReplicatedCount: st.GetUnderReplicatedCount(), UnderReplicated: partitionDocs(st.GetUnderReplicated()),
		OfflineCount: st.GetOfflineCount(), Offline: partitionDocs(st.GetOffline()),
		ColdTier: t.coldBrokers > 0, ObjectStores: append([]string{}, t.stores...),
		UploadLagBytes: t.lagBytes, UploadLagPartitions: t.lagParts, UploadLag: []statusUploadDoc{},
		Cache: statusCacheDoc{Brokers: t.coldBrokers, Hits: t.hits, Misses: t.misses, Gets: t.gets},
	}
	for _, b := range st.GetBrokers() {
		bd := statusBrokerDoc{ID: b.GetId(), Address: b.GetAddress(), Rack: b.GetRack(), Version: b.GetVersion(), Alive: b.GetAlive(), Registered: b.GetRegistered(),
			Controller: b.GetId() == st.GetControllerId()}
		if own, ok := st.byBroker[b.GetId()]; ok {
			bd.Answered, bd.ColdTier, bd.ObjectStore = true, own.GetColdTier(), own.GetObjectStore()
			bd.UploadLagBytes, bd.CacheHits, bd.CacheMisses, bd.ColdGets = own.GetUploadLagBytes(), own.GetCacheHits(), own.GetCacheMisses(), own.GetColdGets()
		} else if err, failed := st.failed[b.GetId()]; failed {
			bd.Error = explain(err).Error()
		}
		d.Brokers = append(d.Brokers, bd)
	}
	for _, r := range t.rows[:min(limit, len(t.rows))] {
		d.UploadLag = append(d.UploadLag, statusUploadDoc{Topic: r.lag.GetTopic(), Partition: r.lag.GetPartition(), Leader: r.leader, Bytes: r.lag.GetBytes(), Segments: r.lag.GetSegments()})
	}
	return d
}

func partitionDocs(ps []*stratav1.PartitionStatus) []partitionDoc {
	out := []partitionDoc{}
	for _, p := range ps {
		m := p.GetPartition()
		out = append(out, partitionDoc{Topic: p.GetTopic(), Partition: m.GetPartition(), Leader: m.GetLeader(),
			Replicas: orEmpty(m.GetReplicas()), ISR: orEmpty(m.GetIsr())})
	}
	return out
}

// orEmpty makes a nil list [] in JSON, never null.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
