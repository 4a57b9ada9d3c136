package readplan

import "math"

// The order of an input decides how busy the partitions can be kept. The
// import reads each cursor in order and parks it when the next record's
// physical partition already has a full queue; while it waits, partitions
// whose records lie further on get nothing. A file sorted by partition key
// can thus keep one partition busy while the others idle, however fast the
// container is. Plan.Simulate replays a load's partition sequence through
// the plan's reading — cursors, bounded queues per partition, each
// partition drained at its share of the target — so a dry run can say what
// the order costs instead of assuming the order does not matter.

// Load is what a simulation writes a plan's records into: Partitions
// physical partitions, each spending BudgetPerPartition RU/s. Records and
// Bytes are the load's own: a cursor is split while loading only with
// MinSplitBytes of records left, in records of their mean size.
type Load struct {
	Partitions         int
	BudgetPerPartition float64
	Records, Bytes     int64
}

// Result is what the simulated load does.
type Result struct {
	// Seconds until the last record is written.
	Seconds float64
	// Busy is, per partition, the seconds it spent writing: the RU it
	// spent over its budget. (Counting the steps in which it had records
	// undercounted a partition fed a few records at a time, which spends
	// its bucket's banked credit in bursts, and changed with the
	// sequence's coarsening.)
	Busy []float64
}

// Simulate replays seq, the records each of the plan's pieces holds (a
// piece's number is its cursor in seq), through the plan's reading: every
// cursor reads its records in order as fast as queues allow, parking on a
// record whose partition's queue is full; every partition writes its
// queue at its budget. Reading is taken to be much faster than writing,
// which it is (hundreds of MB/s against a few MB/s paced).
func (p Plan) Simulate(seq *Sequence, l Load) Result {
	cfg := orderConfig{Partitions: l.Partitions, BudgetPerPartition: l.BudgetPerPartition,
		Queue: p.Queue + p.Window, Cursors: p.Cursors, Order: p.Order}
	if p.Splits && l.Records > 0 && l.Bytes > 0 {
		cfg.Split = NewSplitPolicy(p.MaxCursors)
		cfg.MinSplit = MinSplitBytes * l.Records / l.Bytes
	}
	return simulate(seq, cfg)
}

// orderConfig is the reading scheme and the container a simulation runs.
type orderConfig struct {
	Partitions int
	// BudgetPerPartition is each partition's RU/s (the target ÷ partitions).
	BudgetPerPartition float64
	// Queue is the records read ahead per partition (the import's
	// --read-ahead: a queue and, with batches, a dispatcher's window).
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

// cursor reads runs, its current block, then the blocks in rest; the
// blocks are never empty, so i < len(runs) while it reads.
type cursor struct {
	runs []run
	rest [][]run
	i    int
	left int32   // records left in runs[i]
	ru   float64 // RU per record of runs[i]
}

func newCursor(runs []run, rest [][]run) *cursor {
	return &cursor{runs: runs, rest: rest, left: runs[0].N, ru: float64(runs[0].RU) / float64(runs[0].N)}
}

func (c *cursor) reading() bool { return c.i < len(c.runs) }

// unread is the records the cursor has still to read.
func (c *cursor) unread() int64 {
	left := int64(c.left)
	for _, r := range c.runs[c.i+1:] {
		left += int64(r.N)
	}
	for _, b := range c.rest {
		for _, r := range b {
			left += int64(r.N)
		}
	}
	return left
}

// took moves the cursor past n records of its current run.
func (c *cursor) took(n int32) {
	c.left -= n
	if c.left > 0 {
		return
	}
	c.i++
	if c.i == len(c.runs) && len(c.rest) > 0 {
		c.runs, c.rest, c.i = c.rest[0], c.rest[1:], 0
	}
	if c.i < len(c.runs) {
		c.left = c.runs[c.i].N
		c.ru = float64(c.runs[c.i].RU) / float64(c.runs[c.i].N)
	}
}

// partition is one partition's queue as runs of equal-cost records, a
// count of the records in it, the RU it may still spend this step (with
// debt), and the pacer's second guard: the RU left in the aligned second
// sec (renewed as min(left, 0) + budget), so a partition that starts a
// second with a full bucket spends no more than the budget in it.
type partition struct {
	q      []run
	n      int
	credit float64
	sec    int64
	left   float64
}

// simulation is one run of simulate.
type simulation struct {
	cfg   orderConfig
	queue int
	// curs are the cursors reading, waiting those that take a finished
	// one's place in turn.
	curs, waiting []*cursor
	ps            []partition
	res           Result
}

// simulate replays seq through cfg's reading scheme (see Plan.Simulate).
func simulate(seq *Sequence, cfg orderConfig) Result {
	parts := max(cfg.Partitions, 1)
	step := cfg.Step
	if step <= 0 {
		step = 0.01
	}
	s := &simulation{cfg: cfg, queue: max(cfg.Queue, 1), res: Result{Busy: make([]float64, parts)}}
	if cfg.BudgetPerPartition <= 0 {
		return s.res
	}
	s.start(seq)
	s.ps = make([]partition, parts)
	for i := range s.ps {
		s.ps[i].left = cfg.BudgetPerPartition
	}
	var t float64
	s.refill()
	for !s.done() {
		if cfg.Split != nil {
			reading, starved := s.starved()
			if cfg.Split.Observe(t, starved, reading) {
				s.split()
				s.refill()
			}
		}
		lastBusy := s.write(t, step)
		s.refill()
		if s.done() {
			t += step * lastBusy
			break
		}
		t += step
	}
	s.res.Seconds = t
	return s.res
}

// start opens the sequence's cursors in the order the pool takes them,
// the first Cursors of them reading.
func (s *simulation) start(seq *Sequence) {
	order := s.cfg.Order
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
			s.waiting = append(s.waiting, newCursor(l.blocks[0], l.blocks[1:]))
		}
	}
	pool := s.cfg.Cursors
	if pool <= 0 || pool > len(s.waiting) {
		pool = len(s.waiting)
	}
	s.curs = append([]*cursor(nil), s.waiting[:pool]...)
	s.waiting = s.waiting[pool:]
}

