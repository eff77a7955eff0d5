package main

// strata cluster status: the operator's one screen.

import (
	"context"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/spf13/cobra"

	"github.com/strata-log/strata/client"
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
With ACLs, partitions of topics you may not see are counted, not listed.`,
		Example: `  strata cluster status
  strata cluster status --limit 50
  STRATA_BROKER=10.0.0.5:7400 strata cluster status --tls-ca ca.pem --tls-cert me.pem --tls-key me-key.pem`,
		Args: exactArgs(),
		RunE: run(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
			if limit <= 0 {
				return usageErrorf("--limit %d: want a positive number of partitions", limit)
			}
			return f.admin(ctx, func(ctx context.Context, c *client.Client) error {
				st, err := collectStatus(ctx, c, limit)
				if err != nil {
					return err
				}
				return printStatus(cmd.OutOrStdout(), st, int(limit))
			})
		}),
	}
	cmd.Flags().Int32Var(&limit, "limit", 10, "most partitions to list in each section")
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
	controller := "none known"
	if st.GetControllerId() >= 0 {
		controller = fmt.Sprint(st.GetControllerId())
	}
	fmt.Fprintf(w, "Cluster: %s (%d alive), controller %s, %s, %s; metadata version %d, as broker %d sees it\n\n",
		nounCount(len(st.GetBrokers()), "broker"), alive, controller, nounCount(int(st.GetTopics()), "topic"), nounCount(int(st.GetPartitions()), "partition"),
		st.GetMetadataVersion(), st.GetBrokerId())

	tw := newTable(w)
	fmt.Fprintln(tw, "BROKER\tADDRESS\tRACK\tALIVE\tCONTROLLER\tUPLOAD-LAG\tCACHE-HITS")
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
			lag = humanBytes(own.GetUploadLagBytes())
			hits = hitRatio(own)
		} else if _, failed := st.failed[b.GetId()]; failed {
			lag, hits = "?", "?"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", b.GetId(), orDash(b.GetAddress()), orDash(b.GetRack()), aliveText, ctl, lag, hits)
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

// printTier writes the upload lag and the cold cache over every broker
// that answered.
func printTier(w io.Writer, st *clusterStatus, limit int) error {
	var rows []uploadRow
	var lagBytes int64
	var lagParts int
	var hits, misses uint64
	cold := 0
	for id, own := range st.byBroker {
		lagBytes += own.GetUploadLagBytes()
		lagParts += int(own.GetUploadLagPartitions())
		for _, l := range own.GetUploadLag() {
			rows = append(rows, uploadRow{leader: id, lag: l})
		}
		if own.GetColdTier() {
			cold++
			hits += own.GetCacheHits()
			misses += own.GetCacheMisses()
		}
	}
	if cold == 0 {
		fmt.Fprintf(w, "\nCold tier: none (the brokers that answered run with object_store.type none)\n")
		return nil
	}
	fmt.Fprintf(w, "\nUpload lag: %s in %s\n", humanBytes(lagBytes), nounCount(lagParts, "partition"))
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i].lag, rows[j].lag
		if a.GetBytes() != b.GetBytes() {
			return a.GetBytes() > b.GetBytes()
		}
		if a.GetTopic() != b.GetTopic() {
			return a.GetTopic() < b.GetTopic()
		}
		return a.GetPartition() < b.GetPartition()
	})
	shown := min(limit, len(rows))
	if shown > 0 {
		tw := newTable(w)
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tLEADER\tLAG\tSEGMENTS")
		for _, r := range rows[:shown] {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\n", r.lag.GetTopic(), r.lag.GetPartition(), r.leader, humanBytes(r.lag.GetBytes()), r.lag.GetSegments())
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if more := lagParts - shown; more > 0 {
		fmt.Fprintf(w, "... and %d more not listed\n", more)
	}
	ratio := "no cold reads yet"
	if hits+misses > 0 {
		ratio = fmt.Sprintf("%.1f%% hits (%d of %d chunk reads)", 100*float64(hits)/float64(hits+misses), hits, hits+misses)
	}
	fmt.Fprintf(w, "\nCold chunk cache: %s, over %s\n", ratio, nounCount(cold, "broker"))
	return nil
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
