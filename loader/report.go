package loader

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/human"
	"github.com/cosmosloader/loader/loader/chart"
	"github.com/cosmosloader/loader/loader/htmlreport"
)

// Report is the account of one import run. Its JSON field names are part
// of the command contract (ARCHITECTURE.md). The top-level figures cover
// the whole load, including earlier runs that this one resumed: records,
// requests, RU, duration (the runs' durations added up) and the rate
// achieved over it. ThisRun has the same figures for this process alone;
// the series, the naive/paced comparison and the checkpoint figures are
// this run's.
type Report struct {
	Status   string `json:"status"` // finished, interrupted, stopped
	ExitCode int    `json:"exit_code"`
	Error    string `json:"error,omitempty"`

	RecordsRead            int64 `json:"records_read"`
	RecordsWritten         int64 `json:"records_written"`
	RecordsSkippedExisting int64 `json:"records_skipped_existing"`
	RecordsDeadLettered    int64 `json:"records_dead_lettered"`
	// InputsRefused counts inputs refused whole (a gzip file failing its
	// CRC or length check, an unreadable Parquet file, a CSV header
	// repeating or omitting a column name): each is one line of the dead-letter file (reason
	// corrupt_input or csv_header) and one of RecordsDeadLettered; none
	// of its records was loaded.
	InputsRefused      int64   `json:"inputs_refused"`
	RequestsSent       int64   `json:"requests_sent"`
	ThrottledResponses int64   `json:"throttled_responses"`
	ThrottledPercent   float64 `json:"throttled_percent"`
	// Retries are this run's resent write attempts by cause (not carried
	// over from the runs a resume continues).
	Retries          Retries `json:"retries"`
	RUConsumed       float64 `json:"ru_consumed"`
	DurationSeconds  float64 `json:"duration_seconds"`
	TargetRUPerSec   float64 `json:"target_ru_per_sec"`
	AchievedRUPerSec float64 `json:"achieved_ru_per_sec"`
	Utilization      float64 `json:"utilization"`
	DeadLetterPath   string  `json:"dead_letter_path"`
	CheckpointPath   string  `json:"checkpoint_path"`
	// CheckpointSaves and CheckpointSeconds are this run's checkpointing:
	// how often it saved and the time the saves took (they run beside
	// the writers, so this bounds their cost to throughput from above).
	CheckpointSaves   int64   `json:"checkpoint_saves"`
	CheckpointSeconds float64 `json:"checkpoint_seconds"`

	Strategy   string `json:"strategy"`
	Mode       string `json:"mode"`
	Partitions int    `json:"partitions"`
	Database   string `json:"database"`
	Container  string `json:"container"`
	Embedded   bool   `json:"embedded,omitempty"`

	RUPerRecord Spread `json:"ru_per_record"`

	// DeadLettersByReason counts the dead-letter file's lines by reason,
	// the most frequent first, each with its first record's file:line;
	// DeadLetterHint says what likely fixes the load when one reason
	// refused most of its records.
	DeadLettersByReason []ReasonCount `json:"dead_letters_by_reason,omitempty"`
	DeadLetterHint      string        `json:"dead_letter_hint,omitempty"`
	// RecordsPerRequest is the records written or found existing per
	// request sent (retries and 429s included): above 1 with batches.
	RecordsPerRequest float64 `json:"records_per_request"`
	// Batch is --batch as the run used it: auto, off, N, or "off (…)"
	// when the server refused batches and the run fell back to point writes.
	Batch string `json:"batch"`

	// Resumed marks a run that continued an earlier one's checkpoint.
	Resumed bool       `json:"resumed,omitempty"`
	ThisRun RunFigures `json:"this_run"`

	// Naive is modelled from this run's measured charges; Paced is what
	// this run measured (the paced strategy) or what pacing would do.
	Naive NaiveFigures `json:"naive"`
	Paced PacedFigures `json:"paced"`

	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	// Series is the run second by second: RU, requests, throttles, records.
	Series []htmlreport.Second `json:"series"`

	// Leases is the capacity this process held over time and Shards the
	// input shards it loaded, when sharing the container with other loaders.
	Leases []LeaseSample `json:"leases,omitempty"`
	Shards []string      `json:"shards,omitempty"`
	// Fleet names the shared load and this loader's part in it (see
	// fleetreport.go); nil when not sharing.
	Fleet *FleetShare `json:"fleet,omitempty"`

	// TargetChanges lists the target from each moment on, when the
	// container's throughput changed during the load (the first entry is
	// the starting target); TargetRUPerSec and Utilization are then
	// against the time-weighted mean target. PartitionChanges likewise
	// lists the physical partitions after each split seen.
	TargetChanges    []TargetChange    `json:"target_changes,omitempty"`
	PartitionChanges []PartitionChange `json:"partition_changes,omitempty"`
}

