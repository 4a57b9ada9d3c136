package loader

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cosmosloader/loader/loader/readplan"
	"github.com/cosmosloader/loader/pacing"
)

// batchMode is the batches o asks for.
func (o *Options) batchMode() BatchMode {
	switch {
	case o.Batch < 2:
		return BatchMode{}
	case o.Ranges != nil:
		return BatchMode{Kind: BatchRange, MaxOps: o.Batch}
	}
	return BatchMode{Kind: BatchPerKey, MaxOps: o.Batch}
}

// batchKind is the batches sent now: those asked for, as far as the probe
// has found the server executes them (point writes until it answers), and
// none once the server refused them during the run.
func (r *run) batchKind() BatchKind {
	kind := r.o.batchMode().Kind
	if kind == BatchOff || r.batchOff.Load() {
		return BatchOff
	}
	if r.o.BatchProbe != nil {
		found, decided := r.o.BatchProbe()
		if !decided {
			return BatchOff
		}
		kind = min(kind, found)
	}
	if _, ok := r.o.Sink.(BatchSink); kind == BatchPerKey && r.o.Ranges != nil && !ok {
		return BatchOff // refused range batches, and cannot send the others
	}
	return kind
}

// startBatchProbe starts finding out which of the batches --batch asks
// for the target executes (Options.BatchProbe); for range batches it
// reads the partition key ranges first. A target that cannot send
// batches at all sends point writes, without a word.
func (p *plan) startBatchProbe(ctx context.Context, tgt *Target) {
	rb, ranged := tgt.Writer.(RangeBatcher)
	_, keyed := tgt.Writer.(BatchProber)
	switch {
	case p.batch.Kind == BatchOff:
		return
	case !ranged && !keyed:
		p.batch, p.batchesRefused = BatchMode{}, true
		return
	case p.batch.Kind == BatchRange && ranged:
		p.ranges = newRangeRoutes(rb, p.batch.MaxOps)
	case p.batch.Kind == BatchRange:
		p.batch.Kind = BatchPerKey
	}
	p.probe = startBatchProbe(ctx, p.batch.Kind, tgt.Writer, p.ranges, p.warnf)
}

// batchProbeState is Options.BatchProbe: nil when nothing is probed.
func (p *plan) batchProbeState() func() (BatchKind, bool) {
	if p.probe == nil {
		return nil
	}
	return p.probe.state
}

// noteProbe records in total what the probe found the target refused.
func (p *plan) noteProbe(total *Result) {
	if p.probe == nil {
		return
	}
	found := p.probe.found()
	total.BatchesRefused = total.BatchesRefused || found == BatchOff
	total.RangeBatchesRefused = p.batch.Kind == BatchRange && found == BatchPerKey
}

// boundRangeBatches bounds a range batch's estimate to a part of its
// partition's share of the target as it is now, smaller over a jittery
// path (pacing.Pacer.BatchRU), and to a shared load's own bound; the
// bound holds for transactional batches too, should the target refuse
// range batches.
func (p *plan) boundRangeBatches(rp *runPacing) {
	if p.ranges == nil {
		return
	}
	shared := rp.batchRU
	rp.batchRU = func() float64 {
		c := rp.pacer.BatchRU()
		if shared != nil {
			c = min(c, shared())
		}
		return c
	}
}

// batchProbe is the probes' answer on its way: which batches the target
// executes. The load starts with point writes and sends batches once the
// answer says it may, instead of waiting a round trip (0.3–0.6 s over a
// long path) before the first write.
type batchProbe struct {
	done chan struct{}
	kind BatchKind
}

// startBatchProbe finds in the background the best of the batches want
// asks for that w executes: range batches (ranges read first), else
// transactional batches of one key, else none. warn is told once what the
// target refused and what the load sends instead.
func startBatchProbe(ctx context.Context, want BatchKind, w Writer, ranges *rangeRoutes, warn func(format string, a ...any)) *batchProbe {
	b := &batchProbe{done: make(chan struct{})}
	go func() {
		defer close(b.done)
		b.kind = probeBatches(ctx, want, w, ranges, func(format string, a ...any) {
			if ctx.Err() == nil { // an interrupted probe found nothing out
				warn(format, a...)
			}
		})
	}()
	return b
}

