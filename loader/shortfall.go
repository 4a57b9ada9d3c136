package loader

import (
	"fmt"
	"runtime"
	"time"

	"github.com/cosmosloader/loader/internal/human"
	"github.com/cosmosloader/loader/loader/report"
)

// shortfallShare is the share of its target below which a load's report
// says why it ran slower.
const shortfallShare = 0.95

// loadFacts are what a load saw of itself beyond its report: how often
// its writers waited for the reader, how busy it kept its CPUs, the
// partition key that took the most RU.
type loadFacts struct {
	starved   float64 // share of the run every partition waited for input
	cpuBusy   float64 // of GOMAXPROCS; < 0 unknown
	cpus      int
	hotKey    heavyKey
	hasHotKey bool
}

// cpuClock measures how busy a load keeps the CPUs it may use.
type cpuClock struct {
	cpu  time.Duration
	wall time.Time
	ok   bool
}

func startCPUClock(now time.Time) cpuClock {
	c, ok := processCPU()
	return cpuClock{cpu: c, wall: now, ok: ok}
}

// busy is the share of GOMAXPROCS' CPU time the process used since the
// clock started; -1 when unknown.
func (c cpuClock) busy(now time.Time) float64 {
	cpu, ok := processCPU()
	wall := now.Sub(c.wall)
	if !c.ok || !ok || wall <= 0 {
		return -1
	}
	return (cpu - c.cpu).Seconds() / (wall.Seconds() * float64(runtime.GOMAXPROCS(0)))
}

// explainShortfall names why a load ran below shortfallShare of its
// target, each reason with its evidence; nil when it did not.
func explainShortfall(r *report.Report, f loadFacts) []report.Shortfall {
	if r.TargetRUPerSec <= 0 || r.Utilization >= shortfallShare || r.ThisRun.DurationSeconds <= 0 {
		return nil
	}
	var out []report.Shortfall
	add := func(s report.Shortfall, ok bool) {
		if ok {
			out = append(out, s)
		}
	}
	add(throughputChange(r))
	add(unpaced(r))
	add(otherTraffic(r))
	add(hotPartition(r, f))
	add(inputBound(r, f))
	add(clientCPU(f))
	if len(out) == 0 && r.ThisRun.DurationSeconds < 10 {
		out = append(out, report.Shortfall{Reason: report.ShortfallShortLoad, Evidence: fmt.Sprintf(
			"the load took %s: its first second (connections, the writer pool's ramp) and its last requests' drain weigh on a load this short",
			human.Seconds(r.ThisRun.DurationSeconds))})
	}
	if len(out) == 0 {
		out = append(out, report.Shortfall{Reason: report.ShortfallUnexplained, Evidence: fmt.Sprintf(
			"%s of the target; no throughput change, other traffic, hot partition, starved reader or busy CPU stood out",
			human.Number(r.Utilization*100, 0)+"%")})
	}
	return out
}

// throughputChange: the container's throughput was cut during the load.
func throughputChange(r *report.Report) (report.Shortfall, bool) {
	for i := 1; i < len(r.TargetChanges); i++ {
		from, to := r.TargetChanges[i-1], r.TargetChanges[i]
		if to.RU >= from.RU {
			continue
		}
		var throttled int64
		for _, s := range r.Series {
			if t := float64(s.T); t >= to.AtSeconds-1 && t < to.AtSeconds+10 {
				throttled += s.Throttled
			}
		}
		return report.Shortfall{Reason: report.ShortfallThroughputChange, Evidence: fmt.Sprintf(
			"the container's throughput went from %s to %s RU/s at %s; %s in the 10 s after",
			human.Number(from.RU, 0), human.Number(to.RU, 0), human.Seconds(to.AtSeconds), countOf(throttled, "request was", "requests were")+" throttled")}, true
	}
	return report.Shortfall{}, false
}

// unpaced: the load sent without pacing, and the service refused
// what its budget could not hold.
func unpaced(r *report.Report) (report.Shortfall, bool) {
	if r.Strategy != string(StrategyNaive) {
		return report.Shortfall{}, false
	}
	if r.RequestsSent > 0 && float64(r.ThrottledResponses) < 0.01*float64(r.RequestsSent) && r.RoundTripMs > 0 {
		perSec := naiveConcurrency / (r.RoundTripMs / 1000)
		return report.Shortfall{Reason: report.ShortfallNaiveStrategy, Evidence: fmt.Sprintf(
			"--strategy naive keeps %d requests in flight: over a %s round trip that is at most %s requests a second",
			naiveConcurrency, human.Duration(time.Duration(r.RoundTripMs*float64(time.Millisecond))), human.Number(perSec, 0))}, true
	}
	return report.Shortfall{Reason: report.ShortfallNaiveStrategy, Evidence: fmt.Sprintf(
		"--strategy naive sends without pacing: %s of %s requests were throttled and waited out their retry-after",
		human.Count(r.ThrottledResponses), human.Count(r.RequestsSent))}, true
}

