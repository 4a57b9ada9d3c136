package loader

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cosmosloader/loader/internal/clock"
	"github.com/cosmosloader/loader/loader/readplan"
	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/report"
	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/pacing"
)

// Strategy selects how writes are scheduled.
type Strategy string

const (
	// StrategyPaced admits each write through its partition's RU token
	// bucket, adapting to 429s: the default.
	StrategyPaced Strategy = "paced"
	// StrategyNaive sends with fixed high concurrency and resends whatever
	// is throttled after the server's retry-after: the approach pacing is
	// measured against.
	StrategyNaive Strategy = "naive"
)

// Pacer admits RU-denominated writes per physical partition. Throttled is
// where the paced strategy's reaction to a 429 ends: a pause for the
// retry-after and the rate pacing.AIMD sets. pacing.Pacer implements it;
// unit tests use fakes.
type Pacer interface {
	Partition(epk string) int
	Wait(ctx context.Context, part int, ru float64) error
	Settle(part int, estimated, actual float64)
	Throttled(part int, retryAfter time.Duration)
	Succeeded(part int)
}

// costModel is what a run needs of a cost model (pacing.CostModel): a
// write's estimated RU charge, and learning from actual charges.
type costModel interface {
	Estimate(size, terms int) float64
	Observe(size, terms int, charge float64)
}

// Limiter bounds the requests in flight; its limit follows observed
// latency and charges (Little's law). pacing.Concurrency implements it.
type Limiter interface {
	Acquire(ctx context.Context) error
	Release()
	ObserveLatency(d time.Duration)
	ObserveCharge(ru float64)
}

// Input is one input with where to start reading and how its generated ids
// are derived.
type Input struct {
	source.Input
	// Start is the committed position of an earlier run (Offset and Line).
	Start Committed
	// End, when > 0, bounds a shard of the input: only records starting
	// before this byte offset are read.
	End int64
	// IDSeed names the input's content (e.g. its head hash and size), so
	// generated ids are the same on every run over the same data.
	IDSeed string
}

// Options configure one run of the pipeline.
type Options struct {
	Inputs   []Input
	Stdin    io.Reader
	Source   source.Options
	Mapper   *record.Mapper
	Sink     Sink
	Mode     Mode
	Strategy Strategy

	Pacer   Pacer // required for StrategyPaced
	Cost    costModel
	Limiter Limiter // in-flight bound for StrategyPaced
	// Batch caps the operations of a batch (see ParseBatch); 0 or 1
	// sends point writes only. Transactional batches of records that
	// share a partition key need a Sink that is a BatchSink.
	Batch int
	// Ranges, when set, sends range batches instead, addressed by these
	// partition key ranges; they need a Sink that is a RangeBatchSink.
	Ranges *rangeRoutes
	// BatchProbe, when set, says which batches the server has been found
	// to execute: until it has (decided), the run sends point writes, so
	// a probe takes no round trip from the load's start.
	BatchProbe func() (kind BatchKind, decided bool)
	// BatchBytes bounds a batch's documents; 0 means DefaultBatchBytes.
	BatchBytes int
	// BatchRU bounds a batch's estimated RU, asked when a window of queued
	// records is grouped and again before each batch is sent; nil: no
	// bound.
	BatchRU func() float64
	// BatchLinger is the longest a dispatcher waits to fill a batch; 0
	// means DefaultBatchLinger, negative not at all.
	BatchLinger time.Duration
	// Logf, when set, receives the run's one-off notices (stderr).
	Logf func(format string, a ...any)
	// NaiveConcurrency is the fixed number of writers of StrategyNaive.
	NaiveConcurrency int
	// QueuePerPartition bounds records read ahead per physical partition;
	// 0 means readplan.DefaultReadAhead(Partitions).
	QueuePerPartition int
	Partitions        int
	// Cursors is how many inputs are read at once (the segments of one
	// file, each its own input); 0 or 1 reads them one after another.
	Cursors int
	// Turns is set for runs side by side (a shared load's shards), and
	// shared by them: their dispatchers wait for a partition's budget in
	// turn (see turns), and, as cursors do, each maps on its own
	// goroutine (mapping workers would only add chunks in flight per
	// run). nil: a run alone.
	Turns *turns
	// Order is the order several cursors take the inputs in (indexes
	// into Inputs); nil: as listed.
	Order []int
	// Lines counts the lines before the pieces of NDJSON inputs placed
	// without counting them (source.Position.Base), for dead letters;
	// shared by the runs of one load. nil: the run keeps its own.
	Lines *source.LineIndexes
	// Segments, when set, splits segments while the load runs, as new
	// inputs (segments.go).
	Segments *segmenter

	// MaxErrors stops the run once more records than this are dead-lettered;
	// negative means no limit. Errors, when set, replaces it: the limit a
	// load's runs share, with what earlier runs listed (newErrorLimit).
	MaxErrors int64
	Errors    *errorLimit
	// MaxTransientAttempts bounds one request's attempts that meet
	// transient failures (503, timeouts, resets) before the run stops as
	// fatal. Every request counts its own: a point write, a batch, each
	// part of a batch split by a refused operation.
	MaxTransientAttempts int

	DeadLetterPath string
	DeadLetterSize int64 // checkpointed size to truncate to on resume

	// Checkpoint is called with a snapshot every CheckpointEvery records or
	// CheckpointInterval, and once at the end.
	Checkpoint         func(runSnapshot) error
	CheckpointEvery    int64
	CheckpointInterval time.Duration
	// Progress is called about once a second with live figures.
	Progress func(Live)
	// ReadDone, when set, is called once the run has read its inputs to
	// their end, while what it read is still being written: a shared load
	// claims its next shard then, so the worker has it at hand when the
	// run ends. It must not block.
	ReadDone func()
	// DrainTimeout bounds how long in-flight writes may finish after a stop.
	DrainTimeout time.Duration
	// OnGone is called (from a writer) when a write meets 410 Gone for a
	// split or moved partition, before the record is re-routed and resent:
	// the caller refreshes the routing. It must not block.
	OnGone func()

	// Clock is the run's time: its ticks, backoffs, drain deadline and
	// figures. Nil: the system clock.
	Clock clock.Clock
	// Charges collects every written record's charge; several runs (one
	// per shard) may share one. Nil: a new one.
	Charges *Histogram
}