func probeBatches(ctx context.Context, want BatchKind, w Writer, ranges *rangeRoutes, warn func(format string, a ...any)) BatchKind {
	var notRange error
	if want == BatchRange {
		if notRange = probeRanges(ctx, ranges); notRange == nil {
			return BatchRange
		}
	}
	notKey := errors.New("the target cannot send them")
	if p, ok := w.(BatchProber); ok {
		notKey = p.ProbeBatches(ctx)
	}
	switch {
	case notKey == nil && notRange != nil:
		warn("range batches are not available (%v): sending transactional batches of records that share a partition key", notRange)
	case notKey == nil:
	case notRange != nil:
		warn("range batches are not available (%v), nor transactional batches (%v): sending point writes for the whole run", notRange, notKey)
	default:
		warn("transactional batches are not supported by this server (%v): sending point writes for the whole run", notKey)
	}
	if notKey == nil {
		return BatchPerKey
	}
	return BatchOff
}

// probeRanges reads the container's partition key ranges and checks that
// it executes range batches as Cosmos DB does.
func probeRanges(ctx context.Context, ranges *rangeRoutes) error {
	if ranges == nil {
		return errors.New("the target cannot send them")
	}
	if err := ranges.read(ctx, 0); err != nil {
		return err
	}
	return ranges.src.ProbeRangeBatches(ctx)
}

// state is Options.BatchProbe.
func (b *batchProbe) state() (BatchKind, bool) {
	select {
	case <-b.done:
		return b.kind, true
	default:
		return BatchOff, false
	}
}

// found waits for the answer and returns it.
func (b *batchProbe) found() BatchKind {
	<-b.done
	return b.kind
}

// BatchProber is a target that can check, before loading, that it executes
// transactional batches as Cosmos DB does.
type BatchProber interface {
	ProbeBatches(ctx context.Context) error
}

// BatchSink is a Sink that can also send a transactional batch: documents
// of one logical partition key, written all or nothing in one request.
type BatchSink interface {
	Sink
	WriteBatch(ctx context.Context, docs []Document) BatchOutcome
}

// BatchOutcome is what a BatchSink reports for one batch attempt. Outcome
// is the request as a whole: a 2xx means every operation was applied; 207
// Multi-Status means none was, and Ops says why (the refused operation's
// own status, 424 Failed Dependency for the others); anything else (429,
// 5xx, 400/413 of the whole body, no response) means the batch was not
// executed and Ops is empty.
type BatchOutcome struct {
	Outcome
	Ops []Outcome
}

const (
	// MaxBatchOps is Cosmos DB's limit on operations in a batch, a
	// transactional one or a range batch.
	MaxBatchOps = 100
	// DefaultBatchBytes bounds the documents' bytes in one batch: well under
	// the service's 2 MB request limit, leaving room for the operations'
	// framing.
	DefaultBatchBytes = 1536 << 10
	// DefaultBatchLinger is the longest a partition's dispatcher waits for
	// more records of a key that already has two or more waiting.
	DefaultBatchLinger = 2 * time.Millisecond
	// batchOpOverhead approximates the JSON framing of one operation.
	batchOpOverhead = 64
)

// BatchKind is how records are grouped into requests.
type BatchKind int

const (
	// BatchOff sends a request per record (point writes).
	BatchOff BatchKind = iota
	// BatchPerKey sends transactional batches: records that share their
	// full partition key, written all or nothing.
	BatchPerKey
	// BatchRange sends range batches: records of any keys in one physical
	// partition, each operation applied on its own, as the SDKs' bulk
	// modes send them (docs/bulk-protocol.md).
	BatchRange
)

