package loader

import (
	"errors"
	"fmt"
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

// progressFunc turns the pipeline's live figures into events for
// j.Progress; nil when nobody listens. fill adds what only the caller
// knows (the shared load's leases).
func (j *Job) progressFunc(totalBytes int64, target float64, fill func(*ProgressEvent)) func(Live) {
	if j.Progress == nil {
		return nil
	}
	return func(l Live) {
		ev := ProgressEvent{Live: l, TotalBytes: totalBytes, TargetRU: target}
		if l.Pacing != nil {
			ev.PacerLimitRU, ev.Partitions = l.Pacing.LimitRU, l.Pacing.Partitions
		}
		if fill != nil {
			fill(&ev)
		}
		j.Progress(ev)
	}
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
	out.Carried = lp.done.Carried
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
	sum.DeadLettered += l.DeadLettered
	sum.InputsRefused += l.InputsRefused
	sum.Requests += l.Requests
	sum.Throttled += l.Throttled
	sum.RU += l.RU
	sum.Retries.Add(l.Retries)
}
