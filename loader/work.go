package loader

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/clock"
	"github.com/cosmosloader/loader/loader/htmlreport"
	"github.com/cosmosloader/loader/loader/record"
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
	finish(rep *Report)
	// atOnce is how many pieces may run at once; next and finish are
	// then called from as many goroutines.
	atOnce() int
}

// progressStore keeps the committed progress of pieces.
type progressStore interface {
	// save records a snapshot of p's run; an error stops the run.
	save(p *piece, s Snapshot) error
	// totals is the load's state for the report and the counters earlier
	// processes had reached; ran is what this process's runs committed.
	totals(ran checkpoint.Counters) (st *checkpoint.State, base checkpoint.Counters)
}

// piece is what one pipeline run reads.
type piece struct {
	name    string // the shard's ID; "" for a plain load's inputs
	inputs  []Input
	cursors int
	order   []int // the order the cursors take inputs in; nil: as listed
	// segments splits the inputs' segments while loading; nil: never.
	segments *segmenter
	source   source.Options
	// totalBytes is what the piece has to read, for progress; 0 unknown.
	totalBytes int64
	// totalRows is its rows when every input is Parquet; 0 otherwise.
	totalRows      int64
	deadLetterPath string
	deadLetterSize int64
	// lost is closed when the piece is taken away (another loader owns
	// the shard now); nil when it cannot be.
	lost <-chan struct{}
	// release gives the piece back once its run ends; nil: nothing to do.
	release func()
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

// StartRequestsInFlight caps the writer pool while the answer rate is
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
const StartRequestsInFlight = 512

// limiterConfig is the writer pool's configuration for a load paced to
// target RU/s.
func limiterConfig(target float64, clk clock.Clock, logf func(string, ...any)) pacing.ConcurrencyConfig {
	return pacing.ConcurrencyConfig{TargetRU: target, StartMax: StartRequestsInFlight, Clock: clk,
		Notice: func(m string) { logf("warning: %s", m) }}
}

// load runs every piece src hands out through the pipeline, pacing to
// target, and reports. The Report is returned whenever a run started.
func (p *plan) load(ctx context.Context, tgt *Target, mapper *record.Mapper, target float64, cost *pacing.CostModel,
	src workSource, store progressStore) (*Report, error) {
	partitions := len(tgt.Bounds) - 1
	limiter := pacing.NewConcurrency(limiterConfig(target, p.Clock, p.logf))
	pacer, err := pacing.NewPacer(pacing.PacerConfig{TargetRU: target, Bounds: tgt.Bounds, Clock: p.Clock, PathLatency: limiter.PathLatency, Aim: pacing.LoadAim})
	if err != nil {
		return nil, err
	}
	w := newWatcher(tgt.Live, p.Watch, p.Clock, target, p.RU, p.RUShare, tgt.Throughput, partitions)
	w.logf = p.logf
	w.routing = pacer
	rp := &runPacing{pacer: pacer, limiter: limiter, watcher: w, wait: pacer}
	src.pace(rp)
	if rp.watch && tgt.Live != nil {
		wctx, stopWatch := context.WithCancel(ctx)
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			w.run(wctx, tgt.Throughput > 0)
		}()
		defer func() { stopWatch(); <-watched }()
	}
	common := Options{
		Stdin: p.Stdin, Mapper: mapper, Sink: tgt.Sink(p.Mode), Mode: p.Mode, Strategy: p.Strategy,
		Batch: p.batch, BatchProbe: p.batchProbeState(), Logf: p.warnf, Pacer: rp.wait, OnGone: w.askRanges, Cost: cost, Limiter: limiter,
		Partitions: partitions, QueuePerPartition: p.ReadAhead, MaxErrors: p.MaxErrors,
		CheckpointEvery: p.CheckpointEvery, CheckpointInterval: p.CheckpointInterval,
		DrainTimeout: p.DrainTimeout, Charges: NewHistogram(), Clock: p.Clock, BatchRU: rp.batchRU,
		Lines: &source.LineIndexes{},
	}

	began := p.Clock.Now()
	total := &Result{Cause: Finished, Charges: common.Charges, BatchesRefused: p.batchesRefused}
	var (
		mu      sync.Mutex // guards the figures below and total
		ran     checkpoint.Counters
		lastErr error
		started bool // a run returned
		// startFailed: a run could not start before any had returned.
		startFailed bool
		stopped     bool // a run's cause is the load's: no more pieces
		exhausted   bool
	)
	// Several pieces run at once (see workSource.atOnce), each with its
	// own queues (together they read ahead what one would) and mapping on
	// its own goroutine, waiting for a partition's budget in turn.
	workers := max(src.atOnce(), 1)
	if workers > 1 {
		ahead := p.ReadAhead
		if ahead <= 0 {
			ahead = DefaultReadAhead(partitions)
		}
		common.QueuePerPartition = min(ahead, max(ahead/workers, minSharedReadAhead))
		common.Turns = &turns{}
	}
	prog := &loadProgress{began: began, runs: make([]pieceLive, workers)}
	pieceCtx, stopPieces := context.WithCancel(ctx)
	defer stopPieces()
	stop := func(cause StopCause, err error) {
		if !stopped {
			stopped = true
			total.Cause, total.Err = cause, err
			stopPieces()
		}
	}
	work := func(slot int) {
		for {
			mu.Lock()
			done := stopped
			mu.Unlock()
			if done {
				return
			}
			pc, err := src.next(pieceCtx)
			mu.Lock()
			if err != nil || pc == nil || stopped {
				if err != nil && pieceCtx.Err() == nil {
					lastErr = err
					stop(FatalError, err)
				} else if err == nil && pc == nil {
					exhausted = true
				}
				mu.Unlock()
				if pc != nil && pc.release != nil {
					pc.release()
				}
				return
			}
			mu.Unlock()
			o := common
			o.Inputs, o.Cursors, o.Order, o.Source, o.Segments = pc.inputs, pc.cursors, pc.order, pc.source, pc.segments
			o.DeadLetterPath, o.DeadLetterSize = pc.deadLetterPath, pc.deadLetterSize
			o.Checkpoint = func(s Snapshot) error { return store.save(pc, s) }
			show := p.progressFunc(pc.totalBytes, target, func(ev *ProgressEvent) {
				ev.TargetRU, ev.TotalRows = w.current(), pc.totalRows
				if rp.fill != nil {
					rp.fill(ev)
				}
			})
			if show != nil {
				prog.start(slot, p.Clock.Now())
				o.Progress = func(l Live) { show(prog.sum(slot, l)) }
			}
			res, err := runPiece(pieceCtx, pc, o)
			mu.Lock()
			if res == nil { // the run could not start
				startFailed = !started
				lastErr = err
				stop(FatalError, err)
				mu.Unlock()
				return
			}
			started = true
			prog.finish(slot, res.Live)
			accumulate(total, &ran, res, began)
			// A lease lost while the run drained fails its last save: the
			// shard is another's to finish, not the load's end.
			lost := (res.Cause != Finished && errors.Is(res.Err, ErrLeaseLost)) || errors.Is(err, ErrLeaseLost)
			if err != nil && !lost {
				lastErr = err
			}
			if lost {
				p.logf("warning: lost the lease on shard %s; another loader continues it", pc.name)
			} else if res.Cause != Finished {
				stop(res.Cause, res.Err)
			}
			mu.Unlock()
		}
	}
	var running sync.WaitGroup
	for slot := range workers {
		running.Go(func() { work(slot) })
	}
	running.Wait()
	if startFailed && !started {
		return nil, lastErr // nothing ran: no report
	}
	total.Series = mergeSeconds(total.Series)
	if ctx.Err() != nil && total.Cause == Finished && !exhausted {
		total.Cause = Interrupted
	}
	total.Snapshot.Complete = total.Cause == Finished
	total.Snapshot.Elapsed = p.Clock.Now().Sub(began)
	if p.probe != nil && p.probe.refused() {
		total.BatchesRefused = true
	}
	st, base := store.totals(ran)
	changes, parts := w.history()
	rep := buildReport(&p.Job, total, meanTarget(changes, total.Snapshot.Elapsed.Seconds()), partitions, base, st)
	if len(changes) > 1 {
		rep.TargetChanges = changes
	}
	if len(parts) > 1 {
		rep.PartitionChanges = parts
	}
	src.finish(rep)
	return rep, lastErr
}