// BatchMode is --batch: the batches wanted and the most operations in one.
type BatchMode struct {
	Kind   BatchKind
	MaxOps int
}

// ParseBatch reads --batch: "auto" (range batches where the target takes
// them, else transactional batches of one key, else point writes), "key"
// (transactional batches of one key only), "off" (point writes), or N
// (as auto, at most N operations a request).
func ParseBatch(s string) (BatchMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return BatchMode{Kind: BatchRange, MaxOps: MaxBatchOps}, nil
	case "key":
		return BatchMode{Kind: BatchPerKey, MaxOps: MaxBatchOps}, nil
	case "off", "none", "0":
		return BatchMode{}, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxBatchOps {
		return BatchMode{}, fmt.Errorf("--batch must be auto, key, off or a number of operations from 1 to %d; got %q", MaxBatchOps, s)
	}
	if n == 1 {
		return BatchMode{}, nil
	}
	return BatchMode{Kind: BatchRange, MaxOps: n}, nil
}

// BatchKey is a record's full (hierarchical) logical partition key as a
// map key: two records batch together only when every component matches,
// type included ("1" and 1 are different keys). The common single string
// key is the string itself, not a copy; a string key that starts with a
// NUL byte is escaped (NUL, NUL) and any other key is an encoding of all
// its components after NUL, 1, so no two keys meet. A string, not a
// struct, so that maps of keys take Go's fast path for string keys: the
// struct's hash was two thirds of a dry-run's request planning.
type BatchKey string

func keyOf(pk []any) BatchKey {
	if len(pk) == 1 {
		if s, ok := pk[0].(string); ok {
			if s != "" && s[0] == 0 {
				return BatchKey("\x00\x00" + s)
			}
			return BatchKey(s)
		}
	}
	var b strings.Builder
	b.WriteString("\x00\x01")
	for _, v := range pk {
		switch v := v.(type) {
		case string:
			b.WriteByte('s')
			b.WriteString(strconv.Itoa(len(v)))
			b.WriteByte(':')
			b.WriteString(v)
		case float64:
			b.WriteByte('n')
			b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
		case bool:
			if v {
				b.WriteString("t")
			} else {
				b.WriteString("f")
			}
		default:
			b.WriteByte('z')
		}
		b.WriteByte(0)
	}
	return BatchKey(b.String())
}

// groupBatches splits a window of queued records into requests: records
// that share a key, in read order, in chunks of at most maxOps operations
// and maxBytes of documents; a chunk of one is a point write. Requests come
// in the order of their first record.
func groupBatches(window []*item, maxOps, maxBytes int, maxRU float64) [][]*item {
	var g batchGrouper
	return g.group(window, maxOps, maxBytes, maxRU)
}

// batchGrouper is groupBatches keeping its memory from one call to the
// next, for a caller done with a call's requests before it makes the next
// (dry-run's planner, a window per 1,024 records); the import's dispatchers
// hand their requests to writers, so they take fresh ones (groupBatches).
type batchGrouper struct {
	chunks map[BatchKey]int // a key's chunk being filled: its index in out
	bytes  []int            // the bytes of each chunk in out
	rus    []float64        // the estimated RU of each chunk in out
	out    [][]*item
}

// group cuts window into requests of at most maxOps records and maxBytes
// of documents, and of at most maxRU estimated (0: no bound).
func (g *batchGrouper) group(window []*item, maxOps, maxBytes int, maxRU float64) [][]*item {
	if g.chunks == nil {
		g.chunks = make(map[BatchKey]int, len(window))
	}
	clear(g.chunks)
	out, bytes, rus := g.out[:0], g.bytes[:0], g.rus[:0]
	for _, it := range window {
		cost := it.size + batchOpOverhead
		k := it.batchKey()
		at, ok := g.chunks[k]
		if ok && len(out[at]) < maxOps && bytes[at]+cost <= maxBytes && (maxRU <= 0 || rus[at]+it.est <= maxRU) {
			out[at] = append(out[at], it)
			bytes[at] += cost
			rus[at] += it.est
			continue
		}
		g.chunks[k] = len(out)
		bytes = append(bytes, cost)
		rus = append(rus, it.est)
		if len(out) < cap(out) { // a request of the last call: its memory
			out = out[:len(out)+1]
			out[len(out)-1] = append(out[len(out)-1][:0], it)
		} else {
			out = append(out, []*item{it})
		}
	}
	g.out, g.bytes, g.rus = out, bytes, rus
	return out
}

