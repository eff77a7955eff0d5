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
// it. Every goroutine below runs under the broker's lifetime, one context
// (Broker.life) that Start makes and Close cancels: through goLoop or
// goTask, which hand it to what they run and count it in the broker's
// WaitGroup, or under a context derived from it. Broker.Close cancels the
// lifetime, ends held group heartbeats, waits for everything goLoop and
// goTask started, then stops the fetchers and waits for them, and closes
// every partition (which stops and waits for its own). Once Close
// returns, no goroutine the broker started runs
// (TestCloseEndsEveryBrokerGoroutine in rpc). A Start that fails cancels
// the lifetime too.
//
// Long-lived, one each, started by Start through goLoop once the metadata
// is ready, and ended by the lifetime:
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
//     run through goLoop, under a context of the loop's that ends with it.
//   - isrWatchLoop (metrics_cluster.go): counts the ISR changes of led
//     partitions as the metadata applies them.
//   - tierLoop (tier.go): every tierInterval, or when kicked, runs each
//     leader's tiering round (tierPassErr: its phases in order) on a
//     goroutine of its own, at most tiering.upload_parallelism at once,
//     each under a timeout derived from the lifetime; it waits for them
//     before it returns.
//   - cleanerLoop (cleaner.go): picks the dirtiest log of a compacted
//     topic and cleans it in passes through hotlog's crash-safe rewrite,
//     throttled to cleaner.io_max_bytes_per_second; waits cleaner.backoff
//     when none needs it.
//   - the cold-read yield (coldyield.go, coldYield.run): present when cold
//     reads are paced; every window steps the rate cold reads may take from
//     what produce latency shows.
//   - a read replica's refreshLoop (readreplica.go), instead of the
//     cluster ones: re-reads the heads and lists the bucket; its scans run
//     a bounded pool of goroutines and wait for them.
//
// Short-lived tasks, through goTask (refused once the broker is closing),
// each with its own timeout derived from the lifetime: proposing an ISR
// change (proposeISR), asking for a new leader epoch (requestNewEpoch),
// deleting a deleted topic's objects from the bucket (DeleteTopic).
//
// Replication, one goroutine per connection or stream:
//
//   - fetchers (replica_follower.go): one fetcher per leader broker this
//     broker follows partitions of, started by fetchers.update from
//     reconcile, under a context derived from the lifetime; each stream's
//     session runs a second goroutine receiving the leader's chunks, and
//     waits for it. reconcile cancels a fetcher whose leader moved or has
//     nothing left to follow; the lifetime's end stops them all, and
//     closeAll (fetchers.stop) waits for them.
//   - a ServeReplication stream's call, on a leader, runs on the
//     transport's goroutine (rpc), which ends it by ending the stream;
//     its pushers are listed below, with the work on demand.
//
// Per partition, on demand (no goroutine while idle):
//
//   - a leader's pusher passes (replica_pushers.go): one pusher per
//     followed partition of a ServeReplication stream, owned by the
//     stream's pushers value. A pusher holds no goroutine while it has
//     nothing to send: a pass runs as a broker task (goTask) when the
//     pusher starts, when the log changes (a one-shot callback,
//     hotlog.Log.AfterChange) or when the follower acknowledges, sends
//     until nothing is left or the window is full, and ends. A pusher
//     stops when the follower says it stopped following, when its epoch
//     changes (a new pusher replaces it), when it is fenced, when the
//     stream ends or when the lifetime does; the stream's call waits for
//     every pass before it returns, and Close waits for them with the
//     other tasks.
//   - the high watermark advancer (partition.go): started by a kick (an
//     append, a follower's report), runs while kicks come, then ends; the
//     partition's close stops it and waits.
//   - the hot log's flusher (hotlog/flush.go): likewise, started by the
//     log when its flush policy asks for a fsync, stopped by the log's
//     Close.
package broker
