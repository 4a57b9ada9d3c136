package blobsource

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"

	"github.com/cosmosloader/loader/loader/source"

	"github.com/cosmosloader/loader/internal/offheap"
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

	// plans are the ranges announced by PlanReads, newest last: at most
	// plansKept (one per Parquet decoder reading a row group).
	plans  [][]*planned
	gets   chan struct{} // bounds the plans' GETs in flight
	pieces pieceMemory   // the planned pieces' memory
}

// A planned range is read front to back: it keeps pieces from the last
// read on, a window's worth, fetched ahead in the background.
type planned struct {
	lo, hi int64
	window int64 // bytes kept fetched ahead of the last read
	piece  int64 // size of each GET
	read   int64 // end of the last read
	pieces []*block
}

type block struct {
	off    int64
	data   []byte
	ready  chan struct{} // closed when data (or err) is in
	err    error
	used   int64 // LRU tick
	high   int64 // end of the furthest read served from it
	served int64 // bytes served from it
	// A planned range's piece is unmapped when the last of its holds
	// (newPiece) lets go; the cache's blocks are on the Go heap.
	refs   int
	mapped bool
}

func (bl *block) end() int64 { return bl.off + int64(len(bl.data)) }

const (
	// plansKept: a Parquet file is read by at most two decoders, each
	// planning its row group.
	plansKept = 2
	// minPiece is the least a planned range is fetched by.
	minPiece = 64 << 10
	// planGets is how many GETs the plans keep in flight at once.
	planGets = 16
)

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
	return &random{b: b, size: b.id.Size, block: blockSize, max: blocks, ctx: ctx, cancel: cancel, pieces: b.pieces,
		gets: make(chan struct{}, planGets)}, nil
}

var _ source.ReadPlanner = (*random)(nil)

// PlanReads announces the ranges about to be read, each front to back,
// all in turns (a row group's column chunks), and those to be read after
// them (the next row group). Each range keeps a window ahead of its reads
// fetched, and the windows are fetched at once, so the reads wait on one
// round trip rather than one per read, and the next ranges' first bytes
// are there when their reads start. A plan's windows share the cache's
// bytes (CacheBlocks × CacheBlockSize), divided between the of readers
// planning at once: the ranges read now first, in
// proportion to their lengths (the columns of a row group are read at the
// pace of its rows, so each through its bytes in the same time), then the
// next ones with what is left. A range planned before keeps what was
// fetched of it. A third plan drops the first: one plan per decoder, two
// at most.
//
// Ranges that span no more than a block together (a small row group) are
// not planned but fetched into the cache in one GET, unless it holds them
// already (the tail fetched with the footer holds all of a small file):
// a GET per column chunk would cost more requests for no fewer round
// trips.
func (r *random) PlanReads(now, next []source.ByteRange, of int) {
	budget := r.block * int64(r.max) / int64(min(max(1, of), plansKept))
	r.mu.Lock()
	defer r.mu.Unlock()
	now, next = r.cacheSmall(now), r.cacheSmall(next)
	plan := r.windows(nil, now, budget)
	var used int64
	for _, st := range plan {
		used += st.window
	}
	plan = r.windows(plan, next, budget-used)
	if len(plan) == 0 {
		return
	}
	if len(r.plans) == plansKept {
		for _, st := range r.plans[0] {
			r.drop(st, 0, len(st.pieces))
		}
		r.plans = slices.Delete(r.plans, 0, 1)
	}
	r.plans = append(r.plans, plan)
	for _, st := range plan {
		r.fetchAhead(st, max(st.lo, st.read), st.lo)
	}
}

// cacheSmall fetches ranges into the cache, in the background, when they
// span a block at most, and then returns none; else it returns them.
// r.mu is held.
func (r *random) cacheSmall(ranges []source.ByteRange) []source.ByteRange {
	if len(ranges) == 0 {
		return nil
	}
	lo, hi := ranges[0].Start, ranges[0].End
	for _, rg := range ranges {
		lo, hi = min(lo, rg.Start), max(hi, rg.End)
	}
	if hi-lo > r.block {
		return ranges
	}
	if bl := r.find(lo); bl != nil {
		lo = bl.end() // held from its start
	}
	for _, bl := range r.blocks {
		if bl.off >= lo && bl.off < hi {
			hi = bl.off // held from there on, or to be fetched by another GET
		}
	}
	if lo < hi {
		bl := r.add(lo, hi)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.fill(bl)
		}()
	}
	return nil
}

// windows appends to plan the ranges, with windows sharing budget in
// proportion to their lengths, taking over what an earlier plan fetched of
// the same range. r.mu is held.
func (r *random) windows(plan []*planned, ranges []source.ByteRange, budget int64) []*planned {
	var total int64
	for _, rg := range ranges {
		total += max(0, rg.End-rg.Start)
	}
	for _, rg := range ranges {
		n := rg.End - rg.Start
		if n <= 0 {
			continue
		}
		w := max(0, min(n, budget*n/max(total, budget)))
		st := &planned{lo: rg.Start, hi: rg.End, window: w, piece: min(r.block, max(minPiece, w/2)), read: rg.Start}
		if old := r.plannedAt(rg.Start); old != nil && old.lo == st.lo && old.hi == st.hi {
			st.pieces, st.read = old.pieces, old.read
			old.pieces = nil
		}
		plan = append(plan, st)
	}
	return plan
}

