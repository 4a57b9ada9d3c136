package pacing

import (
	"math"
	"time"
)

// NaiveResult is what sending everything at once, and resending whatever
// is throttled, costs.
type NaiveResult struct {
	Requests  int64   `json:"requests"`
	Throttled int64   `json:"throttled"`
	Passes    int     `json:"passes"`
	Seconds   float64 `json:"seconds"`
}

// PacedResult is what pacing to the target costs.
type PacedResult struct {
	Requests  int64   `json:"requests"`
	Throttled int64   `json:"throttled"`
	Seconds   float64 `json:"seconds"`
}

// PartitionMaxRU is the most RU/s one physical partition serves, whatever
// the container's throughput: a logical partition (one partition key
// value) never gets more.
const PartitionMaxRU = 10000

// ModelConfig describes the load a Model compares the strategies for.
type ModelConfig struct {
	// TargetRU is split evenly over Partitions (≤ 0 means 1) as Cosmos DB
	// splits provisioned throughput. With TargetRU ≤ 0 there is nothing
	// to model and the results are zero.
	TargetRU   float64
	Partitions int
	// Capacity, when set, is each partition's RU/s actually available to
	// the load: its share less what other traffic took. Both strategies
	// get the same; a partition it leaves out (or gives ≤ 0) gets its
	// share.
	Capacity []float64
	// Naive is the naive client modelled; its zero value is the Rate
	// Limiting pattern's: every record in flight at once.
	Naive NaiveClient
}

// NaiveClient is how a naive client sends: the parameters of its model.
type NaiveClient struct {
	// Concurrency is how many requests it keeps in flight; 0 sends every
	// record at once, and each pass over the throttled ones is a second.
	Concurrency int
	// RoundTrip is a request's time from send to answer; 0 is taken as
	// one millisecond (a loopback path).
	RoundTrip time.Duration
	// RetryWait is how long a throttled request waits before it is sent
	// again; 0 waits the server's retry-after, until its partition's
	// budget renews at the next second.
	RetryWait time.Duration
}

// Model compares the naive and the paced strategy for a load, as dry-run
// and the import report show it. Requests are added in input order, one
// at a time (Add) or in runs of equal cost (AddN, e.g. from a histogram),
// so a file of any size is modelled in constant memory; a Model is not
// safe for concurrent use.
//
// The naive client with every record in flight at once sends every
// remaining record at the top of each second (a pass). Each partition
// accepts requests in arrival order while its budget for the second
// lasts, an expensive request going into debt that the next seconds
// repay, as Cosmos DB does; the rest get 429 and are sent again in the
// next pass. Because acceptance goes in input order, the records accepted
// in a pass are always the next ones of the input, which is what makes
// the model one pass over the costs. A client with a bounded number of
// requests in flight is simulated from each partition's totals instead
// (naiveBounded).
//
// The paced strategy sends each record once, at the partition's capacity:
// no 429s, and the time is the busiest partition's RU ÷ its capacity.
type Model struct {
	naive NaiveClient
	parts []modelPart
}

type modelPart struct {
	budget  float64 // RU/s the partition gives the load
	records int64   // requests added so far
	ru      float64 // their total cost
	// squares is Σ cost², over Σ (cost − budget) of the requests above
	// the budget: how far a request that takes the last of a second's
	// budget leaves the partition in debt (naiveBounded).
	squares, over float64
	passes        int     // naive passes begun
	starts        int64   // Σ requests already accepted at the start of each pass
	avail         float64 // naive budget left in the current pass
}

// NewModel returns the model of a load into a container with targetRU
// RU/s split evenly over partitions, for the Rate Limiting pattern's naive
// client (everything in flight at once).
func NewModel(targetRU float64, partitions int) *Model {
	return NewModelOf(ModelConfig{TargetRU: targetRU, Partitions: partitions})
}

// NewModelOf returns the model c describes.
func NewModelOf(c ModelConfig) *Model {
	n := max(c.Partitions, 1)
	m := &Model{naive: c.Naive, parts: make([]modelPart, n)}
	share := c.TargetRU / float64(n)
	for i := range m.parts {
		b := share
		if i < len(c.Capacity) && c.Capacity[i] > 0 && share > 0 {
			b = c.Capacity[i]
		}
		m.parts[i].budget = b
	}
	return m
}

