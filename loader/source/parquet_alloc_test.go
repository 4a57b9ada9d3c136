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
