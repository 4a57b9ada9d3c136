package pacing

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/cosmosloader/loader/internal/clock"
)

// ConcurrencyConfig configures a Concurrency. Zero values mean defaults.
type ConcurrencyConfig struct {
	// TargetRU is the RU/s the pacer aims at.
	TargetRU float64
	// MeanRU seeds the mean charge until charges are observed (default 10).
	MeanRU float64
	// Latency is the round-trip time assumed until Warmup latencies have
	// been observed (default 1 s). It is deliberately high: at start-up a
	// limit that is too high costs a few idle goroutines, one that is too
	// low leaves a long network path starved for seconds while the
	// estimate crawls up from answers that are themselves throttled by it.
	Latency time.Duration
	// Warmup is how many latencies must be observed before they replace
	// Latency (default 16). Until 2 × Warmup have been, at most 4 ×
	// Warmup requests plus one per answer are in flight: enough for the
	// first answers to size the pool within a round trip or two, few
	// enough that a target far beyond what this machine can send does not
	// open thousands of connections before the bound on the answer rate
	// (limitLocked) can apply.
	Warmup int
	// Percentile of the recent latencies the limit is sized from (default
	// 0.95). Little's law holds for the mean, but with jitter the requests
	// in flight are the slow ones: sizing from the mean starves the pool
	// whenever a few slow answers hold slots.
	Percentile float64
	// Window is how many recent latencies the percentile is taken over
	// (default 1024: about a second of a busy load, so a change of network
	// path is followed within a second or two).
	Window int
	// Headroom multiplies Little's law's answer (default 1.3): a request
	// waiting for a free slot is RU/s not spent, while one waiting in the
	// pacer costs only memory.
	Headroom float64
	// Min bounds the limit from below (default 2).
	Min int
	// StartMax, when > 0, caps the limit until the answer rate has
	// stopped rising (start-up, and again after the target is raised)
	// and the floor is known to be the path's latency (pathKnownLocked).
	// It bounds what a cold start can spend on requests that only queue:
	// the first answers' latency may be mostly a queue (see probeLocked),
	// and the bandwidth-delay bound multiplies it by a warm-up's rising
	// rate (lifted at the plateau alone, an unthrottled load into a local
	// target grew a pool of hundreds that only queued). After that
	// Little's law, the bandwidth-delay product, probes and the
	// file-descriptor limit size the pool, nothing else: any fixed number
	// is too low for some target and path.
	StartMax int
	// FDLimit is the process's open-file limit; 0 means read it from the
	// system (RLIMIT_NOFILE; Go raises the soft limit to the hard one at
	// start-up). Every request in flight holds a connection, so the limit
	// stays FDReserve below it.
	FDLimit int
	// FDReserve is how many descriptors are kept for everything else:
	// inputs, checkpoint, dead letters, idle connections (default 64 plus
	// a tenth of FDLimit).
	FDReserve int
	// Smoothing is the EWMA weight of a new charge (default 0.05).
	Smoothing float64
	// Gain bounds the pool to this many times the bandwidth-delay product:
	// the highest recent answer rate × the path's round trip (default 4)
	// while the answer rate is still rising, as BBR's start-up does.
	Gain float64
	// SteadyGain replaces Gain once the answer rate has stopped rising
	// (default 2, BBR's congestion-window gain): a pool beyond twice what
	// the answers show in flight only queues — in this process when its
	// CPU is the limit, or in the target — and each request waiting costs
	// a connection, its goroutines and its body (bench scenario F,
	// unthrottled into a local target: with 4 × the pool sat several times
	// larger than a pool that wrote as fast on less CPU).
	SteadyGain float64
	// Clock is what the answer rate is measured with (default
	// clock.System).
	Clock clock.Clock
	// Notice, if set, is called once, the first time the file-descriptor
	// limit holds the limit below what Little's law asks for, with a
	// message for the user. It is called without locks held.
	Notice func(msg string)
}

