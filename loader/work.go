package loader

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"time"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/clock"
	"github.com/cosmosloader/loader/loader/readplan"
	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/report"
	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/pacing"
)

// A load is read in pieces, each by one pipeline run: a plain load is one
// piece (its inputs, or their segments) kept in the checkpoint file; a
// shared load is leased shards, several at once, each kept in its blob.
// load is the one run path for both: what differs is where the pieces come
// from (a workSource) and where their progress is kept (a progressStore).

// workSource hands out the pieces of a load.
type workSource interface {
	// next is the next piece to read; nil when none is left.
	next(ctx context.Context) (*piece, error)
	// pace ties the run's pacer and limiter to the capacity the source
	// may use, and says what the pipeline waits on.
	pace(r *runPacing)
	// finish adds the source's part to the report.
	finish(rep *report.Report)
	// atOnce is how many pieces may run at once; next and finish are
	// then called from as many goroutines.
	atOnce() int
}

// progressStore keeps the committed progress of pieces.
type progressStore interface {
	// save records a snapshot of p's run; an error stops the run.
	save(p *piece, s runSnapshot) error
	// totals is the load's state for the report and the counters earlier
	// processes had reached; ran is what this process's runs committed.
	totals(ran checkpoint.Counters) (st *checkpoint.State, base checkpoint.Counters)
}

// piece is what one pipeline run reads.
type piece struct {
	name   string // the shard's ID; "" for a plain load's inputs
	inputs []Input
	// reads is how the inputs are read; nil: one at a time, as listed.
	reads *readplan.Plan
	// segments splits the inputs' segments while loading; nil: never.
	segments *segmenter
	source   source.Options
	// totalBytes is what the piece has to read, for progress; 0 unknown.
	totalBytes int64
	// totalRows is its rows when every input is Parquet; 0 otherwise.
	totalRows int64
	// before is what earlier runs of its inputs acknowledged; ahead of
	// it the records they listed past their marks.
	before         Counts
	ahead          int64
	deadLetterPath string
	deadLetterSize int64
	// lost is closed when the piece is taken away (another loader owns
	// the shard now); nil when it cannot be.
	lost <-chan struct{}
	// release gives the piece back once its run ends; nil: nothing to do.
	release func()
	// readDone is called once its inputs are read to their end (see
	// Options.ReadDone); nil: nothing to do.
	readDone func()
	// shard is the claim a shard's progress is saved through.
	shard *ShardClaim
}

// runPacing is the pacing of a load, shared by its pieces' runs.
type runPacing struct {
	pacer   *pacing.Pacer
	limiter *pacing.Concurrency
	watcher *watcher
	// Set by workSource.pace: what the pipeline waits on, whether the
	// watcher runs, and what progress events add.
	wait  Pacer
	watch bool
	fill  func(*ProgressEvent)
	// batchRU bounds a batch's estimated RU (Options.BatchRU); nil: none.
	batchRU func() float64
}

// startRequestsInFlight caps the writer pool while the answer rate is
// still rising (pacing.ConcurrencyConfig.StartMax). Each request in flight
// holds a connection, its goroutines, its records and its body: a cold
// start's first answers wait behind its first burst, and unthrottled into
// a local target (bench scenario F) the bound on the answer rate let the
// pool grow to ~1,700 requests and the process to 300 MB before the rate
// had stopped rising. Once it has, and the latency the pool is sized from
// is known to be the path's rather than a queue's, nothing but the
// file-descriptor limit caps the pool: a 500,000 RU/s target over a 50 ms
// path needs ~3,300 in flight; probes (pacing.Concurrency.probeLocked)
// bring down a pool that only queues in this process.
const startRequestsInFlight = 512

// limiterConfig is the writer pool's configuration for a load paced to
// target RU/s.
func limiterConfig(target float64, clk clock.Clock, logf func(string, ...any)) pacing.ConcurrencyConfig {
	return pacing.ConcurrencyConfig{TargetRU: target, StartMax: startRequestsInFlight, Clock: clk,
		Notice: func(m string) { logf("warning: %s", m) }}
}