// plannedAt returns the planned range whose range holds off, newest plan first.
// r.mu is held.
func (r *random) plannedAt(off int64) *planned {
	for i := len(r.plans) - 1; i >= 0; i-- {
		for _, st := range r.plans[i] {
			if st.lo <= off && off < st.hi {
				return st
			}
		}
	}
	return nil
}

// fetchAhead drops st's pieces that end at or before from (read past) and
// adds pieces, fetched in the background, until they cover [from, to) and
// the window after it. A read before the first piece starts st over.
// r.mu is held.
func (r *random) fetchAhead(st *planned, from, to int64) {
	k := 0
	for k < len(st.pieces) && st.pieces[k].end() <= from {
		k++
	}
	if k == len(st.pieces) || st.pieces[k].off > from {
		k = len(st.pieces)
	}
	r.drop(st, 0, k)
	next := from
	if n := len(st.pieces); n > 0 {
		next = st.pieces[n-1].end()
	}
	until := min(st.hi, max(to, from+st.window))
	for next < until {
		bl := r.newPiece(next, min(st.piece, st.hi-next))
		st.pieces = append(st.pieces, bl)
		next = bl.end()
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			select {
			case r.gets <- struct{}{}:
				bl.err = r.b.fetch(r.ctx, bl.off, bl.data)
				<-r.gets
			case <-r.ctx.Done():
				bl.err = r.ctx.Err()
			}
			close(bl.ready)
			r.mu.Lock()
			r.unref(bl)
			r.mu.Unlock()
		}()
	}
}

// newPiece is a planned range's piece of n bytes at off, outside the Go
// heap where the system allows (a plan's pieces come and go at the pace of
// the reads: on the heap, the collector's target doubled them). It is held
// twice: by its range and by its fetch.
func (r *random) newPiece(off, n int64) *block {
	bl := &block{off: off, ready: make(chan struct{}), refs: 2}
	if bl.data = r.pieces.Map(int(n)); bl.data != nil {
		bl.mapped = true
	} else {
		bl.data = make([]byte, n)
	}
	return bl
}

// unref lets go of a hold on a piece: its range's, its fetch's or a
// read's. The last one unmaps it. r.mu is held.
func (r *random) unref(bl *block) {
	if bl.refs--; bl.refs == 0 && bl.mapped {
		r.pieces.Unmap(bl.data)
		bl.data = nil
	}
}

// pieceMemory maps the memory of planned pieces, and unmaps it. Map
// returns nil where it cannot map (the piece is then on the Go heap).
type pieceMemory interface {
	Map(n int) []byte
	Unmap(b []byte)
}

// offHeap maps pieces outside the Go heap (internal/offheap).
type offHeap struct{}

func (offHeap) Map(n int) []byte { return offheap.Map(n) }
func (offHeap) Unmap(b []byte)   { offheap.Unmap(b) }

// drop removes pieces [i, j) from st. r.mu is held.
func (r *random) drop(st *planned, i, j int) {
	for _, bl := range st.pieces[i:j] {
		r.unref(bl)
	}
	st.pieces = slices.Delete(st.pieces, i, j)
}

// readPlanned reads into p at off from st, as far as st's range goes: it
// waits for the pieces it needs, and keeps st's window fetched ahead of
// the read. A piece that failed is dropped with those after it, so the
// next read asks again.
func (r *random) readPlanned(st *planned, p []byte, off int64) (int, error) {
	end := min(off+int64(len(p)), st.hi)
	r.mu.Lock()
	r.fetchAhead(st, off, end)
	var need []*block
	for _, bl := range st.pieces {
		if bl.off < end {
			bl.refs++ // held while copied from
			need = append(need, bl)
		}
	}
	r.mu.Unlock()
	done, err := 0, error(nil)
	for _, bl := range need {
		select {
		case <-bl.ready:
		case <-r.ctx.Done():
			err = r.ctx.Err()
		}
		if err == nil && bl.err != nil {
			err = bl.err
			r.mu.Lock()
			if i := slices.Index(st.pieces, bl); i >= 0 {
				r.drop(st, i, len(st.pieces))
			}
			r.mu.Unlock()
		}
		if err != nil {
			break
		}
		at := off + int64(done)
		done += copy(p[done:end-off], bl.data[at-bl.off:])
	}
	r.mu.Lock()
	for _, bl := range need {
		r.unref(bl)
	}
	if err == nil {
		st.read = max(st.read, end)
		r.fetchAhead(st, end, end)
	}
	r.mu.Unlock()
	return done, err
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
		if st := r.plannedAt(at); st != nil {
			r.mu.Unlock()
			k, err := r.readPlanned(st, p[done:n], at)
			done += k
			if err != nil {
				return done, err
			}
			continue
		}
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
	for _, plan := range r.plans {
		for _, st := range plan {
			r.drop(st, 0, len(st.pieces))
		}
	}
	r.blocks, r.plans = nil, nil
	r.mu.Unlock()
	return nil
}
