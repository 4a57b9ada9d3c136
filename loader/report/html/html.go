// Package html renders one load as a single self-contained HTML
// page: key figures, RU/s and records per second over time with every
// throttled second marked, and the naive-versus-paced comparison.
//
// The page has inline CSS and inline SVG only — no scripts, fonts, images
// or links to anything outside the file — so it can be mailed, attached to
// a ticket or opened offline years later and look the same.
package html

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"math"
	"os"
	"strings"

	"github.com/cosmosloader/loader/internal/human"
	"github.com/cosmosloader/loader/loader/report"
	"github.com/cosmosloader/loader/loader/report/svg"
)

// Run is another run drawn beside this one, such as the benchmark's naive
// and SDK-default loads. Color is a CSS colour; empty picks one.
type Run struct {
	Name   string
	Series []report.Second
	Color  string
}

// Page is what one page shows: a load's report and, drawn beside it,
// other runs. Title heads the page; "" names the container.
type Page struct {
	report.Report
	Title   string
	Compare []Run
}

// leftMargin lines the two charts' plots up for RU/s up to 100,000.
const leftMargin = 84

// maxMarkers bounds the throttle markers per run: past it, neighbouring
// throttled seconds share one marker whose tooltip sums them, so a long
// throttled run stays readable and small.
const maxMarkers = 150

var (
	throttleColor = "#dc2626"
	targetColor   = "#64748b"
	limitColor    = "#16a34a"
	// Runs avoid red, which means "throttled" on the page.
	runColors = []string{"#2563eb", "#ea580c", "#9333ea", "#0d9488", "#ca8a04", "#db2777"}
)

// Write renders d as HTML to w.
func Write(w io.Writer, d *Page) error {
	if d == nil {
		return fmt.Errorf("write html report: no data")
	}
	v := build(d)
	var b bytes.Buffer
	if err := page.Execute(&b, v); err != nil {
		return fmt.Errorf("render html report: %w", err)
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("write html report: %w", err)
	}
	return nil
}

type figure struct {
	Label, Value, Note string
	Class              string
	// Scope, in a resumed run's report, says whose figure it is: the
	// whole load's or this run's.
	Scope string
}

type compareRow struct {
	Color, Name, Duration, RU, Requests, Throttled, Peak, Mean, Utilization string
}

type comparisonRow struct {
	Label, Naive, Paced string
}

type view struct {
	Title, Status, StatusClass, Error, Subtitle, When string
	ResumeCommand                                     string
	Figures                                           []figure
	RUChart, RecordsChart                             template.HTML
	RUCaption, RecordsCaption                         string
	Runs                                              []compareRow
	ShowComparison                                    bool
	NaiveSource, PacedSource                          string
	Comparison                                        []comparisonRow
	Spread                                            string
	DeadLetterPath, CheckpointPath                    string
	DeadLetterNote                                    string
	// ThisRun compares this run with the whole load after a resume.
	ThisRun []comparisonRow
	Reasons []reasonRow
	Hint    string
	// Assumptions is the comparison's one line: which side is modelled,
	// on what terms.
	Assumptions string
	// Shortfall is why the load ran below its target; Partitions each
	// physical partition's part against its share.
	Shortfall  []report.Shortfall
	Partitions []partitionRow
	Notes      []string
}

type partitionRow struct {
	Partition, RU, Records, Throttled, MeanRU, Share, Capacity, Limit, Busy string
	Class                                                                   string
}

type reasonRow struct {
	Reason, Count, First, Example string
}

type namedSeries struct {
	name, color string
	secs        []report.Second
}

