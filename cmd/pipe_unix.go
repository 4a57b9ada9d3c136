//go:build unix

package cmd

import (
	"os"
	"syscall"
)

// stdioDup returns a duplicate of f's descriptor. Go kills the process with
// SIGPIPE when a write to descriptor 1 or 2 finds the pipe closed; on any
// other descriptor the write returns EPIPE and the program decides. When
// the descriptor cannot be duplicated, f is returned as it is.
func stdioDup(f *os.File) *os.File {
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		return f
	}
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), f.Name())
}
