package broker

// Byte-rate quotas per principal (quotas.produce_bytes_per_sec,
// quotas.fetch_bytes_per_sec): a token bucket per principal on each broker,
// holding at most one second's worth and filling at the rate.
//
// A request is let through while its principal's bucket holds any tokens
// and then charged in full, so the bucket may go into debt: a batch larger
// than a second's worth still passes, and the debt holds the principal
// back until the bucket fills again. Produce is charged its batch when it
// arrives; over quota it is refused with THROTTLED and a RetryAfter of the
// time until the bucket holds tokens again, and nothing is written. Fetch
// is charged what it returns; over quota the next fetch waits for the
// bucket when that takes at most maxQuotaDelay (a stream then just runs
// slower), and is refused with THROTTLED and a RetryAfter otherwise.
//
// The principal is security.PrincipalFrom's name; a call without one (a
// broker without TLS, dev mode) counts against the principal "", which all
// such callers share.

import (
	"context"
	"sync"
	"time"

	"github.com/strata-log/strata/security"
)

// maxQuotaDelay is the longest a fetch over quota is held before it is
// served; a longer wait is a THROTTLED refusal, which a client backs off
// from, rather than a stream silent for longer than its heartbeats.
const maxQuotaDelay = time.Second

// maxIdleBuckets: beyond this many principals, full buckets are dropped
// (a full bucket is the state of a principal never seen), so the map does
// not grow with every principal that ever called.
const maxIdleBuckets = 1024

// quota is one rate limit, with a bucket per principal. A nil *quota is
// unlimited.
type quota struct {
	setting string // the broker setting, for errors
	rate    float64
	now     func() time.Time

	mu struct {
		sync.Mutex
		buckets map[string]*bucket
	}
}

// bucket is one principal's tokens (bytes) as of at; negative is debt.
type bucket struct {
	tokens float64
	at     time.Time
}

// newQuota returns a quota of rate bytes per second, or nil (unlimited)
// when rate is 0.
func newQuota(setting string, rate int64) *quota {
	if rate <= 0 {
		return nil
	}
	q := &quota{setting: setting, rate: float64(rate), now: time.Now}
	q.mu.buckets = map[string]*bucket{}
	return q
}

// bucketLocked returns principal's bucket, filled up to now.
func (q *quota) bucketLocked(principal string, now time.Time) *bucket {
	bk, ok := q.mu.buckets[principal]
	if !ok {
		if len(q.mu.buckets) >= maxIdleBuckets {
			q.dropFullLocked(now)
		}
		bk = &bucket{tokens: q.rate, at: now}
		q.mu.buckets[principal] = bk
		return bk
	}
	if elapsed := now.Sub(bk.at); elapsed > 0 {
		bk.tokens = min(q.rate, bk.tokens+elapsed.Seconds()*q.rate)
		bk.at = now
	}
	return bk
}

// dropFullLocked forgets the buckets that have filled up.
func (q *quota) dropFullLocked(now time.Time) {
	for p, bk := range q.mu.buckets {
		if bk.tokens+now.Sub(bk.at).Seconds()*q.rate >= q.rate {
			delete(q.mu.buckets, p)
		}
	}
}

// waitLocked is how long until bk holds tokens again; 0 when it does.
func (q *quota) waitLocked(bk *bucket) time.Duration {
	if bk.tokens > 0 {
		return 0
	}
	// Until the debt is paid and one byte more is in.
	return max(time.Millisecond, time.Duration((1-bk.tokens)/q.rate*float64(time.Second)))
}

// take charges n bytes to principal if its bucket holds tokens, returning
// 0; otherwise it charges nothing and returns how long until it does.
func (q *quota) take(principal string, n int) time.Duration {
	if q == nil {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	bk := q.bucketLocked(principal, q.now())
	if wait := q.waitLocked(bk); wait > 0 {
		return wait
	}
	bk.tokens -= float64(n)
	return 0
}

// wait returns how long until principal's bucket holds tokens; 0 when it
// does now. It charges nothing.
func (q *quota) wait(principal string) time.Duration {
	if q == nil {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waitLocked(q.bucketLocked(principal, q.now()))
}

// charge takes n bytes from principal's bucket, into debt if need be.
func (q *quota) charge(principal string, n int) {
	if q == nil || n <= 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.bucketLocked(principal, q.now()).tokens -= float64(n)
}

// throttled is the refusal of a principal over the quota.
func (q *quota) throttled(what, principal string, wait time.Duration) error {
	who := "principal " + principal
	if principal == "" {
		who = "callers without a principal (no TLS)"
	}
	e := refuse(ReasonThrottled, nil, "%s: %s used up %s (%d bytes per second); retry in %v",
		what, who, q.setting, int64(q.rate), wait.Round(time.Millisecond)).
		with("quota", q.setting).with("bytes_per_sec", itoa(int64(q.rate)))
	e.RetryAfter = wait
	return e
}

// quotaPrincipal is the key of the caller's buckets.
func quotaPrincipal(ctx context.Context) string {
	if p, ok := security.PrincipalFrom(ctx); ok {
		return p.Name
	}
	return ""
}

// admitProduce charges a produce of n bytes to the caller's quota, or
// refuses it with THROTTLED.
func (l *limits) admitProduce(ctx context.Context, n int) error {
	if l == nil || l.produce == nil {
		return nil
	}
	p := quotaPrincipal(ctx)
	if wait := l.produce.take(p, n); wait > 0 {
		return l.produce.throttled("produce", p, wait)
	}
	return nil
}

// admitFetch holds a fetch while the caller is over its quota, up to
// maxQuotaDelay, or refuses it with THROTTLED when the wait would be longer.
// held is how long it held the fetch.
func (l *limits) admitFetch(ctx context.Context) (held time.Duration, err error) {
	if l == nil || l.fetch == nil {
		return 0, nil
	}
	p := quotaPrincipal(ctx)
	wait := l.fetch.wait(p)
	switch {
	case wait == 0:
		return 0, nil
	case wait > maxQuotaDelay:
		return 0, l.fetch.throttled("fetch", p, wait)
	}
	start := time.Now()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return time.Since(start), nil
	case <-ctx.Done():
		return time.Since(start), ctx.Err()
	}
}

// chargeFetch charges what a fetch returned to the caller's quota.
func (l *limits) chargeFetch(ctx context.Context, n int) {
	if l == nil || l.fetch == nil {
		return
	}
	l.fetch.charge(quotaPrincipal(ctx), n)
}
