package pacing

import (
	"math"
	"time"
)

// Over a jittery path the service's seconds do not get what the pacer sent
// in ours. A request leaves on the pacer's even pace, but it arrives (and
// is charged) up to the path's spread later: those sent within the spread
// of a boundary of the service's second fall on either side of it at
// random. A second's arrivals then vary about the pace, and a second that
// gets more than its budget refuses the excess (429), while one that gets
// less leaves budget unspent. Pacing a little below the budget trades a
// little of the second that gets less for fewer 429s in the one that gets
// more. docs/design/seconds.md has the argument and the measurements.
//
// With requests of r RU on average, a partition paced at s RU/s sends s/r
// a second, and those sent in a spread of J seconds around each boundary
// land on either side with a chance that falls linearly across it: the
// variance of a second's RU is about 2 × (s/r) × (J/6) × r² = J·s·r/3.
// The pacer aims jitterDeviations standard deviations below the budget.
const (
	// jitterDeviations is how many standard deviations of a second's
	// arrivals the pacer leaves unspent.
	jitterDeviations = 0.65
	// maxJitterHeadroom bounds that headroom, as a fraction of the
	// target: a round trip stretched by a stall of this machine is not
	// the path's spread, and must not cost the load more than this.
	maxJitterHeadroom = 0.03
	// reaimEvery is how often the aim is looked at again.
	reaimEvery = time.Second
	// reaimStep is the least change of aim that is made.
	reaimStep = 0.001
)

// jitterHeadroom is the fraction of a partition's budget of share RU/s to
// leave unspent when its requests of meanRU arrive spread over jitter.
func jitterHeadroom(jitter time.Duration, share, meanRU float64) float64 {
	if jitter <= 0 || !(share > 0) || !(meanRU > 0) {
		return 0
	}
	sd := math.Sqrt(jitter.Seconds() * share * meanRU / 3)
	return min(jitterDeviations*sd/share, maxJitterHeadroom)
}

// reaim sets the aim from the path's spread (PacerConfig.PathJitter) and
// the mean request, at most every reaimEvery once a 429 came: Aim, or
// lower when the spread asks for more headroom than Aim leaves.
func (p *Pacer) reaim(now time.Time) {
	if p.cfg.PathJitter == nil || !p.throttledOnce.Load() {
		return
	}
	at := p.reaimAt.Load()
	if now.UnixNano() < at || !p.reaimAt.CompareAndSwap(at, now.Add(reaimEvery).UnixNano()) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	meanRU, n := p.meanRequest()
	if n == 0 {
		return
	}
	budget := p.target / float64(n)
	aim := min(p.cfg.Aim, 1-jitterHeadroom(p.pathSpread(), budget, meanRU))
	if math.Abs(aim-p.aim) < reaimStep {
		return
	}
	p.aim = aim
	p.reshare()
}

// pathSpread is the spread of the path's round trips (PathJitter), at
// most twice the fastest round trip (PathLatency) when that is known: a
// spread much wider than the path's own length is queues — this
// machine's, the target's — which a local target on a busy machine shows,
// and shrinking its batches for them only adds to the machine's work.
func (p *Pacer) pathSpread() time.Duration {
	j := p.cfg.PathJitter()
	if p.cfg.PathLatency != nil {
		if l := p.cfg.PathLatency(); l > 0 {
			j = min(j, 2*l)
		}
	}
	return j
}

// meanRequest is the mean RU of the requests reserved so far and the
// number of current partitions.
func (p *Pacer) meanRequest() (float64, int) {
	p.rmu.RLock()
	defer p.rmu.RUnlock()
	var ru float64
	var requests int64
	for _, pt := range p.parts {
		pt.mu.Lock()
		ru, requests = ru+pt.totalRU, requests+pt.requests
		pt.mu.Unlock()
	}
	if requests == 0 {
		return 0, len(p.live)
	}
	return ru / float64(requests), len(p.live)
}

// jitterBatchSpread bounds a range batch over a jittery path: the
// standard deviation of a second's arrivals that batches of its size make
// (see jitterHeadroom), as a fraction of the partition's budget.
const jitterBatchSpread = 0.01

// BatchRU is the most one range batch is estimated to cost in this load:
// RangeBatchRU at the current target, and, once a 429 came, less over a
// jittery path (PathJitter), where the larger the requests, the more a
// second's arrivals vary and the more of the budget the pacer leaves
// unspent to keep the 429s few. A batch bounded below one record's
// estimate carries one record.
func (p *Pacer) BatchRU() float64 {
	n := p.Partitions()
	share := p.Target() / float64(n)
	c := RangeBatchRU(share, 1)
	if p.cfg.PathJitter != nil && p.throttledOnce.Load() {
		if j := p.pathSpread().Seconds(); j > 0 {
			c = min(c, 3*jitterBatchSpread*jitterBatchSpread*share/j)
		}
	}
	return c
}
