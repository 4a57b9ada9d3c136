// Package report is the account of a load and of a dry run: the JSON
// contract (the Report of an import, the DryRun of a dry run; their field
// names are the command's contract, see the README), the per-second series
// and the text summaries printed at the end. The HTML page (report/html)
// and its charts (report/svg) draw a Report; nothing here runs a load.
package report

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/cosmosloader/loader/internal/human"
	"github.com/cosmosloader/loader/pacing"
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
	// RoundTripMs is the median time from a request's send to its answer
	// in this run, in milliseconds.
	RoundTripMs float64 `json:"round_trip_ms,omitempty"`
	// RecordsPerRequest is the records written or found existing per
	// request sent (retries and 429s included): above 1 with batches.
	RecordsPerRequest float64 `json:"records_per_request"`
	// Batch is --batch as the run used it: auto, key, off, N, or "off (…)"
	// when the server refused batches and the run fell back to point
	// writes, "key (…)" when it refused range batches only.
	Batch string `json:"batch"`

	// Resumed marks a run that continued an earlier one's checkpoint.
	Resumed bool `json:"resumed,omitempty"`
	// ResumeCommand, when the load can be continued, is the command that
	// continues it (the command line sets it: it knows how to quote).
	ResumeCommand string     `json:"resume_command,omitempty"`
	ThisRun       RunFigures `json:"this_run"`

	// Naive is modelled from this run's measured charges; Paced is what
	// this run measured (the paced strategy) or what pacing would do.
	Naive NaiveFigures `json:"naive"`
	Paced PacedFigures `json:"paced"`
	// PartitionLoads is each physical partition's part of this run, on
	// which terms the comparison's modelled side was modelled.
	PartitionLoads []PartitionLoad `json:"partition_loads,omitempty"`
	// Notes say what the figures above do not: writes that replaced
	// existing items at about twice the RU.
	Notes []string `json:"notes,omitempty"`
	// Shortfall says why this run achieved less than 95 % of its target,
	// each reason with its evidence; absent when it did not.
	Shortfall []Shortfall `json:"shortfall,omitempty"`

	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	// Series is the run second by second: RU, requests, throttles, records.
	Series []Second `json:"series"`

	// Leases is the capacity this process held over time and Shards the
	// input shards it loaded, when sharing the container with other loaders.
	Leases []LeaseSample `json:"leases,omitempty"`
	Shards []string      `json:"shards,omitempty"`
	// Fleet names the shared load and this loader's part in it (see
	// fleet.go); nil when not sharing.
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
// Passes are the all-at-once client's (every record sent at once, the
// throttled ones again each second); 0 for a client with a bounded
// number of requests in flight.
type NaiveFigures struct {
	Requests  int64   `json:"requests"`
	Throttled int64   `json:"throttled"`
	Passes    int     `json:"passes"`
	Seconds   float64 `json:"seconds"`
	Measured  bool    `json:"measured"`
	// Assumptions says, in one line, on what terms modelled figures were
	// modelled: the client, the capacity, the spread over partitions.
	Assumptions string `json:"assumptions,omitempty"`
}

// PacedFigures are the paced approach's numbers.
type PacedFigures struct {
	Requests    int64   `json:"requests"`
	Throttled   int64   `json:"throttled"`
	Seconds     float64 `json:"seconds"`
	Measured    bool    `json:"measured"`
	Assumptions string  `json:"assumptions,omitempty"`
}

// PartitionLoad is one physical partition's part of a run: what it took,
// its share of the target, the capacity it gave the load (its share less
// what other traffic took: the RU the load charged in the seconds the
// partition's budget ran out), and the least time its RU needed at that
// capacity, which no strategy beats.
type PartitionLoad struct {
	Partition  int     `json:"partition"`
	Requests   int64   `json:"requests"`
	Records    int64   `json:"records"`
	RU         float64 `json:"ru"`
	Throttled  int64   `json:"throttled"`
	ShareRU    float64 `json:"share_ru_per_sec"`
	CapacityRU float64 `json:"capacity_ru_per_sec"`
	Seconds    float64 `json:"seconds"`
	// PacerLimitRU is the pacer's mean limit for the partition while it
	// had work; 0 when not pacing.
	PacerLimitRU float64 `json:"pacer_limit_ru_per_sec,omitempty"`
}

