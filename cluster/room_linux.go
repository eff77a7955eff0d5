package cluster

import (
	"os"
	"syscall"
)

// fallocKeepSize is FALLOC_FL_KEEP_SIZE: allocate blocks without changing
// the file's size.
const fallocKeepSize = 0x1

// allocate gives f blocks for its first n bytes, keeping its size.
func allocate(f *os.File, n int64) error {
	for {
		err := syscall.Fallocate(int(f.Fd()), fallocKeepSize, 0, n)
		if err != syscall.EINTR {
			return err
		}
	}
}
