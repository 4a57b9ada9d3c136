package loader

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/cosmosloader/loader/internal/epk"
	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/csv"
	"github.com/cosmosloader/loader/loader/source/formats"
	"github.com/cosmosloader/loader/loader/source/parquet/sizer"
	"github.com/cosmosloader/loader/pacing"
)

// Cosmos DB's caps: one logical partition holds at most 20 GB; one
// physical partition serves at most 10,000 RU/s.
const (
	logicalPartitionLimit  = 20 << 30
	physicalPartitionMaxRU = 10000
)

// DryRunJob configures a dry run: the same inputs, readers and mapper as an
// import, and the container's shape from the service or from flags.
type DryRunJob struct {
	Inputs []source.Input
	Stdin  io.Reader
	Source source.Options
	Mapper record.Config
	// TargetRU and Bounds describe the throughput the load would get.
	TargetRU float64
	Bounds   []string
	// CostPerRecord, when > 0, replaces the cost model.
	CostPerRecord float64
	// ReadAhead is the import's records queued per physical partition
	// (0 = its default): the order simulation uses the same depth.
	ReadAhead int
	// Segments is the import's --segments (0 = its default).
	Segments int
	Mode     Mode
	Now      func() time.Time

	// Batch is the import's --batch as a cap on operations (ParseBatch);
	// requests are counted as the import would send them.
	Batch int

	// Connect, when set, opens Target and takes the container's partition
	// key, indexing policy and partitions from it instead of Mapper's and
	// Bounds; TargetRU, when 0, becomes its throughput × RUShare (cmd
	// wires cosmos.Connect, as for an import).
	Connect Connector
	Target  TargetOptions
	RUShare float64
}

// connected is j with the container's shape read through j.Connect.
func (j *DryRunJob) connected(ctx context.Context) (*DryRunJob, error) {
	tgt, err := j.Connect(ctx, j.Target)
	if err != nil {
		return nil, err
	}
	c := *j
	c.Bounds = tgt.Bounds
	c.Mapper.PartitionKeyPaths = tgt.PartitionKeyPaths
	c.Mapper.Policy = tgt.Indexing
	if c.TargetRU <= 0 {
		if tgt.Throughput <= 0 {
			return nil, &UsageError{errors.New("the container's throughput could not be read: set --ru")}
		}
		share := c.RUShare
		if share <= 0 {
			share = 1
		}
		c.TargetRU = tgt.Throughput * share
	}
	return &c, nil
}

// Plan is what a dry run predicts.
type Plan struct {
	Inputs     []string  `json:"inputs"`
	Records    int64     `json:"records"`
	Bytes      int64     `json:"bytes"`
	BadRecords int64     `json:"bad_records"`
	BadSamples []BadLine `json:"bad_samples,omitempty"`
	// BadMore is how many bad records BadSamples leaves out; BadByReason
	// counts all of them; Hint says what likely fixes most of them.
	BadMore     int64         `json:"bad_more,omitempty"`
	BadByReason []ReasonCount `json:"bad_by_reason,omitempty"`
	Hint        string        `json:"hint,omitempty"`
	EstimatedRU float64       `json:"estimated_ru"`
	RUPerRecord Spread        `json:"ru_per_record"`
	Largest     []Item        `json:"largest_items"`

	TargetRUPerSec float64   `json:"target_ru_per_sec"`
	Partitions     int       `json:"partitions"`
	PartitionRU    []float64 `json:"partition_ru"`
	// TopKeys lists the heaviest partition keys, only when one is hot or
	// the keys are too few to spread evenly.
	TopKeys  []KeyLoad `json:"top_partition_keys,omitempty"`
	Warnings []string  `json:"warnings,omitempty"`
	// Notes are costs the estimate leaves out, such as replacing items
	// that already exist.
	Notes []string `json:"notes,omitempty"`

	// EstimatedSeconds is the paced duration in the input's order: the
	// import's reading replayed over the records' partitions (OrderSim).
	// BoundSeconds is what no order can beat: the busiest physical
	// partition's RU over its share of the target. PartitionBusy is each
	// partition's seconds of writing (its RU over its share of the
	// target), to set against EstimatedSeconds; LongestRun the most consecutive
	// records bound for one partition.
	EstimatedSeconds float64   `json:"estimated_seconds"`
	BoundSeconds     float64   `json:"bound_seconds"`
	PartitionBusy    []float64 `json:"partition_busy_seconds"`
	LongestRun       int64     `json:"longest_partition_run"`
	// OrderUtilisation is BoundSeconds ÷ EstimatedSeconds: what the
	// input's order leaves of the target.
	OrderUtilisation float64   `json:"order_utilisation"`
	FinishAt         time.Time `json:"finish_at"`
	AtOtherRates     []RateRow `json:"at_other_rates"`

	// Requests is how many requests the load takes unthrottled, batches
	// of records that share a partition key counting once.
	Requests          int64   `json:"requests"`
	RecordsPerRequest float64 `json:"records_per_request"`

	Naive NaiveFigures `json:"naive"`
	Paced PacedFigures `json:"paced"`
}