// Second is one second of a run: what the pipeline samples, the JSON
// report lists and the charts draw. T counts seconds since the start.
type Second struct {
	T         int64   `json:"t"`
	RU        float64 `json:"ru"`
	Requests  int64   `json:"requests"`
	Throttled int64   `json:"throttled"`
	Records   int64   `json:"records"`
	// LimitRU is the pacer's limit at the second's end: the sum of the
	// partitions' rates, below the target while 429s hold some back; 0
	// when not pacing.
	LimitRU float64 `json:"limit_ru,omitempty"`
	// Partitions is each physical partition's second, by the pacer's
	// numbering (a split adds partitions), up to MaxPartitionSeries of
	// them.
	Partitions []PartitionSecond `json:"partitions,omitempty"`
}

// PartitionSecond is one physical partition in one second: the RU it
// charged and the 429s it answered, against its share of the target and
// the pacer's limit for it (0 when not pacing).
type PartitionSecond struct {
	RU        float64 `json:"ru"`
	Throttled int64   `json:"throttled,omitempty"`
	ShareRU   float64 `json:"share_ru,omitempty"`
	LimitRU   float64 `json:"limit_ru,omitempty"`
}

// MaxPartitionSeries bounds the partitions the per-second series lists:
// beyond it a report of a long load would grow by kilobytes a second.
const MaxPartitionSeries = 64

// MergeSeconds sorts a series by time and sums the entries of one second
// (runs that overlapped: pieces run at once, or one ending in the second
// the next began), in place.
func MergeSeconds(series []Second) []Second {
	sort.SliceStable(series, func(i, j int) bool { return series[i].T < series[j].T })
	out := series[:0]
	for _, s := range series {
		if n := len(out); n > 0 && out[n-1].T == s.T {
			o := &out[n-1]
			o.RU += s.RU
			o.Requests += s.Requests
			o.Throttled += s.Throttled
			o.Records += s.Records
			// Runs side by side share one pacer: its figures are not summed.
			o.LimitRU = max(o.LimitRU, s.LimitRU)
			for len(o.Partitions) < len(s.Partitions) {
				o.Partitions = append(o.Partitions, PartitionSecond{})
			}
			for i, p := range s.Partitions {
				q := &o.Partitions[i]
				q.RU += p.RU
				q.Throttled += p.Throttled
				q.ShareRU, q.LimitRU = max(q.ShareRU, p.ShareRU), max(q.LimitRU, p.LimitRU)
			}
			continue
		}
		out = append(out, s)
	}
	return out
}

// Retries counts write attempts that failed and were sent again, by cause.
// A run that "works" while resending most of its writes is not healthy;
// these say which layer is failing.
type Retries struct {
	Throttled   int64 `json:"throttled"`   // 429: the RU/s budget
	Timeout     int64 `json:"timeout"`     // 408: the service timed the request out
	Unavailable int64 `json:"unavailable"` // 503 service unavailable, 449 retry with
	Connection  int64 `json:"connection"`  // no response: reset, refused, dropped, client timeout
	Other       int64 `json:"other"`       // 410, 500, 502, 504 …
}

// Total is the number of retries of every class.
func (r Retries) Total() int64 {
	return r.Throttled + r.Timeout + r.Unavailable + r.Connection + r.Other
}

// Add adds o's retries to r.
func (r *Retries) Add(o Retries) {
	r.Throttled += o.Throttled
	r.Timeout += o.Timeout
	r.Unavailable += o.Unavailable
	r.Connection += o.Connection
	r.Other += o.Other
}

// TargetChange is the RU/s target from AtSeconds into the run on; the
// first entry is the starting target.
type TargetChange struct {
	AtSeconds float64 `json:"at_seconds"`
	RU        float64 `json:"ru"`
}

// PartitionChange records the physical partitions seen from AtSeconds on.
type PartitionChange struct {
	AtSeconds  float64 `json:"at_seconds"`
	Partitions int     `json:"partitions"`
}

// LeaseSample is one change of the capacity a process holds, for the report.
type LeaseSample struct {
	Time      time.Time `json:"time"`
	Held      int       `json:"held"`
	LimitRU   float64   `json:"limit_ru"`
	StorageOK bool      `json:"storage_ok"`
}

// WriteJSON writes the report to path (0644; it holds no secrets).
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	b = human.RoundJSON(b) // each figure to what it measures, not 4000.0000000000005
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

// Round2 rounds v to two decimals, as the report's figures are.
func Round2(v float64) float64 { return math.Round(v*100) / 100 }

// Modelled is what m says the naive approach and the paced one would do.
func Modelled(m *pacing.Model) (NaiveFigures, PacedFigures) {
	n, p := m.Naive(), m.Paced()
	return NaiveFigures{Requests: n.Requests, Throttled: n.Throttled, Passes: n.Passes, Seconds: Round2(n.Seconds)},
		PacedFigures{Requests: p.Requests, Throttled: p.Throttled, Seconds: Round2(p.Seconds)}
}
