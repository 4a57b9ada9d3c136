package loader

import (
	"strings"
	"testing"

	"github.com/cosmosloader/loader/loader/report"
)

// tallyOf is a tally of partitions holding records each, one request a
// record at costs RU.
func tallyOf(costs float64, records ...int64) []partitionCount {
	out := make([]partitionCount, len(records))
	for i, n := range records {
		out[i] = partitionCount{Requests: n, Records: n, RU: float64(n) * costs}
		out[i].ByCost[costClass(costs)] = costCount{Records: n, RU: float64(n) * costs}
	}
	return out
}

// busiest is the longest a partition's RU needs at the capacity the
// comparison found for it.
func busiest(loads []report.PartitionLoad) float64 {
	var worst float64
	for _, l := range loads {
		worst = max(worst, l.Seconds)
	}
	return worst
}

// A hot key: the modelled naive run goes through the same partitions as
// the paced one and never finishes before the hot partition could.
func TestNaiveIsModelledThroughTheHotPartition(t *testing.T) {
	c := &comparison{target: 4000, strategy: StrategyPaced, parts: tallyOf(10, 3000, 1000, 1000, 1000), partitions: 4}
	measured := report.PacedFigures{Requests: 6000, Seconds: 31, Measured: true}
	naive, paced, loads := c.figures(measured)
	if paced != measured {
		t.Errorf("paced = %+v, want the measured run", paced)
	}
	if len(loads) != 4 || loads[0].Seconds != 30 || loads[1].Seconds != 10 {
		t.Fatalf("loads = %+v, want partition 0's 30,000 RU at 1,000 RU/s taking 30 s", loads)
	}
	if naive.Measured || naive.Seconds < busiest(loads) || naive.Requests < 6000 {
		t.Errorf("naive = %+v, want modelled, at least 6,000 requests and the hot partition's 30 s", naive)
	}
	if !strings.Contains(naive.Assumptions, "one request a record") || !strings.Contains(naive.Assumptions, "4 partitions") {
		t.Errorf("assumptions = %q", naive.Assumptions)
	}
}

// A noisy neighbour: the seconds a partition answered 429s while the
// load charged less than its share say what capacity other traffic left,
// and the naive run is modelled at that capacity, not at the share.
func TestNaiveIsModelledAtTheCapacityObserved(t *testing.T) {
	var series []report.Second
	for s := int64(0); s < 26; s++ {
		sec := report.Second{T: s}
		for range 4 {
			sec.Partitions = append(sec.Partitions, report.PartitionSecond{RU: 600, Throttled: 3, ShareRU: 1000, LimitRU: 620})
		}
		series = append(series, sec)
	}
	c := &comparison{target: 4000, strategy: StrategyPaced, parts: tallyOf(10, 1500, 1500, 1500, 1500), partitions: 4, series: series}
	naive, _, loads := c.figures(report.PacedFigures{Requests: 6100, Throttled: 100, Seconds: 26, Measured: true})
	for _, l := range loads {
		if l.CapacityRU != 600 || l.Seconds != 25 || l.PacerLimitRU != 620 {
			t.Fatalf("load %+v, want a capacity of 600 RU/s found, 25 s at it", l)
		}
	}
	if naive.Seconds < 25 {
		t.Errorf("naive = %+v, want no sooner than 25 s at the capacity other traffic left", naive)
	}
	if !strings.Contains(naive.Assumptions, "2,400 of 4,000 RU/s") {
		t.Errorf("assumptions = %q, want the capacity found said", naive.Assumptions)
	}
	r := report.Report{Naive: naive}
	if a := r.Assumptions(); !strings.HasPrefix(a, "naive modelled: ") || strings.Contains(a, "\n") {
		t.Errorf("the comparison's line = %q, want one line saying naive is modelled", a)
	}
}

// A --strategy naive run is the measured side; paced is modelled, at the
// same terms, and says so.
func TestPacedIsModelledWhenNaiveRan(t *testing.T) {
	c := &comparison{target: 4000, strategy: StrategyNaive, parts: tallyOf(10, 3000, 1000, 1000, 1000), partitions: 4}
	naive, paced, loads := c.figures(report.PacedFigures{Requests: 9000, Throttled: 3000, Seconds: 40, Measured: true})
	if !naive.Measured || naive.Requests != 9000 || naive.Seconds != 40 {
		t.Errorf("naive = %+v, want the measured run", naive)
	}
	if paced.Measured || paced.Seconds < busiest(loads) || !strings.Contains(paced.Assumptions, "paced at") {
		t.Errorf("paced = %+v, want modelled no sooner than the hot partition's %v s, saying so", paced, busiest(loads))
	}
}

// A noisy neighbour the pacer learned at once: too few throttled seconds
// to measure the capacity, but the 429s held the pacer's limit well
// below the share, and that limit is the capacity the load had.
func TestCapacityIsThePacersLimitWhenFewSecondsWereThrottled(t *testing.T) {
	var series []report.Second
	for s := int64(0); s < 7; s++ {
		sec := report.Second{T: s}
		for range 4 {
			p := report.PartitionSecond{RU: 600, ShareRU: 1000, LimitRU: 620}
			if s == 1 {
				p.Throttled = 5
			}
			sec.Partitions = append(sec.Partitions, p)
		}
		series = append(series, sec)
	}
	parts := tallyOf(10, 420, 420, 420, 420)
	for i := range parts {
		parts[i].Throttled = 5
	}
	c := &comparison{target: 4000, strategy: StrategyPaced, parts: parts, partitions: 4, series: series}
	_, _, loads := c.figures(report.PacedFigures{Requests: 1700, Throttled: 20, Seconds: 7, Measured: true})
	for _, l := range loads {
		if l.CapacityRU != 620 {
			t.Fatalf("load %+v, want the pacer's 620 RU/s as the capacity found", l)
		}
	}
	r := &report.Report{TargetRUPerSec: 4000, Utilization: 0.6, PartitionLoads: loads, Strategy: string(StrategyPaced)}
	r.ThisRun.DurationSeconds, r.ThisRun.ThrottledResponses, r.ThisRun.RequestsSent = 7, 20, 1700
	if sf := explainShortfall(r, loadFacts{cpuBusy: -1}); len(sf) == 0 || sf[0].Reason != report.ShortfallOtherTraffic {
		t.Errorf("shortfall %+v, want other traffic", sf)
	}
}