func build(d *Page) view {
	v := view{
		Title:          d.Title,
		Status:         d.Status,
		Error:          d.Error,
		ResumeCommand:  d.ResumeCommand,
		DeadLetterPath: d.DeadLetterPath,
		CheckpointPath: d.CheckpointPath,
	}
	if v.Title == "" {
		v.Title = "Load report"
		if d.Container != "" {
			v.Title = "Load into " + d.Container
		}
	}
	if v.Status == "" {
		v.Status = "finished"
	}
	v.Status = fmt.Sprintf("%s · exit %d", v.Status, d.ExitCode)
	switch d.ExitCode {
	case 0:
		v.StatusClass = "ok"
	case 3:
		v.StatusClass = "warn"
	default:
		v.StatusClass = "bad"
	}
	v.Subtitle = subtitle(d)
	v.When = when(d)
	v.Figures = figures(d)

	runs := runsOf(d)
	v.RUChart, v.RUCaption = ruChart(d, runs)
	v.RecordsChart, v.RecordsCaption = recordsChart(runs)
	if len(d.Compare) > 0 {
		for _, r := range runs {
			v.Runs = append(v.Runs, summarise(r, d.TargetRUPerSec))
		}
	}

	v.ShowComparison = d.Naive.Requests > 0 || d.Paced.Requests > 0
	v.NaiveSource, v.PacedSource = report.Basis(d.Naive.Measured), report.Basis(d.Paced.Measured)
	passes := "—"
	if d.Naive.Passes > 0 {
		passes = count(int64(d.Naive.Passes))
	}
	v.Comparison = []comparisonRow{
		{"Requests sent", count(d.Naive.Requests), count(d.Paced.Requests)},
		{"Throttled (429) responses", count(d.Naive.Throttled), count(d.Paced.Throttled)},
		{"Passes over the data", passes, "1"},
		{"Time", duration(d.Naive.Seconds), duration(d.Paced.Seconds)},
	}
	v.Assumptions = d.Assumptions()
	v.Shortfall = d.Shortfall
	v.Notes = d.Notes
	v.Partitions = partitionRows(d)
	if rr := d.RUPerRecord; rr.Max > 0 {
		v.Spread = fmt.Sprintf("RU per record: median %s, 95th percentile %s, max %s.",
			svg.FormatNumber(rr.P50, 2), svg.FormatNumber(rr.P95, 2), svg.FormatNumber(rr.Max, 2))
	}
	if d.Resumed {
		t := d.ThisRun
		v.ThisRun = []comparisonRow{
			{"Records committed", count(t.Records), count(d.RecordsRead)},
			{"Records written", count(t.RecordsWritten), count(d.RecordsWritten)},
			{"Dead-lettered", count(t.RecordsDeadLettered), count(d.RecordsDeadLettered)},
			{"RU consumed", svg.FormatNumber(t.RUConsumed, 0), svg.FormatNumber(d.RUConsumed, 0)},
			{"Duration", duration(t.DurationSeconds), duration(d.DurationSeconds)},
			{"Achieved RU/s", svg.FormatNumber(t.AchievedRUPerSec, 0), svg.FormatNumber(d.AchievedRUPerSec, 0)},
			{"Requests sent", count(t.RequestsSent), count(d.RequestsSent)},
			{"Throttled (429) responses", count(t.ThrottledResponses), count(d.ThrottledResponses)},
		}
	}
	for _, r := range d.DeadLettersByReason {
		v.Reasons = append(v.Reasons, reasonRow{Reason: r.Reason, Count: count(r.Count), First: r.First, Example: r.Example})
	}
	v.Hint = d.DeadLetterHint
	if d.RecordsDeadLettered > 0 {
		v.DeadLetterNote = fmt.Sprintf("%s records could not be written; each line of the dead-letter file holds one with the reason.", count(d.RecordsDeadLettered))
		if d.InputsRefused > 0 {
			v.DeadLetterNote += fmt.Sprintf(" Inputs refused whole (unreadable: a corrupt gzip or Parquet file, a bad CSV header): %s; one line stands for each such file, none of whose records was loaded.", count(d.InputsRefused))
		}
	}
	return v
}