// budgetEpsilon absorbs float rounding in a budget that runs out exactly.
const budgetEpsilon = 1e-9

// Add adds one request of the given cost on a partition.
func (m *Model) Add(part int, ru float64) { m.AddN(part, 1, ru) }

// AddN adds n consecutive requests of the same cost on a partition, in
// time proportional to the passes they span rather than to n.
func (m *Model) AddN(part int, n int64, ru float64) {
	pt := &m.parts[min(max(part, 0), len(m.parts)-1)]
	if n <= 0 || !(pt.budget > 0) {
		return
	}
	ru = math.Max(ru, 0)
	pt.ru += float64(n) * ru
	pt.squares += float64(n) * ru * ru
	pt.over += float64(n) * math.Max(ru-pt.budget, 0)
	if m.naive.Concurrency > 0 {
		// A bounded client is simulated from the totals (Naive).
		pt.records += n
		return
	}
	eps := budgetEpsilon * pt.budget
	for n > 0 {
		for pt.passes == 0 || pt.avail <= eps {
			// A new pass: everything from here on is sent again.
			pt.passes++
			pt.starts += pt.records
			pt.avail = math.Min(pt.avail, 0) + pt.budget
		}
		// Requests are accepted while any budget is left.
		k := n
		if ru > 0 {
			k = min(n, int64(math.Ceil((pt.avail-eps)/ru)))
		}
		k = max(k, 1)
		pt.avail -= float64(k) * ru
		pt.records += k
		n -= k
	}
}

// Naive returns the naive strategy's cost. It never finishes before the
// busiest partition could at its capacity.
func (m *Model) Naive() NaiveResult {
	if m.naive.Concurrency > 0 {
		return naiveBounded(m.flows(), m.naive)
	}
	var r NaiveResult
	var records int64
	for _, pt := range m.parts {
		// Pass i sends every record not accepted before it.
		r.Requests += int64(pt.passes)*pt.records - pt.starts
		records += pt.records
		r.Passes = max(r.Passes, pt.passes)
	}
	r.Throttled = r.Requests - records
	// A pass is a second; when expensive records leave debt behind the
	// container stays busy repaying it, and that time counts too.
	r.Seconds = math.Max(float64(r.Passes), m.Paced().Seconds)
	return r
}

// flows is each partition's totals, for the bounded client's simulation.
func (m *Model) flows() []flow {
	fs := make([]flow, len(m.parts))
	for i, pt := range m.parts {
		fs[i] = flow{requests: float64(pt.records), budget: pt.budget}
		if pt.records > 0 && pt.ru > 0 {
			fs[i].cost = pt.ru / float64(pt.records)
			// The request that spends the last of a second's budget is
			// picked in proportion to its cost, and overshoots by a
			// uniform part of it.
			fs[i].overshoot = pt.squares / (2 * pt.ru)
			fs[i].longWait = pt.over / pt.ru
		}
	}
	return fs
}

// Paced returns the paced strategy's cost.
func (m *Model) Paced() PacedResult {
	var r PacedResult
	for _, pt := range m.parts {
		r.Requests += pt.records
		if pt.budget > 0 {
			r.Seconds = math.Max(r.Seconds, pt.ru/pt.budget)
		}
	}
	return r
}

// ModelNaive models the naive strategy for records of the given costs, in
// input order, into one partition of targetRU RU/s.
func ModelNaive(costs []float64, targetRU float64) NaiveResult {
	m := NewModel(targetRU, 1)
	for _, c := range costs {
		m.Add(0, c)
	}
	return m.Naive()
}

// ModelPaced models the paced strategy for records of the given costs into
// targetRU RU/s.
func ModelPaced(costs []float64, targetRU float64) PacedResult {
	m := NewModel(targetRU, 1)
	for _, c := range costs {
		m.Add(0, c)
	}
	return m.Paced()
}

