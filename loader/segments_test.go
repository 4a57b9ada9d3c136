package loader

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/epk"
	"github.com/cosmosloader/loader/loader/readplan"
	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/formats"
	"github.com/cosmosloader/loader/pacing"
)

// A file read whole is split while loading: the cursor stops at a line
// boundary near the middle of what it has not read, the checkpoint holds
// both segments before the new cursor starts, and a resume plans both.
func TestSegmenterSplitsTheLargestUnreadRange(t *testing.T) {
	var b bytes.Buffer
	for i := 0; b.Len() < 2<<20; i++ {
		fmt.Fprintf(&b, `{"id":"r%06d","pk":"k","pad":"%0*d"}`+"\n", i, 50+i%40, 0)
	}
	data := b.Bytes()
	path := filepath.Join(t.TempDir(), "in.ndjson")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	files := []Input{{Input: source.Input{Path: path}}}
	state := &checkpoint.State{Inputs: []checkpoint.Input{{Fingerprint: checkpoint.Fingerprint{Path: path, Size: int64(len(data))}}}}
	plan := planSegments(files, state)
	tr := newTracker([]Committed{plan.inputs[0].Start}, nil)
	s := newSegmenter(plan, state, source.Options{}, 4, t.Logf)

	first := bytes.IndexByte(data, '\n') + 1
	c := s.cursor(0)
	c.begin()
	if !c.take(0, source.Position{Offset: int64(first), Line: 1}) {
		t.Fatal("the first record is the cursor's")
	}
	seq := tr.add(0, int64(first), 1)
	tr.ack(0, seq, resultWritten, nil)

	var spawned []int
	var next Input
	if err := s.split(tr, func(i int, in Input) { spawned, next = append(spawned, i), in }); err != nil {
		t.Fatal(err)
	}
	if len(spawned) != 1 || spawned[0] != 1 {
		t.Fatalf("spawned %v, want input 1", spawned)
	}
	at := next.Start.Offset
	mid := int64(first) + (int64(len(data))-int64(first))/2
	if at < mid || at > mid+200 || data[at-1] != '\n' {
		t.Fatalf("split at %d, want the line start at or after %d", at, mid)
	}
	// Its lines count from itself: the cut read nothing before it.
	if next.Start.Line != 0 || next.Start.Base != at {
		t.Errorf("new segment starts on line %d from %d, want line 0 from itself", next.Start.Line, next.Start.Base)
	}
	if c.take(at, source.Position{}) {
		t.Error("the old cursor read past the split")
	}
	if !c.take(at-10, source.Position{Offset: at, Line: next.Start.Line}) {
		t.Error("the old cursor refused a record before the split")
	}
	segs := state.Inputs[0].Segments
	if len(segs) != 2 || segs[0].End != at || segs[0].Start.Offset != 0 || segs[1].Start.Offset != at || segs[1].End != 0 || segs[1].Committed.Offset != at {
		t.Fatalf("checkpoint segments %+v", segs)
	}

	plan.record(state, tr.committed(), false)
	if got := state.Inputs[0].Segments[0].Committed.Offset; got != int64(first) {
		t.Errorf("first segment committed at %d, want %d", got, first)
	}
	resumed := planSegments(files, state)
	if len(resumed.inputs) != 2 || resumed.inputs[0].End != at || resumed.inputs[1].Start.Offset != at || resumed.inputs[1].End != 0 || !slices.Equal(resumed.pieces(), []int{2}) {
		t.Errorf("resume plan %+v", resumed.inputs)
	}

	// Cursor 0 has read up to the split and cursor 1 has not begun:
	// nothing left to split.
	for range 8 {
		if err := s.split(tr, func(i int, in Input) { spawned = append(spawned, i) }); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(state.Inputs[0].Segments); n != 2 {
		t.Errorf("%d segments after splits with nothing to split, want 2", n)
	}
}

// A gzip file's offsets count decompressed bytes, and stdin has no size:
// neither cursor may stop at the size on disk (it did, and the rest of the
// input was silently not read).
func TestSegmenterCursorsOfUnsplittableInputsReadToTheEnd(t *testing.T) {
	dir := t.TempDir()
	gz := filepath.Join(dir, "in.ndjson.gz")
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	for i := range 1000 {
		fmt.Fprintf(zw, `{"id":"r%d","pk":"k"}`+"\n", i)
	}
	zw.Close()
	if err := os.WriteFile(gz, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	files := []Input{{Input: source.Input{Path: gz}}, {Input: source.Input{Path: "-", Stdin: true}}}
	state := &checkpoint.State{Inputs: []checkpoint.Input{
		{Fingerprint: checkpoint.Fingerprint{Path: gz, Size: int64(b.Len())}},
		{Stdin: true},
	}}
	s := newSegmenter(planSegments(files, state), state, source.Options{}, 4, t.Logf)
	for i, name := range []string{"gzip", "stdin"} {
		c := s.cursor(i)
		c.begin()
		past := int64(b.Len()) * 10
		if !c.take(past, source.Position{Offset: past + 20, Line: 900}) {
			t.Errorf("%s: the cursor stops at a record at offset %d", name, past)
		}
	}
}

// A partition a split retired is not idle: its lane, once drained, stays
// empty, and counting it would cut segments while every current partition
// has work.
func TestLanesIdleSkipsRetiredPartitions(t *testing.T) {
	p, err := pacing.NewPacer(pacing.PacerConfig{TargetRU: 1000, Bounds: epk.SplitEven(1)})
	if err != nil {
		t.Fatal(err)
	}
	// Partition 0 splits into 1 and 2.
	b := epk.SplitEven(2)
	if _, err := p.Rebound(b); err != nil {
		t.Fatal(err)
	}
	adm := &pacedAdmission{pacer: p}
	l := &lanes{size: 4, current: adm.current, start: func(int, chan *item, *atomic.Int64) {}}
	l.get(2)
	l.get(1) <- &item{}
	l.get(2) <- &item{}
	if l.anyIdle() {
		t.Error("anyIdle with the retired lane 0 empty and lanes 1 and 2 queued, want false")
	}
	<-l.get(2)
	if !l.anyIdle() {
		t.Error("anyIdle with the current lane 2 empty, want true")
	}
}

// With batching a partition's queue is often empty while its dispatcher
// admits or writes what it just took: that partition is not idle, and a
// load whose cursors are all parked is not starved because of it.
func TestLanesIdleCountsWorkInFlight(t *testing.T) {
	var busy []*atomic.Int64
	l := &lanes{size: 4, start: func(_ int, _ chan *item, b *atomic.Int64) { busy = append(busy, b) }}
	l.get(1)
	l.get(0) <- &item{}
	busy[1].Add(1) // partition 1: queue empty, a batch in flight
	if l.anyIdle() {
		t.Fatal("anyIdle with one partition queued and the other writing, want false")
	}
	seg := &segmenter{plan: &segmentPlan{}, curs: []*segCursor{{reading: true}}}
	seg.curs[0].parked.Store(true)
	if _, starved := seg.starved(l.anyIdle); starved {
		t.Error("starved while every partition has work queued or in flight")
	}
	busy[1].Add(-1)
	if !l.anyIdle() {
		t.Fatal("anyIdle with partition 1 empty and nothing in flight, want true")
	}
	if _, starved := seg.starved(l.anyIdle); !starved {
		t.Error("not starved with the only cursor parked and partition 1 idle")
	}
}

// A segment that refuses the rest of itself (a Parquet row group that does
// not decode) is skipped on resume; the input's other segments are read on.
// An older checkpoint, which says only that the input was refused, skips
// them all.
func TestRefusedSegmentAloneIsSkippedOnResume(t *testing.T) {
	files := []Input{{Input: source.Input{Path: "x.parquet"}}}
	state := &checkpoint.State{Inputs: []checkpoint.Input{{Segments: []checkpoint.Segment{
		{Start: checkpoint.Position{}, End: 100, Committed: checkpoint.Position{Offset: 40, Line: 4}},
		{Start: checkpoint.Position{Offset: 100, Line: 10}, End: 200, Committed: checkpoint.Position{Offset: 100, Line: 10}},
		{Start: checkpoint.Position{Offset: 200, Line: 20}, Committed: checkpoint.Position{Offset: 230, Line: 23}},
	}}}}
	plan := planSegments(files, state)
	plan.record(state, []Committed{{Offset: 40, Line: 4}, {Offset: 150, Line: 15, Refused: true}, {Offset: 230, Line: 23}}, false)
	if ci := state.Inputs[0]; !ci.Refused || !ci.Segments[1].Refused || ci.Segments[0].Refused || ci.Segments[2].Refused {
		t.Fatalf("after a refusal in segment 1: %+v", ci)
	}
	var refused []bool
	for _, in := range planSegments(files, state).inputs {
		refused = append(refused, in.Start.Refused)
	}
	if !slices.Equal(refused, []bool{false, true, false}) {
		t.Errorf("resumed segments refused %v, want only segment 1", refused)
	}
	for i := range state.Inputs[0].Segments {
		state.Inputs[0].Segments[i].Refused = false // as an older loader saved it
	}
	refused = refused[:0]
	for _, in := range planSegments(files, state).inputs {
		refused = append(refused, in.Start.Refused)
	}
	if !slices.Equal(refused, []bool{true, true, true}) {
		t.Errorf("an older checkpoint's segments refused %v, want all", refused)
	}
}

// A checkpoint's segments are its files' pieces, laid out file by file,
// as the read plan numbers them.
func TestSegmentPlanCountsEachFilesPieces(t *testing.T) {
	seg := func(start, end int64) checkpoint.Segment {
		return checkpoint.Segment{Start: checkpoint.Position{Offset: start}, End: end, Committed: checkpoint.Position{Offset: start}}
	}
	files := []Input{{Input: source.Input{Path: "a"}}, {Input: source.Input{Path: "b"}}, {Input: source.Input{Path: "c"}}}
	state := &checkpoint.State{Inputs: []checkpoint.Input{
		{Segments: []checkpoint.Segment{seg(0, 10), seg(10, 20), seg(20, 0)}},
		{},
		{Segments: []checkpoint.Segment{seg(0, 10), seg(10, 0)}},
	}}
	plan := planSegments(files, state) // pieces a0 a1 a2 b c0 c1
	if got, want := plan.pieces(), []int{3, 1, 2}; !slices.Equal(got, want) {
		t.Errorf("pieces %v, want %v", got, want)
	}
}

// A resumed Parquet input says the row it reads on from: its offsets are
// rows scaled to its size, not bytes anyone could look up.
func TestResumePositionsNameParquetRows(t *testing.T) {
	inputs := []Input{
		{Input: source.Input{Path: "a.parquet"}, Start: Committed{Offset: 5000, Line: 120, Records: 120}},
		{Input: source.Input{Path: "b.ndjson"}, Start: Committed{Offset: 5000, Line: 120, Records: 118}},
		{Input: source.Input{Path: "c.data"}, Start: Committed{Offset: 5000, Line: 9, Records: 9}},
	}
	got := resumePositions(inputs, make([]checkpoint.Input, 3), source.Options{})
	want := []string{
		"a.parquet: from row 121; 120 records already committed",
		"b.ndjson: from line 121 (byte 4.9 KB); 118 records already committed",
		"c.data: from line 10 (byte 4.9 KB); 9 records already committed",
	}
	if !slices.Equal(got, want) {
		t.Errorf("resume positions\n%q\nwant\n%q", got, want)
	}
	if got := resumePositions(inputs[2:], make([]checkpoint.Input, 1), source.Options{Format: source.FormatParquet}); got[0] != "c.data: from row 10; 9 records already committed" {
		t.Errorf("--format parquet: %q", got[0])
	}
}

func TestShardsAtOnce(t *testing.T) {
	sorted := []Input{{Input: source.Input{Path: "sorted.ndjson"}}}
	pq := []Input{{Input: source.Input{Path: "../testdata/parquet/rows.parquet"}}}
	for _, tc := range []struct {
		name                     string
		files                    []Input
		shards, partitions, want int
		atOnce                   int
	}{
		{"one partition: one shard at a time", sorted, 100, 1, 0, 1},
		{"--segments 1: one shard at a time", sorted, 100, 8, 1, 1},
		{"as many as an import's segments", sorted, 100, 8, 0, readplan.MaxCursors(8)},
		{"at most the segments' bound", sorted, 1000, 40, 0, readplan.MaxCursors(40)},
		{"fewer shards than that", sorted, 5, 8, 0, 5},
		{"--segments 6: at most 6", sorted, 100, 8, 6, 6},
		{"Parquet readers within the split memory", pq, 100, 40, 0, min(readplan.MaxCursors(40), formats.ReadersAtOnce(pq[0].Input, source.Options{}))},
	} {
		if got := shardsAtOnce(tc.files, tc.shards, source.Options{}, tc.partitions, tc.want); got != tc.atOnce {
			t.Errorf("%s: %d shards at once, want %d", tc.name, got, tc.atOnce)
		}
	}
}
