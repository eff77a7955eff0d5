//go:build linux

package tiering

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePage is the size of a transparent huge page on the platforms Strata
// runs on (x86-64 and arm64 with 4 KiB base pages).
const hugePage = 2 << 20

// mapped holds the buffers mapBuffer mapped, by their first byte, with the
// length of each mapping: unmapBuffer unmaps only those, and leaves a heap
// buffer (mapBuffer's fallback) to the GC.
var mapped struct {
	sync.Mutex
	size map[*byte]uintptr
}

// mapBuffer maps size bytes of anonymous memory for a chunk buffer, outside
// the Go heap, its pages populated at once: the caller overwrites all of it
// straight away.
//
// A buffer of at least one huge page starts on a huge-page boundary and
// asks for transparent huge pages. The first use of fresh memory is most
// of what a cold GB read into a cache that keeps it costs, and much of
// that is paid per page: on the 2-core VM of docs/BENCHMARKS.md a fresh
// 4 MiB buffer, mapped, filled from a socket and CRC-checked, takes 12 ms
// in 4 KiB pages and about 1 ms in huge pages, as a recycled one does
// (BenchmarkChunkBufferFirstUse). Where the kernel has no huge page to
// give (THP off, or memory too fragmented), the same calls populate 4 KiB
// pages.
//
// Where mapping fails the buffer comes from the heap.
func mapBuffer(size int) []byte {
	if size >= hugePage {
		if b := mapHuge(size); b != nil {
			return b
		}
	}
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(size), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return make([]byte, size)
	}
	return track(p, size)
}

// mapHuge maps size bytes starting on a huge-page boundary, advised for
// transparent huge pages and populated; nil if mapping fails. It maps one
// huge page more than asked for and unmaps the unaligned ends, so that the
// mapping is the buffer exactly.
func mapHuge(size int) []byte {
	span := uintptr(size) + hugePage
	p, err := unix.MmapPtr(-1, 0, nil, span, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil
	}
	head := (hugePage - uintptr(p)%hugePage) % hugePage
	start := unsafe.Add(p, head)
	if head > 0 {
		_ = unix.MunmapPtr(p, head)
	}
	if tail := span - head - uintptr(size); tail > 0 {
		_ = unix.MunmapPtr(unsafe.Add(start, size), tail)
	}
	b := track(start, size)
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE) // advice: without it, 4 KiB pages
	if unix.Madvise(b, unix.MADV_POPULATE_WRITE) != nil {
		// Before Linux 5.14: fault each page in now, one write per page
		// (a huge page faults in whole on its first).
		for i := 0; i < size; i += unix.Getpagesize() {
			b[i] = 0
		}
	}
	return b
}

// track records the mapping of size bytes at p and returns it as a slice.
func track(p unsafe.Pointer, size int) []byte {
	b := unsafe.Slice((*byte)(p), size)
	mapped.Lock()
	if mapped.size == nil {
		mapped.size = map[*byte]uintptr{}
	}
	mapped.size[&b[0]] = uintptr(size)
	mapped.Unlock()
	return b
}

// unmapBuffer gives back a buffer mapBuffer returned, whole (from its first
// byte). Nothing may refer to it any more: a read of it would fault. A
// heap buffer is left to the GC.
func unmapBuffer(b []byte) {
	if cap(b) == 0 {
		return
	}
	first := &b[:1][0]
	mapped.Lock()
	size, ok := mapped.size[first]
	delete(mapped.size, first)
	mapped.Unlock()
	if ok {
		_ = unix.MunmapPtr(unsafe.Pointer(first), size)
	}
}
