// Package e2e holds black-box tests of the built strata binary: brokers run
// as separate processes on loopback ports, are killed with SIGKILL and
// restarted, and are checked only through their public API.
package e2e
