//go:build !unix

package source

// mapBuffer: off-heap buffers are for unix systems; elsewhere Arrow's
// buffers stay on the Go heap.
func mapBuffer(int) []byte { return nil }

func unmapBuffer([]byte) {}
