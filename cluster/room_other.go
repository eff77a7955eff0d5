//go:build !linux

package cluster

import (
	"os"
	"syscall"
)

// allocate is not done outside Linux: no room is kept there (see room.go).
func allocate(*os.File, int64) error { return syscall.ENOSYS }