// Concurrency sizes the writer pool by Little's law: to spend TargetRU
// RU/s on requests of MeanRU each taking Latency, about TargetRU ÷ MeanRU ×
// Latency requests must be in flight. The latency used is a high
// percentile of the recent round trips, not their mean, so a jittery path
// still keeps the target busy. A 50,000 RU/s target over a 50 ms link
// keeps hundreds in flight; 400 RU/s of 10 RU records at 2 ms keeps 2.
// Nothing caps it but the process's file-descriptor limit, and that is
// reported (Notice, BoundMessage) when it binds.
//
// It is also a semaphore whose size follows the limit: Acquire before
// sending a request the pacer has admitted, Release when its response is
// in. It is safe for concurrent use.
type Concurrency struct {
	cfg     ConcurrencyConfig
	fdBound int // 0: none known

	mu       sync.Mutex
	target   float64
	meanRU   float64
	latency  float64   // seconds: the percentile, or cfg.Latency while warming up
	floor    float64   // seconds: the path's latency without queues (estimateLocked)
	low5     float64   // seconds: the lowest 5th percentile of any window so far
	spread   float64   // seconds: twice the window's 25th to 75th percentile (PathJitter)
	samples  []float64 // ring of recent latencies, seconds
	next     int       // ring position of the next sample
	seen     int       // samples observed in all
	scratch  []float64
	inFlight int
	waiters  []chan struct{}

	boundMsg string // set once, when the fd limit first binds
	notified bool

	// The answer rate: answers since rateAt, and the rates of the last
	// rateWindows windows (answers per second; none until one has passed).
	rateAt time.Time
	rateN  int
	rates  []float64
	// The mean latency of the answers of the last closed window (winMean)
	// and the sum of the current one's.
	winSum, winMean float64
	// The answer rate has stopped rising (full) when plateau windows in a
	// row came in below 1.25 × best, the highest rate that was itself a
	// rise: BBR's "full pipe" test. A raised target starts it again.
	best    float64
	plateau int
	full    bool
	// capped: StartMax bound the last limit computed (capLocked).
	capped bool

	// A probe (probeLocked) holds the pool at probeLimit to see the
	// latency without most of the requests in flight: probeAt is when
	// it began (zero: none running), drained when the pool first held
	// no more than probeLimit, probeSum and probeN the latencies of the
	// requests sent since. nextProbe is when the next may begin, every
	// probeEvery while probes lower the floor.
	probeAt, drained, nextProbe time.Time
	probeLimit, probeN          int
	probeSum                    float64
	probeEvery                  time.Duration
	probedPath                  bool // the last probe found no lower latency
}

// A probe lowers the pool to a quarter (probeShare) for a few rate windows
// at most (probeMax), at most every probeEvery, which doubles up to
// probeEveryMax each time a probe finds no lower latency. Only a pool
// above probeAbove is probed: a smaller one costs little memory.
const (
	probeShare    = 0.25
	probeMax      = 4 * rateWindow
	probeEveryMin = time.Second
	probeEveryMax = 32 * time.Second
	probeAbove    = 64
	// probeBelow: a load answered at this share of its target or more
	// is not probed; the pool is doing its job.
	probeBelow = 0.9
	// probeQueue: a floor less than this many times PathLatency does not
	// look like a queue (queuedLocked), and is not probed.
	probeQueue = 2
)

// shortPath is the longest round trip without queues (PathLatency) taken
// for a short path, whose pool is sized with SteadyGain while the answer
// rate still rises too.
const shortPath = 20 * time.Millisecond

// plateauWindows is how many windows without a 25 % rise mean the pool has
// found what the path and this process can answer: a second, which is
// two or more round trips on any path the start-up latency allows for.
const plateauWindows = 4

// cappedPlateauWindows replaces plateauWindows while the start-up cap
// binds on a long path (longPathLocked): the rate is then flat because
// the pool is, and each window waited is a window at the cap's rate: a
// high target over a 200 ms path reached its rate a second late. Half a
// second is still a round trip or two there. Not on a shorter path: a
// cold start's queue on a local target (bench scenario F) lifted the cap
// before a probe could show it for what it was, and the pool and the
// process's memory grew for nothing.
const cappedPlateauWindows = 2

