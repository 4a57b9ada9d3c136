package loader

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/cosmosloader/loader/internal/epk"
	"github.com/cosmosloader/loader/pacing"
)

// RangeBatcher is a target that can write range batches: documents of any
// partition keys that fall in one physical partition (partition key
// range), sent as one non-atomic request, as the SDKs' bulk modes send
// them (docs/bulk-protocol.md). Its Sink is then a RangeBatchSink.
type RangeBatcher interface {
	// ProbeRangeBatches checks before loading that the target executes
	// range batches as Cosmos DB does; the error says in one line why
	// not. It writes nothing.
	ProbeRangeBatches(ctx context.Context) error
	// ReadRanges reads the physical partitions afresh: bounds as
	// Target.Bounds, and ids[i], the partition key range id that holds
	// [bounds[i], bounds[i+1]) and that a range batch is addressed by.
	ReadRanges(ctx context.Context) (bounds, ids []string, err error)
}

// RangeBatchSink is a Sink that can also send a range batch.
type RangeBatchSink interface {
	Sink
	// WriteRangeBatch sends docs (at most MaxBatchOps, of keys in range
	// rangeID) as one non-atomic batch in the sink's mode. Outcome is the
	// request as a whole. On 200 or 207 Ops holds each document's own
	// outcome, in order, each applied or not on its own: a 429 (with its
	// retry-after) or a 410 for one operation, a 409 in create mode, a 400
	// for one document. Any other status — 410/1002 when the range split,
	// 429 when its partition had no budget, 400/413 for the body — means
	// no operation ran, and Ops is empty; with no response (Status 0) the
	// operations may or may not have run.
	WriteRangeBatch(ctx context.Context, rangeID string, docs []Document) BatchOutcome
}

// rangeRoutes are the container's partition key ranges as range batches
// are addressed: which range holds a record, and each range's batch
// sizer. A load's runs share them. They are read before the first range
// batch (the probe) and again when a batch meets 410 for a range that
// split or moved.
type rangeRoutes struct {
	src    RangeBatcher
	maxOps int

	reading sync.Mutex // one read at a time

	mu     sync.RWMutex
	bounds []string
	ids    []string
	sizers []*pacing.BatchSizer // per range, as ids
	gen    uint64               // counts the reads
}

func newRangeRoutes(src RangeBatcher, maxOps int) *rangeRoutes {
	return &rangeRoutes{src: src, maxOps: maxOps}
}

// read reads the ranges afresh, unless they were read again since
// generation seen: the writers that meet one split's 410s together read
// them once. A range that is still there keeps its sizer; a new one
// starts small.
func (t *rangeRoutes) read(ctx context.Context, seen uint64) error {
	t.reading.Lock()
	defer t.reading.Unlock()
	t.mu.RLock()
	cur, had := t.gen, make(map[string]*pacing.BatchSizer, len(t.ids))
	for i, id := range t.ids {
		had[id] = t.sizers[i]
	}
	t.mu.RUnlock()
	if cur != seen {
		return nil
	}
	bounds, ids, err := t.src.ReadRanges(ctx)
	if err != nil {
		return fmt.Errorf("read the partition key ranges: %w", err)
	}
	if len(ids) == 0 || len(bounds) != len(ids)+1 {
		return fmt.Errorf("read the partition key ranges: %d ids for %d bounds", len(ids), len(bounds))
	}
	sizers := make([]*pacing.BatchSizer, len(ids))
	for i, id := range ids {
		if sizers[i] = had[id]; sizers[i] == nil {
			sizers[i] = pacing.NewBatchSizer(t.maxOps)
		}
	}
	t.mu.Lock()
	t.bounds, t.ids, t.sizers = bounds, ids, sizers
	t.gen++
	t.mu.Unlock()
	return nil
}

