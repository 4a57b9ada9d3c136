package loader

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/clock"
	"github.com/cosmosloader/loader/internal/human"
	"github.com/cosmosloader/loader/internal/parallel"
	"github.com/cosmosloader/loader/loader/readplan"
	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/formats"
)

// A file sorted by partition key parks a single reader on one partition's
// full queue while the others idle. Reading the file at several places at
// once — segments, each with its own cursor and low-water mark — gives every
// partition work whenever the file holds records for it anywhere, not only
// in the next few thousand lines.

// followNoteBytes is the CSV size from which following its quoting before
// the load (to cut it) is said: a blob of hundreds of GB is read once
// first, 16 ranges at once, which can take minutes with nothing else to
// show.
var followNoteBytes int64 = 1 << 30

// noteFollowingCSV says that in, a CSV of size bytes, is read once before
// its load begins, when it is big enough for that to be noticed.
func noteFollowingCSV(in source.Input, size int64, so source.Options, logf func(string, ...any)) {
	if f, err := source.ResolveFormat(in, so); err != nil || (f != source.FormatCSV && f != source.FormatTSV) || size < followNoteBytes {
		return
	}
	logf("note: reading %s (%s) once to find where its records start: a CSV's quoting is followed from its start, 16 blocks at once", in.Path, human.Bytes(float64(size)))
}

// segmentPlan maps the checkpoint's inputs to the pipeline's: one pipeline
// input per segment of a segmented file, one per other file.
type segmentPlan struct {
	// mu guards the plan and the state's inputs once a segmenter may split
	// segments while the load runs.
	mu     sync.Mutex
	inputs []Input
	file   []int // pipeline input → index in state.Inputs
	seg    []int // pipeline input → index in that input's Segments, or -1
}

// splitInputs decides, for a fresh load, each file's segments (as many as
// the read plan's c.SegmentsOf its size) and records them in state.Inputs
// (whose Fingerprints are set). logf says when cutting a CSV will read it
// first (noteFollowingCSV).
func splitInputs(files []Input, state *checkpoint.State, so source.Options, c readplan.Config, logf func(string, ...any)) ([]string, error) {
	// Splitting a Parquet blob reads its footer, a round trip or two:
	// parallel.InputsAtOnce files are split at once.
	type split struct {
		n      int
		ranges []source.Range
		why    string
	}
	splits := make([]split, len(files))
	err := parallel.Each(len(files), parallel.InputsAtOnce, func(i int) error {
		if files[i].Stdin {
			return nil
		}
		sp := &splits[i]
		sp.n = c.SegmentsOf(state.Inputs[i].Size)
		if sp.n <= 1 {
			return nil
		}
		noteFollowingCSV(files[i].Input, state.Inputs[i].Size, so, logf)
		var err error
		sp.ranges, sp.why, err = formats.Split(files[i].Input, so, sp.n)
		return err
	})
	if err != nil {
		return nil, err
	}
	var notes []string
	for i, in := range files {
		if in.Stdin {
			if c.Lanes > 1 && c.Segments != 1 {
				notes = append(notes, "standard input is read with one cursor: if it is sorted by partition key, partitions wait on each other (loader dry-run on a copy shows how much)")
			}
			continue
		}
		n, ranges, why := splits[i].n, splits[i].ranges, splits[i].why
		if n <= 1 {
			continue
		}
		if why != "" {
			notes = append(notes, fmt.Sprintf("%s is read with one cursor because %s: if it is sorted by partition key, partitions wait on each other (loader dry-run shows how much; a plain NDJSON copy is read at %d places at once)", in.Path, why, n))
			continue
		}
		if len(ranges) <= 1 {
			continue
		}
		segs := make([]checkpoint.Segment, len(ranges))
		for k, rg := range ranges {
			start := checkpoint.Position{Offset: rg.Start.Offset, Line: rg.Start.Line, Base: rg.Start.Base}
			segs[k] = checkpoint.Segment{Start: start, End: rg.End, Committed: start}
		}
		state.Inputs[i].Segments = segs
	}
	return notes, nil
}