// runSnapshot is the durable state of a run at one moment.
type runSnapshot struct {
	Committed      []Committed
	DeadLetterSize int64
	Requests       int64
	Throttled      int64
	RU             float64
	Elapsed        time.Duration
	Complete       bool
}

// Live are the figures a progress display shows.
type Live struct {
	Elapsed                time.Duration
	RecordsRead, BytesRead int64
	// BytesDone is the input below the committed low-water marks.
	BytesDone int64
	// Written and Skipped count records as the service acknowledges them
	// (written, or found existing in create mode), DeadLettered once the
	// dead-letter file holding them is synced: the one meaning progress,
	// metrics, the summary and the report share.
	Written, Skipped, DeadLettered int64
	// Carried counts the records among Written and Skipped that an
	// earlier run finished past its checkpointed position: read again,
	// not sent (Committed.Ahead); CarriedExisting those of them found
	// existing.
	Carried, CarriedExisting int64
	// InputsRefused counts inputs refused whole (corrupt gzip, bad CSV
	// header); each is also one of DeadLettered.
	InputsRefused       int64
	Requests, Throttled int64
	RU                  float64
	InFlight            int64
	// Retries are this run's resent attempts by cause.
	Retries report.Retries
	// NoWriteFor is how long no write has succeeded while attempts kept
	// failing (0 once one succeeds), LastFailure what the last one was
	// ("503 service unavailable"): a display warns past about 10 s.
	NoWriteFor  time.Duration
	LastFailure string
	// Pacing is the pacer's view (its limit, each partition's share and
	// rate); nil when not pacing (the naive strategy).
	Pacing *pacing.Snapshot
	// perPartition is what each physical partition took so far, as the
	// pacer numbers them (both strategies).
	perPartition []partitionCount
}

// StopCause says why a run ended before its inputs did.
type StopCause int

const (
	Finished StopCause = iota
	Interrupted
	MaxErrorsExceeded
	FatalError
)

// Result is what a run did.
type Result struct {
	Cause    StopCause
	Err      error // the fatal error or the reason for stopping
	Started  time.Time
	Snapshot runSnapshot
	Live     Live
	Series   []report.Second
	Charges  *Histogram
	// roundTrip is the median time from a request's send to its answer;
	// hotKey the partition key that took the most RU (when hasHotKey).
	roundTrip time.Duration
	hotKey    heavyKey
	hasHotKey bool
	// starved is the share of the run every partition spent waiting for
	// records while the input was still being read: an input-bound load.
	starved float64
	// ahead is the records the final checkpoint lists past its marks:
	// acknowledged, and counted as such.
	ahead Counts
	// BatchesRefused: the server answered batches with 500, or refused
	// them before the load, and the run fell back to point writes.
	// RangeBatchesRefused: it refused range batches, and the run sent
	// transactional batches instead.
	BatchesRefused, RangeBatchesRefused bool
	// CheckpointSaves and CheckpointTime measure checkpointing's cost.
	CheckpointSaves int64
	CheckpointTime  time.Duration
	// reasons counts the dead-letter file's lines by reason, earlier runs' too.
	reasons *report.Reasons
}

// ErrMaxErrors is the cause of a run stopped by --max-errors.
var ErrMaxErrors = errors.New("too many records dead-lettered")

type item struct {
	input int
	seq   uint64
	doc   Document
	size  int
	terms int
	est   float64
	part  int
	epk   string
	path  string
	line  int64
	base  int64 // where line counts from (source.Position.Base)
	off   int64
	raw   []byte
	// key is keyOf(doc.PK) once keyed is set: see batchKey.
	key   BatchKey
	keyed bool
	// tries are the record's own failed attempts in range batches, where
	// each operation is answered on its own.
	tries attempts
}

// batchKey is the record's key for grouping into batches, worked out on
// first use: a window asks for it more than once, and a dry-run's planner
// hands it over already known.
func (it *item) batchKey() BatchKey {
	if !it.keyed {
		it.key, it.keyed = keyOf(it.doc.PK), true
	}
	return it.key
}

// where names the record's place for a message: its line, or its byte
// offset in a piece whose lines before it were not counted.
func (it *item) where() string {
	if it.base > 0 {
		return fmt.Sprintf("%s at byte %d", it.path, it.off)
	}
	return fmt.Sprintf("%s line %d", it.path, it.line)
}