// otherTraffic: 429s met while the pacer kept within the partitions'
// shares, and the capacity they left the load.
func otherTraffic(r *report.Report) (report.Shortfall, bool) {
	if r.Strategy == string(StrategyNaive) || r.ThisRun.ThrottledResponses == 0 {
		return report.Shortfall{}, false
	}
	var capacity, share, limit float64
	for _, l := range r.PartitionLoads {
		capacity += l.CapacityRU
		share += l.ShareRU
		limit += l.PacerLimitRU
	}
	// The partitions' seconds ran out of budget well below their share
	// (observedCapacity wants several such seconds: a stray 429 at a
	// second's boundary does not count).
	if share <= 0 || capacity >= 0.9*share {
		return report.Shortfall{}, false
	}
	held := ""
	if limit > 0 && limit < 0.9*share {
		held = fmt.Sprintf("; the pacer held back to %s RU/s", human.Number(limit, 0))
	}
	taken := share - capacity
	return report.Shortfall{Reason: report.ShortfallOtherTraffic, Evidence: fmt.Sprintf(
		"%s of %s requests met 429 while the load kept within its share: other traffic took about %s of the %s RU/s (%s), leaving the load about %s",
		human.Count(r.ThisRun.ThrottledResponses), human.Count(r.ThisRun.RequestsSent), human.Number(taken, 0), human.Number(share, 0),
		human.Number(100*taken/share, 0)+"%", human.Number(capacity, 0)+" RU/s"+held)}, true
}

// hotPartition: one partition held so much of the load that its share of
// the target, not the target, set the pace.
func hotPartition(r *report.Report, f loadFacts) (report.Shortfall, bool) {
	var total, seconds float64
	busiest := -1
	for i, l := range r.PartitionLoads {
		total += l.RU
		seconds += l.Seconds
		if busiest < 0 || l.Seconds > r.PartitionLoads[busiest].Seconds {
			busiest = i
		}
	}
	n := len(r.PartitionLoads)
	if busiest < 0 || total <= 0 || n < 2 {
		return report.Shortfall{}, false
	}
	b := r.PartitionLoads[busiest]
	share := b.RU / total
	// It needed most of the run, and well over what the partitions needed
	// on average: the others finished early and waited.
	if b.Seconds < 0.8*r.ThisRun.DurationSeconds || b.Seconds < 1.3*seconds/float64(n) {
		return report.Shortfall{}, false
	}
	var key string
	if f.hasHotKey && f.hotKey.Partition == b.Partition && f.hotKey.RU >= 0.1*total {
		key = fmt.Sprintf("; partition key %s alone took %s", f.hotKey.Key, human.Number(100*min(f.hotKey.RU/total, 1), 0)+"%")
	}
	return report.Shortfall{Reason: report.ShortfallHotPartition, Evidence: fmt.Sprintf(
		"partition %d took %s of the RU%s; at its %s RU/s it needed %s of the load's %s, the other partitions' work done sooner: a physical partition serves at most its share (and never more than 10,000 RU/s)",
		b.Partition, human.Number(100*share, 0)+"%", key, human.Number(b.CapacityRU, 0), human.Seconds(b.Seconds), human.Seconds(r.ThisRun.DurationSeconds))}, true
}

// inputBound: the writers waited for records while the input was read.
func inputBound(r *report.Report, f loadFacts) (report.Shortfall, bool) {
	if f.starved < 0.2 {
		return report.Shortfall{}, false
	}
	return report.Shortfall{Reason: report.ShortfallInputBound, Evidence: fmt.Sprintf(
		"every partition waited for records %s of the time while the input was read, at %s records/s",
		human.Number(100*f.starved, 0)+"%", human.Number(float64(r.ThisRun.Records)/max(r.ThisRun.DurationSeconds, 1), 0))}, true
}

// clientCPU: the loader used about all the CPU it may.
func clientCPU(f loadFacts) (report.Shortfall, bool) {
	if f.cpuBusy < 0.9 {
		return report.Shortfall{}, false
	}
	return report.Shortfall{Reason: report.ShortfallClientCPU, Evidence: fmt.Sprintf(
		"the loader kept its %s %s busy: it sent as fast as this machine let it",
		human.Plural(int64(f.cpus), "CPU"), human.Number(100*min(f.cpuBusy, 1), 0)+"%")}, true
}

// replaced is what a cost model knows of the writes that replaced items
// already there (pacing.CostModel).
type replaced interface {
	ReplacedShare() float64
	ReplaceRatio() float64
	ChargedAsReplaces() (float64, bool)
}

// replacedNote says, in upsert mode, that a part of the load replaced
// items the container already held, each at about twice a create's RU
// (the cost model tells them by their charge), or that the whole load
// did: a repeated load, charged about twice what creating its items is
// documented to cost; "" when few did.
func replacedNote(mode Mode, cost costModel) string {
	c, ok := cost.(replaced)
	if mode != ModeUpsert || !ok {
		return ""
	}
	if share := c.ReplacedShare(); share >= 0.05 {
		return fmt.Sprintf("about %s of the upserts replaced items the container already held, each at about %s× a new item's RU: a repeated load costs about that much more than the first",
			human.Number(100*share, 0)+"%", human.Number(c.ReplaceRatio(), 1))
	}
	if ratio, all := c.ChargedAsReplaces(); all {
		return fmt.Sprintf("the upserts were charged about %s× what creating items of their size is documented to cost, as replacing items costs: the container most likely already held these ids (a repeated load); --mode create would count them as existing instead of writing them again",
			human.Number(ratio, 1))
	}
	return ""
}

// countOf is n with its noun: "1 request was", "3 requests were".
func countOf(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return human.Count(n) + " " + many
}
