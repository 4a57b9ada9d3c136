package dryrun

import (
	"fmt"
	"math"
	"time"

	"github.com/cosmosloader/loader/internal/human"

	"github.com/cosmosloader/loader/loader/readplan"
	"github.com/cosmosloader/loader/loader/report"
	"github.com/cosmosloader/loader/pacing"
)

// modelled is what the model makes of the records read: how long the
// load takes in the input's order (estimate), what no order can beat
// (bound), and the plan and load it replayed them through.
type modelled struct {
	plan            readplan.Plan
	config          readplan.Config
	load            readplan.Load
	estimate, bound float64
}

// model replays the records through the import's read plan and fills in
// the dry run's durations: the estimate, the bound, each partition's busy
// time, the duration at other rates and the naive-versus-paced figures.
func (r *reading) model() modelled {
	j, p := r.j, r.p
	md := modelled{config: j.Batch.ReadConfig(readplan.Config{Partitions: r.parts, Segments: j.Segments, ReadAhead: j.ReadAhead})}
	// The import reads several files at once, and cuts a file while
	// loading only when every input can be cut.
	md.plan = readplan.New(j.Inputs, r.counts, j.Source, md.config)
	md.plan.Splits = md.plan.Splits && r.splittable
	// The import's buckets spend pacing.LoadAim of the target, and so
	// does the model of it.
	paced := j.TargetRU * pacing.LoadAim
	// The heaviest key's partition serves at most 10,000 RU/s however
	// much the container has: no rate loads faster than it.
	keyBound := r.keyBound()
	md.bound = max(pacedSeconds(p.PartitionRU, paced), keyBound)
	md.load = readplan.Load{Partitions: r.parts, BudgetPerPartition: paced / float64(r.parts), Records: p.Records, Bytes: p.Bytes}
	sim := md.plan.Simulate(r.seq, md.load)
	// The simulation steps in 10 ms; never report less than the bound.
	md.estimate = max(sim.Seconds, md.bound)
	p.BoundSeconds, p.EstimatedSeconds = report.Round2(md.bound), report.Round2(md.estimate)
	p.LongestRun = r.seq.LongestRun
	for _, b := range sim.Busy {
		p.PartitionBusy = append(p.PartitionBusy, report.Round2(b))
	}
	if md.estimate > 0 {
		p.OrderUtilisation = report.Round2(md.bound / md.estimate)
	}
	p.FinishAt = j.Now().Add(time.Duration(p.EstimatedSeconds * float64(time.Second))).Round(time.Second)
	for _, f := range []float64{0.25, 0.5, 2, 4, 10} {
		ru := math.Round(j.TargetRU * f)
		if ru >= 400 {
			// Every budget and drain scales with the rate, the queue
			// depths do not matter to the ratio: time scales as 1/f.
			secs := md.estimate * j.TargetRU / ru
			row := report.RateRow{RUPerSec: ru, Seconds: report.Round2(max(secs, keyBound)), Capped: keyBound > secs}
			p.AtOtherRates = append(p.AtOtherRates, row)
		}
	}
	p.Naive, p.Paced = report.Modelled(r.naive)
	p.Paced.Seconds = p.EstimatedSeconds
	p.Naive.Assumptions = fmt.Sprintf("one request a record, %s; each partition's share of %s RU/s; the records as read, spread over %s",
		naiveClient(), human.Number(j.TargetRU, 0), human.Plural(int64(r.parts), "partition"))
	p.Paced.Assumptions = "the import's read plan replayed over the same partitions at the target"
	if md.estimate > 0 {
		// No strategy loads the busiest partition faster than its share
		// (the bound is paced at pacing.LoadAim of it; naive is not).
		p.Naive.Seconds = report.Round2(max(p.Naive.Seconds, md.bound*pacing.LoadAim))
	}
	return md
}

// naiveClient is the naive client the dry run models: the Rate Limiting
// pattern's, every record in flight at once, the throttled ones resent
// each second (a dry run has no round trip or client to go by).
func naiveClient() pacing.NaiveClient { return pacing.NaiveClient{} }

// keyBound is the least time the heaviest partition key (counted
// exactly) needs at what one physical partition serves, paced; 0 without
// one.
func (r *reading) keyBound() float64 {
	for _, k := range r.p.TopKeys {
		if !k.Approximate {
			return k.RU / (physicalPartitionMaxRU * pacing.LoadAim)
		}
	}
	return 0
}

// pacedSeconds is how long a paced load takes when each physical partition
// gets target/partitions RU/s: the slowest partition decides.
func pacedSeconds(partitionRU []float64, target float64) float64 {
	if target <= 0 {
		return 0
	}
	share := target / float64(len(partitionRU))
	var worst float64
	for _, ru := range partitionRU {
		worst = max(worst, ru/share)
	}
	return worst
}

// withSegments is how long the load would take with the advice's pieces
// (more of them, fixed): what --segments could win.
func (r *reading) withSegments(md modelled) float64 {
	alt := readplan.New(r.j.Inputs, r.altCounts, r.j.Source, md.config)
	alt.Splits = false
	return max(alt.Simulate(r.alt, md.load).Seconds, md.bound)
}