type run struct {
	o       Options
	adm     admission
	tr      *tracker
	dl      *deadLetterFile
	start   time.Time
	stopRd  context.CancelCauseFunc // stops reading
	readCtx context.Context
	wctx    context.Context // writes; outlives readCtx by DrainTimeout
	wg      sync.WaitGroup

	read, bytes         atomic.Int64
	requests, throttled atomic.Int64
	written, skipped    atomic.Int64
	carried             atomic.Int64 // see Live.Carried
	carriedExisting     atomic.Int64 // of carried, those found existing
	refused             atomic.Int64 // inputs refused whole
	inFlight            atomic.Int64
	ruMilli             atomic.Int64
	sinceCheckpoint     atomic.Int64
	retries             retryCounters
	health              writeHealth
	tally               partitionTally
	policy              retryPolicy
	// batchWorked: a batch has been committed this run; batchOff: the
	// server refused batches, so the rest of the run sends point writes.
	batchWorked, batchOff atomic.Bool

	saves    int64         // checkpoints saved
	saveTime time.Duration // time spent saving them (fsyncs mostly)

	// waiting reports whether every partition waits for the reader;
	// starved counts the loop's ticks it did while reading went on, of
	// ticks.
	waiting        func() bool
	readDone       atomic.Bool
	starved, ticks int64

	mu      sync.Mutex
	fatal   error
	cause   StopCause
	series  []report.Second
	charges *Histogram
}

// Run loads every input through the pipeline: reader → mapper → pacer →
// writers → acknowledgement tracker → checkpoint. A record is read only
// when its partition's queue has room, so memory stays bounded. ctx
// cancellation is an interruption: reading stops, in-flight writes drain
// for at most DrainTimeout, and the final checkpoint is saved.
func Run(ctx context.Context, o Options) (*Result, error) {
	o.defaults()
	// Committed counts are this run's; only the position (and what was
	// finished past it) carries over.
	starts := make([]Committed, len(o.Inputs))
	for i, in := range o.Inputs {
		starts[i] = Committed{Offset: in.Start.Offset, Line: in.Start.Line, Base: in.Start.Base, Refused: in.Start.Refused, Ahead: in.Start.Ahead}
	}
	dl, err := openDeadLetter(o.DeadLetterPath, o.DeadLetterSize)
	if err != nil {
		return nil, err
	}
	if o.Charges == nil {
		o.Charges = NewHistogram()
	}
	if o.Lines == nil {
		o.Lines = &source.LineIndexes{}
	}
	r := &run{o: o, adm: newAdmission(o), dl: dl, start: o.Clock.Now(), charges: o.Charges,
		policy: retryPolicy{maxTransient: o.MaxTransientAttempts}}
	r.health.lastOK.Store(r.start.UnixNano())
	if o.Errors == nil {
		r.o.Errors = newErrorLimit(o.MaxErrors, 0)
	}
	r.tr = newTracker(starts, r.listDead)

	readCtx, stopRd := context.WithCancelCause(context.Background())
	r.readCtx, r.stopRd = readCtx, stopRd
	// Ends the watcher below once the run is over (a no-op cause then).
	defer stopRd(nil)
	wctx, cancelWrites := context.WithCancel(context.Background())
	r.wctx = wctx
	defer cancelWrites()

	// An outside cancellation (SIGINT) stops reading; writes get a grace
	// period to drain.
	go func() {
		select {
		case <-ctx.Done():
			r.stop(Interrupted, context.Cause(ctx))
		case <-readCtx.Done():
		}
		<-readCtx.Done()
		if o.Clock.Sleep(wctx, o.DrainTimeout) == nil {
			cancelWrites()
		}
	}()

	parts := r.adm.lanes(o.Partitions)
	var dispatchers sync.WaitGroup
	laneSize, _ := o.batchMode().queueAndWindow(o.QueuePerPartition)
	queues := &lanes{size: laneSize, current: r.adm.current, start: func(lane int, q chan *item, busy *atomic.Int64) {
		dispatchers.Add(1)
		go func() {
			defer dispatchers.Done()
			r.dispatch(lane, q, busy)
		}()
	}}
	queues.get(parts - 1)

	r.waiting = queues.allIdle
	done := make(chan struct{})
	var readErr error
	go func() {
		defer close(done)
		readErr = r.readAll(queues)
		r.readDone.Store(true)
		if readErr == nil && !r.stopped() && o.ReadDone != nil {
			o.ReadDone()
		}
		queues.closeAll()
		dispatchers.Wait()
		r.wg.Wait()
	}()

	r.loop(done)
	if readErr != nil {
		r.stop(FatalError, readErr)
	}
	cancelWrites()
	if err := r.tr.err(); err != nil {
		r.stop(FatalError, err)
	}
	snap, serr := r.checkpoint(true)
	res := &Result{Cause: r.cause, Err: r.fatal, Started: r.start, Snapshot: snap, Live: r.live(), Charges: r.charges}
	if r.o.Progress != nil {
		// The last event has the counts the report will: the final
		// checkpoint has synced every dead letter counted.
		r.o.Progress(res.Live)
	}
	for _, c := range snap.Committed {
		w, e := c.Ahead.Counts()
		res.ahead = res.ahead.plus(Counts{Written: w, Existing: e})
	}
	res.roundTrip = r.tally.roundTrip()
	if r.ticks > 0 {
		res.starved = float64(r.starved) / float64(r.ticks)
	}
	res.hotKey, res.hasHotKey = r.tally.heaviestKey()
	res.BatchesRefused = r.batchOff.Load()
	r.mu.Lock()
	res.CheckpointSaves, res.CheckpointTime = r.saves, r.saveTime
	res.Series = append([]report.Second(nil), r.series...)
	r.mu.Unlock()
	if cerr := dl.close(); cerr != nil && serr == nil {
		serr = cerr
	}
	res.reasons = dl.reasons()
	if serr != nil {
		return res, serr
	}
	return res, nil
}

