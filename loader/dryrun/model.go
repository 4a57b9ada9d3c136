package dryrun

import (
	"math"
	"time"

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
	md := modelled{config: readplan.Config{Partitions: r.parts, Segments: j.Segments, ReadAhead: j.ReadAhead, Batch: j.Batch}}
	// The import reads several files at once, and cuts a file while
	// loading only when every input can be cut.
	md.plan = readplan.New(j.Inputs, r.counts, j.Source, md.config)
	md.plan.Splits = md.plan.Splits && r.splittable
	// The import's buckets spend pacing.LoadAim of the target, and so
	// does the model of it.
	paced := j.TargetRU * pacing.LoadAim
	md.bound = pacedSeconds(p.PartitionRU, paced)
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
			p.AtOtherRates = append(p.AtOtherRates, report.RateRow{RUPerSec: ru, Seconds: report.Round2(md.estimate * j.TargetRU / ru)})
		}
	}
	p.Naive, p.Paced = report.Modelled(r.naive)
	p.Paced.Seconds = p.EstimatedSeconds
	return md
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
