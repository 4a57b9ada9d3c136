package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cosmosloader/loader/internal/human"
)

// DryRun is what a dry run predicts: the JSON of dry-run --json, whose
// field names are the command's contract like the Report's.
type DryRun struct {
	Inputs     []string  `json:"inputs"`
	Records    int64     `json:"records"`
	Bytes      int64     `json:"bytes"`
	BadRecords int64     `json:"bad_records"`
	BadSamples []BadLine `json:"bad_samples,omitempty"`
	// BadMore is how many bad records BadSamples leaves out; BadByReason
	// counts all of them; Hint says what likely fixes most of them.
	BadMore     int64         `json:"bad_more,omitempty"`
	BadByReason []ReasonCount `json:"bad_by_reason,omitempty"`
	Hint        string        `json:"hint,omitempty"`
	EstimatedRU float64       `json:"estimated_ru"`
	RUPerRecord Spread        `json:"ru_per_record"`
	Largest     []Item        `json:"largest_items"`

	TargetRUPerSec float64   `json:"target_ru_per_sec"`
	Partitions     int       `json:"partitions"`
	PartitionRU    []float64 `json:"partition_ru"`
	// TopKeys lists the heaviest partition keys, only when one is hot or
	// the keys are too few to spread evenly.
	TopKeys  []KeyLoad `json:"top_partition_keys,omitempty"`
	Warnings []string  `json:"warnings,omitempty"`
	// Notes are costs the estimate leaves out, such as replacing items
	// that already exist, and a container shape corrected to one that
	// can serve the target.
	Notes []string `json:"notes,omitempty"`

	// EstimatedSeconds is the paced duration in the input's order: the
	// import's reading replayed over the records' partitions
	// (readplan.Plan.Simulate).
	// BoundSeconds is what no order can beat: the busiest physical
	// partition's RU over its share of the target. PartitionBusy is each
	// partition's seconds of writing (its RU over its share of the
	// target), to set against EstimatedSeconds; LongestRun the most consecutive
	// records bound for one partition.
	EstimatedSeconds float64   `json:"estimated_seconds"`
	BoundSeconds     float64   `json:"bound_seconds"`
	PartitionBusy    []float64 `json:"partition_busy_seconds"`
	LongestRun       int64     `json:"longest_partition_run"`
	// OrderUtilisation is BoundSeconds ÷ EstimatedSeconds: what the
	// input's order leaves of the target.
	OrderUtilisation float64   `json:"order_utilisation"`
	FinishAt         time.Time `json:"finish_at"`
	AtOtherRates     []RateRow `json:"at_other_rates"`

	// Requests is how many requests the load takes unthrottled, batches
	// of records that share a partition key counting once.
	Requests          int64   `json:"requests"`
	RecordsPerRequest float64 `json:"records_per_request"`

	Naive NaiveFigures `json:"naive"`
	Paced PacedFigures `json:"paced"`
}

// BadLine names one bad record.
type BadLine struct {
	Source string `json:"source"`
	Line   int64  `json:"line"`
	Reason string `json:"reason"`
	Error  string `json:"error"`
}

// Item is one of the largest documents.
type Item struct {
	ID     string  `json:"id"`
	Source string  `json:"source"`
	Line   int64   `json:"line"`
	Bytes  int     `json:"bytes"`
	RU     float64 `json:"ru"`
}

// KeyLoad is one logical partition's share of the load.
type KeyLoad struct {
	// Key is the partition key as JSON text (for people); Value the same
	// key as a plain JSON value (for machines).
	Key       string          `json:"-"`
	Value     json.RawMessage `json:"key"`
	Records   int64           `json:"records"`
	RU        float64         `json:"ru"`
	Bytes     int64           `json:"bytes"`
	Share     float64         `json:"share"` // of all RU
	Partition int             `json:"partition"`
	// Approximate marks counts from the bounded heavy-hitter sketch, which
	// may overestimate a key by at most the smallest tracked count.
	Approximate bool `json:"approximate,omitempty"`
}

// RateRow is the duration at another throughput.
type RateRow struct {
	RUPerSec float64 `json:"ru_per_sec"`
	Seconds  float64 `json:"seconds"`
	// Capped: the heaviest partition key's partition, at the 10,000 RU/s
	// one physical partition serves, binds at this rate, not the rate.
	Capped bool `json:"capped,omitempty"`
}