func (o *Options) defaults() {
	if o.Clock == nil {
		o.Clock = clock.System{}
	}
	if o.QueuePerPartition <= 0 {
		o.QueuePerPartition = readplan.DefaultReadAhead(o.Partitions)
	}
	if o.NaiveConcurrency <= 0 {
		o.NaiveConcurrency = naiveConcurrency
	}
	if o.MaxTransientAttempts <= 0 {
		o.MaxTransientAttempts = 10
	}
	if o.CheckpointEvery <= 0 {
		o.CheckpointEvery = 10000
	}
	if o.CheckpointInterval <= 0 {
		o.CheckpointInterval = DefaultCheckpointInterval
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 30 * time.Second
	}
	if o.Mode == "" {
		o.Mode = ModeUpsert
	}
	if _, ok := o.Sink.(RangeBatchSink); !ok {
		o.Ranges = nil
	}
	if _, ok := o.Sink.(BatchSink); (!ok && o.Ranges == nil) || o.Batch < 2 {
		o.Batch, o.Ranges = 0, nil
	}
	o.Batch = min(o.Batch, MaxBatchOps)
	if o.BatchBytes <= 0 {
		o.BatchBytes = DefaultBatchBytes
	}
	if o.BatchLinger == 0 {
		o.BatchLinger = DefaultBatchLinger
	}
	if o.Strategy == "" {
		o.Strategy = StrategyPaced
	}
}

// DefaultCheckpointInterval is how often a run saves its checkpoint at
// least. A kill costs the records acknowledged since the last save (those
// acknowledged past a low-water mark are listed in it) and those in
// flight: saved every second, a kill costs about a second of writes.
const DefaultCheckpointInterval = time.Second

// lanes are the queues of records read ahead, one per pacer partition
// index. A split adds partitions, hence lanes; a split-away partition's
// lane drains, its records re-routed as they are dispatched. Only the
// reader calls get and closeAll. busy counts, per lane, the requests its
// dispatcher is admitting (spending the pacer's bucket) or has in flight.
type lanes struct {
	mu    sync.Mutex
	qs    []chan *item
	busy  []*atomic.Int64
	size  int
	start func(int, chan *item, *atomic.Int64)
	// current tells a current partition's lane from one a split retired
	// (admission.current); nil: every lane is current.
	current func(int) bool
}

func (l *lanes) get(i int) chan *item {
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.qs) <= i {
		q, busy := make(chan *item, l.size), new(atomic.Int64)
		l.qs, l.busy = append(l.qs, q), append(l.busy, busy)
		l.start(len(l.qs)-1, q, busy)
	}
	return l.qs[max(i, 0)]
}

// anyIdle reports whether some partition is idle: nothing queued and
// nothing being admitted or written. With batching a queue is often empty
// while its partition writes what was just taken from it; that partition
// is not starved. Nor is a partition a split retired: once drained its
// lane stays empty, and counting it would cut segments for nothing.
func (l *lanes) anyIdle() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, q := range l.qs {
		if len(q) == 0 && l.busy[i].Load() == 0 && (l.current == nil || l.current(i)) {
			return true
		}
	}
	return false
}

// allIdle reports whether every current partition is idle: the writers
// wait for the reader.
func (l *lanes) allIdle() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, q := range l.qs {
		if (len(q) > 0 || l.busy[i].Load() > 0) && (l.current == nil || l.current(i)) {
			return false
		}
	}
	return true
}

func (l *lanes) closeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, q := range l.qs {
		close(q)
	}
}

// stop ends reading; the first cause wins.
func (r *run) stop(cause StopCause, err error) {
	r.mu.Lock()
	if r.cause == Finished && cause != Finished {
		r.cause, r.fatal = cause, err
	}
	r.mu.Unlock()
	r.stopRd(err)
}

func (r *run) stopped() bool { return r.readCtx.Err() != nil }

// loop ticks progress, the per-second series and checkpoints until done.
func (r *run) loop(done <-chan struct{}) {
	period := min(200*time.Millisecond, r.o.CheckpointInterval)
	lastCheckpoint := r.o.Clock.Now()
	lastSecond := int64(0)
	var prev Live
	for {
		select {
		case <-done:
			r.recordSecond(&prev, &lastSecond, true)
			return
		case <-r.o.Clock.After(period):
		}
		now := r.o.Clock.Now()
		r.ticks++
		if !r.readDone.Load() && !r.stopped() && r.waiting != nil && r.waiting() {
			r.starved++
		}
		r.recordSecond(&prev, &lastSecond, false)
		if now.Sub(lastCheckpoint) >= r.o.CheckpointInterval || r.sinceCheckpoint.Load() >= r.o.CheckpointEvery {
			if _, err := r.checkpoint(false); err != nil {
				r.stop(FatalError, err)
			}
			lastCheckpoint = now
		}
	}
}

func (r *run) recordSecond(prev *Live, last *int64, final bool) {
	elapsed := r.o.Clock.Now().Sub(r.start)
	sec := int64(elapsed / time.Second)
	if sec <= *last && !final {
		return
	}
	cur := r.live()
	r.mu.Lock()
	r.series = append(r.series, report.Second{
		T:          *last,
		RU:         cur.RU - prev.RU,
		Requests:   cur.Requests - prev.Requests,
		Throttled:  cur.Throttled - prev.Throttled,
		Records:    (cur.Written + cur.Skipped - cur.Carried) - (prev.Written + prev.Skipped - prev.Carried),
		LimitRU:    limitOf(cur.Pacing),
		Partitions: partitionSeconds(prev.perPartition, cur.perPartition, cur.Pacing),
	})
	r.mu.Unlock()
	*prev, *last = cur, sec
	// The final figures are shown once the final checkpoint has synced
	// the dead letters (Run).
	if r.o.Progress != nil && !final {
		r.o.Progress(cur)
	}
}