// partitionRows is each physical partition's part of the run: its mean
// RU/s over the run against its share of the target and the capacity it
// gave the load. A partition that needed most of the run is marked.
func partitionRows(d *Page) []partitionRow {
	if len(d.PartitionLoads) < 2 {
		return nil
	}
	dur := d.ThisRun.DurationSeconds
	if dur <= 0 {
		dur = d.DurationSeconds
	}
	var rows []partitionRow
	for _, l := range d.PartitionLoads {
		row := partitionRow{
			Partition: fmt.Sprint(l.Partition), RU: svg.FormatNumber(l.RU, 0), Records: count(l.Records), Throttled: count(l.Throttled),
			Share: svg.FormatNumber(l.ShareRU, 0), Capacity: svg.FormatNumber(l.CapacityRU, 0), Limit: "—", Busy: duration(l.Seconds),
			MeanRU: "—",
		}
		if dur > 0 {
			row.MeanRU = svg.FormatNumber(l.RU/dur, 0)
		}
		if l.PacerLimitRU > 0 {
			row.Limit = svg.FormatNumber(l.PacerLimitRU, 0)
		}
		if dur > 0 && l.Seconds >= 0.8*dur {
			row.Class = "warn"
		}
		rows = append(rows, row)
	}
	return rows
}

func subtitle(d *Page) string {
	var parts []string
	if d.Database != "" || d.Container != "" {
		parts = append(parts, strings.Trim(d.Database+" / "+d.Container, " /"))
	}
	if d.Strategy != "" {
		parts = append(parts, d.Strategy+" strategy")
	}
	if d.Mode != "" {
		parts = append(parts, d.Mode)
	}
	if d.Partitions > 0 {
		parts = append(parts, human.Plural(int64(d.Partitions), "physical partition"))
	}
	if d.Embedded {
		parts = append(parts, "embedded local target")
	}
	return strings.Join(parts, " · ")
}

func when(d *Page) string {
	const layout = "2006-01-02 15:04:05 MST"
	switch {
	case !d.StartedAt.IsZero() && !d.FinishedAt.IsZero():
		return fmt.Sprintf("%s → %s", d.StartedAt.UTC().Format(layout), d.FinishedAt.UTC().Format(layout))
	case !d.StartedAt.IsZero():
		return "started " + d.StartedAt.UTC().Format(layout)
	}
	return ""
}

func figures(d *Page) []figure {
	fs := []figure{
		{Label: "Records written", Value: count(d.RecordsWritten), Note: "of " + count(d.RecordsRead) + " read"},
		{Label: "Skipped (already there)", Value: count(d.RecordsSkippedExisting)},
		{Label: "Dead-lettered", Value: count(d.RecordsDeadLettered), Class: warnIf(d.RecordsDeadLettered > 0)},
		{Label: "RU consumed", Value: svg.FormatNumber(d.RUConsumed, 0)},
		{Label: "Duration", Value: duration(d.DurationSeconds)},
		{Label: "Achieved RU/s", Value: svg.FormatNumber(d.AchievedRUPerSec, 0), Note: "target " + svg.FormatNumber(d.TargetRUPerSec, 0)},
		{Label: "Utilisation", Value: svg.FormatNumber(d.Utilization*100, 0) + " %", Note: "of the target RU/s"},
		{Label: "Throttled", Value: svg.FormatNumber(d.ThrottledPercent, 2) + " %", Note: count(d.ThrottledResponses) + " of " + count(d.RequestsSent) + " requests", Class: warnIf(d.ThrottledResponses > 0)},
	}
	if d.RequestsSent > 0 {
		note := "point writes"
		if d.Batch != "" {
			note = "--batch " + d.Batch
		}
		fs = append(fs, figure{Label: "Records per request", Value: svg.FormatNumber(d.RecordsPerRequest, 2), Note: note})
	}
	r := d.Retries
	fs = append(fs, figure{
		Label: "Retries",
		Value: count(r.Total()),
		Note: fmt.Sprintf("429 throttled %s · 408 timeout %s · 503/449 unavailable %s · connection %s · other %s",
			count(r.Throttled), count(r.Timeout), count(r.Unavailable), count(r.Connection), count(r.Other)),
		Class: warnIf(r.Timeout+r.Unavailable+r.Connection+r.Other > 0),
	})
	if d.TargetRUPerSec <= 0 {
		fs[5].Note = "no target set"
		fs[6].Value, fs[6].Note = "—", "no target set"
	}
	if d.Resumed {
		for i := range fs {
			fs[i].Scope = "whole load"
		}
		fs[len(fs)-1].Scope = "this run" // retries are counted per run
	}
	return fs
}

