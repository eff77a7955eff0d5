//go:build linux

package tiering

import "syscall"

// mapBuffer maps size bytes of anonymous memory for a chunk buffer, asking
// for transparent huge pages; where mapping fails it takes them from the
// heap (unmapBuffer then leaves them to the GC).
func mapBuffer(size int) []byte {
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return make([]byte, size)
	}
	_ = syscall.Madvise(b, syscall.MADV_HUGEPAGE) // advice: without it, 4 KiB pages
	return b
}

// unmapBuffer gives back a buffer mapBuffer returned, whole (as long as
// its capacity). Nothing may refer to it any more: a read of it would
// fault.
func unmapBuffer(b []byte) {
	// Munmap knows the mappings it made; a heap buffer it refuses.
	_ = syscall.Munmap(b[:cap(b)])
}