func limitOf(p *pacing.Snapshot) float64 {
	if p == nil {
		return 0
	}
	return p.LimitRU
}

// partitionSeconds is each partition's second between two tallies, with
// the pacer's share and limit for it.
func partitionSeconds(prev, cur []partitionCount, p *pacing.Snapshot) []report.PartitionSecond {
	n := len(cur)
	if p != nil {
		for _, ps := range p.Partitions {
			n = max(n, ps.Index+1)
		}
	}
	if n == 0 || n > report.MaxPartitionSeries {
		return nil
	}
	out := make([]report.PartitionSecond, n)
	for i, c := range cur {
		var was partitionCount
		if i < len(prev) {
			was = prev[i]
		}
		out[i].RU = report.Round2(c.RU - was.RU)
		out[i].Throttled = c.Throttled - was.Throttled
	}
	if p != nil {
		for _, ps := range p.Partitions {
			out[ps.Index].ShareRU, out[ps.Index].LimitRU = report.Round2(ps.ShareRU), report.Round2(ps.LimitRU)
		}
	}
	return out
}

func (r *run) live() Live {
	now := r.o.Clock.Now()
	stalled, lastFailure := r.health.stalled(now)
	return Live{
		Retries:         r.retries.snapshot(),
		NoWriteFor:      stalled,
		LastFailure:     lastFailure,
		Elapsed:         now.Sub(r.start),
		RecordsRead:     r.read.Load(),
		BytesRead:       r.bytes.Load(),
		BytesDone:       r.bytesDone(),
		Written:         r.written.Load(),
		Skipped:         r.skipped.Load(),
		Carried:         r.carried.Load(),
		CarriedExisting: r.carriedExisting.Load(),
		perPartition:    r.tally.snapshot(),
		DeadLettered:    r.dl.durable(),
		InputsRefused:   r.refused.Load(),
		Requests:        r.requests.Load(),
		Throttled:       r.throttled.Load(),
		RU:              float64(r.ruMilli.Load()) / 1000,
		InFlight:        r.inFlight.Load(),
		Pacing:          r.adm.pacerStats(),
	}
}

func (r *run) bytesDone() int64 { return r.tr.bytesDone() }

// checkpoint syncs the dead-letter file, then hands a snapshot to the
// Checkpoint callback: the positions and the file's size are taken
// together (lines written later belong to records above the positions),
// and saved only once those lines are flushed and fsynced.
func (r *run) checkpoint(final bool) (runSnapshot, error) {
	r.sinceCheckpoint.Store(0)
	var size int64
	committed := r.tr.committedWith(func() { size = r.dl.written() })
	if _, err := r.dl.sync(); err != nil {
		return runSnapshot{}, err
	}
	s := runSnapshot{
		Committed:      committed,
		DeadLetterSize: size,
		Requests:       r.requests.Load(),
		Throttled:      r.throttled.Load(),
		RU:             float64(r.ruMilli.Load()) / 1000,
		Elapsed:        r.o.Clock.Now().Sub(r.start),
	}
	if final {
		r.mu.Lock()
		s.Complete = r.cause == Finished && r.fatal == nil
		r.mu.Unlock()
		s.Complete = s.Complete && !r.tr.pending()
	}
	if r.o.Checkpoint == nil {
		return s, nil
	}
	began := r.o.Clock.Now()
	err := r.o.Checkpoint(s)
	r.mu.Lock()
	r.saves++
	r.saveTime += r.o.Clock.Now().Sub(began)
	r.mu.Unlock()
	return s, err
}

// readAll reads every input in order, maps records and queues them on
// their partition. It returns a fatal input error (I/O, corrupt gzip).
func (r *run) readAll(queues *lanes) error {
	cursors := min(max(r.o.Cursors, 1), len(r.o.Inputs))
	if cursors <= 1 && r.o.Segments == nil {
		workers := ScanWorkers()
		if r.o.Turns != nil { // runs beside this one map on their own goroutines
			workers = 1
		}
		for i, in := range r.o.Inputs {
			if r.stopped() {
				return nil
			}
			if err := r.readInput(i, in, workers, queues); err != nil {
				return err
			}
		}
		return nil
	}
	// Several cursors take the inputs in order; each parks on its own
	// record's full queue while the others go on feeding other partitions.
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	// The cursors map on as many goroutines already; mapping workers
	// would only add chunks in flight per cursor (scenario F reads one
	// file at 64 places).
	read := func(i int, in Input) bool {
		if err := r.readInput(i, in, 1, queues); err != nil {
			errOnce.Do(func() { firstErr = err })
			r.stop(FatalError, err)
			return false
		}
		return true
	}
	take := func(k int) (int, bool) {
		if r.o.Order != nil {
			if k >= len(r.o.Order) {
				return 0, false
			}
			return r.o.Order[k], true
		}
		return k, k < len(r.o.Inputs)
	}
	for range cursors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i, ok := take(int(next.Add(1) - 1))
				if !ok || r.stopped() || !read(i, r.o.Inputs[i]) {
					return
				}
			}
		}()
	}
	if s := r.o.Segments; s != nil {
		stop, watched := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(watched)
			s.watch(stop, r.o.Clock, queues.anyIdle, r.tr, func(i int, in Input) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					read(i, in)
				}()
			})
		}()
		defer func() { close(stop); <-watched }()
	}
	wg.Wait()
	return firstErr
}

