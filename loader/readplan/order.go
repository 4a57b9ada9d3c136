package readplan

import (
	"iter"
	"math"
)

// The order of an input decides how busy the partitions can be kept. The
// import reads each cursor in order and parks it when the next record's
// physical partition already has a full queue; while it waits, partitions
// whose records lie further on get nothing. A file sorted by partition key
// can thus keep one partition busy while the others idle, however fast the
// container is. OrderSim replays a load's partition sequence through that
// scheme — cursors, bounded queues per partition, each partition drained at
// its share of the target — so a dry run can say what the order costs
// instead of assuming the order does not matter.

// Run is a stretch of consecutive records that go to one physical
// partition, with their summed estimated RU.
type Run struct {
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
	runs []Run
}

// runBlock is the runs in one block of a runList (24 KB).
const runBlock = 2048

// runList is one cursor's runs, in blocks of runBlock, so that growing it
// never copies what it holds. A contiguous slice was copied at each
// growth, into fresh pages, which made Add a third of dry-run's
// bookkeeping. Only the first block grows by append, from small, so the
// many short cursors of a split file stay small.
type runList struct {
	blocks [][]Run
}

// add appends r, merging it into the last run when of the same partition.
// The caller counts runs before merging; coarsen recounts exactly.
func (l *runList) add(r Run) {
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
	b := make([]Run, 0, runBlock)
	if nb == 0 {
		b = make([]Run, 0, 16)
	}
	l.blocks = append(l.blocks, append(b, r))
}