// planSegments builds the pipeline's inputs from the files and their
// checkpointed progress (state.Inputs, one per file).
func planSegments(files []Input, state *checkpoint.State) *segmentPlan {
	p := &segmentPlan{}
	for i, f := range files {
		ci := state.Inputs[i]
		if len(ci.Segments) == 0 {
			in := f
			in.Start = committedAt(ci.Committed, ci.Records, ci.Refused)
			p.add(in, i, -1)
			continue
		}
		// A checkpoint that says which segment was refused; an older one
		// only that the input was.
		perSegment := slices.ContainsFunc(ci.Segments, func(s checkpoint.Segment) bool { return s.Refused })
		for k, s := range ci.Segments {
			in := f
			refused := s.Refused || (ci.Refused && !perSegment)
			in.Start = committedAt(s.Committed, s.Records, refused)
			in.End = s.End // 0: to the end of the file
			p.add(in, i, k)
		}
	}
	return p
}

func (p *segmentPlan) add(in Input, file, seg int) {
	p.inputs = append(p.inputs, in)
	p.file = append(p.file, file)
	p.seg = append(p.seg, seg)
}

// record writes a snapshot's low-water marks into state.Inputs.
func (p *segmentPlan) record(state *checkpoint.State, committed []Committed, complete bool) {
	for k, c := range committed {
		ci := &state.Inputs[p.file[k]]
		pos := c.position()
		records := p.inputs[k].Start.Records + c.Records
		ci.Refused = ci.Refused || c.Refused
		if p.seg[k] < 0 {
			ci.Committed, ci.Records, ci.Done = pos, records, complete
			continue
		}
		s := &ci.Segments[p.seg[k]]
		s.Committed, s.Records, s.Done = pos, records, complete
		s.Refused = s.Refused || c.Refused
	}
	for i := range state.Inputs {
		ci := &state.Inputs[i]
		if len(ci.Segments) == 0 {
			continue
		}
		// An older loader reading this checkpoint sees one position: the
		// first segment's, from which re-reading the whole rest of the
		// file loses nothing.
		ci.Committed, ci.Records, ci.Done = ci.Segments[0].Committed, 0, complete
		for _, s := range ci.Segments {
			ci.Records += s.Records
		}
	}
}

// shardsAtOnce is how many of a shared load's shards one loader reads at
// once. A shard of a key-sorted export holds a narrow range of keys, often
// one at a time: a loader leases a share of every partition's throughput
// and spends only the shares of the partitions its shards are at, so it
// reads as many shards as an import reads segments of one file
// (maxCursors), as many as fit in memory. --segments N (want) reads at
// most N at a time.
func shardsAtOnce(files []Input, shards int, so source.Options, partitions, want int) int {
	if partitions <= 1 || want == 1 || shards <= 1 {
		return 1
	}
	n := min(shards, readplan.MaxCursors(partitions), readplan.ReadersAtOnce(sourcesOf(files), so))
	if want > 0 {
		n = min(n, want)
	}
	return max(n, 1)
}

// pieces is, per file, how many pipeline inputs read it.
func (p *segmentPlan) pieces() []int {
	var counts []int
	for k, f := range p.file {
		if k == 0 || f != p.file[k-1] {
			counts = append(counts, 0)
		}
		counts[len(counts)-1]++
	}
	return counts
}

// segmentedSource sizes the NDJSON read blocks (and the Parquet reader's
// JSON arenas, and its decoders: see source.Options.Cursors) for the
// cursors: every queued record keeps its block alive, so 64 cursors with 1 MiB blocks pinned a few hundred MB
// (scenario F: 306 MB). About 4 MiB of blocks in all, at least 64 KiB
// each, keeps reading far ahead of writing.
func segmentedSource(so source.Options, cursors int) source.Options {
	if cursors > 1 && so.BlockSize == 0 {
		so.BlockSize = max(64<<10, (4<<20)/cursors)
	}
	so.Cursors = cursors
	return so
}

