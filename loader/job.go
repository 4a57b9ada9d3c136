package loader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/clock"
	"github.com/cosmosloader/loader/internal/human"
	"github.com/cosmosloader/loader/internal/parallel"
	"github.com/cosmosloader/loader/loader/readplan"
	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/report"
	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/csv"
	"github.com/cosmosloader/loader/loader/source/formats"
	"github.com/cosmosloader/loader/pacing"
)

// Job is one import (or resume) as the user configured it: everything the
// command line says, turned into values.
type Job struct {
	// Args are the inputs as given; Inputs their expansion.
	Args   []string
	Inputs []source.Input
	Stdin  io.Reader
	Source source.Options

	Target   TargetOptions
	Embedded bool // Target is the embedded local Cosmos DB target
	// Connect opens Target (cmd wires cosmos.Connect).
	Connect Connector

	IDField  string
	Mode     Mode
	Strategy Strategy
	// Batch is --batch: auto (""), off or a number of operations.
	Batch string

	// RU is the target RU/s; 0 = the container's throughput × RUShare.
	RU      float64
	RUShare float64
	// Watch is how often the container's throughput and partition key
	// ranges are read during the load, to follow changes and splits.
	Watch WatchOptions
	// ScaleRU, when > 0, raises the container's throughput to it for the
	// load and restores the original afterwards (--scale-ru); beyond
	// partitions × 10,000 RU/s only with AllowSplit.
	ScaleRU    float64
	AllowSplit bool
	// CostPerRecord, when > 0, replaces the cost model (dry-run what-ifs).
	CostPerRecord float64

	MaxErrors int64
	ReadAhead int // records queued per physical partition; 0 = default
	// Segments is how many places of each plain file are read at once;
	// 0 = chosen from the file's size and the partitions
	// (readplan.Config.SegmentsOf).
	Segments           int
	CheckpointPath     string
	CheckpointEvery    int64
	CheckpointInterval time.Duration
	DeadLetterPath     string
	ReportPath         string
	ReportHTMLPath     string
	Restart            bool
	DrainTimeout       time.Duration

	// Resume is the checkpoint being continued (loader resume).
	Resume *checkpoint.State
	// Shared, when set, shares the container's throughput with other
	// loaders through capacity leases and claims inputs as shards, both on
	// Azure Blob Storage; progress is checkpointed there too.
	Shared *SharedOptions

	Quiet bool
	Log   io.Writer // stderr
	// Progress, when set, receives a progress event about once a second.
	Progress func(ProgressEvent)
	// Clock is the load's one source of time: pacing, waits, the
	// watcher, timestamps. Nil: the system clock.
	Clock clock.Clock

	// Checkpointed, when set, is told the checkpoint's path and the whole
	// load's counters after each checkpoint save (structured logs report
	// them).
	Checkpointed func(path string, c checkpoint.Counters)
}

// errUnfinished means an unfinished checkpoint for the same inputs and
// target exists and neither resume nor --restart was asked for.
var errUnfinished = errors.New("an unfinished load of these inputs into this container exists")

// SaveError is progress that could not be made durable: the checkpoint,
// or the dead-letter lines it counts on (a full disk, say). The checkpoint
// saved before it is intact, and a resume from it loses nothing: the
// records after it are sent again.
type SaveError struct{ Err error }

func (e *SaveError) Error() string { return e.Err.Error() }
func (e *SaveError) Unwrap() error { return e.Err }

