// Package broker is a running Strata broker: the partitions it holds, the
// produce, fetch and admin logic on them, and the wiring to the cluster
// metadata. It knows nothing of gRPC; package rpc translates. Its API
// speaks its own types (TopicPartition, Heartbeat, GroupAnswer,
// PartitionInfo, RestoreCopy and the views of view.go), so the API layers
// need not reach into group, cluster or tiering for them.
//
// # Goroutines
//
// What runs in the background, who starts it, what it does and who stops
// it. Broker.Close closes stop, ends held group heartbeats, waits for
// everything started through goLoop or goTask (the broker's WaitGroup),
// then stops the fetchers and closes every partition.
//
// Long-lived, one each, started by Open through goLoop once the metadata
// is ready, and ended by stop:
//
//   - reconcileLoop (reconcile.go): on every metadata change, opens,
//     closes and re-states the partitions this broker holds, and hands the
//     followed ones to the fetchers.
//   - housekeepingLoop (housekeeping.go): visits only the replicas its
//     housekeeper (housekeeper.go) says have work, marked dirty by an
//     event or due by a deadline, at most every 100ms: takes lagging
//     followers out of the ISR and asks for caught-up ones back, asks for
//     a new leader epoch where a restart left this broker leading an old
//     one, writes producer snapshots, seals idle segments and checkpoints
//     high watermarks.
//   - controllerLoop (membership.go): every broker runs it; while this one
//     is the controller it registers live brokers, grows and shrinks the
//     Raft group, moves leadership off brokers that are gone and takes
//     them out of ISRs, and on every broker it keeps the view of who
//     is alive and the proofs of gossiped claims. The claim checks it starts
//     run through goLoop and end with the loop's context.
//   - isrWatchLoop (metrics_cluster.go): counts the ISR changes of led
//     partitions as the metadata applies them.
//   - tierLoop (tier.go): every tierInterval, or when kicked, runs each
//     leader's tiering pass (uploads, then local and total retention) on a
//     goroutine of its own, at most tiering.upload_parallelism at once; it
//     waits for them, and a helper goroutine turns stop into the passes'
//     cancellation.
//   - the cold-read yield (coldyield.go, coldYield.run): present when cold
//     reads are paced; every window steps the rate cold reads may take from
//     what produce latency shows.
//   - a read replica's refreshLoop (readreplica.go), instead of the
//     cluster ones: re-reads the heads and lists the bucket; its scans run
//     a bounded pool of goroutines and wait for them.
//
// Short-lived tasks, through goTask (refused once the broker is closing)
// or goLoop, each with its own timeout and cancelled by stop: proposing an
// ISR change (proposeISR), asking for a new leader epoch (requestNewEpoch),
// deleting a deleted topic's objects from the bucket (DeleteTopic).
//
// Replication, one goroutine per connection or stream:
//
//   - fetchers (replica_follower.go): one fetcher per leader broker this
//     broker follows partitions of, started by fetchers.update from
//     reconcile, with a second goroutine receiving the leader's chunks.
//     reconcile cancels one whose leader moved or has nothing left to
//     follow; Close stops them all (fetchers.stop) and waits.
//   - pushers (replica_leader.go): on a leader, one per followed partition
//     of a ServeReplication stream, started when the follower reports its
//     position, stopped when it says it stopped following, when its epoch
//     changes (a new pusher replaces it), or when the stream ends; the
//     stream's call waits for them before it returns.
//
// Per partition, on demand (no goroutine while idle):
//
//   - the high watermark advancer (partition.go): started by a kick (an
//     append, a follower's report), runs while kicks come, then ends; the
//     partition's close stops it and waits.
//   - the hot log's flusher (hotlog/flush.go): likewise, started by the
//     log when its flush policy asks for a fsync, stopped by the log's
//     Close.
package broker
