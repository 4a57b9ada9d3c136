package loader

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/cosmosloader/loader/internal/human"
	"github.com/cosmosloader/loader/internal/parallel"
	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/parquet"
	"github.com/cosmosloader/loader/pacing"
)

// ProgressEvent is what the engine tells a progress display, about once a
// second: the live figures and what puts them in context. The engine only
// emits events; cmd owns the terminal and decides how to show them.
//
// A display shows Done (the load's records acknowledged, by outcome), one
// percentage — Percent, of the load's records — and the ETA, or
// "estimating…" while ETAKnown is false. Live's counts are this run's.
type ProgressEvent struct {
	Live
	// TotalBytes is the input this run has to load (what is left of it on
	// resume); 0 when unknown: stdin, shards of a shared load.
	TotalBytes int64
	// TotalRows is the rows this run has to load when every input is
	// Parquet, exact from the footers (less the committed rows); 0
	// otherwise. Parquet positions are rows scaled to bytes, so the byte
	// figures advance by rows too.
	TotalRows int64
	// Done is the whole load's records acknowledged so far, earlier runs'
	// included: the counts the summary and the report end with.
	Done Counts
	// Records is the whole load's records: exact when RecordsExact
	// (Parquet footers, or everything read), else estimated from the
	// records read per byte; 0 when unknown.
	Records      int64
	RecordsExact bool
	// Percent is Done's share of Records, in per cent; -1 when Records
	// is unknown.
	Percent float64
	// ETA is the time left at the rate being achieved, never less than
	// the busiest partition's remaining work at its share of the target;
	// ETAKnown is false until there are a few seconds of rate to go on, or
	// when the input's size is unknown.
	ETA      time.Duration
	ETAKnown bool
	// TargetRU is the run's target RU/s.
	TargetRU float64
	// PacerLimitRU is the pacer's current limit, below TargetRU while 429s
	// hold partitions back; 0 when not pacing (the naive strategy).
	PacerLimitRU float64
	// LeasesHeld of LeasePartitions capacity partitions, worth LeasedRU
	// RU/s, when sharing the container with other loaders.
	LeasesHeld, LeasePartitions int
	LeasedRU                    float64
	// Partitions is the pacer's view of each physical partition (its
	// share of the target, current limit, last second's RU, 429s); nil
	// when not pacing.
	Partitions []pacing.PartitionStats
}

// Counts are records by how they ended, each counted once acknowledged:
// written or found existing when the service answered, dead-lettered once
// the dead-letter file holding it is synced.
type Counts struct {
	Written, Existing, DeadLettered int64
}

// Total is every record counted.
func (c Counts) Total() int64 { return c.Written + c.Existing + c.DeadLettered }

func (c Counts) plus(o Counts) Counts {
	return Counts{c.Written + o.Written, c.Existing + o.Existing, c.DeadLettered + o.DeadLettered}
}

// fresh is what a run's live figures acknowledged itself: the records an
// earlier run finished and this one only read again (Carried) are left out.
func fresh(l Live) Counts {
	return Counts{Written: l.Written - (l.Carried - l.CarriedExisting), Existing: l.Skipped - l.CarriedExisting, DeadLettered: l.DeadLettered}
}

// progressFunc turns the pipeline's live figures into events for
// j.Progress; nil when nobody listens. before is what earlier runs
// acknowledged, ahead of it the records they listed past their marks
// (this run reads them again without sending them); fill adds what only
// the caller knows (the target as it changes, the shared load's leases).
func (j *Job) progressFunc(totalBytes int64, before Counts, ahead int64, target float64, fill func(*ProgressEvent)) func(Live) {
	if j.Progress == nil {
		return nil
	}
	est := &estimator{before: before, ahead: ahead}
	return func(l Live) {
		ev := ProgressEvent{Live: l, TotalBytes: totalBytes, TargetRU: target}
		if l.Pacing != nil {
			ev.PacerLimitRU, ev.Partitions = l.Pacing.LimitRU, l.Pacing.Partitions
		}
		if fill != nil {
			fill(&ev)
		}
		est.fill(&ev)
		j.Progress(ev)
	}
}