func warnIf(b bool) string {
	if b {
		return "warn"
	}
	return ""
}

// runsOf is this run followed by the runs to compare, each as a dense
// per-second series.
func runsOf(d *Page) []namedSeries {
	var runs []namedSeries
	if len(d.Series) > 0 || len(d.Compare) == 0 {
		name := "this run"
		if d.Strategy != "" {
			name += " (" + d.Strategy + ")"
		}
		runs = append(runs, namedSeries{name: name, color: runColors[0], secs: dense(d.Series)})
	}
	for _, r := range d.Compare {
		col := r.Color
		if col == "" {
			col = runColors[len(runs)%len(runColors)]
		}
		runs = append(runs, namedSeries{name: r.Name, color: col, secs: dense(r.Series)})
	}
	return runs
}

// maxFill bounds how many missing seconds dense will fill in; beyond a
// week of seconds the input is not a real run and is drawn as given.
const maxFill = 7 * 24 * 3600

// dense sorts a series by time, sums duplicates (report.MergeSeconds),
// and fills seconds with no entry as zeros: a second nobody reported is a
// second nothing happened, and the chart must show that as a dip, not a
// straight line across it.
func dense(in []report.Second) []report.Second {
	if len(in) == 0 {
		return nil
	}
	merged := report.MergeSeconds(append([]report.Second(nil), in...))
	span := merged[len(merged)-1].T - merged[0].T
	if span+1 == int64(len(merged)) || span > maxFill {
		return merged
	}
	out := make([]report.Second, 0, span+1)
	for i, x := range merged {
		if i > 0 {
			for t := merged[i-1].T + 1; t < x.T; t++ {
				out = append(out, report.Second{T: t})
			}
		}
		out = append(out, x)
	}
	return out
}

func ruChart(d *Page, runs []namedSeries) (template.HTML, string) {
	c := svg.Chart{
		Title:      "RU/s per second",
		XLabel:     "elapsed time (m:ss)",
		YLabel:     "RU/s",
		Width:      960,
		Height:     360,
		XDuration:  true,
		LeftMargin: leftMargin,
	}
	switch {
	case len(d.TargetChanges) > 1:
		pts := make([]svg.Point, len(d.TargetChanges))
		for i, c := range d.TargetChanges {
			pts[i] = svg.Point{X: c.AtSeconds, Y: c.RU}
		}
		if end := d.DurationSeconds; end > pts[len(pts)-1].X {
			pts = append(pts, svg.Point{X: end, Y: pts[len(pts)-1].Y})
		}
		c.Series = append(c.Series, svg.Series{Name: "target RU/s (changed during the load)", Color: targetColor, Dashed: true, Step: true, Points: pts})
	case d.TargetRUPerSec > 0:
		c.HLines = []svg.HLine{{Y: d.TargetRUPerSec, Label: "target " + svg.FormatNumber(d.TargetRUPerSec, 0) + " RU/s", Color: targetColor}}
	}
	var throttledSeconds, throttled int64
	for _, r := range runs {
		pts := make([]svg.Point, len(r.secs))
		for j, s := range r.secs {
			pts[j] = svg.Point{X: float64(s.T), Y: s.RU}
			if s.Throttled > 0 {
				throttledSeconds++
				throttled += s.Throttled
			}
		}
		c.Series = append(c.Series, svg.Series{Name: r.name, Color: r.color, Points: pts})
		if limit := limitPoints(r.secs); len(limit) > 0 && len(runs) == 1 {
			c.Series = append(c.Series, svg.Series{Name: "pacer's limit RU/s (below the target after 429s)", Color: limitColor, Dashed: true, Step: true, Points: limit})
		}
		mc := throttleColor
		if len(runs) > 1 {
			mc = r.color
		}
		prefix := ""
		if len(runs) > 1 {
			prefix = r.name + ": "
		}
		c.Markers = append(c.Markers, throttleMarkers(r.secs, mc, prefix)...)
	}
	if longRun(runs) {
		c.XLabel = "elapsed time (h:mm)"
	}
	c.MarkerLegend = "throttled (429) seconds"
	if len(runs) > 1 {
		c.MarkerLegend += ", in the run's colour"
	}
	caption := "No throttled responses: every request was accepted the first time."
	if !hasSeconds(runs) {
		caption = "No per-second figures were recorded for this run."
	}
	if throttled > 0 {
		caption = fmt.Sprintf("▼ marks a second with throttled (429) responses: %s in %s; hover a marker for its count.", count(throttled), human.Plural(throttledSeconds, "second"))
	}
	return template.HTML(c.SVG()), caption
}

