package pacing

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/cosmosloader/loader/internal/clock"
	"github.com/cosmosloader/loader/internal/epk"
)

// tokensPerRU scales request units to the whole tokens x/time/rate counts,
// so a 4.95 RU write takes 4950 tokens and rounding never adds up.
const tokensPerRU = 1000

// PacerConfig configures a Pacer. Zero values mean the documented defaults.
type PacerConfig struct {
	// TargetRU is the total RU/s to spend, split evenly over the partitions
	// the way Cosmos DB splits provisioned throughput. Must be > 0.
	TargetRU float64
	// Bounds are the EPK range boundaries of the container's physical
	// partitions (len = partitions+1), from epk.SplitEven or the service's
	// partition key ranges. Nil means epk.SplitEven(Partitions).
	Bounds []string
	// Partitions is used only when Bounds is nil; 0 means 1.
	Partitions int
	// Clock defaults to clock.System.
	Clock clock.Clock
	// Depth is how much of a second's rate a bucket holds, 100 ms by
	// default: the pattern's "20 operations every 200 ms rather than 100 at
	// the top of each second". A second guard (the service's budget per
	// aligned second, debt carried) keeps a second that starts with the
	// bucket full from spending the extra Depth of it.
	Depth time.Duration
	// AIMD is how a partition's rate answers 429s: the policy, kept apart
	// from the buckets that spend the rate. Zero fields take its defaults.
	AIMD AIMD
	// PathLatency, if set, returns the path's round trip without queues
	// (pacing.Concurrency's PathLatency). A 429's retry-after counts from
	// when the service decided, and a request sent now reaches it a round
	// trip's worth later (the answer's way back, the request's way
	// there), so the pause after a 429 is the retry-after less this: over
	// a 200 ms path, pausing the whole retry-after sent the first request
	// of the renewed second 200 ms into it. AIMD's contention tests
	// still use the retry-after as the service gave it.
	PathLatency func() time.Duration
	// Whole has every request fit in an aligned second's budget, not take
	// it into debt: the service runs a range batch's operations one at a
	// time against the budget, so the operations of a batch that took the
	// second past it would be refused (429) where one request would have
	// run. A request that does not fit in what is left of a second waits
	// for the next one, and that remainder goes unspent.
	Whole bool
	// PathJitter, if set, returns how widely the path's round trips
	// spread (pacing.Concurrency's PathJitter). A request sent within that
	// spread of the service's second boundary lands on either side of it
	// at random, so a second's arrivals vary about the pace, and the more
	// the larger each request: a second that gets more than its budget
	// refuses the excess. Once a 429 shows that the budget binds, the
	// pacer aims below it by what that variation asks for
	// (jitterHeadroom), when that is more than Aim leaves, and bounds
	// range batches smaller (BatchRU).
	PathJitter func() time.Duration
	// Aim is the fraction of the target the buckets are filled at
	// (default 1: the target as given; the loader uses LoadAim). The service renews each partition's budget every
	// second by its own clock, and a path's jitter moves requests paced
	// evenly by ours across its second boundaries: pacing at exactly the
	// budget, some of its seconds get a few requests more than it holds.
	// Half a per cent below it absorbed most of them: over 200 + ≤ 200 ms
	// (scenario L, simulated in TestLongPathKeepsTheTarget) 0.38 % of
	// requests were throttled at 1.0 and 0.24 % at 0.995 (300 + ≤ 300 ms:
	// 0.53 % and 0.32 %).
	Aim float64
}

// LoadAim is the Aim a load paces at: 99.5 % of its target (see Aim).
const LoadAim = 0.995

// DefaultDepth is how much of a second's rate a bucket holds unless
// PacerConfig.Depth says otherwise.
const DefaultDepth = 100 * time.Millisecond

func (c *PacerConfig) defaults() {
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
	if c.Depth <= 0 {
		c.Depth = DefaultDepth
	}
	c.AIMD.defaults()
	if c.Aim <= 0 || c.Aim > 1 {
		c.Aim = 1
	}
}