// longPath is the shortest round trip, without queues (PathLatency), taken
// for a long network path rather than a queue of this process's own.
const longPath = 100 * time.Millisecond

// longPathLocked tells whether even the fastest answers (PathLatency) take
// longPath or more.
func (c *Concurrency) longPathLocked() bool {
	return c.low5 >= longPath.Seconds()
}

// rateWindows is how many windows the highest answer rate is taken over.
const rateWindows = 8

// rateWindow is how long answers are counted for one rate measurement.
const rateWindow = 250 * time.Millisecond

// NewConcurrency returns a Concurrency seeded from cfg.
func NewConcurrency(cfg ConcurrencyConfig) *Concurrency {
	if cfg.MeanRU <= 0 {
		cfg.MeanRU = 10
	}
	if cfg.Latency <= 0 {
		cfg.Latency = time.Second
	}
	if cfg.Warmup <= 0 {
		cfg.Warmup = 16
	}
	if cfg.Percentile <= 0 || cfg.Percentile > 1 {
		cfg.Percentile = 0.95
	}
	if cfg.Window <= 0 {
		cfg.Window = 1024
	}
	if cfg.Headroom <= 0 {
		cfg.Headroom = 1.3
	}
	if cfg.Min <= 0 {
		cfg.Min = 2
	}
	if cfg.Smoothing <= 0 || cfg.Smoothing > 1 {
		cfg.Smoothing = 0.05
	}
	if cfg.Gain <= 1 {
		cfg.Gain = 4
	}
	if cfg.SteadyGain <= 1 {
		cfg.SteadyGain = min(2, cfg.Gain)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	if cfg.FDLimit <= 0 {
		cfg.FDLimit = processFDLimit()
	}
	c := &Concurrency{
		cfg:     cfg,
		target:  cfg.TargetRU,
		meanRU:  cfg.MeanRU,
		latency: cfg.Latency.Seconds(),
		samples: make([]float64, 0, cfg.Window),
	}
	if cfg.FDLimit > 0 {
		reserve := cfg.FDReserve
		if reserve <= 0 {
			reserve = 64 + cfg.FDLimit/10
		}
		c.fdBound = max(cfg.FDLimit-reserve, cfg.Min)
	}
	return c
}

// ObserveLatency feeds one request's round-trip time.
func (c *Concurrency) ObserveLatency(d time.Duration) {
	if d <= 0 {
		return
	}
	c.update(func() {
		s := d.Seconds()
		c.winSum += s
		c.countAnswerLocked()
		c.probeSampleLocked(d)
		if len(c.samples) < cap(c.samples) {
			c.samples = append(c.samples, s)
		} else {
			c.samples[c.next] = s
		}
		c.next = (c.next + 1) % cap(c.samples)
		c.seen++
		// Sorting the window costs O(n log n): after the first 64 answers,
		// do it every 32, which is still many times a second on a busy load.
		if c.seen >= c.cfg.Warmup && (c.seen <= 64 || c.seen%32 == 0) {
			c.latency = c.estimateLocked()
		}
	})
}

// estimateLocked returns the latency to size the pool from: the window's
// high percentile, scaled down by how far its 5th percentile has risen
// above the lowest seen (low5). A long, jittery path raises the high
// percentile but not the low one, and is sized for in full. Requests
// queueing behind one another — in this process when its CPU is the
// limit, or in an overloaded target — raise every percentile together:
// sizing from that would add requests in flight, which lengthen the
// queue, which adds more (an unreachable target grew the pool to
// thousands of connections and slowed the load). The ratio
// keeps the pool where the latency was before the queue formed. Low
// percentiles, not the mean, so that a stall (a few answers taking
// seconds) does not shrink the pool when it needs to grow.
//
// It also keeps the floor the bandwidth-delay bound uses (limitLocked): a
// mean, not the fastest answers. On a machine kept busy by another
// process most of a round trip is waiting for a core, a lucky answer is
// many times faster than the mean, and the 5th percentile as the floor
// starved the pool and left the load well short of its target. The
// floor is the lower of the first 2 × Warmup answers' mean —
// sent while the pool was smallest, before any queue of ours could form —
// and the lowest mean of a window of floorSamples or more.
func (c *Concurrency) estimateLocked() float64 {
	c.scratch = append(c.scratch[:0], c.samples...)
	slices.Sort(c.scratch)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(c.scratch)))) - 1
		return c.scratch[min(max(i, 0), len(c.scratch)-1)]
	}
	high, low := at(c.cfg.Percentile), at(0.05)
	c.spread = 2 * (at(0.75) - at(0.25))
	if c.low5 == 0 || low < c.low5 {
		c.low5 = low
	}
	n := len(c.samples)
	if (c.floor == 0 && n >= min(2*c.cfg.Warmup, cap(c.samples))) || n >= min(floorSamples, cap(c.samples)) {
		var sum float64
		for _, s := range c.samples {
			sum += s
		}
		if mean := sum / float64(n); c.floor == 0 || mean < c.floor {
			c.floor = mean
		}
	}
	if low > 0 {
		return high * c.low5 / low
	}
	return high
}