// dispatchBatched is dispatch with a batching stage: it takes what the
// partition's queue holds, a window at a time, and sends it as the
// batches sent now (batchKind) — range batches (sendRanges), or
// transactional batches of records that share a key with lone records as
// point writes (sendKeys).
func (r *run) dispatchBatched(lane int, q <-chan *item, admit func(part int, ru float64) bool, start func(func()), away *rehomer) {
	_, maxWindow := r.o.batchMode().queueAndWindow(r.o.QueuePerPartition)
	window := make([]*item, 0, maxWindow)
	counts := make(map[BatchKey]int)
	var carry *item // taken for a range batch it did not fit: the next one's first
	for {
		it := carry
		carry = nil
		if it == nil {
			var ok bool
			if it, ok = <-q; !ok {
				return
			}
		}
		var closed bool
		if r.batchKind() == BatchRange {
			window, carry, closed = r.fillRange(append(window[:0], it), q)
			r.sendRanges(lane, window, admit, start, away)
		} else {
			window, closed = r.fillKeys(append(window[:0], it), q, maxWindow, counts)
			r.sendKeys(lane, window, admit, start, away)
		}
		clear(window) // let written documents go
		if closed {
			return
		}
	}
}

// fillKeys takes from q, after window's first record, what the queue
// holds up to maxWindow records, waiting at most BatchLinger for more
// when some key already has two or more records waiting. closed: q was
// closed.
func (r *run) fillKeys(window []*item, q <-chan *item, maxWindow int, counts map[BatchKey]int) (_ []*item, closed bool) {
	clear(counts)
	counts[window[0].batchKey()] = 1
	waiting := false              // some key has 2+ records but less than a full batch
	var deadline <-chan time.Time // the linger, once some key waits
	for len(window) < maxWindow {
		var next *item
		var ok bool
		select {
		case next, ok = <-q:
		default:
			if !waiting || r.o.BatchLinger <= 0 {
				return window, false
			}
			if deadline == nil {
				deadline = r.o.Clock.After(r.o.BatchLinger)
			}
			select {
			case next, ok = <-q:
			case <-deadline:
				return window, false
			}
		}
		if !ok {
			return window, true
		}
		window = append(window, next)
		k := next.batchKey()
		counts[k]++
		if n := counts[k]; n >= 2 && n%r.o.Batch != 0 {
			waiting = true
		}
	}
	return window, false
}

// sendKeys sends a window as each key's records in transactional
// batches, lone records as point writes.
func (r *run) sendKeys(lane int, window []*item, admit func(part int, ru float64) bool, start func(func()), away *rehomer) {
	groups := [][]*item{window}
	if len(window) > 1 {
		var maxRU float64
		if r.o.BatchRU != nil {
			maxRU = r.o.BatchRU()
		}
		groups = groupBatches(window, r.o.Batch, r.o.BatchBytes, maxRU)
	}
	for len(groups) > 0 {
		g := groups[0]
		groups = groups[1:]
		if r.stopped() {
			return
		}
		if len(g) > 1 && r.o.BatchRU != nil {
			// The bound is asked again before each request: a shared
			// load's share can shrink while a window's requests wait
			// for admission, and a batch cut for the larger share
			// would overshoot the smaller one for seconds after.
			if c := r.o.BatchRU(); c > 0 && estimateOf(g) > c {
				cut := groupBatches(g, len(g), math.MaxInt, c)
				g, groups = cut[0], append(cut[1:], groups...)
			}
		}
		// Routed again here: records queued before a split go to the
		// dispatchers of the partitions that now hold them.
		if r.route(g...) != lane {
			for _, it := range g {
				away.send(it)
			}
			continue
		}
		if len(g) == 1 || r.batchKind() != BatchPerKey {
			for _, it := range g {
				if admit(r.route(it), it.est) {
					start(func() { r.write(it) })
				}
			}
			continue
		}
		if admit(r.route(g...), estimateOf(g)) {
			start(func() { r.write(g...) })
		}
	}
}

