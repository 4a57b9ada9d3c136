package blobsource

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"

	"github.com/cosmosloader/loader/loader/source"
)

// Random access (Parquet: the footer, then every column chunk of a row
// group, read page by page in turns) costs one ranged GET per read unless
// something sits in front. The cache below holds at most CacheBlocks blocks
// of at most CacheBlockSize bytes each, so a blob read at random costs at
// most CacheBlocks × CacheBlockSize of memory (16 MiB by default; one block
// more per goroutine reading the same reader at once).
const (
	DefaultCacheBlockSize = 1 << 20
	DefaultCacheBlocks    = 16
	// tailSize is what a first read near the end fetches: Parquet's
	// length-and-magic and, in all but huge schemas, its footer, in one GET.
	tailSize = 64 << 10
)

// random is a cached io.ReaderAt over a blob. A read that misses fetches a
// block starting at the read (the tail at the end); a read that passes
// the middle of its block reads the next block ahead, in the background,
// one at a time. Blocks leave least recently used first. When half the
// cache's worth of blocks (at least 2) have left with less than half of
// them served — more column chunks read in turns than blocks to hold them
// — the reader stops fetching more than is asked and reading ahead, so a
// wide row group costs about its own bytes (1.3× in the test, against 3×
// before it gives up) at one GET per read.
//
// Reads go through Blob.fetch: conditional on the listed ETag (a replaced
// blob fails with 412 rather than mixing versions) and with its retries.
type random struct {
	b      *Blob
	size   int64
	block  int64
	max    int
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	blocks []*block
	tick   int64
	ahead  bool  // a read-ahead is in flight
	wasted int   // blocks evicted while mostly unread
	exact  bool  // thrashing: fetch only what is asked, read nothing ahead
	pos    int64 // for Seek
}

type block struct {
	off    int64
	data   []byte
	ready  chan struct{} // closed when data (or err) is in
	err    error
	used   int64 // LRU tick
	high   int64 // end of the furthest read served from it
	served int64 // bytes served from it
}

func (bl *block) end() int64 { return bl.off + int64(len(bl.data)) }

func (bl *block) isReady() bool {
	select {
	case <-bl.ready:
		return true
	default:
		return false
	}
}

var _ source.RandomReader = (*random)(nil)

// OpenRandom returns a cached random-access reader over the blob; Close
// stops its read-ahead and frees its blocks.
func (b *Blob) OpenRandom() (source.RandomReader, error) {
	ctx, cancel := context.WithCancel(context.Background())
	blockSize, blocks := b.cacheBlockSize, b.cacheBlocks
	if blockSize <= 0 {
		blockSize = DefaultCacheBlockSize
	}
	if blocks <= 0 {
		blocks = DefaultCacheBlocks
	}
	return &random{b: b, size: b.id.Size, block: blockSize, max: blocks, ctx: ctx, cancel: cancel}, nil
}

