package dryrun

import (
	"context"
	"errors"

	"github.com/cosmosloader/loader/internal/epk"
	"github.com/cosmosloader/loader/loader"
	"github.com/cosmosloader/loader/loader/readplan"
	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/report"
	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/formats"
	"github.com/cosmosloader/loader/loader/source/parquet/sizer"
	"github.com/cosmosloader/loader/pacing"
)

// reading is what a dry run takes from the records as it reads them: the
// figures of its report, and what the model replays.
type reading struct {
	j     *Job
	m     *record.Mapper
	p     *report.DryRun
	parts int
	prep  loader.Prep

	hist    *loader.Histogram
	charges *runs // most records cost what the one before did
	largest *itemHeap
	keys    *heavyHitters
	bad     report.Reasons
	// planner groups the records into requests as the import would send
	// them; written counts the records it sent, naive the requests by
	// partition, for the naive-versus-paced model.
	planner *loader.RequestPlanner
	written int64
	naive   *pacing.Model
	// existing samples the first ids, to read back from the container.
	existing existing

	// seq is the records' partitions, per piece of the import's read plan
	// (numbered file by file, from base); alt the same per piece of the
	// advice's plan (readplan.Config.AdviceSegmentsOf). counts and
	// altCounts are each file's pieces, altSegments the most of the
	// advice's in one file.
	seq, alt          *readplan.Sequence
	base, altBase     int
	counts, altCounts []int
	altSegments       int
	// splittable: every input can be split while loading, as the import's
	// segmenter would.
	splittable bool
}

// sequenceRuns bounds a sequence's runs (12 bytes each): past it the
// sequence is coarsened (see readplan.Sequence). More runs cost a
// shuffled input far more memory and gave the same plan.
const sequenceRuns = 256 << 10

func newReading(j *Job, m *record.Mapper) *reading {
	parts := len(j.Bounds) - 1
	r := &reading{
		j: j, m: m, parts: parts,
		p:       &report.DryRun{TargetRUPerSec: j.TargetRU, Partitions: parts, PartitionRU: make([]float64, parts)},
		hist:    loader.NewHistogram(),
		largest: &itemHeap{},
		keys:    newHeavyHitters(1024),
		// The naive client sends one request a record.
		naive: pacing.NewModelOf(pacing.ModelConfig{TargetRU: j.TargetRU, Partitions: parts, Naive: naiveClient()}),
		seq:   readplan.NewSequence(1, sequenceRuns),
		alt:   readplan.NewSequence(1, sequenceRuns),
		// Cut while loading only where nothing fixed the pieces (as the
		// import's segmenter).
		splittable: j.Segments == 0 && parts > 1,
	}
	r.charges = &runs{hist: r.hist}
	if j.reshaped != "" {
		r.p.Notes = append(r.p.Notes, j.reshaped)
	}
	ahead := j.ReadAhead
	if ahead <= 0 {
		ahead = readplan.DefaultReadAhead(parts)
	}
	r.planner = loader.NewRequestPlanner(parts, j.Batch, j.TargetRU, ahead, func(part, records int, ru float64) {
		r.p.Requests++
		r.written += int64(records)
		r.naive.AddN(part, int64(records), ru/float64(max(records, 1)))
	})
	// The per-record work that depends on the record alone runs on the
	// mapping workers; the cost model is never updated in a dry-run.
	charge := pacing.NewCostModel(pacing.CostOptions{FixedCost: j.CostPerRecord}).Estimator()
	bounds := j.Bounds
	r.prep = loader.Prep{
		Key: func(pk []any, keys *loader.KeyCache, out *loader.Prepared) {
			out.EPK, out.Key = keys.Of(pk, true)
			out.Part = epk.Locate(bounds, out.EPK)
		},
		Doc: func(size, terms int, out *loader.Prepared) { out.RU = charge(size, terms) },
	}
	return r
}