// refill reads every cursor until it parks on a full queue or ends; a
// finished cursor hands its place to the next waiting one.
func (s *simulation) refill() {
	for progress := true; progress; {
		progress = false
		for _, c := range s.curs {
			for c.reading() {
				r := c.runs[c.i]
				p := &s.ps[r.Part]
				room := int32(s.queue - p.n)
				if room <= 0 {
					break // parked on a full queue
				}
				take := min(room, c.left)
				p.q = append(p.q, run{Part: r.Part, N: take, RU: float32(c.ru)})
				p.n += int(take)
				c.took(take)
				progress = true
			}
		}
		for k, c := range s.curs {
			if !c.reading() && len(s.waiting) > 0 {
				s.curs[k], s.waiting = s.waiting[0], s.waiting[1:]
				progress = true
			}
		}
	}
}

// done reports whether every record is read and written.
func (s *simulation) done() bool {
	if len(s.waiting) > 0 {
		return false
	}
	for _, c := range s.curs {
		if c.reading() {
			return false
		}
	}
	for _, p := range s.ps {
		if p.n > 0 {
			return false
		}
	}
	return true
}

// starved reports how many cursors read and whether the load starves:
// reading is instant here, so after a refill every cursor still reading
// is parked; writing is instant too, so a partition with nothing queued
// has nothing in flight either: idle as the import's lanes.anyIdle means
// it.
func (s *simulation) starved() (reading int, starved bool) {
	idle := false
	for _, c := range s.curs {
		if c.reading() {
			reading++
		}
	}
	for _, p := range s.ps {
		idle = idle || p.n == 0
	}
	return reading, reading > 0 && idle
}

// split gives the second half of the largest unread stretch of any cursor
// to a new one, as the import splits a segment's unread bytes.
func (s *simulation) split() {
	var big *cursor
	var bigLeft int64
	for _, c := range s.curs {
		if !c.reading() {
			continue
		}
		if left := c.unread(); left > bigLeft {
			big, bigLeft = c, left
		}
	}
	if big == nil || bigLeft < max(2, s.cfg.MinSplit) {
		return
	}
	// What is left, from the current run's unread records on, cut in the
	// middle: the old cursor keeps the head, a new one the tail.
	cur := big.runs[big.i]
	rem := append([]run{{Part: cur.Part, N: big.left, RU: float32(big.ru) * float32(big.left)}}, big.runs[big.i+1:]...)
	for _, b := range big.rest {
		rem = append(rem, b...)
	}
	head, tail := cutRuns(rem, bigLeft/2)
	*big = *newCursor(head, nil)
	s.curs = append(s.curs, newCursor(tail, nil))
}

// write spends a step's budget on every partition's queue and returns the
// busiest partition's share of the step spent writing (less than the
// whole step only for a partition whose queue ran out).
func (s *simulation) write(t, step float64) (lastBusy float64) {
	budget := s.cfg.BudgetPerPartition
	perStep := budget * step
	sec := int64(t + step/2)
	for pi := range s.ps {
		p := &s.ps[pi]
		if sec > p.sec {
			n := float64(sec - p.sec)
			p.left = math.Min(math.Min(p.left, 0)+n*budget, budget)
			p.sec = sec
		}
		if p.n == 0 {
			// An idle partition banks nothing: the pacer's bucket is about
			// a tenth of a second deep.
			p.credit = min(p.credit+perStep, budget*0.1)
			continue
		}
		// Held back by the second guard, the bucket still fills only to
		// its depth.
		p.credit = min(p.credit+perStep, budget*0.1+perStep)
		used := p.spend()
		frac := 1.0
		if used < perStep && p.n == 0 {
			frac = used / perStep
		}
		s.res.Busy[pi] += used / budget
		lastBusy = max(lastBusy, frac)
	}
	return lastBusy
}

// spend writes queued records while the bucket has credit and the second
// has budget, and returns the RU spent.
func (p *partition) spend() (used float64) {
	for p.n > 0 && p.credit > 0 && p.left > 0 {
		r := &p.q[0]
		// Records of equal cost: spend as many as the credit allows, the
		// last one possibly into debt.
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
	return used
}

// cutRuns splits runs after n records (0 < n < their total).
func cutRuns(runs []run, n int64) (head, tail []run) {
	for i, r := range runs {
		if n >= int64(r.N) {
			n -= int64(r.N)
			if n == 0 {
				return append([]run(nil), runs[:i+1]...), append([]run(nil), runs[i+1:]...)
			}
			continue
		}
		per := r.RU / float32(r.N)
		k := int32(n)
		head = append(append([]run(nil), runs[:i]...), run{Part: r.Part, N: k, RU: per * float32(k)})
		tail = append([]run{{Part: r.Part, N: r.N - k, RU: per * float32(r.N-k)}}, runs[i+1:]...)
		return head, tail
	}
	return append([]run(nil), runs...), nil
}
