//go:build unix

package loader

import (
	"syscall"
	"time"
)

// processCPU is the CPU time this process has used, user and system;
// false when it cannot be read.
func processCPU() (time.Duration, bool) {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0, false
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano()), true
}
