package pacing

import (
	"fmt"
	"slices"

	"golang.org/x/time/rate"

	"github.com/cosmosloader/loader/internal/epk"
)

// Rebound changes the physical partitions paced, after a split (or a
// merge) changed the container's partition key ranges. A range that is
// still there keeps its bucket, its index and its adaptation; a new range
// gets a new bucket, starting empty at the adapted fraction of the
// partition it came from. The target is divided evenly over the new
// partitions, as Cosmos DB divides provisioned throughput.
//
// Partitions that are gone are retired, not removed: a request that
// reserved from one settles there, and Partition never returns it again.
// It reports whether the routing changed.
func (p *Pacer) Rebound(bounds []string) (bool, error) {
	if len(bounds) < 2 {
		return false, fmt.Errorf("rebound pacer: %d partition bounds: %w", len(bounds), ErrBadConfig)
	}
	p.mu.Lock() // the target, and no SetTarget meanwhile
	defer p.mu.Unlock()
	p.rmu.Lock()
	defer p.rmu.Unlock()
	if slices.Equal(bounds, p.bounds) {
		return false, nil
	}
	n := len(bounds) - 1
	share := p.shareOf(p.target, n)
	now := p.clock.Now()
	live := make([]int, n)
	for i := range n {
		old := epk.Locate(p.bounds, bounds[i])
		oldIdx := p.live[old]
		parent := p.parts[oldIdx]
		parent.mu.Lock()
		frac := 1.0
		if parent.share > 0 {
			frac = min(parent.limit/parent.share, 1)
		}
		same := p.bounds[old] == bounds[i] && p.bounds[old+1] == bounds[i+1]
		if same {
			parent.share = share
			parent.setLimit(p, parent.now(p.clock), share*frac)
			parent.mu.Unlock()
			live[i] = oldIdx
			continue
		}
		paused := parent.pausedUntil
		parent.mu.Unlock()
		pt := &partition{share: share, limit: share * frac, last: now, pausedUntil: paused}
		pt.lim = rate.NewLimiter(rate.Limit(pt.limit*tokensPerRU), p.burst(pt.limit))
		// Empty, as in NewPacer: the parent's bucket may have been spent.
		pt.lim.ReserveN(now, pt.lim.Burst())
		live[i] = len(p.parts)
		p.parts = append(p.parts, pt)
	}
	p.bounds = append([]string(nil), bounds...)
	p.live = live
	return true, nil
}

// Live reports whether partition index i is one of the current partitions,
// not one retired by a split (or never made).
func (p *Pacer) Live(i int) bool {
	p.rmu.RLock()
	defer p.rmu.RUnlock()
	return slices.Contains(p.live, i)
}

// Bounds returns the partition bounds currently paced.
func (p *Pacer) Bounds() []string {
	p.rmu.RLock()
	defer p.rmu.RUnlock()
	return append([]string(nil), p.bounds...)
}
