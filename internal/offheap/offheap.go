// Package offheap maps buffers outside the Go heap, for the readers' big
// short-lived buffers (Parquet pages, blob bytes fetched ahead): they are
// neither scanned by the garbage collector nor counted toward its target,
// which would otherwise double them, and unmapping returns them to the
// system at once. Whoever maps a buffer unmaps it, exactly once, when
// nothing reads it any more.
package offheap
