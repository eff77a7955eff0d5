package broker

import (
	"testing"
	"time"
)

// The commit clock dates an offset's acknowledgement to the last look
// before the leader saw it: never later than it was, so a seal for
// remote.max.lag.ms comes early rather than late, also once it has merged
// marks to stay bounded.
func TestCommitClockErrsTowardsOlder(t *testing.T) {
	var c commitClock
	t0 := time.Unix(1_000_000, 0)
	if _, ok := c.since(0); ok || c.looking() {
		t.Fatal("a fresh clock knows an acknowledgement")
	}
	c.observe(10, t0) // what the leader found acknowledged when it started
	c.observe(20, t0.Add(time.Second))
	c.observe(20, t0.Add(2*time.Second))
	c.observe(30, t0.Add(3*time.Second))
	for _, tc := range []struct {
		offset int64
		want   time.Time
		ok     bool
	}{
		{5, t0, true},
		{15, t0, true}, // seen at 1s, not at 0s
		{25, t0.Add(2 * time.Second), true},
		{30, time.Time{}, false},
	} {
		if at, ok := c.since(tc.offset); ok != tc.ok || !at.Equal(tc.want) {
			t.Errorf("since(%d) = %v, %v; want %v, %v", tc.offset, at, ok, tc.want, tc.ok)
		}
	}
	c.forget(20)
	if at, _ := c.since(25); !at.Equal(t0.Add(2 * time.Second)) {
		t.Errorf("forgetting what is in the bucket changed the date of 25: %v", at)
	}

	// A store outage: the high watermark moves on every look for an hour.
	c.reset()
	earliest := map[int64]time.Time{} // the last look before an offset was acknowledged
	prev := t0
	for i := range 14400 {
		now := t0.Add(time.Duration(i) * 250 * time.Millisecond)
		hw := int64(i + 1)
		c.observe(hw, now)
		if i == 0 {
			earliest[0] = now
		} else {
			earliest[hw-1] = prev
		}
		prev = now
	}
	if n := len(c.mu.marks); n > maxCommitMarks {
		t.Fatalf("%d marks, bound %d", n, maxCommitMarks)
	}
	for off, want := range earliest {
		if at, ok := c.since(off); !ok || at.After(want) {
			t.Fatalf("offset %d dated %v (ok %v), later than %v", off, at, ok, want)
		}
	}
	if at, _ := c.since(0); !at.Equal(t0) {
		t.Fatalf("the oldest offset is dated %v, want %v", at, t0)
	}
}
