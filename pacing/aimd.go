package pacing

import (
	"math"
	"time"
)

// AIMD is the policy a partition's rate follows after 429s: additive
// increase, multiplicative decrease. It only decides rates; the Pacer's
// buckets are the mechanism that spends them (as rclone's lib/pacer keeps
// its Calculator apart from the pacer that sleeps). Zero fields take the
// defaults given with each.
//
// A burst of 429s — the first 429 at least CutInterval after the previous
// burst began, and every 429 until then — is cut once: the answers to
// requests that were in flight together come back together, and they are
// one event. A burst is cut by Backoff when it looks like contention (the
// budget taken by someone else, or a target above what the partition
// holds) and only by MildBackoff when it looks like timing noise (requests
// that straddled a second's boundary, a stall on a busy machine): pacing
// at exactly the provisioned throughput over a jittery path, noise comes
// every few seconds, and a hard cut for each would cost a visible share of
// the load.
//
// A burst is contention when it follows a 429 within Sustain and either
// falls in the budget period right after the one the previous 429 was
// told to wait for (throttled in consecutive seconds, as when another
// application takes part of the budget) with the budget gone well before
// the period's end (retry-after ≥ CutInterval/10), or grows to refuse
// ContentionBurst of a period's rate. Jitter alone overshoots a second's
// budget only in its last milliseconds and with few requests. Over a long
// path a partition paused until the renewal misses the start of the next
// period, so contention throttles every other second; but then the budget
// runs out early and every request in flight comes back 429, which the
// burst size catches. With a server whose retry-after is short whatever
// the budget, contention keeps answering 429 after the pause and the burst
// grows.
type AIMD struct {
	// Backoff multiplies a partition's rate for contention (default 0.7).
	Backoff float64
	// MildBackoff multiplies it for timing noise (default 0.98): small
	// enough that the additive increase repays it within a fraction of a
	// second.
	MildBackoff float64
	// CutInterval is the shortest time between two bursts' cuts (default
	// 1 s, Cosmos DB's budget period).
	CutInterval time.Duration
	// Sustain is how soon after a 429 a new burst is suspected of
	// contention (default 2 s).
	Sustain time.Duration
	// ContentionBurst is the share of a period's rate a suspect burst must
	// have been refused to count as contention (default 0.1).
	ContentionBurst float64
	// Floor is the lowest rate a partition is cut to, as a fraction of its
	// share of the target (default 0.05).
	Floor float64
	// Recover is the additive increase per clean second, as a fraction of
	// the partition's share (default 0.1: back to the full share within
	// about ten seconds of the last 429).
	Recover float64
}

// minRecoverStep is the least clean time a raise is made for: raising on
// every request would spend the lock on rounding.
const minRecoverStep = 10 * time.Millisecond

func (a *AIMD) defaults() {
	if a.Backoff <= 0 || a.Backoff >= 1 {
		a.Backoff = 0.7
	}
	if a.MildBackoff <= 0 || a.MildBackoff > 1 {
		a.MildBackoff = 0.98
	}
	if a.Sustain <= 0 {
		a.Sustain = 2 * time.Second
	}
	if a.CutInterval <= 0 {
		a.CutInterval = time.Second
	}
	if a.ContentionBurst <= 0 {
		a.ContentionBurst = 0.1
	}
	if a.Floor <= 0 || a.Floor > 1 {
		a.Floor = 0.05
	}
	if a.Recover <= 0 {
		a.Recover = 0.1
	}
}

// aimdState is what AIMD remembers of one partition's 429s. The
// partition's lock guards it.
type aimdState struct {
	// lastCut and lastRecover are when the rate was last cut and raised.
	lastCut, lastRecover time.Time
	// burst is when the current burst of 429s began, last429 when the
	// latest 429 came and lastEnd when the budget period it was throttled
	// in ends (its time plus its retry-after). burstRU is the RU the
	// current burst was refused; suspect says it followed a 429 within
	// Sustain, hard that it has been cut as contention.
	burst, last429, lastEnd time.Time
	burstRU                 float64
	suspect, hard           bool
}

// throttled returns a partition's rate after a 429 at now that asked to
// wait retryAfter (> 0). The partition ran at limit RU/s of its share;
// meanRU is what its requests cost on average, what this 429 refused.
func (a *AIMD) throttled(s *aimdState, now time.Time, retryAfter time.Duration, limit, share, meanRU float64) float64 {
	if s.burst.IsZero() || now.Sub(s.burst) >= a.CutInterval {
		// Measured from the previous 429, not the previous burst's start,
		// so bursts a budget period apart are suspect whatever the phase
		// of the second they fall in.
		s.suspect = !s.last429.IsZero() && now.Sub(s.last429) < a.Sustain
		s.burst, s.burstRU, s.hard = now, 0, false
		limit = a.cut(s, now, limit, share, a.MildBackoff)
		if s.suspect && retryAfter >= a.CutInterval/10 && now.Add(retryAfter).Sub(s.lastEnd) < a.CutInterval*3/2 {
			limit = a.escalate(s, now, limit, share)
		}
	}
	s.burstRU += meanRU
	if s.suspect && !s.hard && s.burstRU >= a.ContentionBurst*limit*a.CutInterval.Seconds() {
		limit = a.escalate(s, now, limit, share)
	}
	s.last429, s.lastEnd = now, now.Add(retryAfter)
	return limit
}

// escalate turns the current burst's mild cut into a contention cut.
func (a *AIMD) escalate(s *aimdState, now time.Time, limit, share float64) float64 {
	s.hard = true
	return a.cut(s, now, limit, share, a.Backoff/a.MildBackoff)
}

// cut multiplies a rate by factor, down to Floor of the share.
func (a *AIMD) cut(s *aimdState, now time.Time, limit, share, factor float64) float64 {
	s.lastCut = now
	return math.Max(limit*factor, share*a.Floor)
}

// recovered returns a partition's rate raised additively for the clean
// time since its last cut, pause or raise, and whether it changed: not
// while paused (until pausedUntil), nor above the share.
func (a *AIMD) recovered(s *aimdState, now, pausedUntil time.Time, limit, share float64) (float64, bool) {
	if limit >= share || now.Before(pausedUntil) {
		return limit, false
	}
	from := s.lastRecover
	if pausedUntil.After(from) {
		from = pausedUntil
	}
	if s.lastCut.After(from) {
		from = s.lastCut
	}
	clean := now.Sub(from)
	if clean < minRecoverStep {
		return limit, false
	}
	s.lastRecover = now
	return math.Min(share, limit+share*a.Recover*clean.Seconds()), true
}