// limitPoints is the pacer's limit over a run's seconds; nil when the run
// was not paced.
func limitPoints(secs []report.Second) []svg.Point {
	var pts []svg.Point
	for _, s := range secs {
		if s.LimitRU > 0 {
			pts = append(pts, svg.Point{X: float64(s.T), Y: s.LimitRU})
		}
	}
	return pts
}

// throttleMarkers puts one marker on each second with throttles, or, when
// there are more such seconds than maxMarkers, on each group of
// neighbouring ones, at the group's highest RU/s.
func throttleMarkers(secs []report.Second, color, prefix string) []svg.Marker {
	var hot []report.Second
	for _, s := range secs {
		if s.Throttled > 0 {
			hot = append(hot, s)
		}
	}
	per := (len(hot) + maxMarkers - 1) / maxMarkers
	var ms []svg.Marker
	for i := 0; i < len(hot); i += max(per, 1) {
		g := hot[i:min(i+max(per, 1), len(hot))]
		top, n := g[0], int64(0)
		for _, s := range g {
			n += s.Throttled
			if s.RU > top.RU {
				top = s
			}
		}
		label := fmt.Sprintf("%s%s: %s", prefix, clock(g[0].T), human.Plural(n, "throttled (429) response"))
		if len(g) > 1 {
			label = fmt.Sprintf("%s%s–%s: %s in %s", prefix, clock(g[0].T), clock(g[len(g)-1].T), human.Plural(n, "throttled (429) response"), human.Plural(int64(len(g)), "throttled second"))
		}
		ms = append(ms, svg.Marker{X: float64(top.T), Y: top.RU, Label: label, Color: color})
	}
	return ms
}

func recordsChart(runs []namedSeries) (template.HTML, string) {
	c := svg.Chart{
		Title:      "Records per second",
		XLabel:     "elapsed time (m:ss)",
		YLabel:     "records/s",
		Width:      960,
		Height:     300,
		XDuration:  true,
		LeftMargin: leftMargin,
	}
	if longRun(runs) {
		c.XLabel = "elapsed time (h:mm)"
	}
	var total, seconds int64
	for _, r := range runs {
		pts := make([]svg.Point, len(r.secs))
		for j, s := range r.secs {
			pts[j] = svg.Point{X: float64(s.T), Y: float64(s.Records)}
		}
		c.Series = append(c.Series, svg.Series{Name: r.name, Color: r.color, Points: pts})
	}
	if len(runs) > 0 {
		for _, s := range runs[0].secs {
			total += s.Records
		}
		seconds = int64(len(runs[0].secs))
	}
	caption := ""
	if seconds > 0 {
		caption = fmt.Sprintf("Records acknowledged by the database each second; %s over %s, %s/s on average.",
			count(total), human.Plural(seconds, "second"), svg.FormatNumber(float64(total)/float64(seconds), 0))
	}
	return template.HTML(c.SVG()), caption
}

func hasSeconds(runs []namedSeries) bool {
	for _, r := range runs {
		if len(r.secs) > 0 {
			return true
		}
	}
	return false
}

func longRun(runs []namedSeries) bool {
	for _, r := range runs {
		if n := len(r.secs); n > 0 && r.secs[n-1].T >= 3600 {
			return true
		}
	}
	return false
}