// Run-time splits. A fixed count can still leave a partition idle: its
// records may lie in no cursor's next few thousand lines (a small file read
// with one cursor, keys longer than a segment). The segmenter watches the
// cursors and the queues and, when pacing.SplitPolicy says the load is
// starved, splits the largest unread range in two at a record boundary: the
// cursor reading it stops at the boundary and a new one reads on from there.
// The new segment is in the checkpoint before its first record is read, so
// a resume reads every segment.

// segmenter opens segments at run time for one Run.
type segmenter struct {
	// plan.mu guards the plan, state.Inputs, curs and refused.
	plan   *segmentPlan
	state  *checkpoint.State
	so     source.Options
	policy *readplan.SplitPolicy
	curs   []*segCursor // by pipeline input
	// refused are the files that cannot be split, by state.Inputs index.
	refused map[int]bool
	logf    func(format string, a ...any)
}

// segCursor is what the segmenter knows of one pipeline input's cursor.
type segCursor struct {
	mu sync.Mutex
	// pos is where the next record starts, end where the cursor stops (a
	// later split moves it closer).
	pos            source.Position
	end            int64
	reading, ended bool
	parked         atomic.Bool
}

// newSegmenter watches the plan's cursors; split segments are recorded in
// state under plan.mu, which the checkpoint's save holds too.
func newSegmenter(plan *segmentPlan, state *checkpoint.State, so source.Options, maxCursors int, logf func(string, ...any)) *segmenter {
	s := &segmenter{plan: plan, state: state, so: so, policy: readplan.NewSplitPolicy(maxCursors),
		refused: map[int]bool{}, logf: logf}
	for k, in := range plan.inputs {
		s.curs = append(s.curs, s.newCursor(in, plan.file[k]))
	}
	return s
}

func (s *segmenter) newCursor(in Input, file int) *segCursor {
	end := in.End
	if end <= 0 {
		end = s.state.Inputs[file].Size
	}
	// An input that cannot be split is never cut, and its offsets need not
	// be below its size on disk (stdin has none; a gzip file's offsets
	// count decompressed bytes): its cursor reads to the end.
	if ok, _ := formats.Splittable(in.Input, s.so); !ok {
		s.refused[file] = true
		end = math.MaxInt64
	}
	return &segCursor{pos: source.Position{Offset: in.Start.Offset, Line: in.Start.Line, Base: in.Start.Base}, end: end}
}

// cursor returns input i's cursor; nil (whose methods do nothing) without
// a segmenter.
func (s *segmenter) cursor(i int) *segCursor {
	if s == nil {
		return nil
	}
	s.plan.mu.Lock()
	defer s.plan.mu.Unlock()
	return s.curs[i]
}

func (c *segCursor) begin() {
	if c != nil {
		c.mu.Lock()
		c.reading = true
		c.mu.Unlock()
	}
}

func (c *segCursor) finish() {
	if c != nil {
		c.mu.Lock()
		c.ended = true
		c.mu.Unlock()
	}
}

