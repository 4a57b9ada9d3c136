//go:build unix

package offheap

import "syscall"

// Map maps n zeroed bytes outside the Go heap, page-aligned; nil if the
// system refuses.
func Map(n int) []byte {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil
	}
	return b
}

// Unmap unmaps a buffer Map returned.
func Unmap(b []byte) { _ = syscall.Munmap(b) }
