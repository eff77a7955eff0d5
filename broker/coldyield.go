package broker

// Cold reads yield to writes. A full-speed replay of history from the
// bucket costs CPU on the broker (GETs, CRC checks, copies into the cache
// and out to the consumer) and on whatever shares its cores (the object
// store, the consumer): on two cores it raised the produce p99 of another
// topic several times over, while the broker itself had spare time. No
// fixed limit fits every machine, so the broker measures what the writers
// see and lets cold reads have what is left:
//
//   - every produce the broker handles is timed from its admission (after
//     the quota) to its answer, and counted while it waits;
//   - every yieldWindow the controller takes the window's median and 99th
//     percentile of those times, each raised to the age of the oldest
//     produce still waiting if that is longer: the writers' latency now.
//     The median moves first when the machine's CPU is short (every
//     produce waits a little longer), the 99th percentile when cold
//     reads come in bursts;
//   - windows in which no cold GET went out for yieldQuiet windows before
//     teach it the writers' own latency, both quantiles (moving averages);
//   - while either is above its target (the writers' own, a quarter
//     more, and yieldSlack), the bytes cold reads may fetch per second are
//     halved; while it is within, they grow by a tenth a window, up to
//     twice what cold reads actually fetched in the last second (a limit
//     nobody reaches tells nothing). Until it has seen a quiet window it
//     holds cold reads at the least rate, to learn the writers' latency;
//   - cold reads never get less than yieldMinRate: a replay always
//     progresses, at least a chunk every few seconds;
//   - writers idle for yieldIdleWindows: no yielding, the replay gets all
//     the broker's and the topics' limits allow. When writers come back,
//     cold reads start again from the least rate.
//
// The rate is one for the broker, all topics together, and applies to
// every GET after the limits of coldpace.go: it can only slow cold reads
// further. A GET once sent is never held back; at the least rate the next
// one waits for the debt the last one left.

import (
	"context"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// yieldWindow is how often the controller looks at the writers.
	yieldWindow = 100 * time.Millisecond
	// yieldMinRate is the bytes a second cold reads always get.
	yieldMinRate = 1 << 20
	// yieldIdleWindows without a produce end the yielding.
	yieldIdleWindows = 10
	// yieldQuiet is how many windows after the last cold GET the writers'
	// latency counts as their own.
	yieldQuiet = 3
	// yieldSlack is added to the target: below a millisecond the writers'
	// latency moves with the scheduler, not with cold reads.
	yieldSlack = time.Millisecond
	// yieldRing is how many windows of waiting produces are told apart
	// by when they began: ages up to this many windows.
	yieldRing = 64
	// yieldHistory is how many windows the measured cold rate covers.
	yieldHistory = 10
)

// coldYield is the controller: its produce side is lock-free, as every
// produce passes through it.
type coldYield struct {
	lat windowHist
	// window is the number of the current window; waiting counts the
	// produces in flight by the window they began in, modulo yieldRing.
	window  atomic.Int64
	waiting [yieldRing]atomic.Int64
	// admitted is the cold bytes let through in the current window.
	admitted atomic.Int64

	gate rateLimit

	mu struct {
		sync.Mutex
		// rate is the bytes a second cold reads may fetch, 0 when not
		// yielding.
		rate float64
		// own is the writers' own latency, median and 99th percentile
		// (0: not known yet).
		own [2]time.Duration
		// idle counts windows without a produce; quiet those since the
		// last cold GET.
		idle, quiet int
		// fetched is the cold bytes let through in each of the last
		// yieldHistory windows.
		fetched [yieldHistory]int64
		// slowed and eased count the windows the rate was cut and raised
		// in, for strata_cold_read_yield_windows_total.
		slowed, eased int64
		// last is the writers' latency in the last window that had one.
		last [2]time.Duration
	}
}

// produceStart registers a produce that begins now; pass what it returns to
// produceEnd.
func (y *coldYield) produceStart() int64 {
	w := y.window.Load()
	y.waiting[w%yieldRing].Add(1)
	return w
}

// produceEnd registers the end of the produce produceStart returned w for,
// which took d.
func (y *coldYield) produceEnd(w int64, d time.Duration) {
	y.waiting[w%yieldRing].Add(-1)
	y.lat.record(d)
}

// wait holds back a cold GET of n bytes until the rate lets it go, or ctx
// ends. It rechecks at least every window, since the rate may have risen.
func (y *coldYield) wait(ctx context.Context, n int64) (time.Duration, error) {
	start := time.Now()
	for now := start; ; now = time.Now() {
		d := y.gate.take(float64(n), now)
		if d == 0 {
			y.admitted.Add(n)
			return now.Sub(start), nil
		}
		t := time.NewTimer(min(d, yieldWindow))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return time.Since(start), ctx.Err()
		}
	}
}

// run steps the controller every window until ctx ends.
func (y *coldYield) run(ctx context.Context) {
	t := time.NewTicker(yieldWindow)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			y.step(now)
		}
	}
}

