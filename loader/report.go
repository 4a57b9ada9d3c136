package loader

import (
	"math"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/loader/report"
)

func buildReport(j *Job, res *Result, target float64, partitions int, base checkpoint.Counters, st *checkpoint.State) *report.Report {
	c := st.Counters
	dur := res.Snapshot.Elapsed.Seconds()
	r := &report.Report{
		RecordsRead:            c.RecordsRead,
		RecordsWritten:         c.RecordsWritten,
		RecordsSkippedExisting: c.RecordsSkippedExisting,
		RecordsDeadLettered:    c.RecordsDeadLettered,
		RequestsSent:           c.RequestsSent,
		ThrottledResponses:     c.ThrottledResponses,
		RUConsumed:             report.Round2(c.RUConsumed),
		DurationSeconds:        report.Round2(dur),
		TargetRUPerSec:         target,
		DeadLetterPath:         j.DeadLetterPath,
		CheckpointPath:         j.CheckpointPath,
		Strategy:               string(j.Strategy),
		Mode:                   string(j.Mode),
		Partitions:             partitions,
		Database:               j.Target.Database,
		Container:              j.Target.Container,
		Embedded:               j.Embedded,
		Series:                 res.Series,
		CheckpointSaves:        res.CheckpointSaves,
		CheckpointSeconds:      math.Round(res.CheckpointTime.Seconds()*1e4) / 1e4,
		FinishedAt:             j.Clock.Now(),
	}
	r.StartedAt = r.FinishedAt.Add(-res.Snapshot.Elapsed)
	r.Retries = res.Live.Retries
	for _, in := range st.Inputs {
		if in.Refused {
			r.InputsRefused++
		}
	}
	if r.InputsRefused == 0 {
		// Shared loads keep no per-input state here: this run's count.
		r.InputsRefused = res.Live.InputsRefused
	}
	if r.RecordsDeadLettered == 0 {
		r.DeadLetterPath = ""
	}
	if res.reasons != nil {
		r.DeadLettersByReason = res.reasons.Counts()
		r.DeadLetterHint = res.reasons.Hint(c.RecordsRead, st.Config.PartitionKey, j.IDField)
	}
	if c.RequestsSent > 0 {
		r.ThrottledPercent = report.Round2(100 * float64(c.ThrottledResponses) / float64(c.RequestsSent))
		r.RecordsPerRequest = report.Round2(float64(c.RecordsWritten+c.RecordsSkippedExisting) / float64(c.RequestsSent))
	}
	r.Batch = j.Batch
	if r.Batch == "" {
		r.Batch = "auto"
	}
	if res.BatchesRefused {
		r.Batch = "off (the server refused transactional batches)"
	}
	r.Resumed = j.Resume != nil
	r.ThisRun = report.RunFigures{
		Records:             c.RecordsRead - base.RecordsRead,
		RecordsWritten:      c.RecordsWritten - base.RecordsWritten,
		RecordsDeadLettered: c.RecordsDeadLettered - base.RecordsDeadLettered,
		RequestsSent:        res.Snapshot.Requests,
		ThrottledResponses:  res.Snapshot.Throttled,
		RUConsumed:          report.Round2(res.Snapshot.RU),
		DurationSeconds:     report.Round2(dur),
	}
	if dur > 0 {
		// The budget is per second: a run shorter than one second could
		// spend at most one second's worth, so its rate is over that
		// second, not a burst extrapolated to "3,959 RU/s of 1,000".
		r.ThisRun.AchievedRUPerSec = report.Round2(res.Snapshot.RU / max(dur, 1))
	}
	// The whole load's time is its runs' times added up (the gaps between
	// them are not loading); without earlier runs it is this run's.
	whole := dur
	if c.ElapsedSeconds > dur {
		whole = c.ElapsedSeconds
	}
	r.DurationSeconds = report.Round2(whole)
	if whole > 0 {
		r.AchievedRUPerSec = report.Round2(c.RUConsumed / max(whole, 1))
	}
	if target > 0 {
		r.Utilization = report.Round2(r.AchievedRUPerSec/target*100) / 100
	}
	h := res.Charges
	if n := h.Count(); n > 0 {
		r.RUPerRecord = report.Spread{Mean: report.Round2(h.Sum() / float64(n)), P50: report.Round2(h.Quantile(0.5)), P95: report.Round2(h.Quantile(0.95)), Max: report.Round2(h.Max())}
	}
	measured := report.PacedFigures{Requests: res.Snapshot.Requests, Throttled: res.Snapshot.Throttled, Seconds: report.Round2(dur), Measured: true}
	naive, paced := compare(h, target, partitions, max(r.RecordsPerRequest, 1))
	if j.Strategy == StrategyNaive {
		naive = report.NaiveFigures{Requests: measured.Requests, Throttled: measured.Throttled, Seconds: measured.Seconds, Measured: true}
	} else {
		paced = measured
	}
	r.Naive, r.Paced = naive, paced
	switch res.Cause {
	case Finished:
		r.Status = "finished"
	case Interrupted:
		r.Status = "interrupted"
	default:
		r.Status = "stopped"
	}
	if res.Err != nil {
		r.Error = res.Err.Error()
	}
	return r
}
