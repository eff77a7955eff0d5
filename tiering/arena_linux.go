//go:build linux

package tiering

import "syscall"

// mapBuffer maps size bytes of anonymous memory for a chunk buffer, its
// pages populated at once (MAP_POPULATE): the caller overwrites all of it
// straight away, and one call that faults in the whole buffer costs less
// than a fault per page as the GET's body lands (0.75-0.8 CPU-s per GiB
// against 0.9-1.1 on the 2-core VM of docs/BENCHMARKS.md). Transparent
// huge pages are not asked for: there they cost 1.3-1.7 CPU-s per GiB, the
// kernel compacting memory to find each 2 MiB page. Where mapping fails
// the buffer comes from the heap (unmapBuffer then leaves it to the GC).
func mapBuffer(size int) []byte {
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_POPULATE)
	if err != nil {
		return make([]byte, size)
	}
	return b
}

// unmapBuffer gives back a buffer mapBuffer returned, whole (as long as
// its capacity). Nothing may refer to it any more: a read of it would
// fault.
func unmapBuffer(b []byte) {
	// Munmap knows the mappings it made; a heap buffer it refuses.
	_ = syscall.Munmap(b[:cap(b)])
}
