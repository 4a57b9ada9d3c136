package source

import (
	"os"
)

// Range is a byte range of a plain (seekable, uncompressed) input that
// starts on a record boundary: Start is where its first record begins, End
// the offset of the next range's first record (0: the end of the input).
// Segments of one import and the shards of a shared load are both Ranges.
type Range struct {
	Start Position
	End   int64
}

// RawSize is the size of a local file or blob as stored.
func RawSize(in Input) (int64, error) {
	if in.Remote != nil {
		return in.Remote.Identity().Size, nil
	}
	st, err := os.Stat(in.Path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// RangesFrom turns the first-record positions after each target into
// ranges, dropping empty ones (targets inside one long record).
func RangesFrom(starts []Position, size int64) []Range {
	out := []Range{{}}
	for _, s := range starts {
		last := &out[len(out)-1]
		if s.Offset <= last.Start.Offset || s.Offset >= size {
			continue
		}
		last.End = s.Offset
		out = append(out, Range{Start: s})
	}
	return out
}

// EvenTargets are the n-1 offsets that cut size bytes in n even pieces.
func EvenTargets(size int64, n int) []int64 {
	targets := make([]int64, 0, n-1)
	for i := 1; i < n; i++ {
		targets = append(targets, size*int64(i)/int64(n))
	}
	return targets
}