// UsageError is the user's mistake (bad input path, conflicting flags):
// nothing was written.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Execute runs a Job end to end: connect, plan, check the checkpoint, load,
// report. The Report is returned whenever loading started, with err set
// when the run did not finish. j is only read: what Execute resolves (the
// checkpoint's default path, the shared job's name) is in the Report.
func Execute(ctx context.Context, j *Job) (*report.Report, error) {
	p := j.resolve()
	if p.Resume == nil { // a resume reads what the load began with
		stdin, err := formats.CheckFormats(p.Inputs, p.Stdin, p.Source)
		if err != nil {
			return nil, &UsageError{err}
		}
		p.Stdin = stdin
	}
	inputs, fps, err := p.fingerprint()
	if err != nil {
		return nil, &UsageError{err}
	}

	// Everything the run will write is checked, and the checkpoint locked,
	// before connecting: nothing is sent to Cosmos DB by a run that could
	// not record what it did.
	if err := prepareOutput("--report", p.ReportPath, reportDirMode); err != nil {
		return nil, err
	}
	if err := prepareOutput("--report-html", p.ReportHTMLPath, reportDirMode); err != nil {
		return nil, err
	}
	if p.Shared == nil {
		lock, err := p.prepareState()
		if err != nil {
			return nil, err
		}
		defer lock.Release()
	} else if err := p.prepareSharedDeadLetters(fps); err != nil {
		return nil, err
	}

	if p.Connect == nil {
		return nil, errors.New("loader: Job.Connect is not set")
	}
	keys := &keyCheck{p: p, inputs: inputs}
	if p.Resume == nil {
		p.Target.BeforeCreate = keys.beforeCreate
	}
	tgt, err := p.Connect(ctx, p.Target)
	if err != nil {
		return nil, err
	}
	if p.Resume == nil {
		if err := keys.existing(tgt.PartitionKeyPaths); err != nil {
			return nil, err
		}
	}
	p.startBatchProbe(ctx, tgt)
	mapper, err := record.NewMapper(record.Config{
		IDField:           p.IDField,
		PartitionKeyPaths: tgt.PartitionKeyPaths,
		Policy:            tgt.Indexing,
	})
	if err != nil {
		return nil, err
	}
	p.Source.KeyColumns = mapper.KeyFields() // --columns keeps them

	target := p.RU
	if target <= 0 {
		if tgt.Throughput <= 0 {
			return nil, &UsageError{errors.New("the container's throughput could not be read (serverless, shared database throughput, or no permission): set --ru")}
		}
		target = tgt.Throughput * p.RUShare
	}
	if tgt.Throughput > 0 && target > tgt.Throughput*1.001 {
		p.logf("warning: target %s RU/s is above the container's %s RU/s: expect throttling (the pacer will back off)", human.Number(target, 0), human.Number(tgt.Throughput, 0))
	}
	cost := pacing.NewCostModel(pacing.CostOptions{FixedCost: p.CostPerRecord})
	if p.Shared != nil {
		shards, err := p.leasedShards(ctx, tgt, inputs, fps, target)
		if err != nil {
			return nil, err
		}
		defer shards.close()
		return p.load(ctx, tgt, mapper, target, cost, shards, shards)
	}
	whole, err := p.wholeInputs(ctx, tgt, inputs, fps, &target, cost)
	if err != nil {
		return nil, err
	}
	defer whole.restore()
	return p.load(ctx, tgt, mapper, target, cost, whole, whole)
}

// plan is a Job with its defaults resolved, and what Execute learns on
// the way (the checkpoint's path, whether the server takes batches). It is
// Execute's own copy: the caller's Job is never written.
type plan struct {
	Job
	// strategy is Strategy's decisions: how the work is read and watched.
	strategy strategy
	// batch is --batch; off when the target cannot send batches at all
	// (batchesRefused).
	batch          BatchMode
	batchesRefused bool
	// probe is the batch probe, answered while the load starts.
	probe *batchProbe
	// ranges address range batches; nil without them.
	ranges *rangeRoutes
}

// resolve is j with every default filled in, as a new plan: j is not
// changed.
func (j *Job) resolve() *plan {
	p := &plan{Job: *j}
	if p.Clock == nil {
		p.Clock = clock.System{}
	}
	if p.Log == nil {
		p.Log = io.Discard
	}
	if p.Mode == "" {
		p.Mode = ModeUpsert
	}
	if p.Strategy == "" {
		p.Strategy = StrategyPaced
	}
	p.strategy = strategyOf(p.Strategy)
	if p.RUShare <= 0 {
		p.RUShare = 1
	}
	if p.IDField == "" {
		p.IDField = "id"
	}
	if j.Shared != nil {
		so := *j.Shared
		if so.Partitions <= 0 {
			so.Partitions = 10
		}
		p.Shared = &so
	}
	p.batch, _ = ParseBatch(j.Batch) // validated by the command
	if p.Strategy == StrategyNaive {
		// The naive approach, as clients written without a bulk mode
		// send: one request a record (and the one its model counts).
		p.batch = BatchMode{}
	}
	return p
}

