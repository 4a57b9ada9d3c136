package parquet

import (
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/cosmosloader/loader/internal/offheap"
	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
)

// Reused buffers come back zeroed and aligned, whatever the last user left
// in them, and a buffer grown in place is zeroed past its old length.
func TestParquetPoolAllocatorZeroesReusedMemory(t *testing.T) {
	p := &poolAllocator{}
	check := func(b []byte, size int) {
		t.Helper()
		if len(b) != size || uintptr(unsafe.Pointer(unsafe.SliceData(b)))%poolAlign != 0 {
			t.Fatalf("len %d (want %d), address %p", len(b), size, unsafe.SliceData(b))
		}
		for i, c := range b {
			if c != 0 {
				t.Fatalf("byte %d of %d is %#x", i, size, c)
			}
		}
	}
	for _, size := range []int{0, 1, 63, 64, 65, 1000, 4096, 1 << 20, 1<<24 + 1} {
		for range 3 {
			b := p.Allocate(size)
			check(b, size)
			for i := range b[:cap(b)] {
				b[:cap(b)][i] = 0xAA
			}
			if size > 0 {
				g := p.Reallocate(size+size/2+1, b[:size/2])
				for i, c := range g[size/2:] {
					if c != 0 {
						t.Fatalf("grown from %d to %d: byte %d is %#x", size/2, len(g), size/2+i, c)
					}
				}
				b = g
			}
			p.Free(b)
		}
	}
	if p.held > poolHeld {
		t.Fatalf("holds %d bytes, at most %d", p.held, poolHeld)
	}
}

// A class holds its sizes, a buffer of a class's capacity comes back to
// that class, and above 1 MiB no size is rounded up by more than an eighth
// (a whole-column-chunk page of 4.2 MB used to take 8 MiB).
func TestParquetPoolClasses(t *testing.T) {
	caps := map[int]int{}
	for size := 1; size <= 1<<poolMaxShift; size += 1 + size/977 {
		c, capacity := poolClass(size)
		if c < 0 || c >= poolClasses || capacity < size {
			t.Fatalf("size %d: class %d of capacity %d", size, c, capacity)
		}
		if size > 1<<poolFineShift && capacity-size > size/8 {
			t.Fatalf("size %d rounded up to %d", size, capacity)
		}
		if back, _ := poolClass(capacity); back != c {
			t.Fatalf("size %d: class %d, its capacity %d is class %d", size, c, capacity, back)
		}
		if prev, ok := caps[c]; ok && prev != capacity {
			t.Fatalf("class %d has capacities %d and %d", c, prev, capacity)
		}
		caps[c] = capacity
	}
	if c, _ := poolClass(1<<poolMaxShift + 1); c != -1 {
		t.Fatalf("a buffer over %d bytes is class %d", 1<<poolMaxShift, c)
	}
}

// Big buffers live outside the Go heap: a freed one is reused (zeroed),
// release unmaps every one, freed or still handed out, and after release
// the pool allocates on the heap and ignores what it is given back.
func TestParquetPoolOffHeap(t *testing.T) {
	if !offHeapAvailable() {
		t.Skip("no off-heap buffers on this system")
	}
	p := &poolAllocator{}
	small := p.Allocate(offHeapMin / 2)
	if len(p.mapped) != 0 {
		t.Fatalf("a %d-byte buffer was mapped", len(small))
	}
	b := p.Allocate(100 << 10)
	kept := p.Allocate(3 << 20) // never freed, as a leak in Arrow would be
	if len(p.mapped) != 2 || p.outstanding() != cap(b)+cap(kept) {
		t.Fatalf("mapped %d buffers, %d bytes outstanding", len(p.mapped), p.outstanding())
	}
	b[0], b[len(b)-1] = 1, 2
	addr := unsafe.SliceData(b)
	p.Free(b)
	if p.outstanding() != cap(kept) {
		t.Fatalf("%d bytes outstanding after a free", p.outstanding())
	}
	again := p.Allocate(90 << 10)
	if unsafe.SliceData(again) != addr || again[0] != 0 || again[len(again)-1] != 0 {
		t.Fatalf("not reused, or not zeroed: %p (was %p) %d %d", unsafe.SliceData(again), addr, again[0], again[len(again)-1])
	}
	p.Free(again)
	p.release()
	if len(p.mapped) != 0 || p.held != 0 {
		t.Fatalf("after release: %d mapped, %d held", len(p.mapped), p.held)
	}
	late := p.Allocate(1 << 20)
	if len(p.mapped) != 0 || len(late) != 1<<20 {
		t.Fatal("allocated off the heap after release")
	}
	p.Free(late)
	p.Free(kept[:0]) // already unmapped: ignored
	if p.held != 0 {
		t.Fatalf("kept %d bytes after release", p.held)
	}
}

func offHeapAvailable() bool {
	m := offheap.Map(offHeapMin)
	if m != nil {
		offheap.Unmap(m)
	}
	return m != nil
}

// Reading a file to the end and closing it leaves nothing mapped, on
// every fixture, nulls omitted or kept.
func TestParquetReaderReleasesOffHeapBuffers(t *testing.T) {
	dir := t.TempDir()
	gen := filepath.Join(dir, "encoder.parquet")
	sourcetest.WriteEncoderFixture(t, gen)
	big := filepath.Join(dir, "big.parquet")
	sourcetest.WriteBigRows(t, big) // pages of MBs: mapped
	for _, path := range []string{sourcetest.ParquetDir() + "types.parquet", sourcetest.ParquetDir() + "rows.parquet", gen, big} {
		r, err := Format{}.Open(source.Input{Path: path}, nil, source.Options{}, source.Position{})
		if err != nil {
			t.Fatal(err)
		}
		pr := r.(*parquetReader)
		mapped := 0
		for {
			if _, err := r.Next(); err != nil {
				break
			}
			pr.alloc.mu.Lock()
			mapped = max(mapped, len(pr.alloc.mapped))
			pr.alloc.mu.Unlock()
		}
		if path == big && mapped == 0 && offHeapAvailable() {
			t.Errorf("%s: nothing was mapped", path)
		}
		t.Logf("%s: %d bytes of Arrow buffers outstanding at the end", filepath.Base(path), pr.alloc.outstanding())
		r.Close()
		if n := len(pr.alloc.mapped); n != 0 {
			t.Errorf("%s: %d buffers still mapped after Close", path, n)
		}
	}
}

// outstanding is the bytes of off-heap buffers handed out and not freed.
func (p *poolAllocator) outstanding() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, m := range p.mapped {
		n += cap(m)
	}
	for _, l := range p.free {
		for _, b := range l {
			if _, off := p.mapped[unsafe.SliceData(b)]; off {
				n -= cap(b)
			}
		}
	}
	return n
}
