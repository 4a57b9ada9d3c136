//go:build unix

package pacing

import (
	"math"
	"syscall"
)

// processFDLimit returns the soft RLIMIT_NOFILE, or 0 if it is unknown or
// unlimited.
func processFDLimit() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Cur == 0 || r.Cur >= math.MaxInt32 {
		return 0
	}
	return int(r.Cur)
}