// take says whether the record starting at offset is the cursor's (not
// beyond a split) and moves the cursor past it, to next.
func (c *segCursor) take(offset int64, next source.Position) bool {
	if c == nil {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if offset >= c.end {
		return false
	}
	c.pos = next
	return true
}

func (c *segCursor) park(on bool) {
	if c != nil {
		c.parked.Store(on)
	}
}

// starved reports how many cursors are reading and whether every one of
// them is parked while some partition is idle: anyIdle says whether one
// has nothing queued and nothing being admitted or written (lanes.anyIdle).
func (s *segmenter) starved(anyIdle func() bool) (reading int, starved bool) {
	s.plan.mu.Lock()
	curs := s.curs
	s.plan.mu.Unlock()
	parked := 0
	for _, c := range curs {
		c.mu.Lock()
		live := c.reading && !c.ended
		c.mu.Unlock()
		if live {
			reading++
			if c.parked.Load() {
				parked++
			}
		}
	}
	return reading, reading > 0 && parked == reading && anyIdle()
}

// watch samples the load every 100 ms until stop closes, splitting when the
// policy says so; spawn starts a cursor on a new pipeline input.
func (s *segmenter) watch(stop <-chan struct{}, clk clock.Clock, anyIdle func() bool, tr *tracker, spawn func(int, Input)) {
	start := clk.Now()
	for {
		select {
		case <-stop:
			return
		case <-clk.After(100 * time.Millisecond):
		}
		reading, starved := s.starved(anyIdle)
		if s.policy.Observe(clk.Now().Sub(start).Seconds(), starved, reading) {
			if err := s.split(tr, spawn); err != nil {
				s.logf("warning: %v", err)
			}
		}
	}
}

// split cuts the largest unread range of a reading cursor in two at a
// record boundary near its middle and starts a cursor on the second half.
// It does nothing when no range is worth it or the cursor moved past the
// boundary meanwhile.
func (s *segmenter) split(tr *tracker, spawn func(int, Input)) error {
	s.plan.mu.Lock()
	curs := s.curs
	refused := make([]bool, len(curs))
	for i := range curs {
		refused[i] = s.refused[s.plan.file[i]]
	}
	s.plan.mu.Unlock()
	k, from, end := -1, source.Position{}, int64(0)
	for i, c := range curs {
		if refused[i] {
			continue
		}
		c.mu.Lock()
		if c.reading && !c.ended && c.end-c.pos.Offset > end-from.Offset {
			k, from, end = i, c.pos, c.end
		}
		c.mu.Unlock()
	}
	if k < 0 || end-from.Offset < readplan.MinSplitBytes {
		return nil
	}
	s.plan.mu.Lock()
	in, file := s.plan.inputs[k], s.plan.file[k]
	s.plan.mu.Unlock()

	if ok, why := formats.Splittable(in.Input, s.so); !ok {
		s.plan.mu.Lock()
		s.refused[file] = true
		s.plan.mu.Unlock()
		s.logf("note: %s is not split further because %s", in.Path, why)
		return nil
	}
	b, why, err := formats.BoundaryAfter(in.Input, s.so, from, from.Offset+(end-from.Offset)/2)
	if err != nil || why != "" {
		s.plan.mu.Lock()
		s.refused[file] = true
		s.plan.mu.Unlock()
		if err != nil {
			return fmt.Errorf("split %s: %w", in.Path, err)
		}
		s.logf("note: %s is not split further because %s", in.Path, why)
		return nil
	}
	c := curs[k]
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended || c.end != end || c.pos.Offset >= b.Offset || b.Offset >= end {
		return nil
	}
	s.plan.mu.Lock()
	ci := &s.state.Inputs[file]
	if s.plan.seg[k] < 0 {
		// A file read whole until now becomes its first segment.
		start := checkpoint.Position{Offset: in.Start.Offset, Line: in.Start.Line, Base: in.Start.Base}
		ci.Segments = []checkpoint.Segment{{Start: start, Committed: ci.Committed, Records: ci.Records}}
		s.plan.seg[k] = 0
	}
	old := &ci.Segments[s.plan.seg[k]]
	start := checkpoint.Position{Offset: b.Offset, Line: b.Line, Base: b.Base}
	ci.Segments = append(ci.Segments, checkpoint.Segment{Start: start, End: old.End, Committed: start})
	ci.Segments[s.plan.seg[k]].End = b.Offset
	next := in
	next.Start = Committed{Offset: b.Offset, Line: b.Line, Base: b.Base}
	next.End = ci.Segments[len(ci.Segments)-1].End
	s.plan.add(next, file, len(ci.Segments)-1)
	i := tr.open(next.Start)
	if i != len(s.plan.inputs)-1 {
		panic("segments: tracker and plan disagree on the inputs")
	}
	s.curs = append(s.curs, &segCursor{pos: b, end: end})
	s.plan.mu.Unlock()
	c.end = b.Offset
	// c has not ended, so its reader holds the Run's cursor group open.
	spawn(i, next)
	return nil
}

// sourcesOf is the inputs' sources.
func sourcesOf(ins []Input) []source.Input {
	out := make([]source.Input, len(ins))
	for i, in := range ins {
		out[i] = in.Input
	}
	return out
}