func summarise(r namedSeries, target float64) compareRow {
	var ru, peak float64
	var req, thr int64
	for _, s := range r.secs {
		ru += s.RU
		peak = math.Max(peak, s.RU)
		req += s.Requests
		thr += s.Throttled
	}
	row := compareRow{Color: r.color, Name: r.name, Duration: duration(float64(len(r.secs))),
		RU: svg.FormatNumber(ru, 0), Requests: count(req), Throttled: count(thr), Peak: svg.FormatNumber(peak, 0), Mean: "—", Utilization: "—"}
	if n := len(r.secs); n > 0 {
		mean := ru / float64(n)
		row.Mean = svg.FormatNumber(mean, 0)
		if target > 0 {
			row.Utilization = svg.FormatNumber(100*mean/target, 0) + " %"
		}
	}
	return row
}

func count(n int64) string { return human.Count(n) }

// duration is human.Duration ("1m 8s", "36.7s", "420ms"), with a dash
// for no time at all.
func duration(sec float64) string {
	if sec <= 0 || math.IsNaN(sec) {
		return "—"
	}
	return human.Seconds(sec)
}

func clock(t int64) string {
	if t >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", t/3600, t/60%60, t%60)
	}
	return fmt.Sprintf("%d:%02d", t/60, t%60)
}

var page = template.Must(template.New("report").Parse(pageHTML))

const pageHTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>{{.Title}} — {{.Status}}</title>
<style>
:root { --bg: #ffffff; --fg: #1e293b; --muted: #64748b; --line: #e2e8f0; --card: #f8fafc;
  --ok: #15803d; --ok-bg: #dcfce7; --warn: #b45309; --warn-bg: #fef3c7; --bad: #b91c1c; --bad-bg: #fee2e2;
  --chart-bg: var(--bg); color-scheme: light dark; }
@media (prefers-color-scheme: dark) {
  :root { --bg: #0f172a; --fg: #e2e8f0; --muted: #94a3b8; --line: #334155; --card: #1e293b;
    --ok: #4ade80; --ok-bg: #14532d; --warn: #fbbf24; --warn-bg: #451a03; --bad: #f87171; --bad-bg: #450a0a; }
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg); font: 15px/1.5 system-ui, sans-serif; }
main { max-width: 1000px; margin: 0 auto; padding: 28px 20px 40px; }
header { border-bottom: 1px solid var(--line); padding-bottom: 14px; margin-bottom: 20px; }
h1 { font-size: 24px; margin: 0 10px 4px 0; display: inline-block; vertical-align: middle; overflow-wrap: anywhere; }
h2 { font-size: 17px; margin: 28px 0 10px; }
.status { display: inline-block; vertical-align: middle; font-size: 13px; font-weight: 600; padding: 2px 10px; border-radius: 999px; }
.status.ok { color: var(--ok); background: var(--ok-bg); }
.status.warn { color: var(--warn); background: var(--warn-bg); }
.status.bad { color: var(--bad); background: var(--bad-bg); }
.sub, .muted { color: var(--muted); margin: 2px 0; overflow-wrap: anywhere; }
.next { margin: 6px 0; overflow-wrap: anywhere; }
.scope { color: var(--muted); font-weight: normal; }
.error { border-left: 4px solid var(--bad); background: var(--bad-bg); padding: 8px 12px; margin: 12px 0 0; white-space: pre-wrap; overflow-wrap: anywhere; }
.figures { display: grid; grid-template-columns: repeat(auto-fill, minmax(210px, 1fr)); gap: 10px; margin: 0; }
.figure { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 10px 14px; margin: 0; }
.figure dt { color: var(--muted); font-size: 13px; }
.figure dd { margin: 0; font-size: 22px; font-weight: 600; font-variant-numeric: tabular-nums; }
.figure dd small { display: block; font-size: 12px; font-weight: 400; color: var(--muted); }
.figure.warn dd { color: var(--warn); }
tr.warn td { color: var(--warn); }
figure { margin: 18px 0 0; }
svg.chart { display: block; width: 100%; height: auto; color: var(--fg); }
figcaption { color: var(--muted); font-size: 13px; margin-top: 2px; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { text-align: right; padding: 6px 10px; border-bottom: 1px solid var(--line); }
th:first-child, td:first-child { text-align: left; }
thead th { color: var(--muted); font-weight: 600; font-size: 13px; }
.tag { font-size: 11px; font-weight: 600; text-transform: uppercase; letter-spacing: .04em; padding: 1px 6px; border-radius: 4px; border: 1px solid var(--line); color: var(--muted); }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px; margin-right: 6px; vertical-align: -1px; }
code { font: 13px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; overflow-wrap: anywhere; }
dl.paths { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 0; }
dl.paths dt { color: var(--muted); }
dl.paths dd { margin: 0; }
footer { margin-top: 32px; padding-top: 12px; border-top: 1px solid var(--line); color: var(--muted); font-size: 13px; }
@media print {
  :root { --bg: #fff; --fg: #000; --muted: #444; --line: #ccc; --card: #fff; }
  body { font-size: 12px; }
  main { max-width: none; padding: 0; }
  figure, table, .figures { break-inside: avoid; }
}
</style>
</head>
<body>
<main>
<header>
<h1>{{.Title}}</h1> <span class="status {{.StatusClass}}">{{.Status}}</span>
{{if .Subtitle}}<p class="sub">{{.Subtitle}}</p>{{end}}
{{if .When}}<p class="sub">{{.When}}</p>{{end}}
{{if .Error}}<p class="error">{{.Error}}</p>{{end}}{{if .ResumeCommand}}
<p class="next">Checkpoint saved. Continue with: <code>{{.ResumeCommand}}</code></p>{{end}}
</header>

<dl class="figures">
{{range .Figures}}<div class="figure{{if .Class}} {{.Class}}{{end}}"><dt>{{.Label}}{{if .Scope}} <small class="scope">· {{.Scope}}</small>{{end}}</dt><dd>{{.Value}}{{if .Note}}<small>{{.Note}}</small>{{end}}</dd></div>
{{end}}</dl>

{{if .ThisRun}}<h2 id="this-run">This run and the whole load</h2>
<table>
<thead><tr><th></th><th>This run</th><th>Whole load</th></tr></thead>
<tbody>
{{range .ThisRun}}<tr><td>{{.Label}}</td><td>{{.Naive}}</td><td>{{.Paced}}</td></tr>
{{end}}</tbody>
</table>
<p class="muted">This run resumed an earlier one's checkpoint: the figures above are the whole load (its runs' durations added up); the charts and the naive-versus-paced comparison are this run's.</p>
{{end}}<figure id="ru">
{{.RUChart}}<figcaption>{{.RUCaption}}</figcaption>
</figure>

