package broker

// Follower truncation by leader epoch. Before a replica follows a leader in
// a new epoch it cuts off whatever suffix of its log the leader does not
// have, so that a suffix written under a deposed leader never survives a
// failover. Offsets alone cannot tell which suffix that is (both logs may
// hold an offset, written by different leaders); the leader-epoch history
// can: a leader writes each offset once per epoch and followers copy
// batches unchanged, so two logs hold the same records up to where their
// histories part.
//
// The follower asks the leader about its latest epoch; the leader answers
// with the largest epoch it knows at or below it and where that epoch ended
// in its log. If the follower knows that epoch too, it cuts at the smaller
// of the two ends and is done. If not, the histories parted earlier: it
// cuts where its own history leaves that epoch and asks again about its new
// latest epoch, until the two agree (Kafka's KIP-279). A leader that knows
// none of the follower's epochs leaves it its high watermark, and no more
// than the leader's log end: what is committed is on every in-sync replica,
// unless a power cut took it from all of them under flush.policy interval,
// and then the leader's log is the one that goes on.

import "github.com/strata-log/strata/hotlog"

// epochHistory is what truncation needs of the follower's own log.
type epochHistory interface {
	// EndOffsetForEpoch returns the largest epoch at or below epoch in the
	// log and where it ended (hotlog.Log's answer).
	EndOffsetForEpoch(epoch int32) (int32, int64)
}

// truncationStep is one round: the follower, whose log ends at end with
// high watermark hw, got answer ans from its leader. It returns where to
// cut (end for nothing) and whether the truncation is complete; if not,
// the follower asks again about its latest epoch after the cut.
func truncationStep(own epochHistory, end, hw int64, ans EpochEnd) (cut int64, done bool) {
	if ans.Epoch == hotlog.UndefinedEpoch || ans.EndOffset < 0 {
		// Nothing in common the leader can name: keep what was committed,
		// but nothing past the leader's log end. A committed record past
		// it is one the leader no longer has (under flush.policy interval
		// every in-sync replica may lose unsynced records to a power
		// cut); kept, it would sit at an offset the leader writes anew.
		if ans.LogEnd >= 0 {
			return min(hw, end, ans.LogEnd), true
		}
		return min(hw, end), true
	}
	epoch, ownEnd := own.EndOffsetForEpoch(ans.Epoch)
	switch {
	case epoch == hotlog.UndefinedEpoch:
		// The follower knows no epoch that old: its whole log came later
		// than the leader's answer allows. Keep what the leader has.
		return min(ans.EndOffset, end), true
	case epoch != ans.Epoch:
		// The follower does not know the leader's epoch: their histories
		// parted before it. Cut where the follower's own older epoch ended
		// and ask again.
		return min(ownEnd, end), false
	}
	return min(ownEnd, ans.EndOffset, end), true
}
