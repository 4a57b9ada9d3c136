package parquet

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/cosmosloader/loader/loader/source"
)

// countingFile counts the bytes read from it.
type countingFile struct {
	*os.File
	read int64
}

func (c *countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.File.ReadAt(p, off)
	c.read += int64(n)
	return n, err
}

// Reads inside held ranges, across two of them and past the last, get the
// input's bytes, and only what lies outside them is read from the input.
func TestHeldBytesServeTheSecondPass(t *testing.T) {
	data := make([]byte, 1000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cf := &countingFile{File: f}
	h := &heldBytes{RandomReader: cf}
	release, err := h.hold([]source.ByteRange{{Start: 100, End: 300}, {Start: 300, End: 500}})
	if err != nil {
		t.Fatal(err)
	}
	cf.read = 0
	for _, r := range []struct{ off, n int64 }{{100, 50}, {250, 100}, {450, 100}, {0, 10}} {
		b := make([]byte, r.n)
		if _, err := h.ReadAt(b, r.off); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if !bytes.Equal(b, data[r.off:r.off+r.n]) {
			t.Errorf("ReadAt(%d, %d) differs from the input", r.off, r.n)
		}
	}
	if cf.read != 50+10 {
		t.Errorf("%d bytes read from the input, want 60 (those outside the held ranges)", cf.read)
	}
	release()
	if h.used != 0 || len(h.chunks) != 0 {
		t.Errorf("after release: %d bytes in %d chunks held", h.used, len(h.chunks))
	}
}