// readAll reads every input in turn, the small blobs after the one being
// read opened and cut ahead (readyQueue).
func (r *reading) readAll(ctx context.Context) error {
	upcoming := &readyQueue{j: r.j, parts: r.parts, ahead: map[int]*readied{}}
	defer upcoming.close()
	for i, in := range r.j.Inputs {
		r.p.Inputs = append(r.p.Inputs, in.Path)
		if err := r.readInput(ctx, in, upcoming.take(i)); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r.charges.flush()
	return nil
}

// readInput reads one input, cut (and perhaps opened) as rd says.
func (r *reading) readInput(ctx context.Context, in source.Input, rd *readied) error {
	r.p.Warnings = append(r.p.Warnings, rd.warnings...)
	if rd.err != nil {
		if rd.rd != nil {
			rd.rd.Close()
		}
		return rd.err
	}
	if ok, _ := formats.Splittable(in, r.j.Source); !ok {
		r.splittable = false
	}
	r.altSegments = max(r.altSegments, len(rd.alt))
	s := &inputScan{reading: r, ctx: ctx, ranges: rd.ranges, altRanges: rd.alt}
	input := loader.Input{Input: in, IDSeed: "dry-run"}
	var err error
	switch {
	case rd.rd != nil:
		err = loader.ScanReader(loader.ScanWorkers(), input, rd.rd, r.j.Source, r.m, r.prep, s.record, s.rows)
	case rd.openErr != nil:
		err = rd.openErr
	default:
		err = loader.ScanInput(loader.ScanWorkers(), input, r.j.Stdin, r.j.Source, r.m, r.prep, s.record, s.rows)
	}
	var ie *source.InputError
	if errors.As(err, &ie) { // a refused input is a bad record, as in an import
		r.p.BadRecords++
		if len(r.p.BadSamples) < maxBadSamples {
			r.p.BadSamples = append(r.p.BadSamples, report.BadLine{Source: input.Path, Line: ie.Line, Reason: ie.Reason(), Error: ie.Error()})
		}
		err = nil
	}
	if err != nil {
		return err
	}
	r.base += len(rd.ranges)
	r.altBase += len(rd.alt)
	r.counts, r.altCounts = append(r.counts, len(rd.ranges)), append(r.altCounts, len(rd.alt))
	return nil
}

// maxBadSamples is how many bad records a dry run names; maxLargest how
// many of the largest documents.
const (
	maxBadSamples = 10
	maxLargest    = 5
)

// inputScan takes one input's records from the scan.
type inputScan struct {
	*reading
	ctx context.Context
	// ranges are the input's pieces in the import's plan, altRanges in
	// the advice's; seg and altSeg the pieces the last record was in.
	ranges, altRanges []source.Range
	seg, altSeg       int
	// last is where the last record read ended.
	last int64
}

// account adds a document of size bytes, in piece seg (altSeg of the
// advice's), to the dry run.
func (s *inputScan) account(d *loader.Prepared, pk []any, size int) {
	ru, part := d.RU, d.Part
	s.charges.add(ru)
	s.p.EstimatedRU += ru
	s.p.PartitionRU[part] += ru
	s.planner.Add(part, d.Key, size, ru)
	s.seq.Add(s.base+s.seg, part, ru)
	s.alt.Add(s.altBase+s.altSeg, part, ru)
	s.keys.add(d.Key, pk, part, ru, int64(size))
}

// record takes one record, a document or a bad one.
func (s *inputScan) record(sc *loader.Scanned) bool {
	// What is kept below is copied (ids, keys, dead letters): the reader
	// may reuse the record's JSON.
	defer sc.Rec.ReleaseData()
	if s.ctx.Err() != nil {
		return false
	}
	p := s.p
	p.Records++
	p.Bytes += sc.Rec.Next.Offset - s.last
	s.last = sc.Rec.Next.Offset
	if d := sc.Dead; d != nil {
		p.BadRecords++
		s.bad.Add(d.Reason, d.Source, d.Line, d.Error, d.Raw)
		if len(p.BadSamples) < maxBadSamples {
			p.BadSamples = append(p.BadSamples, report.BadLine{Source: d.Source, Line: d.Line, Reason: d.Reason, Error: d.Error})
		} else {
			p.BadMore++
		}
		return true
	}
	s.seg = segmentOf(s.ranges, s.seg, sc.Rec.At())
	s.altSeg = segmentOf(s.altRanges, s.altSeg, sc.Rec.At())
	s.account(&sc.Prepared, sc.Doc.PK, len(sc.Doc.Body))
	s.existing.keep(sc.Doc.ID, sc.Doc.PK)
	if s.largest.takes(len(sc.Doc.Body), maxLargest) {
		s.largest.offer(report.Item{ID: sc.Doc.ID, Source: sc.Rec.Path, Line: sc.Rec.Line, Bytes: len(sc.Doc.Body), RU: sc.RU}, maxLargest)
	}
	return true
}

// rows takes a batch of rows summed by columns (see loader.FactRows): as
// record takes records, but for the positions, worked out where a piece
// ends rather than for every row.
func (s *inputScan) rows(fr *loader.FactRows) bool {
	if s.ctx.Err() != nil {
		return false
	}
	f := fr.F
	segEnd, altEnd := 0, 0 // the rows where seg and altSeg may change
	for i := range fr.Rows {
		row := &fr.Rows[i]
		if row.Slow > 0 {
			if !s.record(&fr.Slow[row.Slow-1]) {
				return false
			}
			continue
		}
		s.p.Records++
		if i >= segEnd {
			s.seg = segmentOf(s.ranges, s.seg, f.Offset(i))
			segEnd = nextSegment(f, i, s.ranges, s.seg)
		}
		if i >= altEnd {
			s.altSeg = segmentOf(s.altRanges, s.altSeg, f.Offset(i))
			altEnd = nextSegment(f, i, s.altRanges, s.altSeg)
		}
		s.account(&row.Prepared, row.PK, int(row.Size))
		if len(s.existing.ids) < existingSample {
			s.existing.keep(fr.ID(i), row.PK)
		}
		if s.largest.takes(int(row.Size), maxLargest) {
			s.largest.offer(report.Item{ID: fr.ID(i), Source: f.Path, Line: f.Line(i), Bytes: int(row.Size), RU: row.RU}, maxLargest)
		}
	}
	end := f.Offset(f.Len())
	s.p.Bytes += end - s.last
	s.last = end
	return true
}

// nextSegment is the first of f's rows from i on that starts past range
// seg of ranges: where the row's segment changes next (f.Len() if not in
// f).
func nextSegment(f *sizer.Facts, i int, ranges []source.Range, seg int) int {
	if seg+1 >= len(ranges) {
		return f.Len()
	}
	return f.FirstAt(i, ranges[seg+1].Start.Offset)
}

// segmentOf returns the index of the range holding offset, searching on
// from the previous record's (offsets only grow within a file).
func segmentOf(ranges []source.Range, from int, offset int64) int {
	for from < len(ranges)-1 && offset >= ranges[from+1].Start.Offset {
		from++
	}
	return from
}

// summarise turns what was read into the dry run's figures: RU per record,
// records per request, bad records by reason, the largest items and the
// heaviest keys.
func (r *reading) summarise() {
	p := r.p
	r.planner.Flush()
	if p.Requests > 0 {
		p.RecordsPerRequest = report.Round2(float64(r.written) / float64(p.Requests))
	}
	if n := r.hist.Count(); n > 0 {
		h := r.hist
		p.RUPerRecord = report.Spread{Mean: report.Round2(p.EstimatedRU / float64(n)), P50: report.Round2(h.Quantile(0.5)),
			P95: report.Round2(h.Quantile(0.95)), Max: report.Round2(h.Max())}
	}
	p.EstimatedRU = report.Round2(p.EstimatedRU)
	p.BadByReason = r.bad.Counts()
	p.Hint = r.bad.Hint(p.Records, r.m.PartitionKeyPaths(), r.m.IDField())
	p.Largest = r.largest.sorted()
	p.TopKeys = r.keys.top(10, p.EstimatedRU)
	r.seq.Close()
}
