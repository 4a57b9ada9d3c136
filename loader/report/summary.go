package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/cosmosloader/loader/internal/human"
)

// WriteText prints the human summary that ends every import, in the one
// number and duration format (internal/human).
func (r *Report) WriteText(w io.Writer) {
	var b strings.Builder
	n := human.Count
	fmt.Fprintf(&b, "\n%s: %s records read\n", strings.ToUpper(r.Status[:1])+r.Status[1:], n(r.RecordsRead))
	fmt.Fprintf(&b, "  written               %s\n", n(r.RecordsWritten))
	if r.RecordsSkippedExisting > 0 || r.Mode == "create" {
		fmt.Fprintf(&b, "  skipped (existing)    %s\n", n(r.RecordsSkippedExisting))
	}
	fmt.Fprintf(&b, "  dead-lettered         %s", n(r.RecordsDeadLettered))
	if r.RecordsDeadLettered > 0 {
		fmt.Fprintf(&b, "  → %s", r.DeadLetterPath)
	}
	b.WriteString("\n")
	writeReasons(&b, r.DeadLettersByReason, r.DeadLetterHint)
	if r.InputsRefused > 0 {
		fmt.Fprintf(&b, "  inputs refused        %s (unreadable: a corrupt gzip or Parquet file, a bad CSV header; one dead-letter line each, none of their records loaded)\n", n(r.InputsRefused))
	}
	fmt.Fprintf(&b, "  RU consumed           %s (%s per record, p95 %s)\n",
		human.Number(r.RUConsumed, 1), human.Number(r.RUPerRecord.Mean, 2), human.Number(r.RUPerRecord.P95, 2))
	fmt.Fprintf(&b, "  duration              %s\n", human.Seconds(r.DurationSeconds))
	per := ""
	if r.DurationSeconds < 1 {
		per = ", over one whole second" // the budget is per second
	}
	fmt.Fprintf(&b, "  achieved              %s RU/s of %s target (%s%s)\n", human.Number(r.AchievedRUPerSec, 0),
		human.Number(r.TargetRUPerSec, 0), human.Number(r.Utilization*100, 0)+"%", per)
	if len(r.TargetChanges) > 1 {
		steps := make([]string, len(r.TargetChanges))
		for i, c := range r.TargetChanges {
			steps[i] = human.Number(c.RU, 0) + " at " + human.Seconds(c.AtSeconds)
		}
		fmt.Fprintf(&b, "  target changes        %s (the target above is their time-weighted mean)\n", strings.Join(steps, " → "))
	}
	if len(r.PartitionChanges) > 1 {
		steps := make([]string, len(r.PartitionChanges))
		for i, c := range r.PartitionChanges {
			steps[i] = strconv.Itoa(c.Partitions) + " at " + human.Seconds(c.AtSeconds)
		}
		fmt.Fprintf(&b, "  physical partitions   %s\n", strings.Join(steps, " → "))
	}
	fmt.Fprintf(&b, "  requests              %s, throttled %s (%s)\n", n(r.RequestsSent), n(r.ThrottledResponses), human.Number(r.ThrottledPercent, 2)+"%")
	if rt := r.Retries; rt.Total() > 0 {
		fmt.Fprintf(&b, "  retries (this run)    %s: 429 throttled %s · 408 timeout %s · 503/449 unavailable %s · connection %s · other %s\n",
			n(rt.Total()), n(rt.Throttled), n(rt.Timeout), n(rt.Unavailable), n(rt.Connection), n(rt.Other))
	}
	// With batches allowed the figure says whether they formed (1.00: the
	// keys were unique); a server that refused them says so here too.
	if r.RequestsSent > 0 && (r.RecordsPerRequest > 1.005 || (r.Batch != "" && r.Batch != "off")) {
		batch := "--batch " + r.Batch
		if how, why, ok := strings.Cut(r.Batch, " ("); ok {
			batch = "batches " + how + ": " + strings.TrimSuffix(why, ")")
		}
		fmt.Fprintf(&b, "  records per request   %s (%s)\n", human.Number(r.RecordsPerRequest, 2), batch)
	}
	if r.Resumed {
		t := r.ThisRun
		b.WriteString("  this run (the figures above are the whole load):\n")
		fmt.Fprintf(&b, "    records             %s (written %s, dead-lettered %s)\n", n(t.Records), n(t.RecordsWritten), n(t.RecordsDeadLettered))
		fmt.Fprintf(&b, "    RU consumed         %s in %s, %s RU/s\n", human.Number(t.RUConsumed, 1), human.Seconds(t.DurationSeconds), human.Number(t.AchievedRUPerSec, 0))
		fmt.Fprintf(&b, "    requests            %s, throttled %s\n", n(t.RequestsSent), n(t.ThrottledResponses))
	}
	b.WriteString("\n  Naive vs paced      requests throttled passes      time\n")
	fmt.Fprintf(&b, "  naive (%s) %10s %9s %6s %9s\n", Basis(r.Naive.Measured), n(r.Naive.Requests), n(r.Naive.Throttled), n(int64(r.Naive.Passes)), human.Seconds(r.Naive.Seconds))
	fmt.Fprintf(&b, "  paced (%s) %10s %9s %6s %9s\n", Basis(r.Paced.Measured), n(r.Paced.Requests), n(r.Paced.Throttled), "-", human.Seconds(r.Paced.Seconds))
	if r.Error != "" {
		fmt.Fprintf(&b, "\n  %s\n", r.Error)
	}
	io.WriteString(w, b.String())
}

// maxReasons is how many dead-letter reasons the summary lists.
const maxReasons = 5

// writeReasons lists the dead letters by reason, most frequent first,
// each with where its first record is, then what likely fixes the load.
func writeReasons(b *strings.Builder, rs []ReasonCount, hint string) {
	for i, rc := range rs {
		if i == maxReasons {
			more := "reasons"
			if len(rs)-maxReasons == 1 {
				more = "reason"
			}
			fmt.Fprintf(b, "    and %s more %s (see the report)\n", human.Count(int64(len(rs)-maxReasons)), more)
			break
		}
		fmt.Fprintf(b, "    %-22s %9s  first at %s\n", rc.Reason, human.Count(rc.Count), rc.First)
	}
	if hint != "" {
		fmt.Fprintf(b, "  hint: %s\n", hint)
	}
}

// Basis says how a figure is known: "measured" or "modelled".
func Basis(measured bool) string {
	if measured {
		return "measured"
	}
	return "modelled"
}
