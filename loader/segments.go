package loader

import (
	"fmt"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/loader/source"
)

// A file sorted by partition key parks a single reader on one partition's
// full queue while the others idle. Reading the file at several places at
// once — segments, each with its own cursor and low-water mark — gives every
// partition work whenever the file holds records for it anywhere, not only
// in the next few thousand lines.

// Segment bounds: a cursor per MiB of input, at most 4 per physical
// partition (at least 8, at most 64). Below 4 MiB, or with one partition,
// one cursor is enough: the read-ahead already spans the file or there is
// nothing to keep busy.
const (
	minSegmentedBytes = 4 << 20
	maxSegments       = 64
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
	return int(min(size>>20, int64(min(maxSegments, max(8, 4*partitions)))))
}

// segmentPlan maps the checkpoint's inputs to the pipeline's: one pipeline
// input per segment of a segmented file, one per other file.
type segmentPlan struct {
	inputs []Input
	file   []int // pipeline input → index in state.Inputs
	seg    []int // pipeline input → index in that input's Segments, or -1
	// cursors is how many pipeline inputs are read at once: the most
	// segments any one file has.
	cursors int
	// notes say which files could not be split, and why.
	notes []string
}

// splitInputs decides, for a fresh load, each file's segments and records
// them in state.Inputs (whose Fingerprints are set). want is --segments.
func splitInputs(files []Input, state *checkpoint.State, so source.Options, partitions, want int) ([]string, error) {
	var notes []string
	for i, in := range files {
		if in.Stdin {
			if partitions > 1 && want != 1 {
				notes = append(notes, "standard input is read with one cursor: if it is sorted by partition key, partitions wait on each other (loader dry-run on a copy shows how much)")
			}
			continue
		}
		n := SegmentCount(state.Inputs[i].Size, partitions, want)
		if n <= 1 {
			continue
		}
		ranges, why, err := source.Split(in.Input, so, n)
		if err != nil {
			return nil, err
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
			start := checkpoint.Position{Offset: rg.Start.Offset, Line: rg.Start.Line}
			segs[k] = checkpoint.Segment{Start: start, End: rg.End, Committed: start}
		}
		state.Inputs[i].Segments = segs
	}
	return notes, nil
}

// planSegments builds the pipeline's inputs from the files and their
// checkpointed progress (state.Inputs, one per file).
func planSegments(files []Input, state *checkpoint.State) *segmentPlan {
	p := &segmentPlan{cursors: 1}
	for i, f := range files {
		ci := state.Inputs[i]
		if len(ci.Segments) == 0 {
			in := f
			in.Start = Committed{Offset: ci.Committed.Offset, Line: ci.Committed.Line, Records: ci.Records, Refused: ci.Refused}
			p.add(in, i, -1)
			continue
		}
		p.cursors = max(p.cursors, len(ci.Segments))
		for k, s := range ci.Segments {
			in := f
			in.Start = Committed{Offset: s.Committed.Offset, Line: s.Committed.Line, Records: s.Records, Refused: ci.Refused}
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
		pos := checkpoint.Position{Offset: c.Offset, Line: c.Line}
		records := p.inputs[k].Start.Records + c.Records
		ci.Refused = ci.Refused || c.Refused
		if p.seg[k] < 0 {
			ci.Committed, ci.Records, ci.Done = pos, records, complete
			continue
		}
		s := &ci.Segments[p.seg[k]]
		s.Committed, s.Records, s.Done = pos, records, complete
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

// segmentedSource sizes the NDJSON read blocks for the cursors: every
// queued record keeps its block alive, so 64 cursors with 1 MiB blocks
// pinned a few hundred MB (scenario F: 306 MB). About 4 MiB of blocks in
// all, at least 64 KiB each, keeps reading far ahead of writing.
func segmentedSource(so source.Options, cursors int) source.Options {
	if cursors > 1 && so.BlockSize == 0 {
		so.BlockSize = max(64<<10, (4<<20)/cursors)
	}
	return so
}