func (r *run) readInput(i int, in Input, workers int, queues *lanes) error {
	if in.Start.Refused {
		return nil // refused by an earlier run: its dead letter is written
	}
	// A gzip stream's CRC and length are checked only at its very end, after
	// every record has been handed out: check them before loading any. This
	// runs on every run, resumes included (one decompression pass, far
	// faster than a paced load). Stdin is read once and cannot be checked.
	if !in.Stdin {
		if _, err := source.VerifyGzip(in.Input); err != nil {
			return r.refuseInput(i, in, err)
		}
	}
	cur := r.o.Segments.cursor(i)
	cur.begin()
	defer cur.finish()
	lastOffset, lastLine := in.Start.Offset, in.Start.Line
	anyRecord := false
	// Paced admission routes by the partition key's hash: hash it on the
	// mapping workers (route keeps a hash it is given).
	var prep Prep
	if _, paced := r.adm.(*pacedAdmission); paced {
		prep.Key = func(pk []any, keys *KeyCache, out *Prepared) { out.EPK, _ = keys.Of(pk, false) }
	}
	err := ScanInput(workers, in, r.o.Stdin, r.o.Source, r.o.Mapper, prep, func(s *Scanned) bool {
		if r.stopped() || !cur.take(s.Rec.At(), s.Rec.Next) {
			return false
		}
		anyRecord = true
		rec := s.Rec
		r.read.Add(1)
		r.bytes.Add(rec.Next.Offset - lastOffset)
		lastOffset, lastLine = rec.Next.Offset, rec.Next.Line
		seq := r.tr.add(i, rec.Next.Offset, rec.Next.Line)
		if s.Dead != nil {
			r.deadLetter(i, seq, s.Dead)
			return true
		}
		// The tracker numbers a piece's records from its start, as the
		// checkpoint's Ahead counts them from the position saved.
		if done, existing := in.Start.Ahead.Done(int64(seq)); done {
			r.carry(i, seq, existing)
			return true
		}
		it := &item{
			input: i, seq: seq,
			doc:  Document{ID: s.Doc.ID, PK: s.Doc.PK, Body: s.Doc.Body},
			size: len(s.Doc.Body), terms: s.Doc.Terms, epk: s.EPK,
			path: rec.Path, line: rec.Line, base: rec.Base, off: rec.Offset,
		}
		if r.o.Cost != nil {
			it.est = r.o.Cost.Estimate(it.size, it.terms)
		}
		r.adm.route(it)
		r.tally.read(r.adm.home(it, it.part), it.est)
		q := queues.get(it.part)
		select {
		case q <- it:
			return true
		default:
		}
		cur.park(true)
		defer cur.park(false)
		select {
		case q <- it:
			return true
		case <-r.readCtx.Done():
			return false
		}
	}, nil)
	if err != nil && !anyRecord && in.Start.Offset == 0 && in.End == 0 {
		// A bad CSV header is found when the input is opened.
		return r.refuseInput(i, in, err)
	}
	// A Parquet row group that does not decode refuses the rest of the
	// file, at the position reached: the rows before it were loaded. Read
	// in segments, it refuses the rest of its segment; the others load.
	var ie *source.InputError
	if errors.As(err, &ie) {
		r.read.Add(1)
		r.refused.Add(1)
		seq := r.tr.add(i, lastOffset, lastLine)
		r.deadLetterAs(i, seq, resultRefused, &DeadLetter{
			Source: in.Path, Line: ie.Line, base: in.Start.Base, Offset: ie.Offset, Reason: ie.Code,
			Error: "the rest of the input (of its segment, when read in segments) refused, the rows before it loaded: " + ie.Error(),
		})
		return nil
	}
	return err
}

// carry acknowledges a record that an earlier run wrote (or found
// present) past its checkpointed position, as it was then, without
// sending it again.
func (r *run) carry(input int, seq uint64, existing bool) {
	result, count := resultWritten, &r.written
	if existing {
		result, count = resultSkipped, &r.skipped
		r.carriedExisting.Add(1)
	}
	count.Add(1)
	r.carried.Add(1)
	r.sinceCheckpoint.Add(1)
	r.tr.ack(input, seq, result, nil)
}

// refuseInput turns an input-level failure (source.InputError) into one
// dead letter for the whole input, none of whose records is loaded, and
// lets the other inputs go on. Any other error is returned: it is fatal.
func (r *run) refuseInput(i int, in Input, err error) error {
	var ie *source.InputError
	if !errors.As(err, &ie) {
		return err
	}
	line := ie.Line
	if ie.Code == source.ReasonCSVHeader {
		line = 1
	}
	r.read.Add(1)
	r.refused.Add(1)
	seq := r.tr.add(i, in.Start.Offset, in.Start.Line)
	r.deadLetterAs(i, seq, resultRefused, &DeadLetter{
		Source: in.Path, Line: line, base: in.Start.Base, Offset: ie.Offset, Reason: ie.Code,
		Error: "input refused, none of its records loaded: " + ie.Error(),
	})
	return nil
}

// deadLetter acknowledges a record as dead-lettered; its line is written,
// and --max-errors enforced, as it passes the low-water mark (listDead).
func (r *run) deadLetter(input int, seq uint64, d *DeadLetter) {
	r.deadLetterAs(input, seq, resultDeadLettered, d)
}

func (r *run) deadLetterAs(input int, seq uint64, result recordResult, d *DeadLetter) {
	r.countLines(d)
	r.sinceCheckpoint.Add(1)
	r.tr.ack(input, seq, result, d)
}

