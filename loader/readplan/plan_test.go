package readplan

import (
	"slices"
	"testing"

	"github.com/cosmosloader/loader/loader/source"
)

func TestReadCursors(t *testing.T) {
	files := func(paths ...string) []source.Input {
		var ins []source.Input
		for _, p := range paths {
			ins = append(ins, source.Input{Path: p})
		}
		return ins
	}
	many := files("a.ndjson", "b.ndjson", "c.ndjson", "d.ndjson", "e.ndjson", "f.ndjson", "g.ndjson", "h.ndjson", "i.ndjson", "j.ndjson")
	for _, tc := range []struct {
		name                           string
		files                          []source.Input
		pieces, segs, partitions, want int
		cursors                        int
	}{
		{"one partition: one file at a time", many, 10, 1, 1, 0, 1},
		{"--segments 1: one file at a time", many, 10, 1, 4, 1, 1},
		{"several files, several partitions", many, 10, 1, 4, 0, maxFilesAtOnce},
		{"fewer files than that", many[:3], 3, 1, 4, 0, 3},
		{"a file's segments count", many[:2], 14, 12, 4, 0, 12},
		{"a split file's segments and other files", many, 12, 3, 4, 0, maxFilesAtOnce},
		{"Parquet readers within the split memory", files(slices.Repeat([]string{"../../testdata/parquet/rows.parquet"}, 9)...), 9, 1, 8, 0, 8},
		{"a Parquet file without a footer is guessed", files("../../testdata/parquet/truncated.parquet", "a.ndjson", "b.ndjson"), 3, 1, 8, 0, 3},
		{"one file", many[:1], 1, 1, 4, 0, 1},
	} {
		if got := readCursors(tc.files, tc.pieces, tc.segs, source.Options{}, tc.partitions, tc.want); got != tc.cursors {
			t.Errorf("%s: %d cursors, want %d", tc.name, got, tc.cursors)
		}
	}
}

// With batches on, a partition's queue and its dispatcher's window share
// the read-ahead, so batching holds no more records than --read-ahead says,
// and dry-run's order simulation reads exactly as far.
func TestQueueAndWindowHoldTheReadAhead(t *testing.T) {
	for _, tc := range []struct{ readAhead, maxOps, queue, window int }{
		{4096, 100, 3072, 1024},
		{1024, 100, 512, 512},
		{256, 100, 128, 128},
		{150, 100, 50, 100}, // a full batch at least
		{64, 100, 1, 100},
		{1024, 0, 1024, 0}, // --batch off
	} {
		q, w := QueueAndWindow(tc.readAhead, tc.maxOps)
		if q != tc.queue || w != tc.window {
			t.Errorf("QueueAndWindow(%d, %d) = %d, %d; want %d, %d", tc.readAhead, tc.maxOps, q, w, tc.queue, tc.window)
		}
	}
}

// The cursors take every file's first piece, then every file's second:
// segments of one key-sorted file read together would feed few partitions.
func TestInterleaveTakesEachFilesPieceInTurn(t *testing.T) {
	if got, want := interleave([]int{3, 1, 2}), []int{0, 3, 4, 1, 5, 2}; !slices.Equal(got, want) { // a0 a1 a2 b c0 c1
		t.Errorf("read order %v, want %v", got, want)
	}
	if got := interleave([]int{1, 1, 1}); !slices.Equal(got, []int{0, 1, 2}) {
		t.Errorf("whole files: %v, want their order", got)
	}
}
