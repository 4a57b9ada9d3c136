//go:build unix

package source

import "syscall"

// mapBuffer maps n zeroed bytes outside the Go heap, page-aligned; nil if
// the system refuses.
func mapBuffer(n int) []byte {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil
	}
	return b
}

func unmapBuffer(b []byte) { _ = syscall.Munmap(b) }
