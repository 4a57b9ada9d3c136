package testenv

import "syscall"

// Pdeathsig kills a server if the test binary dies without running its
// cleanups (a -timeout panic, a kill), so no server outlives its test run.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