// RunFigures are what one process did, apart from the runs it resumed.
type RunFigures struct {
	Records             int64   `json:"records"` // committed: written, skipped or dead-lettered
	RecordsWritten      int64   `json:"records_written"`
	RecordsDeadLettered int64   `json:"records_dead_lettered"`
	RequestsSent        int64   `json:"requests_sent"`
	ThrottledResponses  int64   `json:"throttled_responses"`
	RUConsumed          float64 `json:"ru_consumed"`
	DurationSeconds     float64 `json:"duration_seconds"`
	AchievedRUPerSec    float64 `json:"achieved_ru_per_sec"`
}

// Spread summarises a distribution.
type Spread struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	Max  float64 `json:"max"`
}

// NaiveFigures are the send-everything-and-resend approach's numbers.
type NaiveFigures struct {
	Requests  int64   `json:"requests"`
	Throttled int64   `json:"throttled"`
	Passes    int     `json:"passes"`
	Seconds   float64 `json:"seconds"`
	Measured  bool    `json:"measured"`
}

// PacedFigures are the paced approach's numbers.
type PacedFigures struct {
	Requests  int64   `json:"requests"`
	Throttled int64   `json:"throttled"`
	Seconds   float64 `json:"seconds"`
	Measured  bool    `json:"measured"`
}