// logf says what the run does, unless --quiet.
func (p *plan) logf(format string, a ...any) {
	if !p.Quiet {
		fmt.Fprintf(p.Log, format+"\n", a...)
	}
}

// wholeInputs is a plain load's work: every input, or its segments, read
// in one run, with progress kept in the checkpoint file.
type wholeInputs struct {
	p        *plan
	segments *segmentPlan
	// reads is how the pieces are read: the cursors, their order, the
	// read-ahead, whether cursors are added while loading.
	reads readplan.Plan
	// seg splits segments while loading (nil: --segments given, or
	// nothing to keep busy); cursors is what read blocks are sized for.
	seg     *segmenter
	cursors int
	state   *checkpoint.State
	base    checkpoint.Counters
	// before is what earlier runs acknowledged, ahead of it the records
	// they listed past their marks.
	before     Counts
	ahead      int64
	cost       *pacing.CostModel
	dlSize     int64
	totalBytes int64
	totalRows  int64
	live       bool
	handed     bool
	// restore puts the container's throughput back (--scale-ru).
	restore func()
}

var (
	_ workSource    = (*wholeInputs)(nil)
	_ progressStore = (*wholeInputs)(nil)
)

// wholeInputs builds the checkpoint state (new, or the resumed one),
// splits plain files into segments, applies --scale-ru (raising *target
// with the container when the target follows it) and saves the checkpoint
// before the first write.
func (p *plan) wholeInputs(ctx context.Context, tgt *Target, inputs []Input, fps []checkpoint.Fingerprint,
	target *float64, cost *pacing.CostModel) (*wholeInputs, error) {
	partitions := len(tgt.Bounds) - 1
	w := &wholeInputs{p: p, cost: cost, live: tgt.Live != nil, restore: func() {}}
	startRecords := make([]int64, len(inputs))
	state := &checkpoint.State{CreatedAt: p.Clock.Now(), Config: p.checkpointConfig(tgt.PartitionKeyPaths)}
	var prev []checkpoint.Input
	if p.Resume != nil {
		// A copy: the caller's checkpoint state is not written.
		resumed := *p.Resume
		state = &resumed
		// The resume's command may have set another limit: the next
		// resume keeps it.
		state.Config.MaxErrors = maxErrorsConfig(p.MaxErrors)
		w.dlSize = state.DeadLetterSize
		if len(state.Calibration) > 0 {
			var cal pacing.Calibration
			if err := json.Unmarshal(state.Calibration, &cal); err == nil {
				cost.Restore(cal)
			}
		}
		for i := range inputs {
			c := state.Inputs[i]
			inputs[i].Start = committedAt(c.Committed, c.Records, c.Refused)
			startRecords[i] = c.Records
		}
		prev = state.Inputs
	}
	state.Inputs = make([]checkpoint.Input, len(inputs))
	for i, in := range inputs {
		state.Inputs[i] = checkpoint.Input{Fingerprint: fps[i], Stdin: in.Stdin,
			Committed: in.Start.position(), Records: startRecords[i]}
		if prev != nil {
			state.Inputs[i].Segments = slices.Clone(prev[i].Segments)
		}
	}
	// The work is read for the lanes records are routed to: a naive load
	// has one, so only --segments splits its files.
	reads := p.batch.ReadConfig(readplan.Config{Partitions: partitions, Lanes: p.strategy.lanes(partitions), Segments: p.Segments, ReadAhead: p.ReadAhead})
	if p.Resume == nil {
		notes, err := splitInputs(inputs, state, p.Source, reads, p.logf)
		if err != nil {
			return nil, err
		}
		for _, n := range notes {
			p.logf("note: %s", n)
		}
	}
	for _, n := range source.PartitionFoldersNotes(p.Inputs, p.Source) {
		p.logf("note: %s", n)
	}
	w.segments = planSegments(inputs, state)
	w.reads = readplan.New(sourcesOf(inputs), w.segments.pieces(), p.Source, reads)
	w.state, w.base = state, state.Counters
	w.before, w.ahead = earlierCounts(state)
	w.cursors = w.reads.Cursors
	if w.reads.Splits {
		// Cursors may be added while loading: read blocks sized for the most.
		w.seg = newSegmenter(w.segments, state, p.Source, w.reads.MaxCursors, p.logf)
		w.cursors = max(w.cursors, w.reads.MaxCursors)
	}

	if p.ScaleRU > 0 {
		restore, err := p.scaleThroughput(ctx, tgt, state, partitions, p.logf)
		if err != nil {
			return nil, err
		}
		w.restore = restore
		if p.RU <= 0 {
			*target = tgt.Throughput * p.RUShare
		}
	}

	p.logf("loading %s into %s/%s: target %s RU/s over %s, %s, mode %s",
		human.Plural(int64(len(inputs)), "input"), p.Target.Database, p.Target.Container, human.Number(*target, 0),
		human.Plural(int64(partitions), "physical partition"), p.Strategy, p.Mode)
	p.logf("checkpoint: %s", p.CheckpointPath)
	if p.Resume != nil {
		for _, line := range resumePositions(inputs, state.Inputs, p.Source) {
			p.logf("%s", line)
		}
	}
	if err := checkpoint.RemoveStaleTemps(p.CheckpointPath); err != nil {
		p.logf("warning: %v", err)
	}
	if p.Resume == nil {
		// Saved before the first write, so a kill at any moment leaves a
		// checkpoint that resume accepts (and that says nothing is done).
		state.UpdatedAt = p.Clock.Now()
		if err := checkpoint.Save(p.CheckpointPath, state); err != nil {
			w.restore()
			return nil, fmt.Errorf("save checkpoint: %w", err)
		}
	}
	for k, in := range w.segments.inputs {
		if !in.Stdin {
			end := in.End
			if end <= 0 {
				end = fps[w.segments.file[k]].Size
			}
			w.totalBytes += end - in.Start.Offset
		}
	}
	if p.Progress != nil {
		w.totalRows = parquetRowsLeft(w.segments.inputs, p.Source)
	}
	return w, nil
}

