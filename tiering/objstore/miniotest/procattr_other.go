//go:build !linux

package miniotest

import "syscall"

// sysProcAttr: only Linux can tie the server's life to the test binary's;
// elsewhere the cleanups alone stop it.
func sysProcAttr() *syscall.SysProcAttr { return nil }