// minSharedReadAhead is the least read-ahead per partition of a piece run
// beside others. A batch is grouped from what one piece's queue holds: a
// shuffled file's pieces send smaller batches than one run would (64
// tenants over 8 partitions, 32 pieces: 1.5 records per request, against
// 32), as many RU, more requests. Four times the queues sent bigger
// batches, and 0.9 % of them were throttled.
const minSharedReadAhead = 32

// mergeSeconds sums the seconds of runs that overlapped (pieces run at
// once, or one ending in the second the next began), in time order.
func mergeSeconds(series []htmlreport.Second) []htmlreport.Second {
	sort.SliceStable(series, func(i, j int) bool { return series[i].T < series[j].T })
	out := series[:0]
	for _, s := range series {
		if n := len(out); n > 0 && out[n-1].T == s.T {
			out[n-1].RU += s.RU
			out[n-1].Requests += s.Requests
			out[n-1].Throttled += s.Throttled
			out[n-1].Records += s.Records
			continue
		}
		out = append(out, s)
	}
	return out
}

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
	if res != nil && context.Cause(runCtx) == ErrLeaseLost {
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
	total.Live.Retries.add(r.Live.Retries)
	total.Live.InputsRefused += r.Live.InputsRefused
	total.CheckpointSaves += r.CheckpointSaves
	total.CheckpointTime += r.CheckpointTime
	total.BatchesRefused = total.BatchesRefused || r.BatchesRefused
	if r.reasons != nil {
		if total.reasons == nil {
			total.reasons = &reasonTally{}
		}
		total.reasons.merge(r.reasons)
	}
	for _, sec := range r.Series {
		sec.T += shift
		total.Series = append(total.Series, sec)
	}
}