func (w *wholeInputs) next(context.Context) (*piece, error) {
	if w.handed {
		return nil, nil
	}
	w.handed = true
	return &piece{
		inputs: w.segments.inputs, reads: &w.reads, segments: w.seg,
		source:     segmentedSource(w.p.Source, w.cursors),
		totalBytes: w.totalBytes, totalRows: w.totalRows, before: w.before, ahead: w.ahead,
		deadLetterPath: w.p.DeadLetterPath, deadLetterSize: w.dlSize,
	}, nil
}

// pace follows the container's throughput and splits with the pacer and
// limiter themselves; 429s concentrating on one partition ask for its
// ranges.
func (w *wholeInputs) pace(r *runPacing) {
	r.watcher.targets = []retargeter{r.pacer, r.limiter}
	if w.live && w.p.strategy.watches() {
		r.wait, r.watch = watchedPacer{Pacer: r.pacer, w: r.watcher}, true
	}
}

func (w *wholeInputs) finish(*report.Report) {}

// atOnce: a plain load is one piece.
func (w *wholeInputs) atOnce() int { return 1 }

func (w *wholeInputs) save(_ *piece, s runSnapshot) error {
	state := w.state
	w.segments.mu.Lock() // a split while loading changes state.Inputs
	defer w.segments.mu.Unlock()
	w.segments.record(state, s.Committed, s.Complete)
	state.Counters = addCounters(w.base, s)
	state.DeadLetterSize = s.DeadLetterSize
	state.Complete = s.Complete
	state.UpdatedAt = w.p.Clock.Now()
	if cal, err := json.Marshal(w.cost.Snapshot()); err == nil {
		state.Calibration = cal
	}
	if err := checkpoint.Save(w.p.CheckpointPath, state); err != nil {
		return &SaveError{err}
	}
	if w.p.Checkpointed != nil {
		w.p.Checkpointed(w.p.CheckpointPath, acknowledged(state.Counters, s.Committed))
	}
	return nil
}