// all iterates over the runs in order.
func (l *runList) all() iter.Seq[Run] {
	return func(yield func(Run) bool) {
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
func (l *runList) drain() iter.Seq[Run] {
	return func(yield func(Run) bool) {
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
		b.runs = append(b.runs, Run{Part: int32(part), N: 1, RU: float32(ru)})
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

// OrderConfig is the reading scheme and the container it is simulated for.
type OrderConfig struct {
	Partitions int
	// BudgetPerPartition is each partition's RU/s (the target ÷ partitions).
	BudgetPerPartition float64
	// Queue is the records read ahead per partition (the import's
	// --read-ahead).
	Queue int
	// Cursors is how many of the sequence's cursors read at once, taken
	// in order as earlier ones finish (the import's pool); 0 = all.
	Cursors int
	// Order is the order the pool takes the sequence's cursors in (their
	// indexes); nil: as numbered.
	Order []int
	// Step is the simulation's time step; 0 = 10 ms.
	Step float64
	// Split, when set, opens cursors at run time as the import does when
	// its cursors starve partitions (MaxCursors is the bound); a cursor is
	// split only with at least MinSplit records left (the import's least
	// range worth splitting, in records).
	Split    *SplitPolicy
	MinSplit int64
}

// SplitPolicy decides when a segmented load opens one more cursor: when,
// for Patience, every cursor still reading is parked on a full queue while
// some partition is idle, with nothing queued or in flight — its records, if the
// file holds any, lie beyond every cursor. The import then splits the
// largest unread range in two. A split that does not end the starvation
// (the idle partition may have no records left anywhere) doubles the wait
// before the next one, so a load that cannot be helped makes only a few.
// The import and the dry-run's simulation both ask it, with their own
// clocks, so the dry run models the cursors the import opens.
type SplitPolicy struct {
	// MaxCursors bounds the cursors reading at once.
	MaxCursors int
	// Patience is how long starvation must last before a split, in
	// seconds; 0 = 0.5 s.
	Patience float64

	since   float64 // when the current starvation began; <0: none
	next    float64 // no split before this time
	failed  int     // splits in a row that did not end the starvation
	started bool
}

// NewSplitPolicy returns a policy allowing up to maxCursors cursors.
func NewSplitPolicy(maxCursors int) *SplitPolicy {
	return &SplitPolicy{MaxCursors: maxCursors}
}

// Observe is called regularly with the time in seconds, whether the load
// is starved (every reading cursor parked, some partition idle) and how
// many cursors read; it says whether to open a cursor now.
func (s *SplitPolicy) Observe(now float64, starved bool, cursors int) bool {
	patience := s.Patience
	if patience <= 0 {
		patience = 0.5
	}
	if !s.started {
		s.started, s.since = true, -1
	}
	if !starved {
		s.since, s.failed, s.next = -1, 0, 0
		return false
	}
	if s.since < 0 {
		s.since = now
	}
	if cursors >= s.MaxCursors || now-s.since < patience || now < s.next {
		return false
	}
	// The wait doubles with each split the starvation outlasts.
	s.next = now + patience*float64(int(1)<<min(s.failed, 10))
	s.failed++
	return true
}

// cutRuns splits runs after n records (0 < n < their total).
func cutRuns(runs []Run, n int64) (head, tail []Run) {
	for i, r := range runs {
		if n >= int64(r.N) {
			n -= int64(r.N)
			if n == 0 {
				return append([]Run(nil), runs[:i+1]...), append([]Run(nil), runs[i+1:]...)
			}
			continue
		}
		per := r.RU / float32(r.N)
		k := int32(n)
		head = append(append([]Run(nil), runs[:i]...), Run{Part: r.Part, N: k, RU: per * float32(k)})
		tail = append([]Run{{Part: r.Part, N: r.N - k, RU: per * float32(r.N-k)}}, runs[i+1:]...)
		return head, tail
	}
	return append([]Run(nil), runs...), nil
}

// OrderResult is what the simulated load does.
type OrderResult struct {
	// Seconds until the last record is written.
	Seconds float64
	// Busy is, per partition, the seconds it spent writing: the RU it
	// spent over its budget. (Counting the steps in which it had records
	// undercounted a partition fed a few records at a time, which spends
	// its bucket's banked credit in bursts, and changed with the
	// sequence's coarsening.)
	Busy []float64
}

// SimulateOrder replays seq through the import's reading scheme: every
// cursor reads its records in order as fast as queues allow, parking on a
// record whose partition's queue is full; every partition writes its queue
// at its budget. Reading is taken to be much faster than writing, which it
// is (hundreds of MB/s against a few MB/s paced).
func SimulateOrder(seq *Sequence, cfg OrderConfig) OrderResult {
	parts := max(cfg.Partitions, 1)
	step := cfg.Step
	if step <= 0 {
		step = 0.01
	}
	queue := max(cfg.Queue, 1)
	res := OrderResult{Busy: make([]float64, parts)}
	if cfg.BudgetPerPartition <= 0 {
		return res
	}
	// A cursor reads runs, its current block, then the blocks in rest;
	// the blocks are never empty, so c.i < len(c.runs) while it reads.
	type cursor struct {
		runs []Run
		rest [][]Run
		i    int
		left int32   // records left in runs[i]
		ru   float64 // RU per record of runs[i]
	}
	var waiting []*cursor
	order := cfg.Order
	if order == nil {
		for i := range seq.cursors {
			order = append(order, i)
		}
	}
	for _, i := range order {
		if i >= len(seq.cursors) {
			continue // a cursor that read no record
		}
		if l := seq.cursors[i]; len(l.blocks) > 0 {
			runs := l.blocks[0]
			waiting = append(waiting, &cursor{runs: runs, rest: l.blocks[1:], left: runs[0].N, ru: float64(runs[0].RU) / float64(runs[0].N)})
		}
	}
	pool := cfg.Cursors
	if pool <= 0 || pool > len(waiting) {
		pool = len(waiting)
	}
	curs := append([]*cursor(nil), waiting[:pool]...)
	waiting = waiting[pool:]
	// split gives the second half of the largest unread stretch of any
	// cursor to a new one, as the import splits a segment's unread bytes.
	split := func() {
		var big *cursor
		var bigLeft int64
		for _, c := range curs {
			if c.i >= len(c.runs) {
				continue
			}
			left := int64(c.left)
			for _, r := range c.runs[c.i+1:] {
				left += int64(r.N)
			}
			for _, b := range c.rest {
				for _, r := range b {
					left += int64(r.N)
				}
			}
			if left > bigLeft {
				big, bigLeft = c, left
			}
		}
		if big == nil || bigLeft < max(2, cfg.MinSplit) {
			return
		}
		// What is left, from the current run's unread records on, cut in
		// the middle: the old cursor keeps the head, a new one the tail.
		cur := big.runs[big.i]
		rem := append([]Run{{Part: cur.Part, N: big.left, RU: float32(big.ru) * float32(big.left)}}, big.runs[big.i+1:]...)
		for _, b := range big.rest {
			rem = append(rem, b...)
		}
		head, tail := cutRuns(rem, bigLeft/2)
		big.runs, big.rest, big.i, big.left = head, nil, 0, head[0].N
		big.ru = float64(head[0].RU) / float64(head[0].N)
		nc := &cursor{runs: tail, left: tail[0].N, ru: float64(tail[0].RU) / float64(tail[0].N)}
		curs = append(curs, nc)
	}
	// Each partition's queue as runs of equal-cost records, a count of the
	// records in it, the RU it may still spend this step (with debt), and
	// the pacer's second guard: the RU left in the aligned second sec
	// (renewed as min(left, 0) + budget), so a partition that starts a
	// second with a full bucket spends no more than the budget in it.
	type part struct {
		q      []Run
		n      int
		credit float64
		sec    int64
		left   float64
	}
	ps := make([]part, parts)
	for i := range ps {
		ps[i].left = cfg.BudgetPerPartition
	}
	refill := func() {
		for progress := true; progress; {
			progress = false
			for _, c := range curs {
				for c.i < len(c.runs) {
					r := c.runs[c.i]
					p := &ps[r.Part]
					room := int32(queue - p.n)
					if room <= 0 {
						break // parked on a full queue
					}
					take := min(room, c.left)
					p.q = append(p.q, Run{Part: r.Part, N: take, RU: float32(c.ru)})
					p.n += int(take)
					c.left -= take
					progress = true
					if c.left == 0 {
						c.i++
						if c.i == len(c.runs) && len(c.rest) > 0 {
							c.runs, c.rest, c.i = c.rest[0], c.rest[1:], 0
						}
						if c.i < len(c.runs) {
							c.left = c.runs[c.i].N
							c.ru = float64(c.runs[c.i].RU) / float64(c.runs[c.i].N)
						}
					}
				}
			}
			// A finished cursor hands its place to the next input.
			for k, c := range curs {
				if c.i >= len(c.runs) && len(waiting) > 0 {
					curs[k], waiting = waiting[0], waiting[1:]
					progress = true
				}
			}
		}
	}
	done := func() bool {
		if len(waiting) > 0 {
			return false
		}
		for _, c := range curs {
			if c.i < len(c.runs) {
				return false
			}
		}
		for _, p := range ps {
			if p.n > 0 {
				return false
			}
		}
		return true
	}
	perStep := cfg.BudgetPerPartition * step
	var t float64
	refill()
	for !done() {
		if cfg.Split != nil {
			// Reading is instant here: after a refill every cursor still
			// reading is parked.
			reading, idle := 0, false
			for _, c := range curs {
				if c.i < len(c.runs) {
					reading++
				}
			}
			// Writing is instant too, so a partition with nothing
			// queued has nothing in flight either: idle as the import's
			// lanes.anyIdle means it.
			for _, p := range ps {
				idle = idle || p.n == 0
			}
			if cfg.Split.Observe(t, reading > 0 && idle, reading) {
				split()
				refill()
			}
		}
		var lastBusy float64
		sec := int64(t + step/2)
		for pi := range ps {
			p := &ps[pi]
			if sec > p.sec {
				n := float64(sec - p.sec)
				p.left = math.Min(math.Min(p.left, 0)+n*cfg.BudgetPerPartition, cfg.BudgetPerPartition)
				p.sec = sec
			}
			if p.n == 0 {
				// An idle partition banks nothing: the pacer's bucket is
				// about a tenth of a second deep.
				p.credit = min(p.credit+perStep, cfg.BudgetPerPartition*0.1)
				continue
			}
			// Held back by the second guard, the bucket still fills only
			// to its depth.
			p.credit = min(p.credit+perStep, cfg.BudgetPerPartition*0.1+perStep)
			used := 0.0
			for p.n > 0 && p.credit > 0 && p.left > 0 {
				r := &p.q[0]
				// Records of equal cost: spend as many as the credit
				// allows, the last one possibly into debt.
				k := int32(math.Ceil(p.credit / float64(r.RU)))
				if r.RU <= 0 {
					k = r.N
				}
				k = min(k, r.N)
				cost := float64(k) * float64(r.RU)
				p.credit -= cost
				p.left -= cost
				used += cost
				r.N -= k
				p.n -= int(k)
				if r.N == 0 {
					p.q = p.q[1:]
				}
			}
			frac := 1.0
			if used < perStep && p.n == 0 {
				frac = used / perStep
			}
			res.Busy[pi] += used / cfg.BudgetPerPartition
			lastBusy = max(lastBusy, frac)
		}
		refill()
		if done() {
			t += step * lastBusy
			break
		}
		t += step
	}
	res.Seconds = t
	return res
}
