package miniotest

import "syscall"

// sysProcAttr asks the kernel to kill the server if the test binary dies
// without running its cleanups (a panic, a timeout, SIGKILL), so that no
// server outlives the test that owned it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