// load runs every piece src hands out through the pipeline, pacing to
// target, and reports. The Report is returned whenever a run started.
func (p *plan) load(ctx context.Context, tgt *Target, mapper *record.Mapper, target float64, cost *pacing.CostModel,
	src workSource, store progressStore) (*report.Report, error) {
	partitions := len(tgt.Bounds) - 1
	rp, err := p.pacing(tgt, target, partitions)
	if err != nil {
		return nil, err
	}
	src.pace(rp)
	p.boundRangeBatches(rp)
	if rp.watch && tgt.Live != nil {
		wctx, stopWatch := context.WithCancel(ctx)
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			rp.watcher.run(wctx, tgt.Throughput > 0)
		}()
		defer func() { stopWatch(); <-watched }()
	}
	l := &loading{p: p, src: src, store: store, target: target, rp: rp, began: p.Clock.Now()}
	l.cpu = startCPUClock(time.Now())
	l.common = Options{
		Stdin: p.Stdin, Mapper: mapper, Sink: tgt.Sink(p.Mode), Mode: p.Mode, Strategy: p.Strategy,
		Batch: p.batch.ops(), Ranges: p.ranges, BatchProbe: p.batchProbeState(), Logf: p.warnf, Pacer: rp.wait, OnGone: rp.watcher.askRanges, Cost: cost, Limiter: rp.limiter,
		Partitions: partitions, QueuePerPartition: p.ReadAhead, MaxErrors: p.MaxErrors, Errors: p.errorLimit(l.store),
		CheckpointEvery: p.CheckpointEvery, CheckpointInterval: p.CheckpointInterval,
		DrainTimeout: p.DrainTimeout, Charges: NewHistogram(), Clock: p.Clock, BatchRU: rp.batchRU,
		Lines: &source.LineIndexes{},
	}
	l.total = &Result{Cause: Finished, Charges: l.common.Charges, BatchesRefused: p.batchesRefused}
	// Several pieces run at once (see workSource.atOnce), each with its
	// own queues (together they read ahead what one would) and mapping on
	// its own goroutine, waiting for a partition's budget in turn.
	workers := max(src.atOnce(), 1)
	if workers > 1 {
		ahead := p.ReadAhead
		if ahead <= 0 {
			ahead = readplan.DefaultReadAhead(partitions)
		}
		l.common.QueuePerPartition = min(ahead, max(ahead/workers, minSharedReadAhead))
		l.common.Turns = &turns{}
	}
	l.prog = &loadProgress{began: l.began, runs: make([]pieceLive, workers)}
	l.ctx, l.stopPieces = context.WithCancel(ctx)
	defer l.stopPieces()
	var running sync.WaitGroup
	for slot := range workers {
		running.Go(func() { l.work(slot) })
	}
	running.Wait()
	if l.startFailed && !l.started {
		return nil, l.lastErr // nothing ran: no report
	}
	return l.report(ctx, partitions), l.lastErr
}

// pacing is a load's pacer, writer pool and watcher, paced to target.
func (p *plan) pacing(tgt *Target, target float64, partitions int) (*runPacing, error) {
	limiter := pacing.NewConcurrency(limiterConfig(target, p.Clock, p.logf))
	pacer, err := pacing.NewPacer(pacing.PacerConfig{TargetRU: target, Bounds: tgt.Bounds, Clock: p.Clock, PathLatency: limiter.PathLatency, PathJitter: limiter.PathJitter, Aim: pacing.LoadAim,
		Whole: p.ranges != nil})
	if err != nil {
		return nil, err
	}
	w := newWatcher(tgt.Live, p.Watch, p.Clock, target, p.RU, p.RUShare, tgt.Throughput, partitions)
	w.logf = p.logf
	w.routing = pacer
	return &runPacing{pacer: pacer, limiter: limiter, watcher: w, wait: pacer}, nil
}