// Pacer spends a target RU/s on a container: one RU-denominated token bucket
// per physical partition (golang.org/x/time/rate), each partition's rate
// set by the AIMD policy after its 429s. It is safe for concurrent use.
//
// A writer calls Wait (or Reserve) with the estimated charge before sending,
// then, on success, Settle with the actual charge and Succeeded; on a 429,
// Throttled with the server's retry-after (and not Settle: the tokens the
// throttled request took are forfeited, itself a small back-off).
type Pacer struct {
	cfg    PacerConfig
	clock  clock.Clock
	bounds []string
	start  time.Time

	mu     sync.Mutex // guards target and aim
	target float64
	// aim is the fraction of the target paced at: cfg.Aim, or less over
	// a jittery path (reaim); reaimAt is when reaim may look again, in
	// Unix nanoseconds, read without the lock on every answer.
	aim     float64
	reaimAt atomic.Int64
	// throttledOnce says a 429 came: the budget binds somewhere, and the
	// path's spread matters (reaim, BatchRU). An unthrottled load's round
	// trips spread with the target's queue, which refuses nothing.
	throttledOnce atomic.Bool

	// rmu guards the routing, which Rebound changes after a split: parts
	// only grows (a split-away partition stays, retired, so that requests
	// already holding its index settle on the bucket they reserved from),
	// live lists the indices of the current partitions in bounds order.
	rmu   sync.RWMutex
	parts []*partition
	live  []int
}

// partition is one physical partition's bucket and adaptation state.
type partition struct {
	mu    sync.Mutex
	lim   *rate.Limiter
	share float64 // RU/s of the target this partition is entitled to
	limit float64 // RU/s currently allowed (≤ share after a 429)
	// last is the latest time seen: x/time/rate credits tokens twice if
	// time goes backwards, which concurrent callers reading the clock
	// before taking the lock could otherwise make it do.
	last time.Time
	// credit is RU that Settle gave back, spent by the next reservations.
	credit float64
	// frac is the sub-token remainder of the last reservation.
	frac float64

	// pausedUntil is when the pause after the latest 429 ends: nothing
	// is sent on the partition before.
	pausedUntil time.Time
	// aimd is what the AIMD policy remembers of the partition's 429s.
	aimd aimdState

	requests, succeeded, throttled int64
	totalRU                        float64
	perSecond                      secondRing

	// The second guard models the service's budget per aligned clock
	// second (renewed as available = min(available, 0) + limit): the
	// bucket alone lets a second that starts with it full — after the
	// queue ran dry — take 110 % of the rate, and the service refuses what
	// comes after the budget. guardSec is the unix second guardRU is left
	// in.
	guardSec int64
	guardRU  float64
}

// renewGuard brings the second guard to second sec. pt.mu must be held.
func (pt *partition) renewGuard(sec int64) {
	if sec <= pt.guardSec {
		return
	}
	n := float64(sec - pt.guardSec)
	pt.guardRU = math.Min(math.Min(pt.guardRU, 0)+n*pt.limit, pt.limit)
	pt.guardSec = sec
}

// reguard moves the second guard by a change of rate from old at now: the
// current second's budget by the part of the second still to come (the
// old rate until now, the new one after, as the service re-divides a
// changed throughput), a later second's, already reserved into, wholly.
// pt.mu must be held.
func (pt *partition) reguard(now time.Time, old float64) {
	switch sec := now.Unix(); {
	case pt.guardSec == sec:
		pt.guardRU += (pt.limit - old) * (1 - float64(now.Nanosecond())/1e9)
	case pt.guardSec > sec:
		pt.guardRU += pt.limit - old
	}
}

// guard charges ru to the aligned second of at, or of the first renewal
// after it that leaves budget, and returns when the request may go. A
// request sent while the second has budget left may take it into debt, as
// the service allows — unless whole, when it must fit in what is left (or
// find the second whole). pt.mu must be held.
func (pt *partition) guard(at time.Time, ru float64, whole bool) time.Time {
	sec := at.Unix()
	if sec < pt.guardSec {
		// Behind later reservations: charged to the latest second.
		pt.guardRU -= ru
		return at
	}
	pt.renewGuard(sec)
	if pt.guardRU <= 0 || (whole && pt.guardRU < ru && pt.guardRU < pt.limit) {
		k := int64(1)
		if pt.limit > 0 {
			k = max(int64(math.Floor(-pt.guardRU/pt.limit))+1, 1)
		}
		pt.renewGuard(sec + k)
		at = time.Unix(sec+k, 0)
	}
	pt.guardRU -= ru
	return at
}