// ModelUniform models both strategies for records of one mean cost, spread
// evenly over partitions.
func ModelUniform(records int64, meanRU, targetRU float64, partitions int) (NaiveResult, PacedResult) {
	m := NewModel(targetRU, partitions)
	parts := int64(len(m.parts))
	for i := range parts {
		n := records / parts
		if i < records%parts {
			n++
		}
		m.AddN(int(i), n, meanRU)
	}
	return m.Naive(), m.Paced()
}

// RangeBatchBytes is the request body at which the SDKs' bulk modes close
// a range batch (their DefaultMaxBulkRequestBodySizeInBytes): not the
// service's limit on a request (2 MB), their sizing target, which the
// loader keeps too (docs/bulk-protocol.md).
const RangeBatchBytes = 220201

// BatchLimits bound one range batch request: its operations, its body and
// its estimated charge.
type BatchLimits struct {
	Ops   int
	Bytes int
	RU    float64 // 0: no bound
}

// Full reports whether a request of ops operations, bytes of body and ru
// estimated is full for one more of opBytes and opRU: it holds one
// operation at least, and another would take it past a limit. An
// operation bigger than the limits goes in a request of its own.
func (l BatchLimits) Full(ops, bytes int, ru float64, opBytes int, opRU float64) bool {
	return ops > 0 && (ops >= l.Ops || bytes+opBytes > l.Bytes || (l.RU > 0 && ru+opRU > l.RU))
}

// RangeBatchRU is the most one range batch is estimated to cost in a load
// paced at targetRU RU/s over partitions: rangeBatchShare of a partition's
// share at LoadAim. The service runs a batch's operations one at a time
// against the second's budget, so the pacer fits each batch whole in a
// second (PacerConfig.Whole) and what is left of a second when the next
// batch does not fit goes unspent: half a batch a second, on average. A
// small batch also keeps a partition's requests as even as its pacing,
// so that a path's jitter carries less into the service's next second.
// Unthrottled targets leave it far above 100 operations' charge.
func RangeBatchRU(targetRU float64, partitions int) float64 {
	return targetRU * LoadAim / float64(max(partitions, 1)) * rangeBatchShare
}

// rangeBatchShare is the fraction of a partition's share per second one
// range batch may be estimated at.
const rangeBatchShare = 0.02

// RangeRequests cuts the records of a load sent in range batches into
// requests, as the import's dispatchers send them when their queues are
// full: each partition's records in input order, a request closed by
// BatchLimits and by the partition's BatchSizer, grown as an unthrottled
// load's answers grow it. That is how dry-run and the naive-versus-paced
// model count requests. It holds one open request per partition.
type RangeRequests struct {
	limits BatchLimits
	open   []openRequest
	sizers []*BatchSizer
	send   func(part, records int, ru float64)
}

type openRequest struct {
	ops, bytes int
	ru         float64
}

// NewRangeRequests cuts the records of partitions (≤ 0 means 1) by limits
// and hands each request, once closed, to send.
func NewRangeRequests(partitions int, limits BatchLimits, send func(part, records int, ru float64)) *RangeRequests {
	c := &RangeRequests{limits: limits, open: make([]openRequest, max(partitions, 1)), send: send}
	c.sizers = make([]*BatchSizer, len(c.open))
	for i := range c.sizers {
		c.sizers[i] = NewBatchSizer(limits.Ops)
	}
	return c
}

// Add adds a record of bytes in a request body and ru estimated to
// partition part's open request, sending that one first if it is full.
func (c *RangeRequests) Add(part, bytes int, ru float64) {
	part = min(max(part, 0), len(c.open)-1)
	o := &c.open[part]
	limits := c.limits
	limits.Ops = min(limits.Ops, c.sizers[part].Size())
	if limits.Full(o.ops, o.bytes, o.ru, bytes, ru) {
		c.close(part)
	}
	o.ops++
	o.bytes += bytes
	o.ru += ru
}

// close sends partition part's open request, answered without a 429.
func (c *RangeRequests) close(part int) {
	o := c.open[part]
	c.send(part, o.ops, o.ru)
	c.sizers[part].Answered(o.ops, false)
	c.open[part] = openRequest{}
}

// Flush sends every open request.
func (c *RangeRequests) Flush() {
	for part := range c.open {
		if c.open[part].ops > 0 {
			c.close(part)
		}
	}
}