// floorSamples is how many answers a window's mean must hold to lower the
// floor: enough that its noise is a few per cent on a busy machine.
const floorSamples = 256

// countAnswerLocked adds one answer to the rate measurement.
func (c *Concurrency) countAnswerLocked() {
	now := c.cfg.Clock.Now()
	c.rateN++
	if c.rateAt.IsZero() {
		c.rateAt = now
		return
	}
	// The first window closes as soon as it holds 2 × Warmup answers, when
	// the floor is known too: the bound then applies after the first few
	// answers, milliseconds on a fast path, one round trip on a long one.
	if el := now.Sub(c.rateAt); el >= rateWindow || (len(c.rates) == 0 && c.rateN >= 2*c.cfg.Warmup && el > 0) {
		if len(c.rates) == rateWindows {
			c.rates = append(c.rates[:0], c.rates[1:]...)
		}
		r := float64(c.rateN) / el.Seconds()
		c.rates = append(c.rates, r)
		c.winMean = c.winSum / float64(c.rateN)
		c.rateN, c.rateAt, c.winSum = 0, now, 0
		if r >= 1.25*c.best {
			c.best, c.plateau = r, 0
		} else if c.plateau++; c.plateau >= plateauWindows || (c.capped && c.longPathLocked() && c.plateau >= cappedPlateauWindows) {
			c.full = true
		}
		c.probeLocked(now)
	}
}

// shortPathLocked tells whether the path's round trip (PathLatency) is
// short, at most shortPath: start-up's larger Gain is for a long path,
// where a round trip is a large part of the second a window waits; over
// a short one a window holds tens of round trips, and the larger gain
// only multiplies a cold start's queue (see probeLocked).
func (c *Concurrency) shortPathLocked() bool {
	return c.low5 > 0 && c.low5 <= shortPath.Seconds()
}

// queuedLocked tells whether the latency looks like a queue: the floor
// is at least probeQueue × the fastest answers (PathLatency), or the last
// window's mean at least probeQueue × the floor — it grew with the
// requests in flight. A long path's jitter spreads answers too, but less
// (at 300 + ≤ 300 ms the mean is 1.4 × the 5th percentile), and more
// requests in flight over it take no longer; there a probe would cost a
// round trip or two of rate for nothing, and start-up's larger gain is
// what reaches the target in time. A queue gets the steady gain: it only
// multiplies itself. (A cold start's first answers on a local target are
// all slow alike: no sign of a queue in them, but as the pool grows on
// them the next windows' means rise to several times theirs.)
func (c *Concurrency) queuedLocked() bool {
	return c.low5 > 0 && (c.floor >= probeQueue*c.low5 || c.winMean >= probeQueue*c.floor)
}