func estimateOf(g []*item) float64 {
	var s float64
	for _, it := range g {
		s += it.est
	}
	return s
}

// singles makes each record of g a request of its own: a point write that
// counts its own attempts.
func singles(g []*item) []request {
	out := make([]request, len(g))
	for i := range g {
		out[i] = request{items: g[i : i+1 : i+1]}
	}
	return out
}

// wrote acknowledges a committed request; its operations' charges (a
// point write's, or each of a batch's) calibrate the cost model.
func (r *run) wrote(g []*item, out BatchOutcome) {
	for i, it := range g {
		var c float64
		if len(out.Ops) == len(g) {
			c = out.Ops[i].Charge
		}
		r.ackWritten(it, c, out.Charge/float64(len(g)))
	}
	r.adm.succeeded(g[0].part, out.Charge)
}

// ackWritten acknowledges a written record whose operation was charged
// charge (share when the answer did not say), which calibrates the cost
// model.
func (r *run) ackWritten(it *item, charge, share float64) {
	if charge <= 0 {
		charge = share
	}
	if r.o.Cost != nil {
		r.o.Cost.Observe(it.size, it.terms, charge)
	}
	r.charges.Add(charge)
	r.written.Add(1)
	r.sinceCheckpoint.Add(1)
	r.tr.ack(it.input, it.seq, resultWritten, nil)
}

// batchesRefused reports whether a batch's answer says the server does
// not execute batches: a 500 from a server that has never taken one
// (@vercel/cosmosdb-server). The rest of the run sends point writes, and
// says so once.
func (r *run) batchesRefused(o Outcome) bool {
	if o.Status != http.StatusInternalServerError || r.batchWorked.Load() {
		return false
	}
	what := "transactional batches"
	if r.batchKind() == BatchRange {
		what = "range batches"
	}
	if r.batchOff.CompareAndSwap(false, true) && r.o.Logf != nil {
		r.o.Logf("%s are not supported by this server (%s): sending point writes for the rest of the run", what, outcomeText(o))
	}
	return true
}

// splitRefused handles a 207: the refused operation's record is decided
// as a point write with that status would be, and the others are returned
// to be resent, each part a new request with attempts of its own. ok is
// false when the run must stop.
func (r *run) splitRefused(g []*item, out BatchOutcome) (rest []request, ok bool) {
	failed := -1
	for i, op := range out.Ops {
		if op.Status != http.StatusFailedDependency {
			failed = i
			break
		}
	}
	if len(out.Ops) != len(g) || failed < 0 {
		// No operation to blame: let each record's own write decide.
		return singles(g), true
	}
	it, op := g[failed], out.Ops[failed]
	class, retryAfter := Classify(op)
	// The jitter is moot: a record resent from a refused batch waits only
	// for its own reservation.
	d, tries := r.policy.decide(class, retryAfter, attempts{}, 0)
	switch d.verdict {
	case verdictExists, verdictRefused:
		r.skipOrDeadLetter(it, d, op)
	case verdictStop:
		r.giveUp(g[failed:failed+1], d, op)
		return nil, false
	default:
		// Throttled, transient or (oddly) done inside a failed batch:
		// nothing was applied, so the record is simply sent again alone.
		rest = append(rest, request{items: g[failed : failed+1 : failed+1], tries: tries})
	}
	if failed > 0 {
		rest = append([]request{{items: g[:failed:failed]}}, rest...)
	}
	if failed+1 < len(g) {
		rest = append(rest, request{items: g[failed+1:]})
	}
	return rest, true
}