// BadLine names one bad record.
type BadLine struct {
	Source string `json:"source"`
	Line   int64  `json:"line"`
	Reason string `json:"reason"`
	Error  string `json:"error"`
}

// Item is one of the largest documents.
type Item struct {
	ID     string  `json:"id"`
	Source string  `json:"source"`
	Line   int64   `json:"line"`
	Bytes  int     `json:"bytes"`
	RU     float64 `json:"ru"`
}

// KeyLoad is one logical partition's share of the load.
type KeyLoad struct {
	// Key is the partition key as JSON text (for people); Value the same
	// key as a plain JSON value (for machines).
	Key       string          `json:"-"`
	Value     json.RawMessage `json:"key"`
	Records   int64           `json:"records"`
	RU        float64         `json:"ru"`
	Bytes     int64           `json:"bytes"`
	Share     float64         `json:"share"` // of all RU
	Partition int             `json:"partition"`
	// Approximate marks counts from the bounded heavy-hitter sketch, which
	// may overestimate a key by at most the smallest tracked count.
	Approximate bool `json:"approximate,omitempty"`
}

// RateRow is the duration at another throughput.
type RateRow struct {
	RUPerSec float64 `json:"ru_per_sec"`
	Seconds  float64 `json:"seconds"`
}

// DryRun reads and costs every record without writing anything.
func DryRun(ctx context.Context, j *DryRunJob) (*Plan, error) {
	if j.Connect != nil {
		c, err := j.connected(ctx)
		if err != nil {
			return nil, err
		}
		j = c
	}
	if j.Now == nil {
		j.Now = time.Now
	}
	// Dry-run reads only a body's length: it may be the input itself.
	mcfg := j.Mapper
	mcfg.BorrowBody = true
	m, err := record.NewMapper(mcfg)
	if err != nil {
		return nil, &UsageError{err}
	}
	jc := *j
	j = &jc
	j.Source.KeyColumns = m.KeyFields() // --columns keeps them
	// Of the other members only their length and terms count; Parquet
	// rows are summed by columns (unless Source.NoSizer).
	j.Source.SizeOnly = func(field string) bool { return !m.ReadsValue(field) }
	j.Source.Facts = m
	bounds := j.Bounds
	if len(bounds) < 2 {
		bounds = epk.SplitEven(1)
	}
	parts := len(bounds) - 1
	cost := pacing.NewCostModel(pacing.CostOptions{FixedCost: j.CostPerRecord})
	p := &Plan{TargetRUPerSec: j.TargetRU, Partitions: parts, PartitionRU: make([]float64, parts)}
	hist := NewHistogram()
	charges := &runs{hist: hist} // most records cost what the one before did
	largest := &itemHeap{}
	keys := newHeavyHitters(1024)
	model := pacing.NewModel(j.TargetRU, parts)
	var bad reasonTally
	// Sequences past 256 Ki runs (3 MB) are coarsened; see pacing.Sequence.
	// seq follows the import's segments; alt, more of them, for advice.
	// At 4 Mi runs each, a shuffled 1 GB file over 4 partitions took
	// dry-run to 256 MB of RSS (the heap is twice what is live) and gave
	// the same plan. At 512 Ki runs each, 1 GB of the bench's orders took
	// 147–154 MB, against 125 at 256 Ki, with the same plan; a 1 GB
	// key-sorted DuckDB export's estimate moved by 1 s in 42 minutes.
	seq, alt := pacing.NewSequence(1, 256<<10), pacing.NewSequence(1, 256<<10)
	var cursors, altCursors, seqBase, altBase, altSegments int
	var counts, altCounts []int // each file's segments
	// adaptive: the import would split segments while loading (see
	// segmenter); only when every input can be split.
	adaptive := j.Segments == 0 && parts > 1
	planQueue := j.ReadAhead
	if planQueue <= 0 {
		planQueue = DefaultReadAhead(parts)
	}
	var written int64
	planner := newRequestPlanner(parts, j.Batch, planQueue, func(part, records int, ru float64) {
		p.Requests++
		written += int64(records)
		model.Add(part, ru)
	})
	// The per-record work that depends on the record alone runs on the
	// mapping workers; the cost model is never updated in a dry-run.
	charge := cost.Estimator()
	prep := prep{
		key: func(pk []any, keys *keyCache, out *prepared) {
			out.epk, out.key = keys.of(pk, true)
			out.part = epk.Locate(bounds, out.epk)
		},
		doc: func(size, terms int, out *prepared) { out.ru = charge(size, terms) },
	}
	upcoming := &readyQueue{j: j, parts: parts, ahead: map[int]*readied{}}
	defer upcoming.close()
	for i, in := range j.Inputs {
		p.Inputs = append(p.Inputs, in.Path)
		input := Input{Input: in, IDSeed: "dry-run"}
		r := upcoming.take(i)
		ranges, altRanges, rd, err := r.ranges, r.alt, r.rd, r.err
		p.Warnings = append(p.Warnings, r.warnings...)
		if err != nil {
			if rd != nil {
				rd.Close()
			}
			return nil, err
		}
		if ok, _ := formats.Splittable(in, j.Source); !ok {
			adaptive = false
		}
		cursors, altCursors = max(cursors, len(ranges)), max(altCursors, len(altRanges))
		altSegments = max(altSegments, len(altRanges))
		var seg, altSeg int
		var last int64
		// account adds a document of size bytes, in segment seg (altSeg of
		// the advice's), to the plan.
		account := func(d *prepared, pk []any, size int) {
			ru, part := d.ru, d.part
			charges.add(ru)
			p.EstimatedRU += ru
			p.PartitionRU[part] += ru
			planner.add(part, d.key, size, ru)
			seq.Add(seqBase+seg, part, ru)
			alt.Add(altBase+altSeg, part, ru)
			keys.add(d.key, pk, part, ru, int64(size))
		}
		consume := func(s *scanned) bool {
			// What is kept below is copied (ids, keys, dead letters): the
			// reader may reuse the record's JSON.
			defer s.rec.ReleaseData()
			if ctx.Err() != nil {
				return false
			}
			p.Records++
			p.Bytes += s.rec.Next.Offset - last
			last = s.rec.Next.Offset
			if s.dead != nil {
				p.BadRecords++
				bad.add(s.dead)
				if len(p.BadSamples) < 10 {
					p.BadSamples = append(p.BadSamples, BadLine{Source: s.dead.Source, Line: s.dead.Line, Reason: s.dead.Reason, Error: s.dead.Error})
				} else {
					p.BadMore++
				}
				return true
			}
			seg = segmentOf(ranges, seg, s.rec.At())
			altSeg = segmentOf(altRanges, altSeg, s.rec.At())
			account(&s.prepared, s.doc.PK, len(s.doc.Body))
			if largest.takes(len(s.doc.Body), 5) {
				largest.offer(Item{ID: s.doc.ID, Source: s.rec.Path, Line: s.rec.Line, Bytes: len(s.doc.Body), RU: s.ru}, 5)
			}
			return true
		}
		// consumeFacts takes a batch of summed rows (see scanFacts): as
		// consume takes records, but for the positions, worked out where
		// a segment ends rather than for every row.
		consumeFacts := func(fr *factRows) bool {
			if ctx.Err() != nil {
				return false
			}
			f := fr.f
			segEnd, altEnd := 0, 0 // the rows where seg and altSeg may change
			for i := range fr.rows {
				row := &fr.rows[i]
				if row.slow > 0 {
					if !consume(&fr.slow[row.slow-1]) {
						return false
					}
					continue
				}
				p.Records++
				if i >= segEnd {
					seg = segmentOf(ranges, seg, f.Offset(i))
					segEnd = nextSegment(f, i, ranges, seg)
				}
				if i >= altEnd {
					altSeg = segmentOf(altRanges, altSeg, f.Offset(i))
					altEnd = nextSegment(f, i, altRanges, altSeg)
				}
				account(&row.prepared, row.pk, int(row.size))
				if largest.takes(int(row.size), 5) {
					largest.offer(Item{ID: fr.id(i), Source: f.Path, Line: f.Line(i), Bytes: int(row.size), RU: row.ru}, 5)
				}
			}
			end := f.Offset(f.Len())
			p.Bytes += end - last
			last = end
			return true
		}
		switch {
		case rd != nil:
			err = scanReader(scanWorkers(), input, rd, j.Source, m, prep, consume, consumeFacts)
		case r.openErr != nil:
			err = r.openErr
		default:
			err = scanInput(scanWorkers(), input, j.Stdin, j.Source, m, prep, consume, consumeFacts)
		}
		var ie *source.InputError
		if errors.As(err, &ie) { // a refused input is a bad record, as in an import
			p.BadRecords++
			if len(p.BadSamples) < 10 {
				p.BadSamples = append(p.BadSamples, BadLine{Source: input.Path, Line: ie.Line, Reason: ie.Reason(), Error: ie.Error()})
			}
			err = nil
		}
		if err != nil {
			return nil, err
		}
		seqBase += len(ranges)
		altBase += len(altRanges)
		counts, altCounts = append(counts, len(ranges)), append(altCounts, len(altRanges))
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	charges.flush()
	// The import reads several files at once, as it would.
	files := make([]Input, len(j.Inputs))
	for i, in := range j.Inputs {
		files[i] = Input{Input: in}
	}
	cursors = readCursors(files, seqBase, cursors, j.Source, parts, j.Segments)
	altCursors = readCursors(files, altBase, altCursors, j.Source, parts, j.Segments)
	planner.flush()
	if p.Requests > 0 {
		p.RecordsPerRequest = round2(float64(written) / float64(p.Requests))
	}
	if n := hist.Count(); n > 0 {
		p.RUPerRecord = Spread{Mean: round2(p.EstimatedRU / float64(n)), P50: round2(hist.Quantile(0.5)), P95: round2(hist.Quantile(0.95)), Max: round2(hist.Max())}
	}
	p.EstimatedRU = round2(p.EstimatedRU)
	p.BadByReason = bad.counts()
	p.Hint = bad.hint(p.Records, m.PartitionKeyPaths(), m.IDField())
	p.Largest = largest.sorted()
	p.TopKeys = keys.top(10, p.EstimatedRU)
	seq.Close()
	// The import's buckets spend pacing.LoadAim of the target, and so
	// does the model of it.
	paced := j.TargetRU * pacing.LoadAim
	bound := pacedSeconds(p.PartitionRU, paced)
	readAhead := j.ReadAhead
	if readAhead <= 0 {
		readAhead = DefaultReadAhead(parts)
	}
	// With batches each partition's dispatcher holds a window of records
	// taken from its queue; together they are the read-ahead (at least a
	// batch more when the read-ahead is small).
	q, w := batchSplit(readAhead, j.Batch)
	queue := q + w
	orderCfg := pacing.OrderConfig{Partitions: parts, BudgetPerPartition: paced / float64(parts), Queue: queue, Cursors: cursors,
		Order: interleave(counts)}
	if adaptive && p.Records > 0 && p.Bytes > 0 {
		orderCfg.Split = pacing.NewSplitPolicy(maxCursors(parts))
		orderCfg.MinSplit = minSplitBytes * p.Records / p.Bytes
	}
	sim := pacing.SimulateOrder(seq, orderCfg)
	// The simulation steps in 10 ms; never report less than the bound.
	estimate := max(sim.Seconds, bound)
	p.BoundSeconds, p.EstimatedSeconds = round2(bound), round2(estimate)
	p.LongestRun = seq.LongestRun
	for _, b := range sim.Busy {
		p.PartitionBusy = append(p.PartitionBusy, round2(b))
	}
	if estimate > 0 {
		p.OrderUtilisation = round2(bound / estimate)
	}
	if bound > 0 && estimate > bound*1.05 {
		advice := fmt.Sprintf("a shuffled copy would take %s", fmtSeconds(bound))
		if altSegments > cursors {
			altCfg := orderCfg
			altCfg.Cursors, altCfg.Split, altCfg.Order = altCursors, nil, interleave(altCounts)
			if a := max(pacing.SimulateOrder(alt, altCfg).Seconds, bound); a < estimate*0.95 {
				advice = fmt.Sprintf("--segments %d would take %s", altSegments, fmtSeconds(a))
			}
		}
		p.Warnings = append(p.Warnings, fmt.Sprintf("input order limits this load to %.0f%% of the target: runs of up to %s records bound for one partition park the readers while other partitions wait; %s",
			100*bound/estimate, count(seq.LongestRun), advice))
	}
	p.FinishAt = j.Now().Add(time.Duration(p.EstimatedSeconds * float64(time.Second))).Round(time.Second)
	for _, f := range []float64{0.25, 0.5, 2, 4, 10} {
		ru := math.Round(j.TargetRU * f)
		if ru >= 400 {
			// Every budget and drain scales with the rate, the queue
			// depths do not matter to the ratio: time scales as 1/f.
			p.AtOtherRates = append(p.AtOtherRates, RateRow{RUPerSec: ru, Seconds: round2(estimate * j.TargetRU / ru)})
		}
	}
	share := j.TargetRU / float64(parts)
	before := len(p.Warnings) // the warnings below name a key
	for _, k := range p.TopKeys {
		if k.Approximate {
			continue // an upper bound only: no warning on a guess
		}
		// No physical partition serves more than 10,000 RU/s, whatever the
		// container's total: a key above that cannot be loaded at target.
		if keyRU := k.Share * j.TargetRU; keyRU > physicalPartitionMaxRU && k.Share*p.EstimatedSeconds > 0 {
			p.Warnings = append(p.Warnings, fmt.Sprintf("partition key %s needs %.0f RU/s at this target, more than one physical partition serves (10,000 RU/s)", k.Key, keyRU))
		}
		// A logical partition cannot be spread over physical ones: if one
		// key needs more than its partition's share for longer than the
		// rest of the load takes, it sets the pace of the whole load.
		if k.RU/share > p.EstimatedRU/j.TargetRU*1.05 && k.Share > 1/float64(parts) {
			p.Warnings = append(p.Warnings, fmt.Sprintf("partition key %s holds %.0f%% of the load's RU; its physical partition (%.0f RU/s) needs %.0f s for it alone: that partition key sets the pace",
				k.Key, k.Share*100, share, k.RU/share))
		}
		if k.Bytes > logicalPartitionLimit {
			p.Warnings = append(p.Warnings, fmt.Sprintf("partition key %s would hold %.1f GB: over Cosmos DB's 20 GB logical partition limit", k.Key, float64(k.Bytes)/(1<<30)))
		}
	}
	if !keysWorthShowing(p.TopKeys, keys, parts, len(p.Warnings) > before) {
		p.TopKeys = nil
	}
	for i := range p.PartitionRU {
		p.PartitionRU[i] = round2(p.PartitionRU[i])
	}
	p.Notes = append(p.Notes, source.PartitionFoldersNotes(j.Inputs, j.Source)...)
	if j.Mode != ModeCreate && p.EstimatedRU > 0 {
		// Upserting an id the container already holds is a replace: about
		// twice a create (COSMOS_FACTS.md). A dry run cannot know which
		// ids exist, so it gives the bound.
		p.Notes = append(p.Notes, fmt.Sprintf("upsert replaces items that already exist at about twice the RU: if the container already holds these ids (a repeated load), expect up to %s RU and %s",
			count(int64(math.Round(2*p.EstimatedRU))), fmtSeconds(2*p.EstimatedSeconds)))
	}
	p.Naive, p.Paced = figures(model)
	p.Paced.Seconds = p.EstimatedSeconds
	return p, nil
}

// keysWorthShowing reports whether the partition-key section says anything:
// a key is hot (twice its fair share of RU, or named in a warning), or the
// load has so few keys that hashing cannot spread them evenly. A table of
// unique ids, each holding one record, says nothing.
func keysWorthShowing(top []KeyLoad, keys *heavyHitters, partitions int, warned bool) bool {
	if len(top) == 0 || top[0].Records < 2 {
		return false
	}
	if warned {
		return true
	}
	if top[0].Approximate {
		// More distinct keys than tracked: only a key far above the
		// sketch's error bound is hot.
		return top[0].Share >= 0.05
	}
	distinct := keys.distinct()
	return distinct <= 4*partitions || top[0].Share >= 2/float64(distinct)
}

// A dry-run reads its inputs one after another: its model takes their
// records in order. A small blob far away costs more in round trips (its
// head, its first ranged read, its cuts) than in reading, so the next
// readyInputs blobs of at most readySize are opened and cut while the
// inputs before them are read: a prefix of thousands of small blobs is
// not a round trip or two each, one after another. What waits is at most
// readyInputs × readySize.
const (
	readyInputs = 8
	readySize   = 4 << 20
)

func smallBlob(in source.Input) bool {
	return in.Remote != nil && in.Remote.Identity().Size <= readySize
}

// readied is an input cut (dryRunSegments) and, when readied ahead of its
// turn, opened.
type readied struct {
	done        chan struct{}
	ranges, alt []source.Range
	warnings    []string
	err         error         // cutting it: ends the dry-run
	rd          source.Reader // nil: not opened ahead, or opening it failed
	openErr     error         // opening it: as scanInput's
}

// readyQueue readies the small blobs after the input being read.
type readyQueue struct {
	j     *DryRunJob
	parts int
	ahead map[int]*readied
}

// take readies the small blobs among the readyInputs inputs after input i
// and returns input i: readied ahead, or cut now (to be opened by the
// scan).
func (q *readyQueue) take(i int) *readied {
	ins := q.j.Inputs
	for k := i + 1; k < len(ins) && k <= i+readyInputs; k++ {
		if q.ahead[k] == nil && smallBlob(ins[k]) {
			r := &readied{done: make(chan struct{})}
			q.ahead[k] = r
			go func(in source.Input) {
				defer close(r.done)
				r.ranges, r.alt, r.err = dryRunSegments(in, q.j, q.parts, &r.warnings)
				if r.err == nil {
					r.rd, r.openErr = formats.Open(in, nil, q.j.Source, source.Position{})
				}
			}(ins[k])
		}
	}
	if r := q.ahead[i]; r != nil {
		delete(q.ahead, i)
		<-r.done
		return r
	}
	r := &readied{}
	r.ranges, r.alt, r.err = dryRunSegments(ins[i], q.j, q.parts, &r.warnings)
	return r
}

// close drops the inputs readied but not read (the dry-run ended first).
func (q *readyQueue) close() {
	for _, r := range q.ahead {
		<-r.done
		if r.rd != nil {
			r.rd.Close()
		}
	}
}

// dryRunSegments splits in as the import would (--segments, or the
// default for its size) and, for advice, into four times as many; a file
// that cannot be split is one range, with a warning when it matters.
func dryRunSegments(in source.Input, j *DryRunJob, parts int, warnings *[]string) (ranges, alt []source.Range, err error) {
	if hint := csv.DelimiterHint(in, j.Source); hint != "" {
		*warnings = append(*warnings, hint)
	}
	whole := []source.Range{{}}
	if in.Stdin || parts <= 1 {
		return whole, whole, nil
	}
	size, err := source.RawSize(in)
	if err != nil {
		return nil, nil, err
	}
	n := SegmentCount(size, parts, j.Segments)
	altN := min(maxSegments, max(4*n, 4*parts))
	alt, why, err := formats.Split(in, j.Source, altN)
	if err != nil {
		return nil, nil, err
	}
	if why != "" {
		if n > 1 {
			*warnings = append(*warnings, fmt.Sprintf("%s is read with one cursor because %s", in.Path, why))
		}
		return whole, whole, nil
	}
	if n <= 1 {
		return whole, alt, nil
	}
	ranges, _, err = formats.Split(in, j.Source, n)
	return ranges, alt, err
}

// runs adds charges to a histogram a run of equal ones at a time.
type runs struct {
	hist *Histogram
	v    float64
	n    int64
}

func (r *runs) add(v float64) {
	if v != r.v || r.n == 0 {
		r.flush()
		r.v = v
	}
	r.n++
}

func (r *runs) flush() {
	if r.n > 0 {
		r.hist.AddN(r.v, r.n)
		r.n = 0
	}
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

// pacedSeconds is how long a paced load takes when each physical partition
// gets target/partitions RU/s: the slowest partition decides.
func pacedSeconds(partitionRU []float64, target float64) float64 {
	if target <= 0 {
		return 0
	}
	share := target / float64(len(partitionRU))
	var worst float64
	for _, ru := range partitionRU {
		worst = max(worst, ru/share)
	}
	return worst
}

// pkString is the partition key as JSON text, as encoding/json writes it.
func pkString(pk []any) string {
	if len(pk) == 1 {
		// Most keys are plain strings, which need no escaping: quoting them
		// here is one allocation, where Marshal took ~4 % of dry-run's CPU.
		if s, ok := pk[0].(string); ok && plainJSONString(s) {
			return `"` + s + `"`
		}
		b, _ := json.Marshal(pk[0])
		return string(b)
	}
	b, _ := json.Marshal(pk)
	return string(b)
}

// plainJSONString reports whether encoding/json writes s as it is, between
// quotes: printable ASCII without the characters it escapes.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// WriteText prints the plan for a person.
func (p *Plan) WriteText(w io.Writer) {
	var b strings.Builder
	fmt.Fprintf(&b, "Dry run: nothing was written.\n\n")
	fmt.Fprintf(&b, "  records            %s (%s)\n", count(p.Records), byteSize(float64(p.Bytes)))
	fmt.Fprintf(&b, "  bad records        %s\n", count(p.BadRecords))
	for _, r := range p.BadByReason {
		fmt.Fprintf(&b, "    %-22s %8s  first %s: %s\n", r.Reason, count(r.Count), r.First, r.Example)
	}
	if len(p.BadSamples) > 0 {
		b.WriteString("    first bad records\n")
	}
	for _, s := range p.BadSamples {
		fmt.Fprintf(&b, "      %s  %s\n", where(s.Source, s.Line), s.Error)
	}
	if p.BadMore > 0 {
		fmt.Fprintf(&b, "      … and %s more\n", count(p.BadMore))
	}
	if p.Hint != "" {
		fmt.Fprintf(&b, "  hint: %s\n", p.Hint)
	}
	fmt.Fprintf(&b, "  estimated RU       %.0f\n", p.EstimatedRU)
	fmt.Fprintf(&b, "  RU per record      p50 %.2f  p95 %.2f  max %.2f\n", p.RUPerRecord.P50, p.RUPerRecord.P95, p.RUPerRecord.Max)
	if p.Requests > 0 {
		fmt.Fprintf(&b, "  requests           %s (%.2f records per request)\n", count(p.Requests), p.RecordsPerRequest)
	}
	if len(p.Largest) > 0 {
		b.WriteString("  largest items\n")
		for _, it := range p.Largest {
			fmt.Fprintf(&b, "    %-36s %8s  %7.2f RU  %s:%d\n", trimTo(it.ID, 36), byteSize(float64(it.Bytes)), it.RU, it.Source, it.Line)
		}
	}
	fmt.Fprintf(&b, "\n  target             %.0f RU/s over %d physical partition(s)\n", p.TargetRUPerSec, p.Partitions)
	if p.Partitions > 1 && p.EstimatedSeconds > 0 {
		b.WriteString("  partition busy    ")
		for i, s := range p.PartitionBusy {
			fmt.Fprintf(&b, "  %d: %s (%.0f%%)", i, fmtSeconds(s), 100*s/p.EstimatedSeconds)
		}
		b.WriteString("\n")
	}
	if len(p.TopKeys) > 0 {
		b.WriteString("  top partition keys (share of RU)\n")
		for _, k := range p.TopKeys[:min(5, len(p.TopKeys))] {
			approx := " "
			if k.Approximate {
				approx = "≤"
			}
			fmt.Fprintf(&b, "    %-36s %s%5.1f%%  %s records  partition %d\n", trimTo(k.Key, 36), approx, k.Share*100, count(k.Records), k.Partition)
		}
		if p.TopKeys[0].Approximate {
			b.WriteString("    (≤: more distinct keys than tracked; shares are upper bounds)\n")
		}
	}
	for _, warn := range p.Warnings {
		fmt.Fprintf(&b, "  WARNING: %s\n", warn)
	}
	for _, note := range p.Notes {
		fmt.Fprintf(&b, "  note: %s\n", note)
	}
	fmt.Fprintf(&b, "\n  estimated duration %s at %.0f RU/s (finishes about %s)\n",
		fmtSeconds(p.EstimatedSeconds), p.TargetRUPerSec, p.FinishAt.Format("15:04:05 MST"))
	if len(p.AtOtherRates) > 0 {
		b.WriteString("  at other rates   ")
		for _, r := range p.AtOtherRates {
			fmt.Fprintf(&b, "  %.0f RU/s: %s", r.RUPerSec, fmtSeconds(r.Seconds))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n  Naive vs paced      requests   throttled  passes   duration\n")
	fmt.Fprintf(&b, "    naive          %10d  %10d  %6d   %s\n", p.Naive.Requests, p.Naive.Throttled, p.Naive.Passes, fmtSeconds(p.Naive.Seconds))
	fmt.Fprintf(&b, "    paced          %10d  %10d  %6s   %s\n", p.Paced.Requests, p.Paced.Throttled, "-", fmtSeconds(p.Paced.Seconds))
	io.WriteString(w, b.String())
}

func trimTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// itemHeap keeps the largest items (a min-heap by size).
type itemHeap []Item

func (h itemHeap) Len() int           { return len(h) }
func (h itemHeap) Less(i, j int) bool { return h[i].Bytes < h[j].Bytes }
func (h itemHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *itemHeap) Push(x any)        { *h = append(*h, x.(Item)) }
func (h *itemHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// takes reports whether an item of size bytes joins the keep largest.
func (h itemHeap) takes(size, keep int) bool {
	return len(h) < keep || size > h[0].Bytes
}

func (h *itemHeap) offer(it Item, keep int) {
	if h.Len() < keep {
		heap.Push(h, it)
	} else if it.Bytes > (*h)[0].Bytes {
		(*h)[0] = it
		heap.Fix(h, 0)
	}
}

func (h *itemHeap) sorted() []Item {
	out := append([]Item(nil), *h...)
	sort.Slice(out, func(i, j int) bool { return out[i].Bytes > out[j].Bytes })
	return out
}