// pathKnownLocked tells whether the floor is known to be the path's
// latency, not a queue: it does not look like one, or the last probe
// found fewer requests in flight no faster.
func (c *Concurrency) pathKnownLocked() bool {
	return c.probedPath || (c.low5 > 0 && !c.queuedLocked())
}

// probeLocked starts a probe when a large pool is answered well below
// the target: the requests in flight may be waiting in a queue of this
// process's own (or the target's), where more of them only wait longer.
// Whether a round trip is the path or a queue cannot be told from its
// length, only from what fewer requests in flight do to it: over a path,
// nothing; in a queue, they wait less. At start-up every request waits
// behind the first burst (a cold process opening its connections) and
// the floor, the first answers' mean, is mostly that queue, many times
// the path's own round trip, which held hundreds of requests in flight
// for answers a pool a tenth the size got as fast (bench scenario F). So
// a large pool whose latency looks like a queue (queuedLocked) is lowered
// to a quarter for a moment, as BBR's ProbeRTT lowers its window, and the
// mean of what was sent meanwhile becomes the floor if lower: the pool then follows it down, a quarter's
// worth at a time (its gain of 2 times a quarter), until fewer requests
// stop being faster.
func (c *Concurrency) probeLocked(now time.Time) {
	if !c.probeAt.IsZero() {
		if now.Sub(c.probeAt) >= probeMax {
			c.endProbeLocked(now)
		}
		return
	}
	if c.floor == 0 || now.Before(c.nextProbe) || !c.queuedLocked() {
		return
	}
	limit := c.capLocked(float64(c.boundLocked()))
	// Only a pool that binds: with the pacer the limit (its rate cut by
	// 429s, say), slots are free and fewer would only starve it.
	binds := len(c.waiters) > 0 || c.inFlight >= limit
	if limit <= probeAbove || !binds || c.maxRateLocked()*c.meanRU >= probeBelow*c.target {
		return
	}
	c.probeAt, c.drained, c.probeN, c.probeSum = now, time.Time{}, 0, 0
	c.probeLimit = max(int(float64(limit)*probeShare), c.cfg.Min)
}

// probeSampleLocked counts an answer toward a running probe: only requests
// sent once the pool had drained to the probe's size.
func (c *Concurrency) probeSampleLocked(d time.Duration) {
	if c.probeAt.IsZero() {
		return
	}
	now := c.cfg.Clock.Now()
	if c.drained.IsZero() {
		// This answer's slot is still held: the pool has drained when
		// the others fit in the probe.
		if c.inFlight-1 <= c.probeLimit {
			c.drained = now
		}
		return
	}
	if now.Add(-d).Before(c.drained) {
		return
	}
	c.probeSum += d.Seconds()
	if c.probeN++; c.probeN >= max(c.probeLimit, 2*c.cfg.Warmup) {
		c.endProbeLocked(now)
	}
}

// endProbeLocked ends a probe: what it measured lowers the floor, and a
// probe that found nothing lower waits twice as long for the next.
func (c *Concurrency) endProbeLocked(now time.Time) {
	if c.probeEvery == 0 {
		c.probeEvery = probeEveryMin
	}
	if c.probeN >= c.cfg.Warmup {
		if mean := c.probeSum / float64(c.probeN); mean < 0.9*c.floor {
			c.floor = mean
			c.probeEvery, c.probedPath = probeEveryMin, false
		} else {
			c.probeEvery, c.probedPath = min(2*c.probeEvery, probeEveryMax), true
		}
	} else {
		c.probeEvery = min(2*c.probeEvery, probeEveryMax)
	}
	c.probeAt, c.nextProbe = time.Time{}, now.Add(c.probeEvery)
}