// totals is the checkpoint's state: the whole load, earlier runs included.
func (w *wholeInputs) totals(checkpoint.Counters) (*checkpoint.State, checkpoint.Counters) {
	return w.state, w.base
}

// scaleThroughput raises the container's throughput to j.ScaleRU for the
// load, having first saved the original in the checkpoint, and returns
// the function that puts the original back. On resume the original comes
// from the checkpoint: the container may still be at the raised value
// after a crash.
func (j *Job) scaleThroughput(ctx context.Context, tgt *Target, state *checkpoint.State, partitions int, logf func(string, ...any)) (func(), error) {
	instant := float64(partitions) * 10000
	if j.ScaleRU > instant && !j.AllowSplit {
		return nil, &UsageError{fmt.Errorf("--scale-ru %s is above what the container's %d physical partition(s) can take at once (%d × 10,000 = %s RU/s): beyond that Cosmos DB splits partitions, which takes hours (typically 4–6) and would not speed up this load; raise it to at most %s, or add --allow-split",
			human.Number(j.ScaleRU, 0), partitions, partitions, human.Number(instant, 0), human.Number(instant, 0))}
	}
	live := tgt.Live
	if live == nil {
		return nil, &UsageError{errors.New("--scale-ru: this target's throughput cannot be changed")}
	}
	cur, err := live.ReadThroughput(ctx)
	if err != nil {
		return nil, fmt.Errorf("--scale-ru: the container's throughput could not be read: %w", err)
	}
	orig := Throughput{RU: state.Config.OriginalRU, Autoscale: state.Config.OriginalAutoscale}
	if orig.RU <= 0 {
		if cur.RU >= j.ScaleRU {
			logf("--scale-ru: the container already has %s RU/s (≥ %s): left as it is", human.Number(cur.RU, 0), human.Number(j.ScaleRU, 0))
			return func() {}, nil
		}
		orig = cur
		state.Config.ScaleRU, state.Config.OriginalRU, state.Config.OriginalAutoscale = j.ScaleRU, cur.RU, cur.Autoscale
		// The original is on disk before the container changes: a crash
		// from here on leaves a checkpoint whose resume restores it.
		state.UpdatedAt = j.Clock.Now()
		if err := checkpoint.Save(j.CheckpointPath, state); err != nil {
			return nil, fmt.Errorf("save checkpoint: %w", err)
		}
	}
	restore := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := live.ReplaceThroughput(rctx, orig); err != nil {
			logf("warning: could not restore the container's throughput to %s RU/s: %v — set it back yourself (or run loader resume %s)", human.Number(orig.RU, 0), err, j.CheckpointPath)
			return
		}
		logf("throughput restored to %s RU/s", human.Number(orig.RU, 0))
	}
	if cur.RU < j.ScaleRU {
		if err := live.ReplaceThroughput(ctx, Throughput{RU: j.ScaleRU, Autoscale: cur.Autoscale}); err != nil {
			if orig.RU != cur.RU {
				restore() // a resume after a crash: the original is still owed
			}
			return nil, fmt.Errorf("--scale-ru: %w", err)
		}
		what := "throughput"
		if cur.Autoscale {
			what = "autoscale maximum"
		}
		logf("--scale-ru: %s raised from %s to %s RU/s for the load; %s is restored when it ends", what, human.Number(cur.RU, 0), human.Number(j.ScaleRU, 0), human.Number(orig.RU, 0))
		if j.ScaleRU > instant {
			logf("warning: %s RU/s is above %s: Cosmos DB splits partitions first, which takes hours; the raise applies when it is done", human.Number(j.ScaleRU, 0), human.Number(instant, 0))
		}
	}
	// What is in force, not what was asked: a raise beyond the instant
	// maximum is pending until the split completes.
	if now, err := live.ReadThroughput(ctx); err == nil && now.RU > 0 {
		tgt.Throughput, tgt.Autoscale = now.RU, now.Autoscale
	}
	return restore, nil
}

