//go:build linux

package tiering

import (
	"errors"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// isMapped reports whether every page of b is mapped in this process
// (msync fails with ENOMEM on a range with an unmapped page).
func isMapped(t *testing.T, b []byte) bool {
	t.Helper()
	switch err := unix.Msync(b, unix.MS_ASYNC); {
	case err == nil:
		return true
	case errors.Is(err, unix.ENOMEM):
		return false
	default:
		t.Fatalf("msync: %v", err)
		return false
	}
}

// TestMapBufferHugePageAligned: a chunk buffer of a huge page or more
// starts on a huge-page boundary (so the kernel can back it with huge
// pages), is exactly as long as asked, writable throughout, and is
// unmapped whole by unmapBuffer, once: the ends trimmed off the larger
// mapping and a second unmap leave nothing behind and break nothing.
func TestMapBufferHugePageAligned(t *testing.T) {
	for _, size := range []int{hugePage, 4 << 20, 4<<20 + 256<<10, 8 << 20} {
		b := mapBuffer(size)
		if len(b) != size || cap(b) != size {
			t.Fatalf("mapBuffer(%d): len %d, cap %d", size, len(b), cap(b))
		}
		if at := uintptr(unsafe.Pointer(&b[0])); at%hugePage != 0 {
			t.Errorf("mapBuffer(%d) at %#x: not on a %d-byte boundary", size, at, hugePage)
		}
		for i := range b {
			if b[i] != 0 {
				t.Fatalf("mapBuffer(%d): byte %d is %d, want a zeroed buffer", size, i, b[i])
			}
			b[i] = byte(i)
		}
		if !isMapped(t, b) {
			t.Fatalf("mapBuffer(%d): not mapped", size)
		}
		mapped.Lock()
		tracked := mapped.size[&b[0]]
		mapped.Unlock()
		if tracked != uintptr(size) {
			t.Fatalf("mapBuffer(%d): tracked as %d bytes", size, tracked)
		}
		unmapBuffer(b[:1]) // any slice from its first byte gives it back whole
		if isMapped(t, b[:1]) || isMapped(t, b[size-unix.Getpagesize():]) {
			t.Fatalf("mapBuffer(%d): still mapped after unmapBuffer", size)
		}
		unmapBuffer(b) // a second time: no longer tracked, nothing to do
	}
}

// TestMapBufferSmallAndHeap: a buffer under a huge page is mapped too and
// given back whole; a buffer from the heap (mapBuffer's fallback) is left
// to the GC.
func TestMapBufferSmallAndHeap(t *testing.T) {
	b := mapBuffer(64 << 10)
	if len(b) != 64<<10 || !isMapped(t, b) {
		t.Fatalf("mapBuffer(64 KiB): len %d", len(b))
	}
	unmapBuffer(b)
	if isMapped(t, b) {
		t.Fatal("64 KiB buffer still mapped after unmapBuffer")
	}
	heap := make([]byte, 4<<20)
	unmapBuffer(heap)
	heap[0], heap[len(heap)-1] = 1, 2 // still the program's memory
	unmapBuffer(nil)
}