// maxRateLocked is the highest answer rate of the recent windows, 0 before
// the first.
func (c *Concurrency) maxRateLocked() float64 {
	var m float64
	for _, r := range c.rates {
		m = max(m, r)
	}
	return m
}

// ObserveCharge feeds one request's RU charge.
func (c *Concurrency) ObserveCharge(ru float64) {
	if !(ru > 0) || math.IsInf(ru, 0) {
		return
	}
	c.update(func() { c.meanRU += c.cfg.Smoothing * (ru - c.meanRU) })
}

// SetTarget changes the RU/s aimed at.
func (c *Concurrency) SetTarget(ru float64) {
	if !(ru >= 0) || math.IsInf(ru, 0) {
		return
	}
	c.update(func() {
		if ru > c.target {
			// More to reach: start-up's gain again, until the answers
			// stop rising.
			c.full, c.plateau = false, 0
		}
		c.target = ru
	})
}

// update applies a change and lets waiters in if the limit grew.
func (c *Concurrency) update(change func()) {
	c.mu.Lock()
	change()
	c.wakeLocked()
	c.unlockAndNotify()
}

// unlockAndNotify releases c.mu and, the first time the fd limit has bound,
// tells the user, outside the lock.
func (c *Concurrency) unlockAndNotify() {
	msg := ""
	if c.boundMsg != "" && !c.notified {
		c.notified = true
		msg = c.boundMsg
	}
	c.mu.Unlock()
	if msg != "" && c.cfg.Notice != nil {
		c.cfg.Notice(msg)
	}
}

// Limit returns how many requests to keep in flight.
func (c *Concurrency) Limit() int {
	c.mu.Lock()
	n := c.limitLocked()
	c.unlockAndNotify()
	return n
}

// Latency returns the round-trip time the limit is sized from: the
// configured percentile of the recent latencies, or the start-up
// assumption before enough have been seen.
func (c *Concurrency) Latency() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Duration(c.latency * float64(time.Second))
}

// PathLatency returns the path's round trip without queues: the lowest
// 5th percentile of the recent latencies any window has shown, 0 before
// Warmup answers. A long path's fastest answers still take its length; a
// local one's take a millisecond or two however busy the machine is.
func (c *Concurrency) PathLatency() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Duration(c.low5 * float64(time.Second))
}

// PathJitter returns how widely the recent round trips spread: twice
// their 25th to 75th percentile, the whole width of an even spread that
// has those quartiles; 0 before Warmup answers. Quartiles, so that a few
// answers held up by a stall do not count as the path's spread. The
// pacer aims below the budget by what such a spread asks for
// (PacerConfig.PathJitter).
func (c *Concurrency) PathJitter() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Duration(c.spread * float64(time.Second))
}

// BoundMessage returns why the limit is below what Little's law asks for,
// or "" if it never has been.
func (c *Concurrency) BoundMessage() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.boundMsg
}

func (c *Concurrency) limitLocked() int {
	// Little's law for the rate the target asks for, but never more than
	// Gain × the highest rate answers recently came back at × the lowest
	// mean round trip seen (the path's own latency, without queues): the
	// bandwidth-delay product that BBR congestion control keeps in flight.
	// On a path the target can use, the answer rate rises with the pool and
	// the bound grows ahead of it (×4 a window); when this process, not the
	// service, limits the rate (an unreachable target on two busy cores),
	// more requests would only queue here, the answer rate stops rising
	// and so does the pool. The mean, not the fastest answers: with the
	// pool at N and answers taking R on average, the rate is N ÷ R and the
	// bound Gain × N × floor ÷ R, which shrinks the pool — and with it the
	// rate, and the bound — whenever R is more than Gain × the floor.
	want := c.boundLocked()
	if !c.probeAt.IsZero() {
		want = min(want, c.probeLimit)
	}
	return c.capLocked(float64(want))
}