// loading is one load's pieces run by its workers: the options the runs
// share and the totals they add to.
type loading struct {
	p      *plan
	src    workSource
	store  progressStore
	target float64
	rp     *runPacing
	common Options
	began  time.Time
	prog   *loadProgress
	// cpu measures how busy the load keeps its CPUs, in real time
	// whatever the load's clock.
	cpu cpuClock
	// ctx is the pieces'; stopPieces ends every run.
	ctx        context.Context
	stopPieces context.CancelFunc

	mu      sync.Mutex // guards the figures below and total
	total   *Result
	ran     checkpoint.Counters
	lastErr error
	started bool // a run returned
	// startFailed: a run could not start before any had returned.
	startFailed bool
	stopped     bool // a run's cause is the load's: no more pieces
	exhausted   bool
}

// stop ends the load for cause, once; l.mu is held.
func (l *loading) stop(cause StopCause, err error) {
	if !l.stopped {
		l.stopped = true
		l.total.Cause, l.total.Err = cause, err
		l.stopPieces()
	}
}

// work runs the pieces src hands out, one after another, until none is
// left or the load stops.
func (l *loading) work(slot int) {
	for {
		l.mu.Lock()
		done := l.stopped
		l.mu.Unlock()
		if done {
			return
		}
		pc, err := l.src.next(l.ctx)
		l.mu.Lock()
		if err != nil || pc == nil || l.stopped {
			if err != nil && l.ctx.Err() == nil {
				l.lastErr = err
				l.stop(FatalError, err)
			} else if err == nil && pc == nil {
				l.exhausted = true
			}
			l.mu.Unlock()
			if pc != nil && pc.release != nil {
				pc.release()
			}
			return
		}
		l.mu.Unlock()
		if !l.run(slot, pc) {
			return
		}
	}
}

// run runs one piece through the pipeline and adds it to the totals; it
// says whether the worker goes on.
func (l *loading) run(slot int, pc *piece) bool {
	p := l.p
	o := l.common
	o.Inputs, o.Source, o.Segments = pc.inputs, pc.source, pc.segments
	if r := pc.reads; r != nil {
		o.Cursors, o.Order, o.QueuePerPartition = r.Cursors, r.Order, r.ReadAhead
	}
	o.DeadLetterPath, o.DeadLetterSize = pc.deadLetterPath, pc.deadLetterSize
	o.ReadDone = pc.readDone
	o.Checkpoint = func(s runSnapshot) error { return l.store.save(pc, s) }
	show := p.progressFunc(pc.totalBytes, pc.before, pc.ahead, l.target, func(ev *ProgressEvent) {
		ev.TargetRU, ev.TotalRows = l.rp.watcher.current(), pc.totalRows
		if l.rp.fill != nil {
			l.rp.fill(ev)
		}
	})
	if show != nil {
		l.prog.start(slot, p.Clock.Now())
		o.Progress = func(live Live) { show(l.prog.sum(slot, live)) }
	}
	res, err := runPiece(l.ctx, pc, o)
	l.mu.Lock()
	defer l.mu.Unlock()
	if res == nil { // the run could not start
		l.startFailed = !l.started
		l.lastErr = err
		l.stop(FatalError, err)
		return false
	}
	l.started = true
	l.prog.finish(slot, res.Live)
	accumulate(l.total, &l.ran, res, l.began)
	// A lost shard lease is not the load's failure: the shard's new owner
	// continues from its saved progress.
	lost := res.Cause != Finished && errors.Is(res.Err, ErrLeaseLost)
	if err != nil && !lost {
		l.lastErr = err
	}
	if lost {
		p.logf("warning: lost the lease on shard %s; another loader continues it", pc.name)
	} else if res.Cause != Finished {
		l.stop(res.Cause, res.Err)
	}
	return true
}