// step ends a window: it reads what the writers saw in it and sets the
// rate for the next.
func (y *coldYield) step(now time.Time) {
	w := y.window.Add(1) - 1 // the window ending
	count, seen := y.lat.take()
	var inFlight int64
	var age time.Duration
	for back := int64(yieldRing - 1); back >= 0; back-- {
		k := w - back
		if k < 0 {
			continue
		}
		if n := y.waiting[k%yieldRing].Load(); n > 0 {
			if inFlight == 0 && back > 0 {
				age = time.Duration(back) * yieldWindow // began at least back windows ago
			}
			inFlight += n
		}
	}
	cold := y.admitted.Swap(0)

	y.mu.Lock()
	defer y.mu.Unlock()
	copy(y.mu.fetched[:], y.mu.fetched[1:])
	y.mu.fetched[yieldHistory-1] = cold
	if cold > 0 {
		y.mu.quiet = 0
	} else {
		y.mu.quiet++
	}
	if count == 0 && inFlight == 0 {
		if y.mu.idle++; y.mu.idle >= yieldIdleWindows {
			y.setRateLocked(0, now) // no writers: full speed
		}
		return
	}
	y.mu.idle = 0
	if count == 0 && age == 0 {
		return // a produce just began: nothing measured yet
	}
	slow := false
	for i := range seen {
		seen[i] = max(seen[i], age)
		if y.mu.quiet > yieldQuiet {
			if y.mu.own[i] == 0 {
				y.mu.own[i] = seen[i]
			} else {
				y.mu.own[i] += (seen[i] - y.mu.own[i]) / 8
			}
		}
		own := y.mu.own[i]
		slow = slow || seen[i] > own+own/4+yieldSlack
	}
	y.mu.last = seen
	if y.mu.own[1] == 0 {
		y.setRateLocked(yieldMinRate, now) // learn the writers' own latency first
		return
	}
	var sum int64
	for _, b := range y.mu.fetched {
		sum += b
	}
	measured := float64(sum) / (yieldHistory * yieldWindow).Seconds()
	rate := y.mu.rate
	if rate == 0 {
		// Writers arrive: cold reads start again from the least rate and
		// earn more window by window, rather than halving down from full
		// speed, which took the writers' first second.
		rate = yieldMinRate
	}
	if slow {
		y.mu.slowed++
		rate = min(rate, max(measured, yieldMinRate)) / 2
	} else {
		y.mu.eased++
		rate = min(rate*1.1+yieldMinRate/10, max(2*measured, 4*yieldMinRate))
	}
	y.setRateLocked(max(rate, yieldMinRate), now)
}

func (y *coldYield) setRateLocked(rate float64, now time.Time) {
	y.mu.rate = rate
	y.gate.setRate(int64(rate), now)
}

// yieldState is what the controller shows: the bytes a second cold reads
// may fetch (0 when not yielding), the writers' own latency it learned and
// their latency in the last window (median and 99th percentile), and the
// windows it slowed and eased cold reads in.
type yieldState struct {
	rate          float64
	own, last     [2]time.Duration
	slowed, eased int64
}

func (y *coldYield) state() yieldState {
	y.mu.Lock()
	defer y.mu.Unlock()
	return yieldState{rate: y.mu.rate, own: y.mu.own, last: y.mu.last, slowed: y.mu.slowed, eased: y.mu.eased}
}

// windowHist counts latencies in buckets a sixteenth of a power of two of
// microseconds wide (about 4% apart), lock-free.
type windowHist struct {
	buckets [windowBuckets]atomic.Int64
}

const (
	windowSub     = 4 // bits below the leading one that pick the bucket
	windowBuckets = (64 - windowSub + 1) << windowSub
)

func windowBucket(us uint64) int {
	if us < 1<<windowSub {
		return int(us)
	}
	e := bits.Len64(us) - 1 - windowSub // how far us is shifted
	return (e+1)<<windowSub | int(us>>e)&(1<<windowSub-1)
}

// windowUpper is the largest latency, in microseconds, of bucket i.
func windowUpper(i int) uint64 {
	if i < 1<<windowSub {
		return uint64(i)
	}
	e := i>>windowSub - 1
	m := uint64(i&(1<<windowSub-1) | 1<<windowSub)
	return (m+1)<<e - 1
}

func (h *windowHist) record(d time.Duration) {
	h.buckets[windowBucket(uint64(max(d.Microseconds(), 0)))].Add(1)
}

// take empties the histogram, returning how many latencies it held and
// their median and 99th percentile (the upper ends of their buckets).
func (h *windowHist) take() (n int64, q [2]time.Duration) {
	var counts [windowBuckets]int64
	for i := range h.buckets {
		counts[i] = h.buckets[i].Swap(0)
		n += counts[i]
	}
	if n == 0 {
		return 0, q
	}
	for k, f := range [2]float64{0.5, 0.99} {
		rank := int64(f*float64(n-1)) + 1 // the rank-th smallest
		for i, c := range counts {
			if rank -= c; rank <= 0 {
				q[k] = time.Duration(windowUpper(i)) * time.Microsecond
				break
			}
		}
	}
	return n, q
}
