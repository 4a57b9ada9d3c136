package emulator

import (
	"math"
	"net/http"
	"sort"
	"time"
)

// subRUBudgetExceeded is the substatus of a 429 for a spent RU budget.
const subRUBudgetExceeded = 3200

// seriesLen is how many seconds of per-second history each partition keeps.
const seriesLen = 600

type bucket struct {
	sec       int64
	ru        float64
	requests  int64
	throttled int64
}

// partition is one physical partition: a slice of the EPK space, its items,
// and its per-second RU budget.
type partition struct {
	id       int // the partition key range id
	min, max string
	parents  []string // ids of the ranges it was split from, oldest first

	// completingUntil: writes get 410/1007 (completing split) until then.
	completingUntil time.Time

	items    map[string]*item // by itemKey(pk, id)
	sorted   []string         // keys of items in order; nil when stale
	sortedOK bool

	// available is the RU left in the current second; negative is debt
	// carried into the following seconds. renewedSec is the unix second of
	// the last renewal (0 = never).
	available  float64
	renewedSec int64

	ru        float64
	requests  int64
	throttled int64
	series    [seriesLen]bucket
}

func newPartition(id int, min, max string) *partition {
	return &partition{id: id, min: min, max: max, items: make(map[string]*item)}
}

// renew applies the per-second renewals due by second sec, modelling the
// Java SDK's throttler: at each renewal available = min(available, 0) +
// budget, so a debt is repaid out of the following seconds' budgets.
func (p *partition) renew(sec int64, budget float64) {
	switch {
	case p.renewedSec == 0:
		p.available = budget
	case sec <= p.renewedSec:
		return
	case budget <= 0:
		// The noisy neighbour eats the whole budget: no recovery while it lasts.
		p.available = math.Min(p.available, budget)
	default:
		n := float64(sec - p.renewedSec)
		p.available = math.Min(math.Min(p.available, 0)+n*budget, budget)
	}
	p.renewedSec = sec
}

// admit decides whether a request arriving at now may run. When it may
// not, retryAfter is the time until the renewal that brings the partition's
// budget above zero, so it grows with the debt.
func (p *partition) admit(now time.Time, budget float64) (ok bool, retryAfter time.Duration) {
	sec := now.Unix()
	p.renew(sec, budget)
	if p.available > 0 {
		return true, 0
	}
	k := int64(1)
	if budget > 0 {
		k = int64(math.Floor(-p.available/budget)) + 1
	}
	retryAfter = time.Unix(sec+k, 0).Sub(now)
	if retryAfter < time.Millisecond {
		retryAfter = time.Millisecond
	}
	return false, retryAfter
}

// record accounts a request: its charge comes out of the budget unless it
// was throttled (a 429 changes nothing and costs nothing).
func (p *partition) record(now time.Time, ru float64, throttled bool) {
	if throttled {
		ru = 0
	}
	p.available -= ru
	p.account(now, ru, throttled)
}

// account counts a request and the RU it used in the partition's
// statistics, leaving the budget alone: a range batch's operations take
// their charges from the budget one by one as they run, and the request
// counts once, as throttled when any of its operations was.
func (p *partition) account(now time.Time, ru float64, throttled bool) {
	sec := now.Unix()
	b := &p.series[sec%seriesLen]
	if b.sec != sec {
		*b = bucket{sec: sec}
	}
	b.requests++
	p.requests++
	if throttled {
		b.throttled++
		p.throttled++
	}
	b.ru += ru
	p.ru += ru
}

func (p *partition) resetStats() {
	p.ru, p.requests, p.throttled = 0, 0, 0
	p.series = [seriesLen]bucket{}
}

// sortedKeys returns the partition's item keys in order, the stable order
// query pages and continuation tokens walk.
func (p *partition) sortedKeys() []string {
	if !p.sortedOK {
		keys := p.sorted[:0]
		for k := range p.items {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		p.sorted, p.sortedOK = keys, true
	}
	return p.sorted
}

func (p *partition) put(key string, it *item) {
	if _, ok := p.items[key]; !ok {
		p.sortedOK = false
	}
	p.items[key] = it
}

func (p *partition) del(key string) {
	if _, ok := p.items[key]; ok {
		delete(p.items, key)
		p.sortedOK = false
	}
}

// admitLocked charges nothing and answers 429 when partition p of c has no
// budget at now: it then records the throttle, unlocks c.mu (held by the
// caller) and reports false. Otherwise c.mu stays locked.
func (s *Server) admitLocked(w http.ResponseWriter, c *container, p *partition, now time.Time) bool {
	ok, retry := p.admit(now, c.budget(s.noisyRU()))
	if ok {
		return true
	}
	p.record(now, 0, true)
	c.mu.Unlock()
	s.throttle(w, retry)
	return false
}