// report is the load's report once every worker is done.
func (l *loading) report(ctx context.Context, partitions int) *report.Report {
	p, total := l.p, l.total
	total.Series = report.MergeSeconds(total.Series)
	if ctx.Err() != nil && total.Cause == Finished && !l.exhausted {
		total.Cause = Interrupted
	}
	total.Snapshot.Complete = total.Cause == Finished
	total.Snapshot.Elapsed = p.Clock.Now().Sub(l.began)
	p.noteProbe(total)
	st, base := l.store.totals(l.ran)
	changes, parts := l.rp.watcher.history()
	rep := buildReport(&p.Job, total, meanTarget(changes, total.Snapshot.Elapsed.Seconds()), partitions, base, st)
	if len(changes) > 1 {
		rep.TargetChanges = changes
	}
	if len(parts) > 1 {
		rep.PartitionChanges = parts
	}
	l.src.finish(rep)
	if note := replacedNote(p.Mode, l.common.Cost); note != "" {
		rep.Notes = append(rep.Notes, note)
	}
	rep.Shortfall = explainShortfall(rep, loadFacts{starved: total.starved, cpuBusy: l.cpu.busy(time.Now()), cpus: runtime.GOMAXPROCS(0),
		hotKey: total.hotKey, hasHotKey: total.hasHotKey})
	return rep
}

// minSharedReadAhead is the least read-ahead per partition of a piece run
// beside others. A batch is grouped from what one piece's queue holds: a
// shuffled file's pieces send smaller batches than one run would (64
// tenants over 8 partitions, 32 pieces: 1.5 records per request, against
// 32), as many RU, more requests. Four times the queues sent bigger
// batches, and 0.9 % of them were throttled.
const minSharedReadAhead = 32

// runPiece runs the pipeline over one piece. A lost piece stops its run:
// the new owner continues from the last save.
func runPiece(ctx context.Context, pc *piece, o Options) (*Result, error) {
	if pc.release != nil {
		defer pc.release()
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if pc.lost != nil {
		select {
		case <-pc.lost: // lost before its run: not a record of it is read
			cancel(ErrLeaseLost)
		default:
			go func() {
				select {
				case <-pc.lost:
					cancel(ErrLeaseLost)
				case <-runCtx.Done():
				}
			}()
		}
	}
	res, err := Run(runCtx, o)
	// The lease may be found lost by the run's context or by a save of
	// its progress that the shard's blob refused.
	if res != nil && (context.Cause(runCtx) == ErrLeaseLost || errors.Is(err, ErrLeaseLost)) {
		res.Cause, res.Err = FatalError, ErrLeaseLost
	}
	return res, err
}

// accumulate adds one run to the load's totals: the Result the report is
// built from, and ran, the records and requests this process committed.
func accumulate(total *Result, ran *checkpoint.Counters, r *Result, began time.Time) {
	// Each run counts its seconds from its own start.
	shift := int64(r.Started.Sub(began) / time.Second)
	for _, c := range r.Snapshot.Committed {
		ran.RecordsRead += c.Records
		ran.RecordsWritten += c.Written
		ran.RecordsSkippedExisting += c.Skipped
		ran.RecordsDeadLettered += c.DeadLettered
	}
	ran.RequestsSent += r.Snapshot.Requests
	ran.ThrottledResponses += r.Snapshot.Throttled
	ran.RUConsumed += r.Snapshot.RU
	total.Snapshot.Requests += r.Snapshot.Requests
	total.Snapshot.Throttled += r.Snapshot.Throttled
	total.Snapshot.RU += r.Snapshot.RU
	addLive(&total.Live, r.Live)
	total.ahead = total.ahead.plus(r.ahead)
	total.roundTrip = max(total.roundTrip, r.roundTrip)
	total.starved = max(total.starved, r.starved)
	if r.hasHotKey && (!total.hasHotKey || r.hotKey.RU > total.hotKey.RU) {
		total.hotKey, total.hasHotKey = r.hotKey, true
	}
	total.CheckpointSaves += r.CheckpointSaves
	total.CheckpointTime += r.CheckpointTime
	total.BatchesRefused = total.BatchesRefused || r.BatchesRefused
	if r.reasons != nil {
		if total.reasons == nil {
			total.reasons = &report.Reasons{}
		}
		total.reasons.Merge(r.reasons)
	}
	for _, sec := range r.Series {
		sec.T += shift
		total.Series = append(total.Series, sec)
	}
}
