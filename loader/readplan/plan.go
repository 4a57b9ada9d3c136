// Package readplan is how a load reads its inputs, as one value: the
// pieces each file is read in (whole, or segments cut at record starts),
// how many pieces are read at once and in which order, the records read
// ahead per partition, and whether cursors are added while loading. The
// import reads by a Plan; a dry run replays its records through the same
// Plan (Plan.Simulate), so the order it models is the order the import
// reads in.
//
// A file sorted by partition key parks a single reader on one partition's
// full queue while the others idle. Reading the file at several places at
// once — segments, each with its own cursor and low-water mark — gives
// every partition work whenever the file holds records for it anywhere,
// not only in the next few thousand lines.
package readplan

import (
	"math"

	"github.com/cosmosloader/loader/internal/parallel"
	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/formats"
)

// Plan is how a load reads its inputs.
type Plan struct {
	// Pieces is, per file in the order given, how many pieces it is read
	// in (1: whole). The pieces are numbered file by file.
	Pieces []int
	// Cursors is how many pieces are read at once; Order the order the
	// cursors take them in (each file's first piece, then each file's
	// second, …: interleave).
	Cursors int
	Order   []int
	// ReadAhead is the records read ahead per partition: Queue of them
	// wait in the partition's queue and Window in its dispatcher's
	// batching window (QueueAndWindow).
	ReadAhead, Queue, Window int
	// Splits says whether cursors are added while loading, up to
	// MaxCursors, when the partitions starve (SplitPolicy): the largest
	// unread range is split in two.
	Splits     bool
	MaxCursors int
}

// Config is what a plan is made for: the container and the flags.
type Config struct {
	// Partitions is the container's physical partitions; Lanes the queues
	// records are routed to (one per partition when paced, one in all
	// when naive; 0 means Partitions).
	Partitions, Lanes int
	// Segments is --segments (0: chosen per file, SegmentsOf), ReadAhead
	// --read-ahead (0: DefaultReadAhead) and Batch --batch's cap on a
	// batch's operations (0 or 1: point writes).
	Segments, ReadAhead, Batch int
}

func (c Config) lanes() int {
	if c.Lanes > 0 {
		return c.Lanes
	}
	return c.Partitions
}

// New is the plan for reading files, each cut into pieces[i] pieces.
func New(files []source.Input, pieces []int, so source.Options, c Config) Plan {
	p := Plan{Pieces: pieces, Order: interleave(pieces), ReadAhead: c.ReadAhead, MaxCursors: MaxCursors(c.lanes())}
	total, most := 0, 0
	for _, n := range pieces {
		total, most = total+n, max(most, n)
	}
	p.Cursors = readCursors(files, total, most, so, c.lanes(), c.Segments)
	if p.ReadAhead <= 0 {
		p.ReadAhead = DefaultReadAhead(c.Partitions)
	}
	p.Queue, p.Window = QueueAndWindow(p.ReadAhead, c.Batch)
	// A fixed count (--segments) is kept; so is one lane's one cursor,
	// with nothing to keep busy.
	p.Splits = c.lanes() > 1 && c.Segments == 0
	return p
}

// Segment bounds: a cursor per MiB of input, at most 4 per physical
// partition (at least 8, at most 64). Below 4 MiB, or with one partition,
// one cursor is enough: the read-ahead already spans the file or there is
// nothing to keep busy.
const (
	minSegmentedBytes = 4 << 20
	maxSegments       = 64
)

// SegmentsOf is how many places of a file of size bytes are read at once
// (formats.Split cuts it into that many ranges): --segments, or one per MiB
// up to MaxCursors, one below minSegmentedBytes or with one lane.
func (c Config) SegmentsOf(size int64) int {
	if c.Segments > 0 {
		return c.Segments
	}
	if c.lanes() <= 1 || size < minSegmentedBytes {
		return 1
	}
	return int(min(size>>20, int64(MaxCursors(c.lanes()))))
}

// AdviceSegmentsOf is how many places a dry run tries a file of size bytes
// at for its advice: four times SegmentsOf, at least four per lane.
func (c Config) AdviceSegmentsOf(size int64) int {
	return min(maxSegments, max(4*c.SegmentsOf(size), 4*c.lanes()))
}

// maxFilesAtOnce bounds how many files an import reads at once, whole or
// in segments, besides the segments of one file.
const maxFilesAtOnce = 8

// readCursors is how many of its pieces (files and segments of files, over
// files) an import reads at once: the most segments any one file has
// (segs), and, with lanes to feed, several files at once. A file cut from
// a key-sorted export, or a table partitioned by key as Spark writes one,
// holds few keys: files read one after another keep one partition busy at
// a time, and wait on a far blob's round trips one at a time. At most
// maxFilesAtOnce, and as many readers as fit in what one split Parquet
// file's may hold (ReadersAtOnce). --segments 1 (want) reads one file at
// a time, front to back.
func readCursors(files []source.Input, pieces, segs int, so source.Options, lanes, want int) int {
	if lanes <= 1 || want == 1 || pieces <= 1 {
		return max(segs, 1)
	}
	return max(segs, min(pieces, maxFilesAtOnce, ReadersAtOnce(files, so)), 1)
}

// ReadersAtOnce is how many readers of files fit in what one split
// Parquet file's may hold (formats.ReadersAtOnce), from the first
// readersSampled files: the files of one export are alike.
func ReadersAtOnce(files []source.Input, so source.Options) int {
	sample := files[:min(len(files), readersSampled)]
	most := make([]int, len(sample))
	parallel.Each(len(sample), parallel.InputsAtOnce, func(i int) error {
		most[i] = formats.ReadersAtOnce(sample[i], so)
		return nil
	})
	n := math.MaxInt
	for _, m := range most {
		n = min(n, m)
	}
	return n
}

// readersSampled is how many files ReadersAtOnce reads the footers of.
const readersSampled = 16

// interleave is the order to read pieces laid out file by file, counts[f]
// of them for file f, in: each file's first piece, then each file's second,
// and so on. Segments of one key-sorted file, read together, would feed
// few partitions; the first segments of several files feed more.
func interleave(counts []int) []int {
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

// MinSplitBytes is the least unread range worth splitting while loading:
// each half is then at least a couple of read blocks.
const MinSplitBytes = 512 << 10

// MaxCursors bounds the cursors of a load over the given lanes: up to four
// per lane, at least 8, at most 64.
func MaxCursors(lanes int) int {
	return min(maxSegments, max(8, 4*lanes))
}

// DefaultReadAhead is how many records are read ahead per physical
// partition. While one partition's queue is full — a hot partition key —
// reading waits, and the other partitions can only work through what is
// already queued for them: the deeper the queues, the longer they keep
// their rate on a skewed file. About 16,384 records in all (≈10 MB of
// 600-byte documents) keeps memory flat; 256 to 4,096 per partition.
func DefaultReadAhead(partitions int) int {
	return min(4096, max(256, 16384/max(partitions, 1)))
}

// QueueAndWindow divides a partition's read-ahead between its queue and
// the window of records its dispatcher groups at once (half each, the
// window at most 1,024 and at least a full batch of maxOps), so batching
// holds no more records in memory than the read-ahead says. Without
// batches the queue is all of it.
func QueueAndWindow(readAhead, maxOps int) (queue, window int) {
	if maxOps < 2 {
		return readAhead, 0
	}
	window = max(maxOps, min(readAhead/2, 1024))
	return max(readAhead-window, 1), window
}