// estimator works out a progress event's totals, percentage and ETA from
// the events before it.
type estimator struct {
	mu     sync.Mutex
	before Counts
	ahead  int64
	// rate is the records acknowledged per second, smoothed; last and
	// lastDone the previous sample.
	rate           float64
	last           time.Duration
	lastDone       int64
	sampled, rated bool
	// parts follow each partition's RU as lastDone the records.
	parts []partitionRate
}

// partitionRate is one partition's RU/s as charged, smoothed as the
// records' rate, and when it last met a 429.
type partitionRate struct {
	ru, rate    float64
	throttled   int64
	throttledAt time.Duration
	rated       bool
}

// capacity is what a partition that met 429s within the last etaSmoothing
// gives the load, as it was charged; 0 when it did not: it may have more
// to give than it was asked for.
func (p partitionRate) capacity(now time.Duration) float64 {
	if !p.rated || p.throttled == 0 || now-p.throttledAt > etaSmoothing {
		return 0
	}
	return p.rate
}

// Smoothing and patience of the ETA: the rate is an exponentially
// weighted mean over about etaSmoothing, and no ETA is given before the
// load has run etaPatience (and two samples gave a rate).
const (
	etaSmoothing = 5 * time.Second
	etaPatience  = 3 * time.Second
)

func (e *estimator) fill(ev *ProgressEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := fresh(ev.Live)
	ev.Done = e.before.plus(now)
	ev.Percent = -1
	run, exact := runRecords(ev)
	if run <= 0 {
		return
	}
	// The run's records include those listed ahead, which it only reads.
	ev.Records, ev.RecordsExact = e.before.Total()-e.ahead+run, exact
	ev.Percent = min(100, 100*float64(ev.Done.Total())/float64(max(ev.Records, 1)))
	done := now.Total()
	e.sample(ev.Elapsed, done, ev.Live.perPartition)
	left := max(run-e.ahead-done, 0)
	switch {
	case left == 0 && exact:
		ev.ETA, ev.ETAKnown = 0, true
	case e.rated && ev.Elapsed >= etaPatience && e.rate > 0:
		capacity := make([]float64, len(e.parts))
		for i, p := range e.parts {
			capacity[i] = p.capacity(ev.Elapsed)
		}
		secs := max(float64(left)/e.rate, busiestLeft(ev, run-e.ahead, capacity))
		// To a tenth: the JSON log and the metric keep it, the terminal
		// rounds it to a second.
		ev.ETA, ev.ETAKnown = time.Duration(secs*float64(time.Second)).Round(100*time.Millisecond), true
	}
}

// sample adds the acknowledged count at elapsed to the smoothed rate, and
// each partition's RU charged and 429s met to its own.
func (e *estimator) sample(elapsed time.Duration, done int64, parts []partitionCount) {
	for len(e.parts) < len(parts) {
		e.parts = append(e.parts, partitionRate{})
	}
	if !e.sampled {
		e.last, e.lastDone, e.sampled = elapsed, done, true
		for i, p := range parts {
			e.parts[i].ru, e.parts[i].throttled = p.RU, p.Throttled
		}
		return
	}
	dt := elapsed - e.last
	if dt <= 0 {
		return
	}
	a := 1 - math.Exp(-dt.Seconds()/etaSmoothing.Seconds())
	smooth := func(rate *float64, rated *bool, r float64) {
		if !*rated {
			*rate, *rated = r, true
		} else {
			*rate += a * (r - *rate)
		}
	}
	smooth(&e.rate, &e.rated, float64(done-e.lastDone)/dt.Seconds())
	e.last, e.lastDone = elapsed, done
	for i, p := range parts {
		pr := &e.parts[i]
		smooth(&pr.rate, &pr.rated, (p.RU-pr.ru)/dt.Seconds())
		if p.Throttled > pr.throttled {
			pr.throttledAt = elapsed
		}
		pr.ru, pr.throttled = p.RU, p.Throttled
	}
}

