package formats

import (
	"testing"

	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
)

// NDJSON readers, of files or blobs, have no bound of their own: the
// caller divides their blocks, and a blob stream's chunks, among them.
func TestReadersAtOnceOfNDJSON(t *testing.T) {
	if n := ReadersAtOnce(source.Input{Path: "a.ndjson"}, source.Options{}); n < 1000 {
		t.Errorf("NDJSON: %d readers at once, want no bound here (their blocks are divided)", n)
	}
	if n := ReadersAtOnce(source.Input{Path: "https://a.blob.core.windows.net/c/a.ndjson", Remote: &sourcetest.MemRemote{}}, source.Options{}); n < 1000 {
		t.Errorf("NDJSON blobs: %d readers at once, want no bound here (their streams' chunks are divided)", n)
	}
}
