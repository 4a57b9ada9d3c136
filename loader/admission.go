package loader

import (
	"context"
	"sync"
	"time"

	"github.com/cosmosloader/loader/internal/clock"
	"github.com/cosmosloader/loader/internal/epk"
	"github.com/cosmosloader/loader/pacing"
)

// strategy is what a Strategy decides: how a load's work is read and
// whether the load watches its container (the plan asks before any
// write), and the admission its writes go through (Run). Neither the plan
// nor the pipeline asks which strategy runs.
type strategy interface {
	// lanes is how many read-ahead queues records are routed to, given
	// the container's physical partitions. The plan reads the work for
	// them: a file is cut into segments only when it has lanes to keep
	// busy, or when --segments asks.
	lanes(partitions int) int
	// watches says whether the container's throughput, its splits and
	// where 429s land change what is sent: only then is it watched.
	watches() bool
	admission(o Options) admission
}

// strategyOf is the one place a Strategy is told apart ("" is paced).
func strategyOf(s Strategy) strategy {
	if s == StrategyNaive {
		return naiveStrategy{}
	}
	return pacedStrategy{}
}

// newAdmission is o's strategy at work.
func newAdmission(o Options) admission { return strategyOf(o.Strategy).admission(o) }

// admission is a Strategy at work: when a request may be sent, and what
// the strategy does with its answer. It is its strategy still (the
// pipeline asks it for lanes).
type admission interface {
	strategy
	// route sets the record's partition: its lane, and the bucket a
	// request for it is paid from. It is called again after a split.
	route(it *item)
	// current reports whether lane is a current partition's, not one a
	// split retired: no record is routed to a retired lane again.
	current(lane int) bool
	// admit waits until one request (a point write or a batch) of ru may
	// be sent on part; every admitted request is released once answered.
	admit(ctx context.Context, part int, ru float64) error
	release()
	// repay reserves ru on part again before a request admitted once is
	// resent, whatever the retry policy resent it for.
	repay(ctx context.Context, part int, ru float64) error
	// observe learns an answer's latency; settle corrects part's spend
	// from the estimate to the actual charge of a request not throttled.
	observe(latency time.Duration)
	settle(part int, estimated, actual float64)
	// throttled carries out the retry policy's wait after a 429 (the
	// server's retry-after): the strategy's whole reaction to it. The
	// resend repays before it goes.
	throttled(ctx context.Context, part int, retryAfter time.Duration) error
	// succeeded learns a written request's charge.
	succeeded(part int, charge float64)
	// pacerStats is the pacer's view for a progress display; nil when
	// the strategy does not pace.
	pacerStats() *pacing.Snapshot
}

// pacedStrategy (StrategyPaced) routes records to a lane per physical
// partition and paces them to the target, which follows the container.
type pacedStrategy struct{}

func (pacedStrategy) lanes(partitions int) int { return max(partitions, 1) }
func (pacedStrategy) watches() bool            { return true }
func (pacedStrategy) admission(o Options) admission {
	return &pacedAdmission{pacer: o.Pacer, limiter: o.Limiter, turns: o.Turns}
}

// naiveStrategy (StrategyNaive) has one lane and no partitions, and sends
// at its fixed concurrency whatever the container does.
type naiveStrategy struct{}

func (naiveStrategy) lanes(int) int { return 1 }
func (naiveStrategy) watches() bool { return false }
func (naiveStrategy) admission(o Options) admission {
	return &naiveAdmission{slots: make(chan struct{}, o.NaiveConcurrency), clock: o.Clock}
}

// pacedAdmission pays each request from its partition's RU bucket, under
// the adaptive in-flight limit (StrategyPaced).
type pacedAdmission struct {
	pacedStrategy
	pacer   Pacer
	limiter Limiter
	turns   *turns // shared with the runs beside this one; nil: none
}

// wait is the pacer's Wait, in turn with the runs beside this one.
func (a *pacedAdmission) wait(ctx context.Context, part int, ru float64) error {
	if a.turns == nil {
		return a.pacer.Wait(ctx, part, ru)
	}
	return a.turns.take(ctx, part, func() error { return a.pacer.Wait(ctx, part, ru) })
}