// runRecords is the records this run has to load: exact from Parquet
// footers or once everything is read, else the records read per byte
// times the input's bytes; 0 when unknown.
func runRecords(ev *ProgressEvent) (int64, bool) {
	switch {
	case ev.TotalRows > 0:
		return ev.TotalRows, true
	case ev.TotalBytes <= 0 || ev.BytesRead <= 0 || ev.RecordsRead <= 0:
		return 0, false
	case ev.BytesRead >= ev.TotalBytes:
		return ev.RecordsRead, true
	}
	return int64(float64(ev.RecordsRead) / float64(ev.BytesRead) * float64(ev.TotalBytes)), false
}

// busiestLeft is the least time the run's work left needs: each
// partition's estimated RU still to write (its part of the records read
// so far, scaled to the run's toSend records, less what it has written),
// at the RU its estimates turned out to cost, done at the rate
// partitionRates gives it; the busiest partition's, whatever the others
// do. held is each partition's charged RU/s while it keeps meeting 429s
// (partitionRate.capacity).
func busiestLeft(ev *ProgressEvent, toSend int64, held []float64) float64 {
	read := ev.RecordsRead - ev.Carried
	if read <= 0 || ev.TargetRU <= 0 {
		return 0
	}
	var ru, doneRU float64
	for _, p := range ev.Live.perPartition {
		ru += p.RU
		doneRU += p.DoneRU
	}
	scale := max(float64(toSend)/float64(read), 1)
	left := make([]float64, len(ev.Live.perPartition))
	for i, p := range ev.Live.perPartition {
		charged := 1.0 // actual RU per estimated RU
		switch {
		case p.DoneRU > 0:
			charged = p.RU / p.DoneRU
		case doneRU > 0:
			charged = ru / doneRU
		}
		left[i] = max(p.ReadRU*scale-p.DoneRU, 0) * charged
	}
	rates := partitionRates(ev, held, left)
	var worst float64
	for i := range min(len(left), len(rates)) {
		worst = max(worst, left[i]/rates[i])
	}
	return worst
}

// partitionRates is the RU/s each partition can write at: its share of the
// target, or the pacer's limit for it, lower after 429s. The partitions
// that keep meeting 429s under that are held to what they were charged
// (other traffic took the rest), pooled: one partition's second is lumpy
// (a batch charges a partition at once), so they get the RU/s they were
// charged together, each in proportion to its share or limit. A partition
// with no work left is not among them: it was charged less for want of
// work.
func partitionRates(ev *ProgressEvent, held, left []float64) []float64 {
	n := len(ev.Partitions)
	if n == 0 {
		n = len(ev.Live.perPartition)
	}
	if n == 0 {
		return nil
	}
	rates := make([]float64, max(n, len(ev.Live.perPartition)))
	for i := range rates {
		rates[i] = ev.TargetRU / float64(n)
	}
	for _, ps := range ev.Partitions {
		if ps.LimitRU > 0 && ps.Index < len(rates) {
			rates[ps.Index] = min(rates[ps.Index], ps.LimitRU)
		}
	}
	pooled := func(i int) bool { return i < len(held) && held[i] > 0 && i < len(left) && left[i] > 0 }
	var charged, asked float64
	for i := range rates {
		if pooled(i) {
			charged += held[i]
			asked += rates[i]
		}
	}
	if charged > 0 && charged < asked {
		for i := range rates {
			if pooled(i) {
				rates[i] *= charged / asked
			}
		}
	}
	return rates
}

// parquetRowsLeft is TotalRows: the rows left to load when every input is
// Parquet, else 0; a segment's are those up to its end. Each input's
// footer is a round trip for a blob: parallel.InputsAtOnce are read at once.
func parquetRowsLeft(ins []Input, opts source.Options) int64 {
	for _, in := range ins {
		if f, err := source.ResolveFormat(in.Input, opts); err != nil || f != source.FormatParquet || in.Stdin {
			return 0
		}
	}
	left := make([]int64, len(ins))
	notParquet := errors.New("not Parquet")
	err := parallel.Each(len(ins), parallel.InputsAtOnce, func(i int) error {
		rows, ok := parquet.Rows(ins[i].Input, opts, ins[i].End)
		if !ok {
			return notParquet
		}
		left[i] = rows - ins[i].Start.Line
		return nil
	})
	if err != nil {
		return 0
	}
	var n int64
	for _, r := range left {
		n += r
	}
	return n
}