// prepareState resolves the checkpoint and dead-letter paths, makes sure
// both can be written, takes the checkpoint's lock and refuses to start
// over an unfinished load. The lock is held until the caller releases it.
func (j *Job) prepareState() (*checkpoint.Lock, error) {
	if j.CheckpointPath == "" {
		// The embedded target's loopback port changes every run: it is not
		// part of the target's identity.
		endpoint := j.Target.Endpoint
		if j.Embedded {
			endpoint = ""
		}
		p, err := checkpoint.DefaultPath(absPaths(j.Args), endpoint, j.Target.Database, j.Target.Container)
		if err != nil {
			return nil, err
		}
		j.CheckpointPath = p
	}
	dlFlag := "--dead-letter"
	if j.DeadLetterPath == "" {
		j.DeadLetterPath = strings.TrimSuffix(j.CheckpointPath, ".json") + ".deadletter.ndjson"
		dlFlag = "dead-letter file (beside --checkpoint)"
	}
	if j.Resume != nil {
		dlFlag = "dead-letter file (from the checkpoint)"
	}
	if err := prepareOutput("--checkpoint", j.CheckpointPath, stateDirMode); err != nil {
		return nil, err
	}
	if err := prepareOutput(dlFlag, j.DeadLetterPath, stateDirMode); err != nil {
		return nil, err
	}
	lock, err := checkpoint.Acquire(j.CheckpointPath)
	if err != nil {
		return nil, &UsageError{err}
	}
	if j.Resume == nil && !j.Restart {
		old, err := checkpoint.Load(j.CheckpointPath)
		switch {
		case err == nil && !old.Complete:
			lock.Release()
			return nil, &UsageError{fmt.Errorf("%w (checkpoint %s).\n  Continue it:   loader resume %s\n  Start over:    add --restart (records already written are rewritten: upsert replaces them, create skips them)",
				errUnfinished, j.CheckpointPath, j.CheckpointPath)}
		case err == nil && old.Complete && !j.Quiet && j.Log != nil:
			// Running the same command again is easy to do by mistake, and
			// costs the whole load's RU again.
			again := "upsert replaces each item with the same content, at about twice the RU of a first write"
			if j.Mode == ModeCreate {
				again = "create skips each item that exists, a 409 per record"
			}
			fmt.Fprintf(j.Log, "note: these inputs were loaded into this container before (finished %s, %s records written); this load sends every record again: %s\n",
				old.UpdatedAt.Local().Format("2006-01-02 15:04"), human.Count(old.Counters.RecordsWritten), again)
		case err != nil && !errors.Is(err, os.ErrNotExist):
			lock.Release()
			// Never silently overwrite a checkpoint we cannot read.
			return nil, &UsageError{fmt.Errorf("the checkpoint %s exists but cannot be used: %w\n  Start over with --restart, or choose another file with --checkpoint", j.CheckpointPath, err)}
		}
	}
	return lock, nil
}