<figure id="records">
{{.RecordsChart}}{{if .RecordsCaption}}<figcaption>{{.RecordsCaption}}</figcaption>{{end}}
</figure>
{{if .Runs}}
<h2>Runs compared</h2>
<table>
<thead><tr><th>Run</th><th>Time</th><th>RU</th><th>Requests</th><th>429s</th><th>Peak RU/s</th><th>Mean RU/s</th><th>Utilisation</th></tr></thead>
<tbody>
{{range .Runs}}<tr><td><span class="swatch" style="background: {{.Color}}"></span>{{.Name}}</td><td>{{.Duration}}</td><td>{{.RU}}</td><td>{{.Requests}}</td><td>{{.Throttled}}</td><td>{{.Peak}}</td><td>{{.Mean}}</td><td>{{.Utilization}}</td></tr>
{{end}}</tbody>
</table>
{{end}}
{{if .ShowComparison}}
<h2>Naive versus paced</h2>
<table>
<thead><tr><th></th><th>Naive: send everything, resend the 429s <span class="tag">{{.NaiveSource}}</span></th><th>Paced to the target RU/s <span class="tag">{{.PacedSource}}</span></th></tr></thead>
<tbody>
{{range .Comparison}}<tr><td>{{.Label}}</td><td>{{.Naive}}</td><td>{{.Paced}}</td></tr>
{{end}}</tbody>
</table>
{{if .Assumptions}}<p class="muted" id="assumptions">Measured figures come from this run; {{.Assumptions}}.</p>{{else}}<p class="muted">Measured figures come from this run.</p>{{end}}
{{end}}{{if .Shortfall}}<h2 id="shortfall">Why the load ran below its target</h2>
<ul>
{{range .Shortfall}}<li><strong>{{.Title}}</strong>: {{.Evidence}}</li>
{{end}}</ul>
{{end}}{{if .Partitions}}<h2 id="partitions">Physical partitions</h2>
<table>
<thead><tr><th>Partition</th><th>RU</th><th>Records</th><th>429s</th><th>Mean RU/s</th><th>Share RU/s</th><th>Capacity found RU/s</th><th>Pacer's limit RU/s</th><th>Time its RU needs</th></tr></thead>
<tbody>
{{range .Partitions}}<tr{{if .Class}} class="{{.Class}}"{{end}}><td>{{.Partition}}</td><td>{{.RU}}</td><td>{{.Records}}</td><td>{{.Throttled}}</td><td>{{.MeanRU}}</td><td>{{.Share}}</td><td>{{.Capacity}}</td><td>{{.Limit}}</td><td>{{.Busy}}</td></tr>
{{end}}</tbody>
</table>
<p class="muted">Each partition's RU/s over the run against its share of the target; the capacity found is its share less what other traffic took (what the load charged in the seconds it met 429s). No strategy loads a partition faster than its RU at that capacity.</p>
{{end}}
{{if .Reasons}}<h2 id="dead-letters">Dead letters by reason</h2>
{{if .Hint}}<p class="error">{{.Hint}}</p>{{end}}
<table>
<thead><tr><th>Reason</th><th>Records</th><th>First (file:line)</th><th>Its message</th></tr></thead>
<tbody>
{{range .Reasons}}<tr><td><code>{{.Reason}}</code></td><td>{{.Count}}</td><td><code>{{.First}}</code></td><td>{{.Example}}</td></tr>
{{end}}</tbody>
</table>
{{end}}<h2>Files</h2>
<dl class="paths">
<dt>Dead-letter file</dt><dd>{{if .DeadLetterPath}}<code>{{.DeadLetterPath}}</code>{{else}}none{{end}}</dd>
<dt>Checkpoint</dt><dd>{{if .CheckpointPath}}<code>{{.CheckpointPath}}</code>{{else}}none{{end}}</dd>
</dl>
{{if .DeadLetterNote}}<p class="muted">{{.DeadLetterNote}}</p>{{end}}
{{if .Spread}}<p class="muted">{{.Spread}}</p>{{end}}
{{range .Notes}}<p class="muted">{{.}}</p>
{{end}}