// countLines turns a dead letter's line, counted from the start of a piece
// placed without counting the lines before it, into the input's line: it
// counts them now, once per stretch of the input (source.LineIndex), on
// the goroutine that found the record bad, never under the tracker's lock.
// When they cannot be read, the line stays 0 and Offset says where the
// record is.
func (r *run) countLines(d *DeadLetter) {
	if d.base <= 0 {
		return
	}
	i := slices.IndexFunc(r.o.Inputs, func(in Input) bool { return in.Path == d.Source })
	if i < 0 {
		d.Line = 0
		return
	}
	line, err := r.o.Lines.For(r.o.Inputs[i].Input).Line(d.Line, d.base)
	if err != nil {
		line = 0
		d.Error += " (its line number is unknown: " + err.Error() + "; offset is its byte offset)"
	}
	d.Line, d.base = line, 0
}

// dispatch admits one partition's queued records and starts their writes,
// counting in busy the requests being admitted or in flight.
// After a stop, queued records are dropped unsent: they are above the
// low-water mark and a resume reads them again.
func (r *run) dispatch(lane int, q <-chan *item, busy *atomic.Int64) {
	// Records this lane holds for partitions that split away from it go
	// to their new partitions' own dispatchers.
	away := &rehomer{r: r, size: cap(q), busy: busy}
	defer away.wait()
	// admit waits until one request (a point write or a batch) of ru may
	// be sent: the strategy counts requests, whatever the records in them.
	admit := func(part int, ru float64) bool {
		busy.Add(1)
		defer busy.Add(-1)
		return !r.stopped() && r.adm.admit(r.readCtx, part, ru) == nil
	}
	start := func(send func()) {
		r.wg.Add(1)
		r.inFlight.Add(1)
		busy.Add(1)
		go func() {
			defer r.wg.Done()
			defer r.inFlight.Add(-1)
			defer busy.Add(-1)
			defer r.adm.release()
			send()
		}()
	}
	if r.o.Batch > 1 {
		r.dispatchBatched(lane, q, admit, start, away)
		// Drain what a stop left queued so the reader is never blocked.
		for range q {
		}
		return
	}
	for it := range q {
		// Routed again here: the partitions may have split since the
		// record was queued.
		r.adm.route(it)
		if it.part != lane {
			away.send(it)
			continue
		}
		if admit(it.part, it.est) {
			start(func() { r.write(it) })
		}
	}
}

// rehomer dispatches the records a lane holds for partitions that split
// away from it after they were queued: one dispatcher per partition that
// now holds them, each paying its own partition's bucket. Admitted one
// after another by the lane's dispatcher, a record waiting for one
// child's budget (or its pause after a 429) would hold up the other
// child's records behind it, and that child's budget would go unspent
// while the lane drains — seconds, with a deep read-ahead. The records
// were read already, so this adds no memory; only the lane's dispatcher
// calls send and wait.
type rehomer struct {
	r    *run
	size int // each partition's queue, as a lane's
	busy *atomic.Int64
	subs map[int]chan<- *item
	wg   sync.WaitGroup
}

func (h *rehomer) send(it *item) {
	in, ok := h.subs[it.part]
	if !ok {
		if h.subs == nil {
			h.subs = map[int]chan<- *item{}
		}
		c, out := make(chan *item), make(chan *item, max(h.size, 1))
		part := it.part
		h.wg.Add(2)
		go func() {
			defer h.wg.Done()
			relay(c, out)
		}()
		go func() {
			defer h.wg.Done()
			h.r.dispatch(part, out, h.busy)
		}()
		h.subs[part], in = c, c
	}
	in <- it
}

// wait ends the partitions' queues once the lane is done and waits for
// their dispatchers.
func (h *rehomer) wait() {
	for _, c := range h.subs {
		close(c)
	}
	h.wg.Wait()
}

// relay passes what in receives to out, in order, never making the sender
// wait for out; it closes out once in is closed and everything is passed.
func relay(in <-chan *item, out chan<- *item) {
	defer close(out)
	var buf []*item
	for in != nil || len(buf) > 0 {
		var send chan<- *item
		var head *item
		if len(buf) > 0 {
			send, head = out, buf[0]
		}
		select {
		case it, ok := <-in:
			if !ok {
				in = nil
				continue
			}
			buf = append(buf, it)
		case send <- head:
			buf[0] = nil
			buf = buf[1:]
		}
	}
}

// request is records sent together until each is acknowledged: one record
// as a point write, or records of one key as a transactional batch. tries
// are its own failed attempts: a part of a batch split by a 207 is a new
// request that counts from none.
type request struct {
	items []*item
	tries attempts
}

