package readplan

import (
	"math"

	"github.com/cosmosloader/loader/internal/parallel"
	"github.com/cosmosloader/loader/loader/source"
)

// Segment bounds: a cursor per MiB of input, at most 4 per physical
// partition (at least 8, at most 64). Below 4 MiB, or with one partition,
// one cursor is enough: the read-ahead already spans the file or there is
// nothing to keep busy.
const (
	minSegmentedBytes = 4 << 20
	MaxSegments       = 64
)

// SegmentCount is how many places of a file of size bytes the import reads
// at once for a container of the given physical partitions; want > 0 (the
// --segments flag) decides instead.
func SegmentCount(size int64, partitions, want int) int {
	if want > 0 {
		return want
	}
	if partitions <= 1 || size < minSegmentedBytes {
		return 1
	}
	return int(min(size>>20, int64(MaxCursors(partitions))))
}

// maxFilesAtOnce bounds how many files an import reads at once, whole or
// in segments, besides the segments of one file.
const maxFilesAtOnce = 8

// ReadCursors is how many of its pieces (pipeline inputs: files and
// segments of files, over files) an import reads at once: the most
// segments any one file has (segs), and, with partitions to feed, several
// files at once. A file cut from a key-sorted export, or a table
// partitioned by key as Spark writes one, holds few keys: files read one
// after another keep one partition busy at a time, and wait on a far
// blob's round trips one at a time. At most maxFilesAtOnce, and as many
// readers as fit in what one split Parquet file's may hold
// (source.ReadersAtOnce, from the footers of the first readersSampled
// files: the files of one export are alike). --segments 1 (want) reads
// one file at a time, front to back.
func ReadCursors(files []source.Input, pieces, segs int, so source.Options, partitions, want int) int {
	if partitions <= 1 || want == 1 || pieces <= 1 {
		return max(segs, 1)
	}
	return max(segs, min(pieces, maxFilesAtOnce, ReadersAtOnce(files, so)), 1)
}

// ReadersAtOnce is how many readers of files fit in what one split
// Parquet file's may hold (source.ReadersAtOnce), from the first
// readersSampled files: the files of one export are alike.
func ReadersAtOnce(files []source.Input, so source.Options) int {
	sample := files[:min(len(files), readersSampled)]
	most := make([]int, len(sample))
	parallel.Each(len(sample), parallel.InputsAtOnce, func(i int) error {
		most[i] = source.ReadersAtOnce(sample[i], so)
		return nil
	})
	n := math.MaxInt
	for _, m := range most {
		n = min(n, m)
	}
	return n
}

// readersSampled is how many files ReadCursors reads the footers of.
const readersSampled = 16

// Interleave is the order to read pieces laid out file by file, counts[f]
// of them for file f, in: each file's first piece, then each file's second,
// and so on. Segments of one key-sorted file, read together, would feed
// few partitions; the first segments of several files feed more.
func Interleave(counts []int) []int {
	var order []int
	for s := 0; ; s++ {
		more, base := false, 0
		for _, n := range counts {
			if s < n {
				order = append(order, base+s)
				more = true
			}
			base += n
		}
		if !more {
			return order
		}
	}
}

// MinSplitBytes is the least unread range worth splitting: each half is
// then at least a couple of read blocks.
const MinSplitBytes = 512 << 10

// MaxCursors bounds the cursors of a load over the given partitions: up to
// four per partition, at least 8, at most 64.
func MaxCursors(partitions int) int {
	return min(MaxSegments, max(8, 4*partitions))
}
