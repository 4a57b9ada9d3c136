package readplan

import (
	"iter"
	"math"
)

// run is a stretch of consecutive records that go to one physical
// partition, with their summed estimated RU.
type run struct {
	Part int32
	N    int32
	RU   float32
}

// Sequence records, per cursor, the partitions of the records it reads, in
// order, in bounded memory: runs of one partition are merged, and when the
// number of runs passes the budget the sequence is coarsened — blocks of G
// consecutive records are represented by one run per partition, G growing ×4
// each time. A sorted input stays exact (its runs are long); a shuffled one
// becomes well-mixed blocks, which is what it is.
type Sequence struct {
	cursors []runList
	// gran is G: records per block once coarsened (1 = exact).
	gran    int
	maxRuns int
	total   int
	// pending is the block being filled, per cursor.
	pending []block
	// LongestRun is the most consecutive records of one cursor that went
	// to one partition; last/lastN track the current stretch.
	LongestRun int64
	last       []int32
	lastN      []int64
}

type block struct {
	n    int
	runs []run
}

// runBlock is the runs in one block of a runList (24 KB).
const runBlock = 2048

// runList is one cursor's runs, in blocks of runBlock, so that growing it
// never copies what it holds. A contiguous slice was copied at each
// growth, into fresh pages, which made Add a third of dry-run's
// bookkeeping. Only the first block grows by append, from small, so the
// many short cursors of a split file stay small.
type runList struct {
	blocks [][]run
}

// add appends r, merging it into the last run when of the same partition.
// The caller counts runs before merging; coarsen recounts exactly.
func (l *runList) add(r run) {
	nb := len(l.blocks)
	if nb > 0 {
		last := l.blocks[nb-1]
		if n := len(last); n > 0 && last[n-1].Part == r.Part && int64(last[n-1].N)+int64(r.N) <= math.MaxInt32 {
			last[n-1].N += r.N
			last[n-1].RU += r.RU
			return
		}
		if len(last) < runBlock {
			l.blocks[nb-1] = append(last, r)
			return
		}
	}
	b := make([]run, 0, runBlock)
	if nb == 0 {
		b = make([]run, 0, 16)
	}
	l.blocks = append(l.blocks, append(b, r))
}

// all iterates over the runs in order.
func (l *runList) all() iter.Seq[run] {
	return func(yield func(run) bool) {
		for _, b := range l.blocks {
			for _, r := range b {
				if !yield(r) {
					return
				}
			}
		}
	}
}

// drain iterates over the runs in order, letting each block go once it
// has been read, so that coarsening, which builds the new list as it reads
// the old, holds both only a block at a time. The list is empty after.
func (l *runList) drain() iter.Seq[run] {
	return func(yield func(run) bool) {
		defer func() { l.blocks = nil }()
		for i, b := range l.blocks {
			l.blocks[i] = nil
			for _, r := range b {
				if !yield(r) {
					return
				}
			}
		}
	}
}

// len is the number of runs.
func (l *runList) len() int {
	if len(l.blocks) == 0 {
		return 0
	}
	return (len(l.blocks)-1)*runBlock + len(l.blocks[len(l.blocks)-1])
}

// NewSequence returns a sequence for the given number of cursors (more are
// added as Add names them) keeping at most maxRuns runs in all (≥ 1,024;
// 12 bytes each).
func NewSequence(cursors, maxRuns int) *Sequence {
	return &Sequence{
		cursors: make([]runList, max(cursors, 1)),
		pending: make([]block, max(cursors, 1)),
		last:    make([]int32, max(cursors, 1)),
		lastN:   make([]int64, max(cursors, 1)),
		gran:    1,
		maxRuns: max(maxRuns, 1024),
	}
}

// Add appends one record read by cursor c.
func (s *Sequence) Add(c, part int, ru float64) {
	for c >= len(s.cursors) {
		s.cursors = append(s.cursors, runList{})
		s.pending = append(s.pending, block{})
		s.last = append(s.last, 0)
		s.lastN = append(s.lastN, 0)
	}
	if s.lastN[c] > 0 && s.last[c] == int32(part) {
		s.lastN[c]++
	} else {
		s.last[c], s.lastN[c] = int32(part), 1
	}
	s.LongestRun = max(s.LongestRun, s.lastN[c])
	b := &s.pending[c]
	b.n++
	found := false
	for i := range b.runs {
		if b.runs[i].Part == int32(part) {
			b.runs[i].N++
			b.runs[i].RU += float32(ru)
			found = true
			break
		}
	}
	if !found {
		b.runs = append(b.runs, run{Part: int32(part), N: 1, RU: float32(ru)})
	}
	if b.n >= s.gran {
		s.flush(c)
	}
}

func (s *Sequence) flush(c int) {
	b := &s.pending[c]
	for _, r := range b.runs {
		s.cursors[c].add(r)
		s.total++
	}
	b.n, b.runs = 0, b.runs[:0]
	if s.total > s.maxRuns {
		s.coarsen()
	}
}

// coarsen groups every cursor's runs into blocks of 4× the records.
func (s *Sequence) coarsen() {
	for s.total > s.maxRuns/2 {
		s.gran *= 4
		s.total = 0
		for c, runs := range s.cursors {
			var out runList
			var blk block
			for r := range runs.drain() {
				if int(r.N) >= s.gran {
					// A long run is its own block: keep it whole.
					for _, br := range blk.runs {
						out.add(br)
					}
					blk = block{}
					out.add(r)
					continue
				}
				blk.n += int(r.N)
				merged := false
				for i := range blk.runs {
					if blk.runs[i].Part == r.Part {
						blk.runs[i].N += r.N
						blk.runs[i].RU += r.RU
						merged = true
						break
					}
				}
				if !merged {
					blk.runs = append(blk.runs, r)
				}
				if blk.n >= s.gran {
					for _, br := range blk.runs {
						out.add(br)
					}
					blk = block{}
				}
			}
			for _, br := range blk.runs {
				out.add(br)
			}
			s.cursors[c] = out
			s.total += out.len()
		}
		if s.gran > 1<<20 {
			return
		}
	}
}

// Close flushes partly filled blocks; call it once reading is done.
func (s *Sequence) Close() {
	for c := range s.pending {
		if s.pending[c].n > 0 {
			s.flush(c)
		}
	}
}
