package sizer

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
)

// hybrid reads Parquet's RLE/bit-packing hybrid as the format describes
// it: runs of a repeated value, and groups of eight values packed
// least-significant bit first, in any mix, at every width, a last packed
// run padded past the values.
func TestHybridDecodesRunsAndPackedGroups(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, width := range []int{0, 1, 2, 3, 7, 8, 12, 17, 31, 32} {
		var enc []byte
		var want []int32
		for run := range 40 {
			max := uint64(1)<<width - 1
			if run%2 == 0 { // a repeated value
				n := 1 + rng.IntN(300)
				v := uint32(rng.Uint64() & max)
				enc = binary.AppendUvarint(enc, uint64(n)<<1)
				for i := range (width + 7) / 8 {
					enc = append(enc, byte(v>>(8*i)))
				}
				for range n {
					want = append(want, int32(v))
				}
				continue
			}
			groups := 1 + rng.IntN(5)
			enc = binary.AppendUvarint(enc, uint64(groups)<<1|1)
			packed := make([]byte, groups*width)
			for i := range groups * 8 {
				v := rng.Uint64() & max
				for b := range width {
					if v>>b&1 == 1 {
						bit := i*width + b
						packed[bit/8] |= 1 << (bit % 8)
					}
				}
				want = append(want, int32(v))
			}
			enc = append(enc, packed...)
		}
		want = want[:len(want)-3] // the last group's padding
		h := hybrid{b: enc, width: width}
		got := make([]int32, 0, len(want))
		for len(got) < len(want) { // in reads of odd lengths
			n := min(1+rng.IntN(100), len(want)-len(got))
			buf := make([]int32, n)
			if m := h.fill(buf); m != n {
				t.Fatalf("width %d: read %d of %d at %d", width, m, n, len(got))
			}
			got = append(got, buf...)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("width %d: value %d = %d, want %d", width, i, got[i], want[i])
			}
		}
	}
	// Bytes that end inside a run give the values they hold, then none.
	h := hybrid{b: []byte{3, 0xff}, width: 4} // a packed group of 8 with one byte
	if n := h.fill(make([]int32, 8)); n != 2 {
		t.Fatalf("a cut packed run gave %d values, want 2", n)
	}
	h = hybrid{b: []byte{0x80}, width: 4} // a varint cut short
	if n := h.fill(make([]int32, 1)); n != 0 {
		t.Fatalf("a cut header gave %d values", n)
	}
}

// BenchmarkHybridPacked reads bit-packed runs of the widths levels (1, 3)
// and dictionary indexes (13: 8,192 entries) take, in batches of 1,024.
func BenchmarkHybridPacked(b *testing.B) {
	for _, width := range []int{1, 3, 13} {
		b.Run(fmt.Sprint(width), func(b *testing.B) {
			const groups = 1 << 12
			enc := binary.AppendUvarint(nil, uint64(groups)<<1|1)
			packed := make([]byte, groups*width)
			rng := rand.New(rand.NewPCG(1, 2))
			for i := range packed {
				packed[i] = byte(rng.Uint32())
			}
			enc = append(enc, packed...)
			dst := make([]int32, 1024)
			b.SetBytes(int64(len(packed)))
			for b.Loop() {
				h := hybrid{b: enc, width: width}
				for h.fill(dst) > 0 {
				}
			}
		})
	}
}
