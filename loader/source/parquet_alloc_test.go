package source

import (
	"testing"
	"unsafe"
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