// ReadAt reads len(p) bytes at off (fewer and io.EOF at the end).
func (r *random) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	if off >= r.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), r.size-off))
	done := 0
	for done < n {
		at := off + int64(done)
		want := int64(n - done)
		r.mu.Lock()
		bl := r.find(at)
		if bl == nil && want >= r.block {
			// As big as a block: caching it would only evict others.
			r.mu.Unlock()
			if err := r.b.fetch(r.ctx, at, p[done:n]); err != nil {
				return done, err
			}
			done = n
			break
		}
		if bl == nil {
			lo, hi := r.span(at, want)
			bl = r.add(lo, hi)
			r.mu.Unlock()
			r.fill(bl)
		} else {
			r.mu.Unlock()
		}
		select {
		case <-bl.ready:
		case <-r.ctx.Done():
			return done, r.ctx.Err()
		}
		if bl.err != nil {
			return done, bl.err
		}
		k := copy(p[done:n], bl.data[at-bl.off:])
		done += k
		r.mu.Lock()
		r.tick++
		bl.used = r.tick
		bl.high = max(bl.high, at+int64(k))
		bl.served += int64(k)
		r.readAhead(bl)
		r.mu.Unlock()
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// find returns the block holding the byte at off. r.mu is held.
func (r *random) find(off int64) *block {
	for _, bl := range r.blocks {
		if bl.off <= off && off < bl.end() {
			return bl
		}
	}
	return nil
}

// span is the range a read of want bytes at off that missed fetches.
// r.mu is held.
func (r *random) span(off, want int64) (lo, hi int64) {
	if tail := min(tailSize, r.block); off >= r.size-tail {
		return max(0, r.size-tail), r.size
	}
	hi = off + want
	if !r.exact {
		hi = off + max(want, r.block)
	}
	hi = min(hi, r.size)
	// Stop at the next block held: no byte is held twice.
	for _, bl := range r.blocks {
		if bl.off > off && bl.off < hi && bl.off >= off+want {
			hi = bl.off
		}
	}
	return off, hi
}

// add makes room and adds an unfilled block for [lo, hi). r.mu is held.
func (r *random) add(lo, hi int64) *block {
	for len(r.blocks) >= r.max && r.evict() {
	}
	r.tick++
	bl := &block{off: lo, data: make([]byte, hi-lo), ready: make(chan struct{}), used: r.tick, high: lo}
	r.blocks = append(r.blocks, bl)
	return bl
}

// evict drops the least recently used filled block; false when every block
// is still being fetched. r.mu is held.
func (r *random) evict() bool {
	victim := -1
	for i, bl := range r.blocks {
		if bl.isReady() && (victim < 0 || bl.used < r.blocks[victim].used) {
			victim = i
		}
	}
	if victim < 0 {
		return false
	}
	bl := r.blocks[victim]
	if bl.served < int64(len(bl.data))/2 {
		r.wasted++
		if r.wasted >= max(2, r.max/2) {
			r.exact = true
		}
	}
	r.blocks = slices.Delete(r.blocks, victim, victim+1)
	return true
}

// fill fetches bl; a failed block is dropped, so a later read asks again.
func (r *random) fill(bl *block) {
	err := r.b.fetch(r.ctx, bl.off, bl.data)
	if err != nil {
		r.mu.Lock()
		bl.err = err
		if i := slices.Index(r.blocks, bl); i >= 0 {
			r.blocks = slices.Delete(r.blocks, i, i+1)
		}
		r.mu.Unlock()
	}
	close(bl.ready)
}

// readAhead fetches the block after bl in the background once a read has
// passed bl's middle: the reader is going through it in order. r.mu is held.
func (r *random) readAhead(bl *block) {
	next := bl.end()
	if r.exact || r.ahead || bl.high-bl.off < int64(len(bl.data))/2 || next >= r.size || r.find(next) != nil {
		return
	}
	if len(r.blocks) >= r.max && !r.evict() {
		return
	}
	lo, hi := next, min(r.size, next+r.block)
	for _, o := range r.blocks {
		if o.off > lo && o.off < hi {
			hi = o.off
		}
	}
	nb := r.add(lo, hi)
	r.ahead = true
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.fill(nb)
		r.mu.Lock()
		r.ahead = false
		r.mu.Unlock()
	}()
}

// Seek sets the offset of nothing but Seek itself: Parquet uses it to
// learn the size.
func (r *random) Seek(offset int64, whence int) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var p int64
	switch whence {
	case io.SeekStart:
		p = offset
	case io.SeekCurrent:
		p = r.pos + offset
	case io.SeekEnd:
		p = r.size + offset
	default:
		return 0, errors.New("invalid whence")
	}
	if p < 0 {
		return 0, errors.New("negative position")
	}
	r.pos = p
	return p, nil
}

// Close stops a read-ahead in flight and frees the blocks.
func (r *random) Close() error {
	r.cancel()
	r.wg.Wait()
	r.mu.Lock()
	r.blocks = nil
	r.mu.Unlock()
	return nil
}
