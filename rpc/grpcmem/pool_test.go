package grpcmem

import "testing"

func TestTiers(t *testing.T) {
	for _, c := range []struct{ n, capacity int }{
		{0, 256}, {1, 256}, {256, 256}, {257, 512}, {40 << 10, 64 << 10},
		{1 << 20, 1 << 20}, {1<<20 + 1, 2 << 20}, {8 << 20, 8 << 20}, {8<<20 + 1, 8<<20 + 1},
	} {
		var p Pool
		b := p.Get(c.n)
		if len(*b) != c.n || cap(*b) != c.capacity {
			t.Errorf("Get(%d): len %d cap %d, want len %d cap %d", c.n, len(*b), cap(*b), c.n, c.capacity)
		}
	}
}

// TestReuse: a buffer put back is handed out again for any size of its
// tier, whatever prefix of it was put back; one of another capacity is
// not taken.
func TestReuse(t *testing.T) {
	var p Pool
	b := p.Get(3000) // the 4 KiB tier
	(*b)[0] = 7
	*b = (*b)[:10]
	p.Put(b)
	// sync.Pool may drop what it was given (the race detector makes it do
	// so at random): look a few times.
	found := false
	for range 100 {
		got := p.Get(4000)
		if len(*got) != 4000 || cap(*got) != 4096 {
			t.Fatalf("len %d cap %d", len(*got), cap(*got))
		}
		if got == b {
			found = true
			break
		}
		b = got
		p.Put(got)
	}
	if !found {
		t.Fatal("a buffer put back was never handed out again")
	}
	odd := make([]byte, 3000)
	p.Put(&odd) // not a tier's capacity: dropped
	if got := p.Get(3000); cap(*got) != 4096 {
		t.Fatalf("a buffer of capacity 3000 was handed out for the 4 KiB tier")
	}
}

func TestPoison(t *testing.T) {
	p := Pool{Poison: true}
	b := p.Get(100)
	for i, v := range *b {
		if v != 0xa5 {
			t.Fatalf("byte %d is %#x", i, v)
		}
	}
}