// write sends records until each is written, counted as existing,
// dead-lettered, or the run stops: one record as a point write, several
// of one key as transactional batches. The caller has reserved the
// records' estimate on the partition of the first. What follows each
// answer is the retry policy's (retry.go), for point writes and batches
// alike. A batch is atomic, so a refused operation (its own status; 424
// for the others) splits it: the operations before the refused one, which
// ran and were rolled back, are resent as a batch, the refused record is
// decided alone, and the ones after it (never run) are resent as another
// batch.
func (r *run) write(items ...*item) {
	part := items[0].part                                       // where the dispatcher reserved
	pending := []request{{items: items, tries: items[0].tries}} // a record resent alone from a range batch keeps its count
	reserved := true                                            // the dispatcher paid for the first attempt
	for len(pending) > 0 {
		req := pending[0]
		pending = pending[1:]
		g := req.items
		if len(g) > 1 && r.batchKind() != BatchPerKey {
			if reserved {
				// Paid for as one batch, sent as point writes: the first
				// keeps its own estimate, the others pay their own.
				r.adm.settle(part, estimateOf(g), g[0].est)
			}
			pending = append(singles(g), pending...)
			continue
		}
		est := estimateOf(g)
		if !reserved {
			// Each resend is routed again: the partitions may have split.
			part = r.route(g...)
			if err := r.adm.repay(r.wctx, part, est); err != nil {
				return
			}
		}
		reserved = false
		out, latency, answered := r.send(g, "")
		if !answered {
			return // drain deadline passed: left unacknowledged, replayed on resume
		}
		r.requests.Add(1)
		r.ruMilli.Add(int64(out.Charge * 1000))
		class, retryAfter := Classify(out.Outcome)
		r.tally.answered(g[0], r.adm.home(g[0], part), class == Throttled, took(class, len(g)), est, out.Charge, latency)
		if class != Throttled {
			r.adm.settle(part, est, out.Charge)
		}
		r.health.answered(r.o.Clock.Now(), class, out.Outcome)
		if len(g) > 1 && out.Status == http.StatusMultiStatus {
			rest, ok := r.splitRefused(g, out)
			if !ok {
				return
			}
			pending = append(rest, pending...)
			continue
		}
		if len(g) > 1 && r.batchesRefused(out.Outcome) {
			pending = append([]request{req}, pending...)
			continue
		}
		d, tries := r.policy.decide(class, retryAfter, req.tries, rand.Float64())
		switch d.verdict {
		case verdictWritten:
			if len(g) > 1 {
				r.batchWorked.Store(true)
			}
			r.wrote(g, out)
		case verdictExists, verdictRefused:
			if len(g) > 1 {
				// The batch as a whole was refused (400, 413): the
				// documents may each be fine, so each gets the outcome of
				// its own point write.
				pending = append(singles(g), pending...)
				break
			}
			r.skipOrDeadLetter(g[0], d, out.Outcome)
		case verdictStop:
			r.giveUp(g, d, out.Outcome)
			return
		case verdictResend:
			r.retries[retryClass(out.Outcome)].Add(1)
			if d.throttled {
				r.throttled.Add(1)
			}
			pending = append([]request{{items: g, tries: tries}}, pending...)
			if err := r.await(d, g); err != nil {
				return
			}
		}
		if r.wctx.Err() != nil {
			return
		}
	}
}

// took is how many of a request's records an answer of class c wrote or
// found existing.
func took(c Class, records int) int {
	if c == Done || c == Exists {
		return records
	}
	return 0
}

// send makes one attempt at a request: a point write for one record, a
// range batch addressed to rangeID, or a transactional batch for more,
// and times it. answered is false when the drain deadline passed first.
func (r *run) send(g []*item, rangeID string) (out BatchOutcome, latency time.Duration, answered bool) {
	began := r.o.Clock.Now()
	if len(g) == 1 && rangeID == "" {
		out.Outcome = r.o.Sink.Write(r.wctx, g[0].doc)
	} else {
		docs := make([]Document, len(g))
		for i, it := range g {
			docs[i] = it.doc
		}
		if rangeID != "" {
			out = r.o.Sink.(RangeBatchSink).WriteRangeBatch(r.wctx, rangeID, docs)
		} else {
			out = r.o.Sink.(BatchSink).WriteBatch(r.wctx, docs)
		}
	}
	latency = r.o.Clock.Now().Sub(began)
	r.adm.observe(latency)
	return out, latency, r.wctx.Err() == nil || out.Status != 0
}

// await waits as a resend decision says, on the run's write context. A
// 429's wait is admission's: paced, the pacer pauses the partition that
// now holds the records and cuts its rate, and the resend's repay honours
// the pause; naive, a sleep. After a split the routing is refreshed first.
func (r *run) await(d decision, g []*item) error {
	if d.throttled {
		return r.adm.throttled(r.wctx, r.route(g...), d.wait)
	}
	if d.moved && r.o.OnGone != nil {
		r.o.OnGone()
	}
	return r.o.Clock.Sleep(r.wctx, d.wait)
}

// skipOrDeadLetter acknowledges a record the container already holds, or
// dead-letters one it refused.
func (r *run) skipOrDeadLetter(it *item, d decision, o Outcome) {
	if d.verdict == verdictExists {
		r.skipped.Add(1)
		r.sinceCheckpoint.Add(1)
		r.tr.ack(it.input, it.seq, resultSkipped, nil)
		return
	}
	r.deadLetter(it.input, it.seq, &DeadLetter{
		Source: it.path, Line: it.line, base: it.base, Offset: it.off,
		Reason: "rejected", Error: outcomeText(o), Status: o.Status, ID: it.doc.ID,
		Raw: string(it.doc.Body),
	})
}

// giveUp stops the run as a verdictStop says: after a request's transient
// failures, or on a fatal answer unless the run is stopping anyway.
func (r *run) giveUp(g []*item, d decision, o Outcome) {
	if d.gaveUp > 0 {
		r.stop(FatalError, fmt.Errorf("write %s: gave up after %d attempts: %s", requestName(g), d.gaveUp, outcomeText(o)))
	} else if r.wctx.Err() == nil {
		r.stop(FatalError, fmt.Errorf("write %s: %s", requestName(g), outcomeText(o)))
	}
}

// requestName names a request for a message: its record's id and place,
// or the batch's size and first record's place.
func requestName(g []*item) string {
	if len(g) == 1 {
		return fmt.Sprintf("%s (%s)", g[0].doc.ID, g[0].where())
	}
	return fmt.Sprintf("a batch of %d (%s)", len(g), g[0].where())
}

func outcomeText(o Outcome) string {
	switch {
	case o.Message != "":
		return o.Message
	case o.Err != nil:
		return o.Err.Error()
	default:
		return fmt.Sprintf("status %d", o.Status)
	}
}