// ErrBadConfig reports an unusable PacerConfig.
var ErrBadConfig = errors.New("bad pacer config")

// NewPacer returns a Pacer with empty buckets.
func NewPacer(cfg PacerConfig) (*Pacer, error) {
	if !(cfg.TargetRU > 0) || math.IsInf(cfg.TargetRU, 0) {
		return nil, fmt.Errorf("create pacer: target %v RU/s: %w", cfg.TargetRU, ErrBadConfig)
	}
	cfg.defaults()
	bounds := cfg.Bounds
	if bounds == nil {
		bounds = epk.SplitEven(max(cfg.Partitions, 1))
	}
	if len(bounds) < 2 {
		return nil, fmt.Errorf("create pacer: %d partition bounds: %w", len(bounds), ErrBadConfig)
	}
	p := &Pacer{
		cfg:    cfg,
		clock:  cfg.Clock,
		bounds: append([]string(nil), bounds...),
		start:  cfg.Clock.Now(),
		target: cfg.TargetRU,
		aim:    cfg.Aim,
	}
	n := len(bounds) - 1
	share := p.shareOf(cfg.TargetRU, n)
	for range n {
		pt := &partition{share: share, limit: share, last: p.start, guardSec: p.start.Unix(), guardRU: share}
		pt.lim = rate.NewLimiter(rate.Limit(share*tokensPerRU), p.burst(share))
		// Start empty: a full bucket would let the first second spend
		// (1 + Depth) × the target, a 429 when the target is all there is.
		pt.lim.ReserveN(p.start, pt.lim.Burst())
		p.live = append(p.live, len(p.parts))
		p.parts = append(p.parts, pt)
	}
	return p, nil
}

// shareOf is what each of n partitions is paced at when the target is
// target RU/s: an even split of aim × target, as the service splits the
// provisioned throughput. p.mu must be held once the pacer is in use.
func (p *Pacer) shareOf(target float64, n int) float64 {
	return target * p.aim / float64(n)
}

// burst is the bucket size, in tokens, for a rate in RU/s.
func (p *Pacer) burst(ruPerSec float64) int {
	return max(1, int(ruPerSec*tokensPerRU*p.cfg.Depth.Seconds()))
}

// Partitions returns the number of physical partitions paced.
func (p *Pacer) Partitions() int {
	p.rmu.RLock()
	defer p.rmu.RUnlock()
	return len(p.live)
}

// Partition returns the index of the physical partition holding an EPK.
// After a Rebound, indices of split-away partitions stay valid for the
// requests holding them, and new partitions get new indices.
func (p *Pacer) Partition(key string) int {
	p.rmu.RLock()
	defer p.rmu.RUnlock()
	return p.live[epk.Locate(p.bounds, key)]
}

// part returns partition i, clamping a bad index to a valid one rather than
// panicking in the middle of a load.
func (p *Pacer) part(i int) *partition {
	p.rmu.RLock()
	defer p.rmu.RUnlock()
	return p.parts[min(max(i, 0), len(p.parts)-1)]
}

// now returns the clock's time, never earlier than the partition has seen.
// pt.mu must be held.
func (pt *partition) now(c clock.Clock) time.Time {
	t := c.Now()
	if t.Before(pt.last) {
		return pt.last
	}
	pt.last = t
	return t
}

// Reservation is RU taken from a partition's bucket: the request may be
// sent at At.
type Reservation struct {
	Part int
	RU   float64
	At   time.Time

	p      *Pacer
	rs     []*rate.Reservation
	credit float64
	// sec is the aligned second the second guard charged it to.
	sec int64
}

