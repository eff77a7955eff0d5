package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
)

// segment concatenates batches of every codec, as a segment file holds them.
func segment(t testing.TB) ([]byte, []Batch) {
	t.Helper()
	var stream []byte
	var batches []Batch
	var next int64
	for i, codec := range append(allCodecs, CompressionNone) {
		opts := codecOpts(codec)
		opts.BaseOffset = next
		b := mustEncode(t, opts, sampleRecords(3+i)...)
		next = b.NextOffset()
		stream = append(stream, b...)
		batches = append(batches, b)
	}
	return stream, batches
}

func TestNextSplitsConcatenation(t *testing.T) {
	stream, want := segment(t)
	rest := stream
	for i, w := range want {
		b, r, err := Next(rest)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if string(b) != string(w) {
			t.Fatalf("batch %d differs", i)
		}
		if cap(b) != len(b) {
			t.Fatalf("batch %d: capacity %d not clipped to %d", i, cap(b), len(b))
		}
		rest = r
	}
	if len(rest) != 0 {
		t.Fatalf("%d bytes left", len(rest))
	}
	if _, _, err := Next(rest); err != ErrShortBuffer {
		t.Fatalf("Next on empty input: %v", err)
	}
}

// TestNextVerifiedSkipsOnlyTheCRC: NextVerified splits a stream as Next
// does, and passes a batch whose CRC no longer matches its bytes, which
// Next refuses; a bad length or magic it still refuses.
func TestNextVerifiedSkipsOnlyTheCRC(t *testing.T) {
	stream, want := segment(t)
	damaged := append([]byte(nil), stream...)
	at := len(want[0]) + HeaderSize + 1 // inside the second batch's records
	damaged[at] ^= 0xff
	if _, _, err := Next(damaged[len(want[0]):]); !errors.Is(err, ErrBadCRC) {
		t.Fatalf("Next on the damaged batch: %v, want ErrBadCRC", err)
	}
	rest := damaged
	for i, w := range want {
		b, r, err := NextVerified(rest)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if len(b) != len(w) || cap(b) != len(b) {
			t.Fatalf("batch %d: %d bytes, capacity %d, want %d", i, len(b), cap(b), len(w))
		}
		if i != 1 && string(b) != string(w) {
			t.Fatalf("batch %d differs", i)
		}
		rest = r
	}
	if len(rest) != 0 {
		t.Fatalf("%d bytes left", len(rest))
	}

	badMagic := append([]byte(nil), want[0]...)
	badMagic[offMagic] = 1
	if _, _, err := NextVerified(badMagic); !errors.Is(err, ErrBadMagic) {
		t.Fatalf("NextVerified with a bad magic: %v", err)
	}
	badLength := append([]byte(nil), want[0]...)
	binary.BigEndian.PutUint32(badLength[offBatchLength:], 3)
	if _, _, err := NextVerified(badLength); !errors.Is(err, ErrBadLength) {
		t.Fatalf("NextVerified with a length shorter than a header: %v", err)
	}
	if _, _, err := NextVerified(want[0][:len(want[0])-1]); err != ErrShortBuffer {
		t.Fatalf("NextVerified on a torn batch: %v, want ErrShortBuffer", err)
	}
}

// TestNextTornTail cuts the stream at every byte: Next must return every
// whole batch before the cut, then ErrShortBuffer (never corruption), as
// recovery after a torn write relies on.
func TestNextTornTail(t *testing.T) {
	stream, batches := segment(t)
	ends := map[int]int{} // stream offset -> whole batches before it
	off := 0
	for i, b := range batches {
		off += len(b)
		ends[off] = i + 1
	}
	for cut := 0; cut < len(stream); cut++ {
		rest := stream[:cut]
		n := 0
		var err error
		for {
			_, rest, err = Next(rest)
			if err != nil {
				break
			}
			n++
		}
		if err != ErrShortBuffer {
			t.Fatalf("cut at %d: %v, want ErrShortBuffer", cut, err)
		}
		wantN := 0
		for end, k := range ends {
			if end <= cut {
				wantN = max(wantN, k)
			}
		}
		if n != wantN {
			t.Fatalf("cut at %d: %d batches, want %d", cut, n, wantN)
		}
	}
}

func TestPeekSize(t *testing.T) {
	b := mustEncode(t, DefaultBatchOptions(), Record{Value: []byte("v")})
	for n := range LengthOffset {
		if _, err := PeekSize(b[:n]); err != ErrShortBuffer {
			t.Fatalf("PeekSize of %d bytes: %v", n, err)
		}
	}
	if size, err := PeekSize(b[:LengthOffset]); err != nil || size != len(b) {
		t.Fatalf("PeekSize = %d, %v; want %d", size, err, len(b))
	}
}

func TestErrorMessages(t *testing.T) {
	b := clone(mustEncode(t, DefaultBatchOptions(), Record{Value: []byte("v")}))
	b[len(b)-1] ^= 1
	err := Batch(b).Validate()
	want := fmt.Sprintf("record: crc mismatch: stored 0x%08x computed ", Batch(b).CRC())
	if err == nil || len(err.Error()) <= len(want) || err.Error()[:len(want)] != want {
		t.Fatalf("message %q, want prefix %q", err, want)
	}
	if !errors.Is(err, ErrBadCRC) || !errors.Is(err, ErrCorrupt) {
		t.Fatal("errors.Is broken")
	}
}
