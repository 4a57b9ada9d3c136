package source

import (
	"testing"
)

// One cursor streams a blob in the remote's default chunks; many share a
// bounded amount of memory, in chunks no smaller than minStreamChunk.
func TestStreamChunkBoundsTheStreamsOfManyCursors(t *testing.T) {
	if c := (Options{}).StreamChunk(); c != 0 {
		t.Errorf("one cursor: chunk %d, want the remote's default (0)", c)
	}
	for _, cursors := range []int{2, 8, 32, 64, 1000} {
		c := (Options{Cursors: cursors}).StreamChunk()
		if c < minStreamChunk || (c > minStreamChunk && 3*c*int64(cursors) > segmentStreamsMemory) {
			t.Errorf("%d cursors: chunk %d", cursors, c)
		}
	}
}