<footer>
How to read this: a well-paced load runs its RU/s line just under the dashed target line from start to end, with no ▼ throttle marks; a line far below the target means capacity left idle, marks mean the database refused requests and they had to be resent.
</footer>
</main>
</body>
</html>
`

// WriteFile writes r as one self-contained HTML page with its charts
// (RU/s against the target with 429s marked, records per second).
func WriteFile(path string, r *report.Report) error {
	return writePage(path, &Page{Report: *r, Title: "loader import: " + r.Database + "/" + r.Container})
}

// maxDrawnLoaders bounds the loaders drawn on a fleet's page: the text
// summary lists them all.
const maxDrawnLoaders = 12

// WriteFleet writes a fleet's page: the import page of the whole load,
// with the RU/s of each loader (the first maxDrawnLoaders) drawn beside
// the fleet's against the target.
func WriteFleet(path string, f *report.Fleet) error {
	job := ""
	if f.Fleet != nil {
		job = " " + f.Fleet.Job
	}
	p := &Page{Report: f.Report, Title: fmt.Sprintf("loader fleet%s: %d loaders into %s/%s", job, len(f.Loaders), f.Database, f.Container)}
	for i, l := range f.Loaders {
		if i == maxDrawnLoaders {
			break
		}
		p.Compare = append(p.Compare, Run{Name: l.Label(), Series: l.Series})
	}
	return writePage(path, p)
}

// writePage renders p to the file path.
func writePage(path string, p *Page) error {
	var b bytes.Buffer
	if err := Write(&b, p); err != nil {
		return fmt.Errorf("render HTML report: %w", err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write HTML report: %w", err)
	}
	return nil
}
