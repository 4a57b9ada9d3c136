package parquet

import (
	"slices"
	"sync"

	"github.com/cosmosloader/loader/loader/source"
)

// heldBytes is a remote input as the page guard reads it, with the column
// chunks of the row groups being imported held in memory: an import reads
// a row group twice, once to verify it (verifyRowGroup) and once to decode
// it, and a blob's bytes fetched for the first pass would otherwise be
// fetched again for the second. A row group is held only while what is
// held stays within heldBytesMax; past it the second pass fetches again,
// which costs a read, not correctness.
type heldBytes struct {
	source.RandomReader
	mu     sync.Mutex
	chunks []heldChunk // sorted by start
	used   int64
}

type heldChunk struct {
	start int64
	b     []byte
}

// heldBytesMax bounds the bytes one reader holds at a time: a row group
// of Spark's default size (128 MiB) for each of two decoders.
const heldBytesMax = 256 << 20

// hold reads ranges into memory and serves reads inside them from there
// until release is called. Ranges that do not fit in what is left of
// heldBytesMax are not held (release is then a no-op).
func (h *heldBytes) hold(ranges []source.ByteRange) (release func(), err error) {
	var total int64
	for _, r := range ranges {
		total += r.End - r.Start
	}
	h.mu.Lock()
	if total == 0 || h.used+total > heldBytesMax {
		h.mu.Unlock()
		return func() {}, nil
	}
	h.used += total
	h.mu.Unlock()
	chunks := make([]heldChunk, 0, len(ranges))
	for _, r := range ranges {
		b := make([]byte, r.End-r.Start)
		if _, err := h.RandomReader.ReadAt(b, r.Start); err != nil {
			h.mu.Lock()
			h.used -= total
			h.mu.Unlock()
			return nil, err
		}
		chunks = append(chunks, heldChunk{start: r.Start, b: b})
	}
	h.mu.Lock()
	h.chunks = append(h.chunks, chunks...)
	slices.SortFunc(h.chunks, func(a, b heldChunk) int { return int(a.start - b.start) })
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.chunks = slices.DeleteFunc(h.chunks, func(c heldChunk) bool {
			return slices.ContainsFunc(chunks, func(o heldChunk) bool { return o.start == c.start })
		})
		h.used -= total
	}, nil
}

// ReadAt serves p from the held chunks as far as they reach from off, and
// the rest from the input.
func (h *heldBytes) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	h.mu.Lock()
	for n < len(p) {
		at := off + int64(n)
		i, found := slices.BinarySearchFunc(h.chunks, at, func(c heldChunk, at int64) int { return int(c.start - at) })
		if !found {
			i--
		}
		if i < 0 || at >= h.chunks[i].start+int64(len(h.chunks[i].b)) {
			break
		}
		n += copy(p[n:], h.chunks[i].b[at-h.chunks[i].start:])
	}
	h.mu.Unlock()
	if n == len(p) {
		return n, nil
	}
	m, err := h.RandomReader.ReadAt(p[n:], off+int64(n))
	return n + m, err
}
