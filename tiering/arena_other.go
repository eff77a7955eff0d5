//go:build !linux

package tiering

// mapBuffer takes a chunk buffer from the heap: only Linux maps them.
func mapBuffer(size int) []byte { return make([]byte, size) }

// unmapBuffer leaves a buffer to the GC.
func unmapBuffer([]byte) {}
