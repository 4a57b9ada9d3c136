package loader

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cosmosloader/loader/loader/readplan"
)

// batchesOK says whether batches may be sent now: the server has not
// refused them and the probe, if any, has found that it executes them.
func (r *run) batchesOK() bool {
	if r.batchOff.Load() {
		return false
	}
	if r.o.BatchProbe == nil {
		return true
	}
	decided, ok := r.o.BatchProbe()
	return decided && ok
}

// batchProbe is a ProbeBatches answer on its way: the load starts with
// point writes and sends batches once the answer says it may, instead of
// waiting a round trip (0.3–0.6 s over a long path) before the first write.
type batchProbe struct {
	done chan struct{}
	err  error
}

// startBatchProbe probes in the background; warn is told of a refusal.
func startBatchProbe(ctx context.Context, p BatchProber, warn func(format string, a ...any)) *batchProbe {
	b := &batchProbe{done: make(chan struct{})}
	go func() {
		defer close(b.done)
		if b.err = p.ProbeBatches(ctx); b.err != nil {
			warn("transactional batches are not supported by this server (%v): sending point writes for the whole run", b.err)
		}
	}()
	return b
}

// state is Options.BatchProbe.
func (b *batchProbe) state() (decided, ok bool) {
	select {
	case <-b.done:
		return true, b.err == nil
	default:
		return false, false
	}
}

// refused waits for the answer and says whether the server failed it.
func (b *batchProbe) refused() bool {
	<-b.done
	return b.err != nil
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
	// MaxBatchOps is Cosmos DB's limit on operations in a transactional batch.
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

// ParseBatch reads --batch: "auto" (batches of up to 100 operations),
// "off" (point writes only), or N (batches of at most N operations). It
// returns the operations cap; 0 or 1 means point writes.
func ParseBatch(s string) (int, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return MaxBatchOps, nil
	case "off", "none", "0":
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxBatchOps {
		return 0, fmt.Errorf("--batch must be auto, off or a number of operations from 1 to %d; got %q", MaxBatchOps, s)
	}
	return n, nil
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

// dispatchBatched is dispatch with a batching stage: it takes whatever the
// partition's queue holds (up to a window), waits at most BatchLinger for
// more when some key already has two or more records waiting, and sends
// each key's records as batches, lone records as point writes.
func (r *run) dispatchBatched(lane int, q <-chan *item, admit func(part int, ru float64) bool, start func(func()), away *rehomer) {
	_, maxWindow := readplan.QueueAndWindow(r.o.QueuePerPartition, r.o.Batch)
	window := make([]*item, 0, maxWindow)
	counts := make(map[BatchKey]int)
	for {
		it, ok := <-q
		if !ok {
			return
		}
		window = append(window[:0], it)
		clear(counts)
		counts[it.batchKey()] = 1
		waiting := false // some key has 2+ records but less than a full batch
		closed := false
		var deadline <-chan time.Time // the linger, once some key waits
	fill:
		for len(window) < maxWindow {
			var next *item
			select {
			case next, ok = <-q:
			default:
				if !waiting || r.o.BatchLinger <= 0 {
					break fill
				}
				if deadline == nil {
					deadline = r.o.Clock.After(r.o.BatchLinger)
				}
				select {
				case next, ok = <-q:
				case <-deadline:
					break fill
				}
			}
			if !ok {
				closed = true
				break
			}
			window = append(window, next)
			k := next.batchKey()
			counts[k]++
			if n := counts[k]; n >= 2 && n%r.o.Batch != 0 {
				waiting = true
			}
		}
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
				break
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
			if len(g) == 1 || !r.batchesOK() {
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
		clear(window) // let written documents go
		if closed {
			return
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
	perOp := out.Charge / float64(len(g))
	for i, it := range g {
		c := perOp
		if len(out.Ops) == len(g) && out.Ops[i].Charge > 0 {
			c = out.Ops[i].Charge
		}
		if r.o.Cost != nil {
			r.o.Cost.Observe(it.size, it.terms, c)
		}
		r.charges.Add(c)
		r.written.Add(1)
		r.sinceCheckpoint.Add(1)
		r.tr.ack(it.input, it.seq, resultWritten, nil)
	}
	r.adm.succeeded(g[0].part, out.Charge)
}

// batchesRefused reports whether a batch's answer says the server does
// not execute batches: a 500 from a server that has never taken one
// (@vercel/cosmosdb-server). The rest of the run sends point writes, and
// says so once.
func (r *run) batchesRefused(o Outcome) bool {
	if o.Status != http.StatusInternalServerError || r.batchWorked.Load() {
		return false
	}
	if r.batchOff.CompareAndSwap(false, true) && r.o.Logf != nil {
		r.o.Logf("transactional batches are not supported by this server (%s): sending point writes for the rest of the run", outcomeText(o))
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

// RequestPlanner groups records into requests as the import's dispatchers
// do when their queues are full (the paced steady state): per physical
// partition, windows of queued records grouped by key. dry-run and the
// naive-versus-paced model count requests with it.
type RequestPlanner struct {
	maxOps, maxBytes, window int
	send                     func(part int, records int, ru float64)
	wins                     [][]*item // per partition: the window, pointing into slab
	slab                     [][]item  // per partition: the window's items
	grouper                  batchGrouper
}

func NewRequestPlanner(parts, maxOps, queue int, send func(part, records int, ru float64)) *RequestPlanner {
	_, window := readplan.QueueAndWindow(queue, maxOps)
	parts = max(parts, 1)
	return &RequestPlanner{maxOps: maxOps, maxBytes: DefaultBatchBytes, window: max(window, 1),
		send: send, wins: make([][]*item, parts), slab: make([][]item, parts)}
}

// Add queues a record of partition part, its key's keyOf key.
func (p *RequestPlanner) Add(part int, key BatchKey, size int, ru float64) {
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
	for part := range p.wins {
		p.flushPart(part)
	}
}
