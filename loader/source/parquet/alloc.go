package parquet

import (
	"math/bits"
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cosmosloader/loader/internal/offheap"
)

// poolAllocator is the Arrow allocator of one Parquet reader: the buffers
// Arrow frees (it counts references and frees a batch's buffers when the
// batch is released) are kept, by size class, for the next batch, which
// needs the same sizes again. Arrow's Go allocator makes every one anew,
// and a file's worth of batches cost as much in the garbage collector and
// in zeroing as in decoding. At most poolHeld bytes wait for reuse.
//
// Buffers of offHeapMin bytes or more — pages, decompressed pages, a
// batch's columns — are mapped outside the Go heap (where the system
// allows: see internal/offheap) and unmapped by release, when the reader
// closes. On the heap they were most of it: a file written with a page per
// column chunk (DuckDB) keeps tens of MB of pages live, the collector's
// target doubled that, and buffers of many sizes fragmented it; a soft
// memory limit held the memory down only by collecting all the time. Off
// the heap they are neither scanned, nor counted
// toward the collector's target, nor returned to the system and faulted
// back in. Whatever Arrow never frees is unmapped at release all the same.
//
// Like Arrow's allocators, it returns zeroed, 64-byte aligned memory;
// Arrow's own C allocator frees on Free and Reallocate as this one does.
type poolAllocator struct {
	mu   sync.Mutex
	free [poolClasses][][]byte
	held int
	// mapped holds every off-heap buffer not yet unmapped (handed out or
	// waiting in free), by its first byte; closed is set by release.
	mapped map[*byte][]byte
	closed bool
}

const (
	poolMinShift  = 6  // 64 B
	poolFineShift = 20 // above 1 MiB, eight classes per power of two
	poolMaxShift  = 24 // 16 MiB
	poolHeld      = 64 << 20
	poolAlign     = 64
	// poolClasses: one per power of two up to 1 MiB, then eight per power
	// of two up to 16 MiB.
	poolClasses = poolFineShift + 1 + (poolMaxShift-poolFineShift)*8
	offHeapMin  = 64 << 10
)

var _ memory.Allocator = (*poolAllocator)(nil)

// poolClass is the class that holds size bytes and its capacity, or -1
// when too big. Up to 1 MiB a class is a power of two; above, a power of
// two is cut in eight, so that a big buffer — a whole page of a file
// written with a page per column chunk, as DuckDB writes them, is several
// MB — is not rounded up to twice its size, which is memory to zero and
// to keep.
func poolClass(size int) (c, capacity int) {
	shift := max(bits.Len(uint(max(size, 1)-1)), poolMinShift)
	if shift <= poolFineShift {
		return shift, 1 << shift
	}
	if shift > poolMaxShift {
		return -1, size
	}
	step := 1 << (shift - 4)      // an eighth of the octave (1<<(shift-1), 1<<shift]
	k := (size + step - 1) / step // 9–16
	c = poolFineShift + 1 + (shift-poolFineShift-1)*8 + (k - 9)
	return c, k * step
}

func (p *poolAllocator) Allocate(size int) []byte {
	c, capacity := poolClass(size)
	p.mu.Lock()
	if c >= 0 {
		if l := p.free[c]; len(l) > 0 {
			b := l[len(l)-1]
			l[len(l)-1] = nil
			p.free[c] = l[:len(l)-1]
			p.held -= cap(b)
			p.mu.Unlock()
			b = b[:size]
			clear(b)
			return b
		}
	}
	if capacity >= offHeapMin && !p.closed {
		if b := offheap.Map(capacity); b != nil {
			if p.mapped == nil {
				p.mapped = map[*byte][]byte{}
			}
			p.mapped[unsafe.SliceData(b)] = b
			p.mu.Unlock()
			return b[:size] // new mappings are zero
		}
	}
	p.mu.Unlock()
	return alignedBytes(size, capacity)
}

func (p *poolAllocator) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		if size > len(b) {
			clear(b[len(b):size]) // may hold what an earlier user left
		}
		return b[:size]
	}
	nb := p.Allocate(size)
	copy(nb, b)
	p.Free(b)
	return nb
}

func (p *poolAllocator) Free(b []byte) {
	n := cap(b)
	if n == 0 {
		return
	}
	c, capacity := poolClass(n)
	p.mu.Lock()
	defer p.mu.Unlock()
	m, off := p.mapped[unsafe.SliceData(b)]
	if off && cap(m) != n {
		return // not a buffer this pool handed out
	}
	if c >= 0 && n == capacity && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%poolAlign == 0 && p.held+n <= poolHeld && !p.closed {
		p.free[c] = append(p.free[c], b[:0])
		p.held += n
		return
	}
	if off {
		delete(p.mapped, unsafe.SliceData(b))
		offheap.Unmap(m)
	}
}

// release unmaps every off-heap buffer, freed or not, and drops the
// others: the reader is closed and nothing of Arrow's is used again.
// Later calls allocate on the heap.
func (p *poolAllocator) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.mapped {
		offheap.Unmap(m)
	}
	p.mapped, p.free, p.held, p.closed = nil, [poolClasses][][]byte{}, 0, true
}

// alignedBytes returns size zeroed bytes of capacity capacity at a 64-byte
// aligned address.
func alignedBytes(size, capacity int) []byte {
	buf := make([]byte, capacity+poolAlign)
	shift := 0
	if r := uintptr(unsafe.Pointer(unsafe.SliceData(buf))) % poolAlign; r != 0 {
		shift = int(poolAlign - r)
	}
	return buf[shift : shift+size : shift+capacity]
}
