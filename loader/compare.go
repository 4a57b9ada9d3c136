package loader

import (
	"fmt"
	"time"

	"github.com/cosmosloader/loader/internal/human"
	"github.com/cosmosloader/loader/loader/report"
	"github.com/cosmosloader/loader/pacing"
)

// naiveConcurrency is how many requests --strategy naive keeps in flight:
// the naive client the report models is that one.
const naiveConcurrency = 64

// comparison is the naive strategy and the paced one on the same terms:
// the records as this run wrote them to each physical partition, at their
// charges, each partition's capacity as this run found it, and the naive
// client as --strategy naive sends (one request a record, its writers,
// this run's round trip, resending after the server's retry-after).
// Whichever strategy ran is measured; the other is modelled.
type comparison struct {
	target   float64
	strategy Strategy
	parts    []partitionCount // by the pacer's numbering
	series   []report.Second
	rtt      time.Duration
	charges  *Histogram
	// partitions is the container's physical partitions at the start.
	partitions int
}

// loads is each partition's part of the run with the capacity it gave
// the load (observedCapacity), never above its share of the target.
func (c *comparison) loads() []report.PartitionLoad {
	n := max(len(c.parts), c.partitions, 1)
	share := c.target / float64(max(c.partitions, 1))
	out := make([]report.PartitionLoad, 0, n)
	for i := range n {
		var pc partitionCount
		if i < len(c.parts) {
			pc = c.parts[i]
		}
		pl := report.PartitionLoad{Partition: i, Requests: pc.Requests, Records: pc.Records, RU: report.Round2(pc.RU),
			Throttled: pc.Throttled, ShareRU: report.Round2(share), CapacityRU: report.Round2(share)}
		capacity, ok, limit := c.observedCapacity(i)
		switch {
		case ok:
			pl.CapacityRU = report.Round2(min(capacity, share))
		case pc.Throttled > 0 && limit > 0 && limit < 0.9*share:
			// Too few throttled seconds to measure, but the 429s held
			// the pacer well below the share: it found the capacity
			// soon and kept to it.
			pl.CapacityRU = report.Round2(limit)
		}
		pl.PacerLimitRU = report.Round2(limit)
		if pl.CapacityRU > 0 {
			pl.Seconds = report.Round2(pc.RU / pl.CapacityRU)
		}
		out = append(out, pl)
	}
	return out
}

// observedCapacity is the RU/s partition i gave the load, by the
// per-second series: the mean RU it charged in the seconds it answered
// 429s, seconds whose budget ran out, so that what the load charged in
// them is what other traffic left it (false when too few seconds say);
// and the pacer's mean limit for it while it had work (0 when not
// pacing), which falls and stays below the share when the 429s are
// another application's, not the odd one at a second's boundary.
func (c *comparison) observedCapacity(i int) (capacity float64, ok bool, limit float64) {
	var spent, limits []float64
	last := -1
	for k, s := range c.series {
		if i < len(s.Partitions) && (s.Partitions[i].RU > 0 || s.Partitions[i].Throttled > 0) {
			last = k
		}
	}
	for _, s := range c.series[:max(last, 0)] { // its last second is a part
		if i >= len(s.Partitions) {
			continue
		}
		p := s.Partitions[i]
		if p.Throttled > 0 {
			spent = append(spent, p.RU)
		}
		if p.LimitRU > 0 {
			limits = append(limits, p.LimitRU)
		}
	}
	if len(limits) > 0 {
		limit = mean(limits)
	}
	if len(spent) < minThrottledSeconds {
		return 0, false, limit
	}
	return mean(spent), true, limit
}

// minThrottledSeconds is how many throttled seconds observedCapacity
// needs: a stray 429 at a second's boundary says little.
const minThrottledSeconds = 3

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// model is the comparison's model: the tally's records by partition at
// the capacities of loads, one request each, or, for a run without a
// tally, the charges spread evenly over the partitions.
func (c *comparison) model(loads []report.PartitionLoad) *pacing.Model {
	caps := make([]float64, len(loads))
	for i, l := range loads {
		caps[i] = l.CapacityRU
	}
	client := pacing.NaiveClient{Concurrency: naiveConcurrency, RoundTrip: c.rtt}
	m := pacing.NewModelOf(pacing.ModelConfig{TargetRU: c.target * float64(len(loads)) / float64(max(c.partitions, 1)),
		Partitions: len(loads), Capacity: caps, Naive: client})
	if len(c.parts) == 0 {
		c.spreadEvenly(m, max(c.partitions, 1))
		return m
	}
	for i, p := range c.parts {
		for _, cc := range p.ByCost {
			if cc.Records > 0 {
				m.AddN(i, cc.Records, cc.RU/float64(cc.Records))
			}
		}
	}
	return m
}

// spreadEvenly adds the charges evenly over parts partitions.
func (c *comparison) spreadEvenly(m *pacing.Model, parts int) {
	values, counts := c.charges.Buckets()
	for i, v := range values {
		for p := 0; p < parts; p++ {
			n := counts[i] / int64(parts)
			if int64(p) < counts[i]%int64(parts) {
				n++
			}
			m.AddN(p, n, v)
		}
	}
}

// figures are the comparison's rows, the modelled one saying what it
// assumed, and each partition's part.
func (c *comparison) figures(measured report.PacedFigures) (report.NaiveFigures, report.PacedFigures, []report.PartitionLoad) {
	if c.target <= 0 {
		return report.NaiveFigures{}, report.PacedFigures{}, nil
	}
	loads := c.loads()
	naive, paced := report.Modelled(c.model(loads))
	assumed := c.assumptions(loads)
	if c.strategy == StrategyNaive {
		naive = report.NaiveFigures{Requests: measured.Requests, Throttled: measured.Throttled, Seconds: measured.Seconds, Measured: true}
		paced.Assumptions = "one request a record, paced at " + assumed
		return naive, paced, loads
	}
	naive.Assumptions = fmt.Sprintf("one request a record, %s; %s", pacing.NaiveClient{Concurrency: naiveConcurrency, RoundTrip: c.rtt}, assumed)
	return naive, measured, loads
}

// assumptions says on what terms the modelled strategy was modelled: the
// partitions' capacity and the spread of the load over them.
func (c *comparison) assumptions(loads []report.PartitionLoad) string {
	var capacity, share float64
	for _, l := range loads {
		capacity += l.CapacityRU
		share += l.ShareRU
	}
	spread := fmt.Sprintf("this run's records as it spread them over %s", human.Plural(int64(len(loads)), "partition"))
	if len(c.parts) == 0 {
		spread = fmt.Sprintf("this run's charges spread evenly over %s", human.Plural(int64(len(loads)), "partition"))
	}
	if capacity < 0.99*share {
		return fmt.Sprintf("the capacity this run found, %s of %s RU/s (other traffic took the rest); %s",
			human.Number(capacity, 0), human.Number(share, 0), spread)
	}
	return fmt.Sprintf("each partition's share of %s RU/s; %s", human.Number(c.target, 0), spread)
}
