package client

import (
	"sync"
	"testing"
)

// Hash values of Kafka's own UtilsTest.testMurmur2 (clients/src/test/java/
// org/apache/kafka/common/utils/UtilsTest.java), plus the values Akka's
// Kafka-compatible Murmur2Spec checks against Utils.murmur2, plus the empty
// and one-byte inputs (their partitions below agree with Java's).
var murmur2Vectors = []struct {
	in   string
	want int32 // as Java's int
}{
	{"21", -973932308},
	{"foobar", -790332482},
	{"a-little-bit-long-string", -985981536},
	{"a-little-bit-longer-string", -1486304829},
	{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
	{"abc", 479470107},
	{"1", -1993445489},
	{"12", 126087238},
	{"123", -267702483},
	{"1234", -1614185708},
	{"12345", -1188365604},
	{"", 275646681},
	{"a", -1563381124},
}

func TestMurmur2KafkaVectors(t *testing.T) {
	for _, v := range murmur2Vectors {
		if got := int32(murmur2([]byte(v.in))); got != v.want {
			t.Errorf("murmur2(%q) = %d, want %d", v.in, got, v.want)
		}
	}
}

// Partitions that Kafka's Java producer (DefaultPartitioner) chooses among
// 1000 partitions, as kafka-python's test_murmur2_java_compatibility
// records them.
func TestKeyPartitionJavaCompatible(t *testing.T) {
	cases := []struct {
		key  string
		want int32
	}{
		{"", 681},
		{"a", 524},
		{"ab", 434},
		{"abc", 107},
		{"123456789", 566},
		{"\x00 ", 742},
	}
	for _, c := range cases {
		if got := KeyPartition([]byte(c.key), 1000); got != c.want {
			t.Errorf("KeyPartition(%q, 1000) = %d, want %d", c.key, got, c.want)
		}
	}
}

// toPositive masks the sign bit, it does not take the absolute value: "21"
// hashes to -973932308, so Java's partition among 1000 is
// (-973932308 & 0x7fffffff) % 1000 = 1173551340 % 1000 = 340, where abs()
// would give 308.
func TestKeyPartitionNegativeHash(t *testing.T) {
	if got := KeyPartition([]byte("21"), 1000); got != 340 {
		t.Errorf("KeyPartition(\"21\", 1000) = %d, want 340", got)
	}
	for n := int32(1); n < 50; n++ {
		for _, v := range murmur2Vectors {
			p := KeyPartition([]byte(v.in), n)
			if p < 0 || p >= n {
				t.Fatalf("KeyPartition(%q, %d) = %d", v.in, n, p)
			}
		}
	}
	if got := KeyPartition([]byte("x"), 0); got != 0 {
		t.Errorf("no partitions: %d", got)
	}
}

func TestDefaultPartitionerKeyed(t *testing.T) {
	p := NewDefaultPartitioner()
	for _, v := range murmur2Vectors {
		r := &Record{Topic: "t", Key: []byte(v.in)}
		if got, want := p.Partition(r, 12), KeyPartition(r.Key, 12); got != want {
			t.Errorf("key %q: %d, want %d", v.in, got, want)
		}
	}
	// An empty key is a key: it hashes, it does not stick.
	if got := p.Partition(&Record{Topic: "t", Key: []byte{}}, 1000); got != 681 {
		t.Errorf("empty key went to %d", got)
	}
}

func TestStickyPartitioner(t *testing.T) {
	p := NewDefaultPartitioner().(*stickyPartitioner)
	null := &Record{Topic: "t"}
	const n = 8

	first := p.Partition(null, n)
	for range 100 {
		if got := p.Partition(null, n); got != first {
			t.Fatalf("null-key records moved from %d to %d without a batch closing", first, got)
		}
	}
	// Closing a batch of another partition or topic changes nothing.
	p.OnBatchClosed("t", (first+1)%n)
	p.OnBatchClosed("other", first)
	if got := p.Partition(null, n); got != first {
		t.Fatalf("moved to %d after an unrelated batch closed", got)
	}
	// Closing the sticky partition's batch moves on, never to the same one.
	seen := map[int32]bool{first: true}
	cur := first
	for range 200 {
		p.OnBatchClosed("t", cur)
		next := p.Partition(null, n)
		if next == cur {
			t.Fatalf("stayed on %d after its batch closed", cur)
		}
		if next < 0 || next >= n {
			t.Fatalf("partition %d out of range", next)
		}
		seen[next] = true
		cur = next
	}
	if len(seen) != n {
		t.Errorf("200 moves visited %d of %d partitions", len(seen), n)
	}
	// Topics stick independently.
	other := p.Partition(&Record{Topic: "u"}, n)
	p.OnBatchClosed("u", other)
	if got := p.Partition(null, n); got != cur {
		t.Errorf("topic t moved because topic u did")
	}
	// One partition: always 0.
	if got := p.Partition(&Record{Topic: "single"}, 1); got != 0 {
		t.Errorf("single partition: %d", got)
	}
	// Fewer partitions than the sticky choice: choose again within range.
	for range 50 {
		if got := p.Partition(null, 2); got < 0 || got >= 2 {
			t.Fatalf("shrunk topic: %d", got)
		}
	}
}

func TestStickyPartitionerConcurrent(t *testing.T) {
	p := NewDefaultPartitioner()
	l := p.(BatchListener)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &Record{Topic: "t"}
			for i := range 1000 {
				part := p.Partition(r, 16)
				if part < 0 || part >= 16 {
					t.Errorf("partition %d", part)
					return
				}
				if i%10 == g {
					l.OnBatchClosed("t", part)
				}
			}
		}()
	}
	wg.Wait()
}

func BenchmarkKeyPartition(b *testing.B) {
	key := []byte("user-1234567890")
	for b.Loop() {
		KeyPartition(key, 64)
	}
}
