package pacing

import "time"

// recentSeconds is how many whole seconds Snapshot.RecentRUPerSec averages.
const recentSeconds = 10

// secondRing sums RU by wall-clock second for the last few seconds. Spend
// is booked at the time a request is admitted, which may be a little in
// the future, hence the spare slots.
type secondRing struct {
	slots [16]struct {
		sec int64
		ru  float64
	}
}

func slotOf(sec int64) int { return int((sec%16 + 16) % 16) }

func (r *secondRing) add(t time.Time, ru float64) {
	sec := t.Unix()
	s := &r.slots[slotOf(sec)]
	if s.sec != sec {
		s.sec, s.ru = sec, 0
	}
	s.ru += ru
}

func (r *secondRing) at(sec int64) float64 {
	if s := r.slots[slotOf(sec)]; s.sec == sec {
		return s.ru
	}
	return 0
}

// PartitionStats describes one physical partition's pacing.
type PartitionStats struct {
	// Index is the partition's number as Partition returns it: a split
	// retires partitions and adds new ones at the end.
	Index        int     `json:"index"`
	ShareRU      float64 `json:"share_ru_per_sec"`
	LimitRU      float64 `json:"limit_ru_per_sec"`
	LastSecondRU float64 `json:"last_second_ru"`
	Requests     int64   `json:"requests"`
	Succeeded    int64   `json:"succeeded"`
	Throttled    int64   `json:"throttled"`
	Paused       bool    `json:"paused"`
}

// Snapshot describes the pacer for the progress line and the report.
type Snapshot struct {
	TargetRU float64 `json:"target_ru_per_sec"`
	// LimitRU is the sum of the partitions' current rates: below TargetRU
	// while 429s hold some partitions back.
	LimitRU float64 `json:"limit_ru_per_sec"`
	// LastSecondRU is what was admitted (and settled) in the last whole
	// second; RecentRUPerSec the mean over up to the last ten.
	LastSecondRU   float64 `json:"last_second_ru"`
	RecentRUPerSec float64 `json:"recent_ru_per_sec"`
	TotalRU        float64 `json:"total_ru"`
	// Requests counts sends, retries included; ThrottledPercent is
	// Throttled as a share of them (1–5 % is healthy for Cosmos DB).
	Requests         int64            `json:"requests"`
	Succeeded        int64            `json:"succeeded"`
	Throttled        int64            `json:"throttled"`
	ThrottledPercent float64          `json:"throttled_percent"`
	Partitions       []PartitionStats `json:"partitions"`
}

// Stats returns the pacer's current state and counters.
func (p *Pacer) Stats() Snapshot {
	s := Snapshot{TargetRU: p.Target()}
	now := p.clock.Now()
	cur := now.Unix()
	window := min(int64(now.Sub(p.start)/time.Second), recentSeconds)
	p.rmu.RLock()
	parts, live := p.parts, p.live
	p.rmu.RUnlock()
	isLive := make(map[int]bool, len(live))
	for _, i := range live {
		isLive[i] = true
	}
	for i, pt := range parts {
		pt.mu.Lock()
		p.recover(pt, pt.now(p.clock))
		ps := PartitionStats{
			Index:        i,
			ShareRU:      pt.share,
			LimitRU:      pt.limit,
			LastSecondRU: pt.perSecond.at(cur - 1),
			Requests:     pt.requests,
			Succeeded:    pt.succeeded,
			Throttled:    pt.throttled,
			Paused:       now.Before(pt.pausedUntil),
		}
		for i := int64(1); i <= window; i++ {
			s.RecentRUPerSec += pt.perSecond.at(cur - i)
		}
		s.TotalRU += pt.totalRU
		pt.mu.Unlock()
		s.Requests += ps.Requests
		s.Succeeded += ps.Succeeded
		s.Throttled += ps.Throttled
		s.LastSecondRU += ps.LastSecondRU
		if !isLive[i] {
			continue // split away: its counts stay in the totals
		}
		s.LimitRU += ps.LimitRU
		s.Partitions = append(s.Partitions, ps)
	}
	if window > 0 {
		s.RecentRUPerSec /= float64(window)
	}
	if s.Requests > 0 {
		s.ThrottledPercent = 100 * float64(s.Throttled) / float64(s.Requests)
	}
	return s
}