// ops is the most operations in a batch; 0: point writes.
func (b BatchMode) ops() int {
	if b.Kind == BatchOff {
		return 0
	}
	return b.MaxOps
}

// ReadConfig is c with b's batches: a plan's queues and windows are cut
// for them (readplan.QueueAndWindow).
func (b BatchMode) ReadConfig(c readplan.Config) readplan.Config {
	c.Batch, c.RangeBatches = b.ops(), b.Kind == BatchRange
	return c
}

// queueAndWindow divides a partition's read-ahead between its queue and
// the window its dispatcher groups at once (readplan.QueueAndWindow).
func (b BatchMode) queueAndWindow(readAhead int) (queue, window int) {
	return readplan.QueueAndWindow(readAhead, b.ops(), b.Kind == BatchRange)
}

// RequestPlanner groups records into requests as the import's dispatchers
// do when their queues are full (the paced steady state): per physical
// partition, range batches cut in input order (pacing.RangeRequests), or
// windows of queued records grouped by key. dry-run and the
// naive-versus-paced model count requests with it.
type RequestPlanner struct {
	maxOps, maxBytes, window int
	send                     func(part int, records int, ru float64)
	ranges                   *pacing.RangeRequests // range batches; nil: by key
	wins                     [][]*item             // per partition: the window, pointing into slab
	slab                     [][]item              // per partition: the window's items
	grouper                  batchGrouper
}

// NewRequestPlanner plans the requests of b over parts partitions of a
// load paced at targetRU (which bounds a range batch's estimate,
// pacing.RangeBatchRU) with queue records read ahead per partition.
func NewRequestPlanner(parts int, b BatchMode, targetRU float64, queue int, send func(part, records int, ru float64)) *RequestPlanner {
	_, window := b.queueAndWindow(queue)
	parts = max(parts, 1)
	p := &RequestPlanner{maxOps: b.MaxOps, maxBytes: DefaultBatchBytes, window: max(window, 1),
		send: send, wins: make([][]*item, parts), slab: make([][]item, parts)}
	if b.Kind == BatchOff {
		p.maxOps = 0
	}
	if b.Kind == BatchRange && b.MaxOps >= 2 {
		p.ranges = pacing.NewRangeRequests(parts, rangeLimits(b.MaxOps, targetRU, parts), send)
	}
	return p
}

// Add queues a record of partition part, its key's keyOf key.
func (p *RequestPlanner) Add(part int, key BatchKey, size int, ru float64) {
	if p.ranges != nil {
		p.ranges.Add(part, rangeOpBytes(size, key), ru)
		return
	}
	if p.maxOps < 2 {
		p.send(part, 1, ru)
		return
	}
	if p.slab[part] == nil {
		p.slab[part] = make([]item, 0, p.window)
		p.wins[part] = make([]*item, 0, p.window)
	}
	// Only the fields the grouper reads are set (an item is some 200
	// bytes): the slab's items are the planner's alone, the rest of each
	// stays zero. A window never outgrows the slab (flushPart).
	n := len(p.slab[part])
	p.slab[part] = p.slab[part][:n+1]
	it := &p.slab[part][n]
	it.key, it.keyed, it.size, it.est = key, true, size, ru
	p.wins[part] = append(p.wins[part], it)
	if len(p.wins[part]) >= p.window {
		p.flushPart(part)
	}
}

func (p *RequestPlanner) flushPart(part int) {
	for _, g := range p.grouper.group(p.wins[part], p.maxOps, p.maxBytes, 0) {
		p.send(part, len(g), estimateOf(g))
	}
	// The items are kept for the next window, their keys with them: at
	// most a window's per partition.
	p.slab[part] = p.slab[part][:0]
	p.wins[part] = p.wins[part][:0]
}

func (p *RequestPlanner) Flush() {
	if p.ranges != nil {
		p.ranges.Flush()
		return
	}
	for part := range p.wins {
		p.flushPart(part)
	}
}