// resumePositions says where each unfinished input continues.
func resumePositions(inputs []Input, progress []checkpoint.Input, so source.Options) []string {
	var out []string
	for i, in := range inputs {
		p := progress[i]
		switch {
		case len(p.Segments) > 1:
			var left int64
			for _, s := range p.Segments {
				end := s.End
				if end == 0 {
					end = p.Size
				}
				left += end - s.Committed.Offset
			}
			out = append(out, fmt.Sprintf("%s: %d segments, %s left to read; %s records already committed",
				in.Path, len(p.Segments), human.Bytes(float64(left)), human.Count(p.Records)))
		case in.Start.Offset == 0 && in.Start.Records == 0:
			out = append(out, fmt.Sprintf("%s: from the start", in.Path))
		case isParquet(in.Input, so):
			// Its offsets are rows scaled to its size: no byte to show.
			out = append(out, fmt.Sprintf("%s: from row %s; %s records already committed",
				in.Path, human.Count(in.Start.Line+1), human.Count(in.Start.Records)))
		case in.Start.Base > 0:
			// Its lines before the piece's start were not counted.
			out = append(out, fmt.Sprintf("%s: from byte %s; %s records already committed",
				in.Path, human.Bytes(float64(in.Start.Offset)), human.Count(in.Start.Records)))
		default:
			out = append(out, fmt.Sprintf("%s: from line %s (byte %s); %s records already committed",
				in.Path, human.Count(in.Start.Line+1), human.Bytes(float64(in.Start.Offset)), human.Count(in.Start.Records)))
		}
		if n := finishedAhead(p); n > 0 {
			out[len(out)-1] += fmt.Sprintf("; %s more past that were finished are read, not sent again", human.Count(n))
		}
	}
	return out
}

// finishedAhead counts the records an input's checkpoint lists as finished
// past its marks.
func finishedAhead(p checkpoint.Input) int64 {
	written, existing := aheadCounts(p)
	return written + existing
}

// aheadCounts counts the records an input's checkpoint lists past its
// marks as written and as found existing.
func aheadCounts(p checkpoint.Input) (written, existing int64) {
	if len(p.Segments) == 0 {
		return p.Committed.Ahead.Counts()
	}
	for _, s := range p.Segments {
		w, e := s.Committed.Ahead.Counts()
		written, existing = written+w, existing+e
	}
	return written, existing
}

// earlierCounts is what the load's earlier runs acknowledged: the
// records below their marks, and those they listed past them (ahead).
func earlierCounts(st *checkpoint.State) (c Counts, ahead int64) {
	k := st.Counters
	c = Counts{Written: k.RecordsWritten, Existing: k.RecordsSkippedExisting, DeadLettered: k.RecordsDeadLettered}
	for _, in := range st.Inputs {
		w, e := aheadCounts(in)
		c.Written, c.Existing, ahead = c.Written+w, c.Existing+e, ahead+w+e
	}
	return c, ahead
}

func isParquet(in source.Input, so source.Options) bool {
	f, err := source.ResolveFormat(in, so)
	return err == nil && f == source.FormatParquet
}

// warnf says something that changes the run's speed or result, even with
// --quiet.
func (j *Job) warnf(format string, a ...any) {
	fmt.Fprintf(j.Log, "warning: "+format+"\n", a...)
}