// turns has the dispatchers of runs side by side (Options.Turns: a shared
// load's shards) wait for a partition's budget one at a time, as one
// run's single dispatcher per partition does. Each holding a reservation
// into the seconds ahead, they sent more requests into a partition's
// second than its budget held: 1–5 % throttled where one run's dispatcher
// had none. Only the wait for the budget takes turns, never a slot in
// flight: a write resent after a 429 waits for its turn holding its slot.
type turns struct {
	mu sync.Mutex
	by map[int]chan struct{}
}

// take runs wait while holding part's turn, or returns ctx's error.
func (t *turns) take(ctx context.Context, part int, wait func() error) error {
	t.mu.Lock()
	if t.by == nil {
		t.by = map[int]chan struct{}{}
	}
	c, ok := t.by[part]
	if !ok {
		c = make(chan struct{}, 1)
		t.by[part] = c
	}
	t.mu.Unlock()
	select {
	case c <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-c }()
	return wait()
}

func (a *pacedAdmission) current(lane int) bool {
	if p, ok := a.pacer.(interface{ Live(int) bool }); ok {
		return p.Live(lane)
	}
	return true
}

func (a *pacedAdmission) route(it *item) {
	if it.epk == "" {
		it.epk = epk.Of(it.doc.PK) // hashed once; a split re-routes the hash
	}
	it.part = a.pacer.Partition(it.epk)
}

func (a *pacedAdmission) admit(ctx context.Context, part int, ru float64) error {
	if err := a.wait(ctx, part, ru); err != nil {
		return err
	}
	return a.limiter.Acquire(ctx)
}

func (a *pacedAdmission) release() { a.limiter.Release() }

func (a *pacedAdmission) repay(ctx context.Context, part int, ru float64) error {
	return a.wait(ctx, part, ru)
}

func (a *pacedAdmission) observe(latency time.Duration) { a.limiter.ObserveLatency(latency) }

func (a *pacedAdmission) settle(part int, estimated, actual float64) {
	a.pacer.Settle(part, estimated, actual)
}

// throttled has the pacer pause the partition for the retry-after and
// set its rate by its AIMD policy; the repay that follows both honours the
// pause and pays again the estimate the refused request never used.
func (a *pacedAdmission) throttled(_ context.Context, part int, retryAfter time.Duration) error {
	a.pacer.Throttled(part, retryAfter)
	return nil
}

func (a *pacedAdmission) succeeded(part int, charge float64) {
	a.pacer.Succeeded(part)
	a.limiter.ObserveCharge(charge)
}

// pacerStats is the pacer's Stats when it keeps them (test pacers may not).
func (a *pacedAdmission) pacerStats() *pacing.Snapshot {
	p, ok := a.pacer.(interface{ Stats() pacing.Snapshot })
	if !ok {
		return nil
	}
	st := p.Stats()
	return &st
}

// naiveAdmission sends with a fixed number of writers and only waits out
// the server's retry-after (StrategyNaive): the approach pacing is
// measured against.
type naiveAdmission struct {
	naiveStrategy
	slots chan struct{}
	clock clock.Clock
}

func (a *naiveAdmission) route(*item)      {}
func (a *naiveAdmission) current(int) bool { return true }

func (a *naiveAdmission) admit(ctx context.Context, _ int, _ float64) error {
	select {
	case a.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (a *naiveAdmission) release() { <-a.slots }

func (a *naiveAdmission) repay(context.Context, int, float64) error { return nil }
func (a *naiveAdmission) observe(time.Duration)                     {}
func (a *naiveAdmission) settle(int, float64, float64)              {}
func (a *naiveAdmission) succeeded(int, float64)                    {}
func (a *naiveAdmission) pacerStats() *pacing.Snapshot              { return nil }

func (a *naiveAdmission) throttled(ctx context.Context, _ int, retryAfter time.Duration) error {
	return a.clock.Sleep(ctx, retryAfter)
}