// stallWarning is how long no write may succeed, while attempts keep
// failing, before a progress display says so.
const stallWarning = 10 * time.Second

// StallText is the warning for a run whose writes have all been failing
// for stallWarning or longer, or "" when there is nothing to warn about:
// "no write has succeeded for 12s: 503 service unavailable; retrying".
func StallText(l Live) string {
	if l.NoWriteFor < stallWarning || l.LastFailure == "" {
		return ""
	}
	return fmt.Sprintf("no write has succeeded for %s: %s; retrying", human.Duration(l.NoWriteFor.Truncate(time.Second)), l.LastFailure)
}

// loadProgress sums the live figures of the pieces a load runs at once,
// and of those it has finished, into the load's: a shared load's display
// counts from the load's start, not from each shard's.
type loadProgress struct {
	mu    sync.Mutex
	began time.Time
	done  Live        // the finished pieces' final figures
	runs  []pieceLive // by worker slot
}

type pieceLive struct {
	running bool
	start   time.Time
	live    Live
}

// start marks slot's next piece as begun at now.
func (lp *loadProgress) start(slot int, now time.Time) {
	lp.mu.Lock()
	lp.runs[slot] = pieceLive{running: true, start: now}
	lp.mu.Unlock()
}

// sum takes slot's latest figures and returns the load's: counts summed,
// the pacer's view as slot last saw it, and a stall (NoWriteFor) only as
// long as every running piece has had one.
func (lp *loadProgress) sum(slot int, l Live) Live {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	lp.runs[slot].live = l
	out := l
	out.Elapsed = l.Elapsed + lp.runs[slot].start.Sub(lp.began)
	out.RecordsRead, out.BytesRead, out.BytesDone = lp.done.RecordsRead, lp.done.BytesRead, lp.done.BytesDone
	out.Written, out.Skipped, out.DeadLettered = lp.done.Written, lp.done.Skipped, lp.done.DeadLettered
	out.Carried, out.CarriedExisting = lp.done.Carried, lp.done.CarriedExisting
	out.perPartition = addCounts(nil, lp.done.perPartition)
	out.InputsRefused, out.Requests, out.Throttled = lp.done.InputsRefused, lp.done.Requests, lp.done.Throttled
	out.RU, out.Retries, out.InFlight = lp.done.RU, lp.done.Retries, 0
	for _, r := range lp.runs {
		if r.running {
			addLive(&out, r.live)
			out.InFlight += r.live.InFlight
			if r.live.NoWriteFor < out.NoWriteFor {
				out.NoWriteFor, out.LastFailure = r.live.NoWriteFor, r.live.LastFailure
			}
		}
	}
	return out
}

// finish counts slot's piece, ended with final, among the finished ones.
func (lp *loadProgress) finish(slot int, final Live) {
	lp.mu.Lock()
	addLive(&lp.done, final)
	lp.runs[slot].running = false
	lp.mu.Unlock()
}

// addLive adds l's counts to sum.
func addLive(sum *Live, l Live) {
	sum.RecordsRead += l.RecordsRead
	sum.BytesRead += l.BytesRead
	sum.BytesDone += l.BytesDone
	sum.Written += l.Written
	sum.Skipped += l.Skipped
	sum.Carried += l.Carried
	sum.CarriedExisting += l.CarriedExisting
	sum.perPartition = addCounts(sum.perPartition, l.perPartition)
	sum.DeadLettered += l.DeadLettered
	sum.InputsRefused += l.InputsRefused
	sum.Requests += l.Requests
	sum.Throttled += l.Throttled
	sum.RU += l.RU
	sum.Retries.Add(l.Retries)
}