// fingerprint builds the pipeline inputs with their id seeds and, on
// resume, checks that no input changed since the checkpoint.
func (j *Job) fingerprint() ([]Input, []checkpoint.Fingerprint, error) {
	inputs := make([]Input, len(j.Inputs))
	fps := make([]checkpoint.Fingerprint, len(j.Inputs))
	hints := make([]string, len(j.Inputs)) // csv.DelimiterHint, said before the load
	if j.Resume != nil && len(j.Resume.Inputs) != len(j.Inputs) {
		return nil, nil, fmt.Errorf("the checkpoint lists %d inputs, the command %d", len(j.Resume.Inputs), len(j.Inputs))
	}
	// A blob's fingerprint costs a round trip: take parallel.InputsAtOnce at a
	// time, or a prefix of thousands of blobs far away waits minutes
	// before its first write.
	err := parallel.Each(len(j.Inputs), parallel.InputsAtOnce, func(i int) error {
		in := j.Inputs[i]
		inputs[i] = Input{Input: in, IDSeed: "stdin"}
		if in.Stdin {
			if j.Resume != nil {
				return checkpoint.ErrStdin
			}
			return nil
		}
		if in.Remote != nil {
			fp, err := remoteFingerprint(in, j.Resume, i)
			if err != nil {
				return err
			}
			fps[i] = fp
		} else if j.Resume != nil {
			if err := j.Resume.Inputs[i].Fingerprint.Verify(); err != nil {
				return fmt.Errorf("refusing to resume: %w", err)
			}
			fps[i] = j.Resume.Inputs[i].Fingerprint
		} else {
			fp, err := checkpoint.FingerprintFile(in.Path)
			if err != nil {
				return err
			}
			fps[i] = fp
		}
		if j.Resume != nil {
			// Checksummed is not sensible: a position past the input's end
			// would read nothing there and call the input done.
			gz, err := source.IsGzip(in)
			if err != nil {
				return err
			}
			if err := j.Resume.Inputs[i].CheckPositions(gz); err != nil {
				return fmt.Errorf("refusing to resume: %w", err)
			}
		}
		// Content, not path or mtime, names the records: a re-run of the
		// same data, wherever it lives, regenerates the same ids.
		inputs[i].IDSeed = fps[i].HeadHash + ":" + strconv.FormatInt(fps[i].Size, 10)
		if j.Resume == nil {
			hints[i] = csv.DelimiterHint(in, j.Source)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	for _, h := range hints {
		if h != "" {
			j.warnf("%s", h)
		}
	}
	return inputs, fps, nil
}

// remoteFingerprint takes a remote input's fingerprint from its identity
// and first bytes or, on resume, checks that the object is still the one
// the checkpoint's offsets point into.
func remoteFingerprint(in source.Input, resume *checkpoint.State, i int) (checkpoint.Fingerprint, error) {
	if resume != nil {
		fp := resume.Inputs[i].Fingerprint
		if !fp.IsRemote() {
			return fp, fmt.Errorf("refusing to resume: input %s was a local file in the checkpoint", in.Path)
		}
		id := in.Remote.Identity()
		if err := fp.VerifyRemote(id.ETag, id.Size, id.LastModified); err != nil {
			return fp, fmt.Errorf("refusing to resume: %w", err)
		}
		return fp, nil
	}
	id := in.Remote.Identity()
	head := make([]byte, min(id.Size, checkpoint.HeadSize))
	if n, err := in.Remote.ReadAt(head, 0); err != nil && !(errors.Is(err, io.EOF) && n == len(head)) {
		return checkpoint.Fingerprint{}, fmt.Errorf("fingerprint input %s: %w", in.Path, err)
	}
	return checkpoint.FingerprintRemote(in.Path, id.ETag, id.Size, id.LastModified, head), nil
}

func absPaths(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "-" || strings.Contains(a, "://") {
			out[i] = a
			continue
		}
		if p, err := filepath.Abs(a); err == nil {
			out[i] = p
		} else {
			out[i] = a
		}
	}
	return out
}

// acknowledged is c with the records the marks list past them added: the
// counts progress and the report give, where c's are the marks' alone.
func acknowledged(c checkpoint.Counters, marks []Committed) checkpoint.Counters {
	for _, m := range marks {
		w, e := m.Ahead.Counts()
		c.RecordsWritten += w
		c.RecordsSkippedExisting += e
		c.RecordsRead += w + e
	}
	return c
}

func addCounters(base checkpoint.Counters, s runSnapshot) checkpoint.Counters {
	c := checkpoint.Counters{
		RequestsSent:       base.RequestsSent + s.Requests,
		ThrottledResponses: base.ThrottledResponses + s.Throttled,
		RUConsumed:         base.RUConsumed + s.RU,
		ElapsedSeconds:     base.ElapsedSeconds + s.Elapsed.Seconds(),
	}
	// Record counts come from the committed prefix alone: a record beyond
	// the low-water mark is counted when it is committed, so a replay after
	// a crash is never counted twice.
	c.RecordsRead, c.RecordsWritten = base.RecordsRead, base.RecordsWritten
	c.RecordsSkippedExisting, c.RecordsDeadLettered = base.RecordsSkippedExisting, base.RecordsDeadLettered
	for _, in := range s.Committed {
		c.RecordsRead += in.Records
		c.RecordsWritten += in.Written
		c.RecordsSkippedExisting += in.Skipped
		c.RecordsDeadLettered += in.DeadLettered
	}
	return c
}