// boundLocked is the pool Little's law and the bandwidth-delay product
// allow, before the start-up, memory and file-descriptor bounds.
func (c *Concurrency) boundLocked() int {
	need := c.target / c.meanRU * c.latency
	gain := c.cfg.Gain
	if c.full || c.shortPathLocked() || c.queuedLocked() {
		gain = c.cfg.SteadyGain
	}
	if bdp := gain * c.maxRateLocked() * c.floor; bdp > 0 {
		need = math.Min(need, bdp)
	}
	// The epsilon keeps float error from turning an exact 130 into 131.
	want := math.Ceil(need*c.cfg.Headroom - 1e-9)
	if math.IsNaN(want) || want < float64(c.cfg.Min) {
		return c.cfg.Min
	}
	if want > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(want)
}

// capLocked bounds a wanted pool by start-up, memory and the
// file-descriptor limit.
func (c *Concurrency) capLocked(want float64) int {
	if c.floor == 0 || len(c.rates) == 0 {
		// Until the first answers have measured the path's latency and
		// their rate: 4 × Warmup, and one more per answer, as TCP's slow
		// start.
		want = math.Min(want, float64(max(4*c.cfg.Warmup+c.seen, c.cfg.Min)))
	}
	c.capped = false
	if c.cfg.StartMax > 0 && !(c.full && c.pathKnownLocked()) {
		c.capped = want > float64(max(c.cfg.StartMax, c.cfg.Min))
		want = math.Min(want, float64(max(c.cfg.StartMax, c.cfg.Min)))
	}
	if c.fdBound > 0 && want > float64(c.fdBound) {
		// Only a shortfall against the bare Little's-law need (no
		// headroom) is worth telling the user about.
		need := math.Ceil(c.target / c.meanRU * c.latency)
		if c.boundMsg == "" && need > float64(c.fdBound) && c.seen >= c.cfg.Warmup {
			c.boundMsg = fmt.Sprintf("concurrency: %.0f RU/s of %.1f RU requests at %s round trip (p%.0f) need %.0f requests in flight, "+
				"but the open-file limit (%d) allows %d: the load will run below its target; raise it (ulimit -n) to reach it",
				c.target, c.meanRU, time.Duration(c.latency*float64(time.Second)).Round(time.Millisecond),
				100*c.cfg.Percentile, need, c.cfg.FDLimit, c.fdBound)
		}
		return c.fdBound
	}
	return int(want)
}

// InFlight returns how many slots are held.
func (c *Concurrency) InFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inFlight
}

// Acquire blocks until fewer than Limit requests are in flight and takes a
// slot, or returns ctx's error. Slots are granted in order of arrival.
func (c *Concurrency) Acquire(ctx context.Context) error {
	c.mu.Lock()
	if err := ctx.Err(); err != nil {
		c.mu.Unlock()
		return fmt.Errorf("acquire request slot: %w", err)
	}
	if len(c.waiters) == 0 && c.inFlight < c.limitLocked() {
		c.inFlight++
		c.unlockAndNotify()
		return nil
	}
	ready := make(chan struct{})
	c.waiters = append(c.waiters, ready)
	c.unlockAndNotify()
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		defer c.mu.Unlock()
		select {
		case <-ready:
			// The slot was granted as ctx ended: hand it on.
			c.inFlight--
			c.wakeLocked()
		default:
			for i, w := range c.waiters {
				if w == ready {
					c.waiters = append(c.waiters[:i], c.waiters[i+1:]...)
					break
				}
			}
		}
		return fmt.Errorf("acquire request slot: %w", ctx.Err())
	}
}

// Release gives back a slot taken by Acquire.
func (c *Concurrency) Release() {
	c.mu.Lock()
	if c.inFlight > 0 {
		c.inFlight--
	}
	c.wakeLocked()
	c.unlockAndNotify()
}

// wakeLocked grants slots to waiters, oldest first, while the limit allows.
func (c *Concurrency) wakeLocked() {
	limit := c.limitLocked()
	for len(c.waiters) > 0 && c.inFlight < limit {
		close(c.waiters[0])
		c.waiters = c.waiters[1:]
		c.inFlight++
	}
}