// WriteText prints the dry run for a person.
func (p *DryRun) WriteText(w io.Writer) {
	var b strings.Builder
	fmt.Fprintf(&b, "Dry run: nothing was written.\n\n")
	fmt.Fprintf(&b, "  records            %s (%s)\n", human.Count(p.Records), human.Bytes(float64(p.Bytes)))
	fmt.Fprintf(&b, "  bad records        %s\n", human.Count(p.BadRecords))
	for _, r := range p.BadByReason {
		fmt.Fprintf(&b, "    %-22s %8s  first %s: %s\n", r.Reason, human.Count(r.Count), r.First, r.Example)
	}
	if len(p.BadSamples) > 0 {
		b.WriteString("    first bad records\n")
	}
	for _, s := range p.BadSamples {
		fmt.Fprintf(&b, "      %s  %s\n", where(s.Source, s.Line), s.Error)
	}
	if p.BadMore > 0 {
		fmt.Fprintf(&b, "      … and %s more\n", human.Count(p.BadMore))
	}
	if p.Hint != "" {
		fmt.Fprintf(&b, "  hint: %s\n", p.Hint)
	}
	fmt.Fprintf(&b, "  estimated RU       %s\n", human.Number(p.EstimatedRU, 0))
	fmt.Fprintf(&b, "  RU per record      p50 %.2f  p95 %.2f  max %.2f\n", p.RUPerRecord.P50, p.RUPerRecord.P95, p.RUPerRecord.Max)
	if p.Requests > 0 {
		fmt.Fprintf(&b, "  requests           %s (%.2f records per request)\n", human.Count(p.Requests), p.RecordsPerRequest)
	}
	if len(p.Largest) > 0 {
		b.WriteString("  largest items\n")
		for _, it := range p.Largest {
			fmt.Fprintf(&b, "    %-36s %8s  %7.2f RU  %s:%d\n", trimTo(it.ID, 36), human.Bytes(float64(it.Bytes)), it.RU, it.Source, it.Line)
		}
	}
	fmt.Fprintf(&b, "\n  target             %s RU/s over %s\n", human.Number(p.TargetRUPerSec, 0), human.Plural(int64(p.Partitions), "physical partition"))
	if p.Partitions > 1 && p.EstimatedSeconds > 0 {
		b.WriteString("  partition busy    ")
		for i, s := range p.PartitionBusy {
			fmt.Fprintf(&b, "  %d: %s (%.0f%%)", i, human.Seconds(s), 100*s/p.EstimatedSeconds)
		}
		b.WriteString("\n")
	}
	if len(p.TopKeys) > 0 {
		b.WriteString("  top partition keys (share of RU)\n")
		for _, k := range p.TopKeys[:min(5, len(p.TopKeys))] {
			approx := " "
			if k.Approximate {
				approx = "≤"
			}
			fmt.Fprintf(&b, "    %-36s %s%5.1f%%  %s records  partition %d\n", trimTo(k.Key, 36), approx, k.Share*100, human.Count(k.Records), k.Partition)
		}
		if p.TopKeys[0].Approximate {
			b.WriteString("    (≤: more distinct keys than tracked; shares are upper bounds)\n")
		}
	}
	for _, warn := range p.Warnings {
		fmt.Fprintf(&b, "  WARNING: %s\n", warn)
	}
	for _, note := range p.Notes {
		fmt.Fprintf(&b, "  note: %s\n", note)
	}
	fmt.Fprintf(&b, "\n  estimated duration %s at %s RU/s (finishes about %s)\n",
		human.Seconds(p.EstimatedSeconds), human.Number(p.TargetRUPerSec, 0), p.FinishAt.Format("15:04:05 MST"))
	if len(p.AtOtherRates) > 0 {
		b.WriteString("  at other rates   ")
		capped := false
		for _, r := range p.AtOtherRates {
			mark := ""
			if r.Capped {
				mark, capped = "*", true
			}
			fmt.Fprintf(&b, "  %s RU/s: %s%s", human.Number(r.RUPerSec, 0), human.Seconds(r.Seconds), mark)
		}
		b.WriteString("\n")
		if capped {
			b.WriteString("  * no faster: the heaviest partition key's physical partition serves at most 10,000 RU/s\n")
		}
	}
	b.WriteString("\n  Naive vs paced      requests   throttled  passes   duration\n")
	passes := "-"
	if p.Naive.Passes > 0 {
		passes = human.Count(int64(p.Naive.Passes))
	}
	fmt.Fprintf(&b, "    naive          %10s  %10s  %6s   %s\n", human.Count(p.Naive.Requests), human.Count(p.Naive.Throttled), passes, human.Seconds(p.Naive.Seconds))
	fmt.Fprintf(&b, "    paced          %10s  %10s  %6s   %s\n", human.Count(p.Paced.Requests), human.Count(p.Paced.Throttled), "-", human.Seconds(p.Paced.Seconds))
	if p.Naive.Assumptions != "" {
		fmt.Fprintf(&b, "  both modelled: naive %s; paced %s\n", p.Naive.Assumptions, p.Paced.Assumptions)
	}
	io.WriteString(w, b.String())
}

func trimTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