// Reserve takes ru from part's bucket without waiting and says when the
// request may be sent. A request larger than the bucket goes when the
// bucket is full and leaves it in debt, as Cosmos DB does with an expensive
// request, so no charge is ever too big to send. Wait is Reserve plus the
// sleep; Reserve is for callers that schedule themselves.
func (p *Pacer) Reserve(part int, ru float64) *Reservation {
	pt := p.part(part)
	pt.mu.Lock()
	defer pt.mu.Unlock()
	now := pt.now(p.clock)
	p.recover(pt, now)
	r := &Reservation{Part: part, RU: ru, p: p}
	need := math.Max(ru, 0)
	r.credit = math.Min(pt.credit, need)
	pt.credit -= r.credit
	need -= r.credit
	tokens := need*tokensPerRU + pt.frac
	n := int(tokens)
	pt.frac = tokens - float64(n)
	// The first chunk is what the request waits for; a zero-token
	// reservation still queues behind existing debt.
	first := min(n, pt.lim.Burst())
	res := pt.lim.ReserveN(now, first)
	r.At = now.Add(res.DelayFrom(now))
	r.rs = append(r.rs, res)
	r.rs = append(r.rs, takeTokens(pt.lim, now, n-first)...)
	if r.At.Before(pt.pausedUntil) {
		r.At = pt.pausedUntil
	}
	r.At = pt.guard(r.At, ru, p.cfg.Whole)
	r.sec = max(r.At.Unix(), pt.guardSec)
	pt.requests++
	pt.totalRU += ru
	pt.perSecond.add(r.At, ru)
	return r
}

// takeTokens reserves n tokens in burst-sized chunks, putting the bucket in
// debt rather than failing as one oversized ReserveN would.
func takeTokens(lim *rate.Limiter, now time.Time, n int) []*rate.Reservation {
	var rs []*rate.Reservation
	for n > 0 {
		c := min(n, lim.Burst())
		rs = append(rs, lim.ReserveN(now, c))
		n -= c
	}
	return rs
}

// Cancel returns the reservation's RU to the bucket as far as later
// reservations allow: for a request that will not be sent.
func (r *Reservation) Cancel() {
	pt := r.p.part(r.Part)
	pt.mu.Lock()
	defer pt.mu.Unlock()
	now := pt.now(r.p.clock)
	for i := len(r.rs) - 1; i >= 0; i-- {
		r.rs[i].CancelAt(now)
	}
	r.rs = nil
	pt.credit += r.credit
	r.credit = 0
	if r.sec == pt.guardSec {
		pt.guardRU += r.RU
	}
	pt.requests--
	pt.totalRU -= r.RU
	pt.perSecond.add(r.At, -r.RU)
}

// Wait blocks until part's bucket admits ru, the partition is not paused
// after a 429, and returns nil; or returns ctx's error, having given the RU
// back.
func (p *Pacer) Wait(ctx context.Context, part int, ru float64) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("wait for %.2f RU: %w", ru, err)
	}
	r := p.Reserve(part, ru)
	pt := p.part(part)
	for {
		pt.mu.Lock()
		at := r.At
		if at.Before(pt.pausedUntil) {
			at = pt.pausedUntil
		}
		pt.mu.Unlock()
		now := p.clock.Now()
		d := at.Sub(now)
		if d <= 0 {
			if p.late(r, now) {
				continue
			}
			return nil
		}
		if err := p.clock.Sleep(ctx, d); err != nil {
			r.Cancel()
			return fmt.Errorf("wait for %.2f RU: %w", ru, err)
		}
	}
}

// late moves a request woken in a later aligned second than it was
// charged to — a busy machine, a wake-up past the boundary — to that
// second, where the service will count it, and says whether it must wait
// again for that second's budget.
func (p *Pacer) late(r *Reservation, now time.Time) bool {
	sec := now.Unix()
	if sec <= r.sec {
		return false
	}
	pt := p.part(r.Part)
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if r.sec == pt.guardSec {
		pt.guardRU += r.RU
	} else if pt.guardSec > sec {
		// Later seconds are booked already: leave it where it is.
		r.sec = sec
		return false
	}
	at := pt.guard(now, r.RU, p.cfg.Whole)
	r.At, r.sec = at, at.Unix()
	return at.After(now)
}

// Settle corrects a partition's bucket for the difference between the RU
// reserved for a request and the charge the service reported, so the
// long-run spend matches the target however wrong the estimates are: an
// extra charge is taken now (into debt if need be), a smaller one is given
// back to the next requests (no more than one bucket's worth).
func (p *Pacer) Settle(part int, estimated, actual float64) {
	diff := actual - estimated
	if diff == 0 || math.IsNaN(diff) || math.IsInf(diff, 0) {
		return
	}
	pt := p.part(part)
	pt.mu.Lock()
	defer pt.mu.Unlock()
	now := pt.now(p.clock)
	if diff > 0 {
		tokens := diff*tokensPerRU + pt.frac
		n := int(tokens)
		pt.frac = tokens - float64(n)
		takeTokens(pt.lim, now, n)
		pt.guardRU -= diff
	} else {
		pt.credit = math.Min(pt.credit-diff, pt.limit*p.cfg.Depth.Seconds())
		if now.Unix() == pt.guardSec {
			pt.guardRU -= diff
		}
	}
	pt.totalRU += diff
	pt.perSecond.add(now, diff)
}

