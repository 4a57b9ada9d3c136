//go:build !unix

package offheap

// Map: off-heap buffers are for unix systems; elsewhere callers keep their
// buffers on the Go heap.
func Map(int) []byte { return nil }

// Unmap does nothing where Map maps nothing.
func Unmap([]byte) {}