func buildReport(j *Job, res *Result, target float64, partitions int, base checkpoint.Counters, st *checkpoint.State) *Report {
	c := st.Counters
	dur := res.Snapshot.Elapsed.Seconds()
	r := &Report{
		RecordsRead:            c.RecordsRead,
		RecordsWritten:         c.RecordsWritten,
		RecordsSkippedExisting: c.RecordsSkippedExisting,
		RecordsDeadLettered:    c.RecordsDeadLettered,
		RequestsSent:           c.RequestsSent,
		ThrottledResponses:     c.ThrottledResponses,
		RUConsumed:             round2(c.RUConsumed),
		DurationSeconds:        round2(dur),
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
		r.DeadLettersByReason = res.reasons.counts()
		r.DeadLetterHint = res.reasons.hint(c.RecordsRead, st.Config.PartitionKey, j.IDField)
	}
	if c.RequestsSent > 0 {
		r.ThrottledPercent = round2(100 * float64(c.ThrottledResponses) / float64(c.RequestsSent))
		r.RecordsPerRequest = round2(float64(c.RecordsWritten+c.RecordsSkippedExisting) / float64(c.RequestsSent))
	}
	r.Batch = j.Batch
	if r.Batch == "" {
		r.Batch = "auto"
	}
	if res.BatchesRefused {
		r.Batch = "off (the server refused transactional batches)"
	}
	r.Resumed = j.Resume != nil
	r.ThisRun = RunFigures{
		Records:             c.RecordsRead - base.RecordsRead,
		RecordsWritten:      c.RecordsWritten - base.RecordsWritten,
		RecordsDeadLettered: c.RecordsDeadLettered - base.RecordsDeadLettered,
		RequestsSent:        res.Snapshot.Requests,
		ThrottledResponses:  res.Snapshot.Throttled,
		RUConsumed:          round2(res.Snapshot.RU),
		DurationSeconds:     round2(dur),
	}
	if dur > 0 {
		// The budget is per second: a run shorter than one second could
		// spend at most one second's worth, so its rate is over that
		// second, not a burst extrapolated to "3,959 RU/s of 1,000".
		r.ThisRun.AchievedRUPerSec = round2(res.Snapshot.RU / max(dur, 1))
	}
	// The whole load's time is its runs' times added up (the gaps between
	// them are not loading); without earlier runs it is this run's.
	whole := dur
	if c.ElapsedSeconds > dur {
		whole = c.ElapsedSeconds
	}
	r.DurationSeconds = round2(whole)
	if whole > 0 {
		r.AchievedRUPerSec = round2(c.RUConsumed / max(whole, 1))
	}
	if target > 0 {
		r.Utilization = round2(r.AchievedRUPerSec/target*100) / 100
	}
	h := res.Charges
	if n := h.Count(); n > 0 {
		r.RUPerRecord = Spread{Mean: round2(h.Sum() / float64(n)), P50: round2(h.Quantile(0.5)), P95: round2(h.Quantile(0.95)), Max: round2(h.Max())}
	}
	measured := PacedFigures{Requests: res.Snapshot.Requests, Throttled: res.Snapshot.Throttled, Seconds: round2(dur), Measured: true}
	naive, paced := compare(h, target, partitions, max(r.RecordsPerRequest, 1))
	if j.Strategy == StrategyNaive {
		naive = NaiveFigures{Requests: measured.Requests, Throttled: measured.Throttled, Seconds: measured.Seconds, Measured: true}
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

// WriteJSON writes the report to path (0644; it holds no secrets).
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// count, byteSize and fmtSeconds are the one human format
// (internal/human), for dry-run's text.
var (
	count      = human.Count
	byteSize   = human.Bytes
	fmtSeconds = human.Seconds
)

// WriteHTML writes the report as one self-contained HTML page with its
// charts (RU/s against the target with 429s marked, records per second).
func (r *Report) WriteHTML(path string) error {
	return writeHTML(path, r.htmlData())
}

// htmlData is what the HTML page shows of r.
func (r *Report) htmlData() *htmlreport.Data {
	d := &htmlreport.Data{
		Title:  "loader import: " + r.Database + "/" + r.Container,
		Status: r.Status, ExitCode: r.ExitCode, Error: r.Error,
		StartedAt: r.StartedAt, FinishedAt: r.FinishedAt,
		Database: r.Database, Container: r.Container, Strategy: r.Strategy, Mode: r.Mode,
		Partitions: r.Partitions, Embedded: r.Embedded,
		RecordsRead: r.RecordsRead, RecordsWritten: r.RecordsWritten,
		RecordsSkippedExisting: r.RecordsSkippedExisting, RecordsDeadLettered: r.RecordsDeadLettered,
		RequestsSent: r.RequestsSent, ThrottledResponses: r.ThrottledResponses,
		RUConsumed: r.RUConsumed, DurationSeconds: r.DurationSeconds, TargetRUPerSec: r.TargetRUPerSec,
		AchievedRUPerSec: r.AchievedRUPerSec, Utilization: r.Utilization, ThrottledPercent: r.ThrottledPercent,
		RUPerRecordP50: r.RUPerRecord.P50, RUPerRecordP95: r.RUPerRecord.P95, RUPerRecordMax: r.RUPerRecord.Max,
		DeadLetterPath: r.DeadLetterPath, CheckpointPath: r.CheckpointPath,
		RecordsPerRequest: r.RecordsPerRequest, Batch: r.Batch,
		InputsRefused: r.InputsRefused, Retries: htmlreport.Retries(r.Retries),
		Naive: htmlreport.NaiveFigures(r.Naive), Paced: htmlreport.PacedFigures(r.Paced),
	}
	if r.Resumed {
		d.Resumed, d.ThisRun = true, htmlreport.RunFigures(r.ThisRun)
	}
	for _, rc := range r.DeadLettersByReason {
		d.DeadLetterReasons = append(d.DeadLetterReasons, htmlreport.Reason(rc))
	}
	d.DeadLetterHint = r.DeadLetterHint
	d.Series = append(d.Series, r.Series...)
	for _, c := range r.TargetChanges {
		d.TargetSteps = append(d.TargetSteps, chart.Point{X: c.AtSeconds, Y: c.RU})
	}
	return d
}

// writeHTML renders d to the file path.
func writeHTML(path string, d *htmlreport.Data) error {
	var b bytes.Buffer
	if err := htmlreport.Write(&b, d); err != nil {
		return fmt.Errorf("render HTML report: %w", err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write HTML report: %w", err)
	}
	return nil
}