// Succeeded records a successful request on a partition.
func (p *Pacer) Succeeded(part int) {
	pt := p.part(part)
	pt.mu.Lock()
	pt.succeeded++
	now := pt.now(p.clock)
	p.recover(pt, now)
	pt.mu.Unlock()
	p.reaim(now)
}

// Throttled records a 429 on a partition: it sends nothing more until
// retryAfter has passed (0 means one budget period, 1 s), whatever the 429
// means, and its rate is what the AIMD policy makes of the 429 (see AIMD).
// Other partitions are not affected: a hot partition key must not slow the
// rest of the load.
func (p *Pacer) Throttled(part int, retryAfter time.Duration) {
	if retryAfter <= 0 {
		retryAfter = time.Second
	}
	pause := retryAfter
	if p.cfg.PathLatency != nil {
		pause = max(retryAfter-p.cfg.PathLatency(), 0)
	}
	p.throttledOnce.Store(true)
	pt := p.part(part)
	pt.mu.Lock()
	defer pt.mu.Unlock()
	now := pt.now(p.clock)
	pt.throttled++
	if until := now.Add(pause); until.After(pt.pausedUntil) {
		pt.pausedUntil = until
	}
	var meanRU float64
	if pt.requests > 0 {
		meanRU = pt.totalRU / float64(pt.requests)
	}
	if limit := p.cfg.AIMD.throttled(&pt.aimd, now, retryAfter, pt.limit, pt.share, meanRU); limit != pt.limit {
		pt.setLimit(p, now, limit)
	}
	// Empty the bucket up to the end of the pause, so that when it ends
	// requests resume at the (cut) rate instead of all at once.
	pt.credit = 0
	floor := -pt.limit * tokensPerRU * pt.pausedUntil.Sub(now).Seconds()
	if tokens := pt.lim.TokensAt(now); tokens > floor {
		takeTokens(pt.lim, now, int(tokens-floor))
	}
}

// recover raises a partition's rate as the AIMD policy allows for the
// clean time since its last cut, pause or raise. pt.mu must be held.
func (p *Pacer) recover(pt *partition, now time.Time) {
	if limit, ok := p.cfg.AIMD.recovered(&pt.aimd, now, pt.pausedUntil, pt.limit, pt.share); ok {
		pt.setLimit(p, now, limit)
	}
}

// setLimit changes a partition's rate and, with it, its bucket depth.
// pt.mu must be held.
func (pt *partition) setLimit(p *Pacer, now time.Time, ruPerSec float64) {
	pt.limit = ruPerSec
	pt.lim.SetLimitAt(now, rate.Limit(ruPerSec*tokensPerRU))
	pt.lim.SetBurstAt(now, p.burst(ruPerSec))
}

// SetTarget changes the total RU/s at run time (a capacity lease grew or
// shrank). Partitions keep the fraction of their share that adaptation had
// left them, and the change counts in the second guard from now: a lease
// taken mid-second is spent from then on, not from the next second.
func (p *Pacer) SetTarget(ru float64) {
	if !(ru > 0) || math.IsInf(ru, 0) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = ru
	p.reshare()
}

// reshare divides the target, at the aim, over the partitions afresh.
// p.mu must be held.
func (p *Pacer) reshare() {
	p.rmu.RLock()
	defer p.rmu.RUnlock()
	share := p.shareOf(p.target, len(p.live))
	for _, pt := range p.parts {
		pt.mu.Lock()
		now := pt.now(p.clock)
		frac, old := pt.limit/pt.share, pt.limit
		pt.share = share
		pt.setLimit(p, now, share*frac)
		pt.reguard(now, old)
		pt.mu.Unlock()
	}
}

// Target returns the total RU/s currently aimed at.
func (p *Pacer) Target() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.target
}

// pausedUntil returns when a partition's pause after a 429 ends.
func (p *Pacer) pausedUntil(part int) time.Time {
	pt := p.part(part)
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return pt.pausedUntil
}