// route finds the range holding it: its id, its sizer, and the generation
// of the ranges it was found in.
func (t *rangeRoutes) route(it *item) (id string, s *pacing.BatchSizer, gen uint64) {
	if it.epk == "" {
		it.epk = epk.Of(it.doc.PK) // the naive strategy does not hash keys
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	i := epk.Locate(t.bounds, it.epk)
	return t.ids[i], t.sizers[i], t.gen
}

// split cuts g into the records of each range, in order of first record,
// each keeping g's order. Usually they are all of one range: g itself.
func (t *rangeRoutes) split(g []*item) (groups [][]*item, ids []string, gen uint64) {
	var at map[string]int
	for i, it := range g {
		id, _, gn := t.route(it)
		gen = gn
		if at == nil {
			if i == 0 || id == ids[0] {
				ids = append(ids[:0], id)
				continue
			}
			// A second range: the records so far are the first's.
			at = map[string]int{ids[0]: 0}
			groups = [][]*item{slices.Clip(g[:i])}
		}
		k, ok := at[id]
		if !ok {
			k = len(groups)
			at[id] = k
			groups, ids = append(groups, nil), append(ids, id)
		}
		groups[k] = append(groups[k], it)
	}
	if at == nil {
		return [][]*item{g}, ids, gen
	}
	return groups, ids, gen
}

// rangeLimits bound a range batch of at most maxOps operations in a load
// paced at targetRU over parts partitions (0: no RU bound).
func rangeLimits(maxOps int, targetRU float64, parts int) pacing.BatchLimits {
	l := pacing.BatchLimits{Ops: maxOps, Bytes: pacing.RangeBatchBytes}
	if targetRU > 0 {
		l.RU = pacing.RangeBatchRU(targetRU, parts)
	}
	return l
}

// rangeOpBytes bounds what a record of size bytes and key takes in a
// range batch's body: the document, the operation's framing, and its
// partition key as JSON text inside a JSON string (escaped).
func rangeOpBytes(size int, key BatchKey) int {
	return size + batchOpOverhead + 2*len(key)
}

// fillRange takes from q, after window's first record, the records of one
// range batch: as many as the sizer of the first record's range allows,
// within the batch limits, waiting at most BatchLinger once the queue runs
// dry. A record taken that does not fit comes back as carry, the next
// batch's first. closed: q was closed.
func (r *run) fillRange(window []*item, q <-chan *item) (_ []*item, carry *item, closed bool) {
	first := window[0]
	_, sizer, _ := r.o.Ranges.route(first)
	limits := pacing.BatchLimits{Ops: sizer.Size(), Bytes: pacing.RangeBatchBytes}
	if r.o.BatchRU != nil {
		limits.RU = r.o.BatchRU()
	}
	bytes, ru := rangeOpBytes(first.size, first.batchKey()), first.est
	var deadline <-chan time.Time // the linger, once the queue ran dry
	for len(window) < limits.Ops {
		var next *item
		var ok bool
		select {
		case next, ok = <-q:
		default:
			if r.o.BatchLinger <= 0 {
				return window, nil, false
			}
			if deadline == nil {
				deadline = r.o.Clock.After(r.o.BatchLinger)
			}
			select {
			case next, ok = <-q:
			case <-deadline:
				return window, nil, false
			}
		}
		if !ok {
			return window, nil, true
		}
		b := rangeOpBytes(next.size, next.batchKey())
		if limits.Full(len(window), bytes, ru, b, next.est) {
			return window, next, false
		}
		window = append(window, next)
		bytes, ru = bytes+b, ru+next.est
	}
	return window, nil, false
}

// sendRanges sends a window taken for a range batch. Records a split
// moved to another partition go to its dispatcher (away); the others go
// by the range that holds each now — one range, unless the ranges were
// read again since the window was taken — as range batches, of one record
// if need be, so that the range's sizer hears every answer. A batch is
// paid for at once, the sum of its records' estimates, on the lane's
// partition.
func (r *run) sendRanges(lane int, window []*item, admit func(part int, ru float64) bool, start func(func()), away *rehomer) {
	kept := make([]*item, 0, len(window)) // the writer's own: window is reused
	for _, it := range window {
		r.adm.route(it)
		if it.part != lane {
			away.send(it)
			continue
		}
		kept = append(kept, it)
	}
	if len(kept) == 0 {
		return
	}
	groups, _, _ := r.o.Ranges.split(kept)
	for _, g := range groups {
		if r.stopped() {
			return
		}
		if admit(lane, estimateOf(g)) {
			start(func() { r.writeRange(lane, g) })
		}
	}
}

// writeRange sends g, records paid for on part, as range batches until
// each is written, counted as existing, dead-lettered, or the run stops.
// Each operation is answered on its own (rangeOps); the records to resend
// go again together once their wait is over, each range's in a batch of
// its own (of one, if need be: its operations keep their own answers),
// routed again and paying their estimate again. If batches are turned off
// meanwhile, what is left goes as point writes.
func (r *run) writeRange(part int, g []*item) {
	pending := [][]*item{g}
	reserved := true // the dispatcher paid for the first attempt
	for len(pending) > 0 {
		b := pending[0]
		pending = pending[1:]
		if r.batchKind() != BatchRange {
			r.pointWrites(part, b, reserved)
			reserved = false
			continue
		}
		if groups, _, _ := r.o.Ranges.split(b); len(groups) > 1 {
			// The ranges were read again since b was cut: a batch each.
			if reserved {
				r.adm.settle(part, estimateOf(b), estimateOf(groups[0]))
			}
			b, pending = groups[0], append(groups[1:], pending...)
		}
		id, sizer, gen := r.o.Ranges.route(b[0])
		if !reserved {
			part = r.route(b[0])
			if err := r.adm.repay(r.wctx, part, estimateOf(b)); err != nil {
				return
			}
		}
		reserved = false
		out, latency, answered := r.send(b, id)
		if !answered {
			return // drain deadline passed: left unacknowledged, replayed on resume
		}
		r.requests.Add(1)
		r.ruMilli.Add(int64(out.Charge * 1000))
		took, throttled := rangeTook(out, len(b))
		r.tally.answered(b[0], r.adm.home(b[0], part), throttled, took, estimateOf(b)*float64(took)/float64(len(b)), out.Charge, latency)
		answer := rangeAnswer{part: part, gen: gen, sizer: sizer}
		var rest []*item
		var ok bool
		if opsAnswered(out, len(b)) {
			rest, ok = r.rangeOps(answer, b, out)
		} else {
			rest, ok = r.rangeWhole(answer, b, out)
		}
		if !ok || r.wctx.Err() != nil {
			return
		}
		if len(rest) > 0 {
			pending = append(pending, rest)
		}
	}
}

// rangeTook is how many of a range batch's n records its answer wrote or
// found existing, for the tally; throttled when none was taken and the
// service throttled it (or operations of it).
func rangeTook(out BatchOutcome, n int) (taken int, throttled bool) {
	if !opsAnswered(out, n) {
		class, _ := Classify(out.Outcome)
		return took(class, n), class == Throttled
	}
	for _, op := range out.Ops {
		class, _ := Classify(op)
		taken += took(class, 1)
		throttled = throttled || class == Throttled
	}
	return taken, taken == 0 && throttled
}

// rangeAnswer is where a range batch went: the partition it was paid on,
// the generation of the ranges it was addressed by, its range's sizer.
type rangeAnswer struct {
	part  int
	gen   uint64
	sizer *pacing.BatchSizer
}

// opsAnswered says whether out answers each of n operations on its own.
// An answer for another number of operations says nothing of which ran;
// one where none failed but every one "did not run" (424) says nothing
// either.
func opsAnswered(out BatchOutcome, n int) bool {
	if (out.Status != http.StatusOK && out.Status != http.StatusMultiStatus) || out.Err != nil || len(out.Ops) != n {
		return false
	}
	for _, op := range out.Ops {
		if op.Status != http.StatusFailedDependency {
			return true
		}
	}
	return false
}

// rangeOps decides each operation of an answered range batch on its own,
// by the one retry policy with its record's own attempts: written and
// existing records are acknowledged, refused ones dead-lettered, and the
// rest returned to be resent once the wait is over. The charge settles
// for the batch against the estimates of the operations that ran; 429s
// among them are told to admission once, with the longest retry-after; a
// 410 reads the ranges again. ok is false when the run must stop.
func (r *run) rangeOps(a rangeAnswer, b []*item, out BatchOutcome) (rest []*item, ok bool) {
	r.batchWorked.Store(true)
	var (
		ran                float64 // the estimates of the operations not throttled
		written, throttled bool
		moved              bool
		throttleWait, wait time.Duration
		stopAt             = -1
		stop               decision
	)
	health := Outcome{Status: http.StatusOK}
	share := out.Charge / float64(len(b))
	for i, op := range out.Ops {
		it := b[i]
		d, tries := r.policy.decideOp(op, it.tries, rand.Float64())
		it.tries = tries
		if !d.throttled {
			ran += it.est
		}
		switch d.verdict {
		case verdictWritten:
			written = true
			r.ackWritten(it, op.Charge, share)
		case verdictExists, verdictRefused:
			r.skipOrDeadLetter(it, d, op)
		case verdictStop:
			if stopAt < 0 {
				stopAt, stop = i, d
			}
		case verdictResend:
			rest = append(rest, it)
			if op.Status == http.StatusFailedDependency {
				break // it did not run: no attempt, no retry
			}
			r.retries[retryClass(op)].Add(1)
			health = op
			if d.throttled {
				throttled, throttleWait = true, max(throttleWait, d.wait)
			} else {
				moved, wait = moved || d.moved, max(wait, d.wait)
			}
		}
	}
	r.adm.settle(a.part, ran, out.Charge)
	if written {
		health = Outcome{Status: http.StatusOK}
	}
	class, _ := Classify(health)
	r.health.answered(r.o.Clock.Now(), class, health)
	if stopAt >= 0 {
		r.giveUp(b[stopAt:stopAt+1], stop, out.Ops[stopAt])
		return nil, false
	}
	a.sizer.Answered(len(b), throttled)
	if throttled {
		r.throttled.Add(1)
	} else if written {
		r.adm.succeeded(a.part, out.Charge)
	}
	return rest, r.awaitResend(a, throttled, throttleWait, moved, wait)
}

// rangeWhole decides a range batch answered as a whole: none of its
// operations ran or, without an answer for each, they may have. Each
// record is decided by the one retry policy with its own attempts, and
// they are resent together after the longest wait. A body the server
// refused whole (400, 413) sends each record as a point write of its own;
// a 500 from a server that never took a range batch turns batches off.
func (r *run) rangeWhole(a rangeAnswer, b []*item, out BatchOutcome) (rest []*item, ok bool) {
	class, retryAfter := Classify(out.Outcome)
	if out.Status >= 200 && out.Status < 300 {
		class = Transient // answered, but not for each operation
	}
	if class != Throttled {
		r.adm.settle(a.part, estimateOf(b), out.Charge)
	}
	r.health.answered(r.o.Clock.Now(), class, out.Outcome)
	if r.batchesRefused(out.Outcome) {
		return b, true // sent again as point writes
	}
	if class == Permanent || class == Exists {
		r.pointWrites(a.part, b, false)
		return nil, true
	}
	var wait time.Duration
	moved := false
	for _, it := range b {
		d, tries := r.policy.decide(class, retryAfter, it.tries, rand.Float64())
		it.tries = tries
		if d.verdict == verdictStop {
			r.giveUp(b, d, out.Outcome)
			return nil, false
		}
		wait, moved = max(wait, d.wait), d.moved
	}
	r.retries[retryClass(out.Outcome)].Add(int64(len(b)))
	throttled := class == Throttled
	if throttled {
		r.throttled.Add(1)
		a.sizer.Answered(len(b), true)
		wait = 0 // admission's to wait
	}
	return b, r.awaitResend(a, throttled, retryAfter, moved, wait)
}

// awaitResend waits as the answers of records to resend say. A 429's
// retry-after is admission's (paced: the pacer pauses the partition, and
// the resend's repay honours the pause); after a 410 the ranges are read
// again (unless another writer did since the batch was sent) and the
// watcher is told; the longest other wait is slept.
func (r *run) awaitResend(a rangeAnswer, throttled bool, throttleWait time.Duration, moved bool, wait time.Duration) bool {
	if throttled && r.adm.throttled(r.wctx, a.part, throttleWait) != nil {
		return false
	}
	if moved {
		if err := r.o.Ranges.read(r.wctx, a.gen); err != nil && r.o.Logf != nil && r.wctx.Err() == nil {
			r.o.Logf("warning: %v; resending by the ranges known", err)
		}
		if r.o.OnGone != nil {
			r.o.OnGone()
		}
	}
	return wait <= 0 || r.o.Clock.Sleep(r.wctx, wait) == nil
}

// pointWrites sends each of b as a point write of its own (write), each
// paying its own estimate; reserved: b's estimates are paid for on part.
func (r *run) pointWrites(part int, b []*item, reserved bool) {
	if reserved {
		// Paid for as one batch: the first keeps its own estimate.
		r.adm.settle(part, estimateOf(b), b[0].est)
	}
	for i, it := range b {
		if i > 0 || !reserved {
			if r.adm.repay(r.wctx, r.route(it), it.est) != nil {
				return
			}
		}
		r.write(it)
		if r.wctx.Err() != nil {
			return
		}
	}
}
