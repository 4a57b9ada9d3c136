package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cosmosloader/loader/internal/coord/fleetsim"
	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/human"
	"github.com/cosmosloader/loader/loader/report/svg"
)

// results is bench/results.json.
type results struct {
	Plan         plan                `json:"plan"`
	Machine      machine             `json:"machine"`
	StartedAt    time.Time           `json:"started_at"`
	FinishedAt   time.Time           `json:"finished_at"`
	TotalSeconds float64             `json:"total_seconds"`
	Data         map[string]dataFile `json:"data"`
	Checks       []check             `json:"checks"`
	Errors       []string            `json:"errors,omitempty"`
	A            *scenarioA          `json:"a_side_by_side,omitempty"`
	B            *scenarioB          `json:"b_noisy_neighbour,omitempty"`
	C            *scenarioC          `json:"c_skew,omitempty"`
	D            *scenarioD          `json:"d_dry_run_accuracy,omitempty"`
	E            *scenarioE          `json:"e_read_path,omitempty"`
	F            *scenarioF          `json:"f_memory,omitempty"`
	G            *scenarioG          `json:"g_checkpoint_overhead,omitempty"`
	K            *scenarioK          `json:"k_key_sorted_export,omitempty"`
	L            []*pathRun          `json:"l_long_path,omitempty"`
	M            *pathRun            `json:"m_busy_machine,omitempty"`
	H            *scenarioH          `json:"h_batches,omitempty"`
	N            *scenarioN          `json:"n_live_throughput,omitempty"`
	S            *scenarioS          `json:"s_splits,omitempty"`
	P            *scenarioP          `json:"p_fleet,omitempty"`
	O            *scenarioO          `json:"o_storage_outage,omitempty"`
	Q            *scenarioQ          `json:"q_fleet_sorted_export,omitempty"`
	W            *fleetsim.Result    `json:"w_simulated_fleet,omitempty"`
	R            *scenarioR          `json:"r_range_batches,omitempty"`
	V            *scenarioV          `json:"v_naive_model,omitempty"`
}

// check is one pass criterion of issue 4 (or this benchmark's own, where
// the issue sets no number: see the criterion text).
type check struct {
	Scenario  string `json:"scenario"`
	Criterion string `json:"criterion"`
	Measured  string `json:"measured"`
	Pass      bool   `json:"pass"`
}

func (r *runner) check(scenario, criterion, measured string, pass bool) {
	r.res.Checks = append(r.res.Checks, check{scenario, criterion, measured, pass})
	fmt.Fprintf(os.Stderr, "  %s %s: %s\n", passFail(pass), criterion, measured)
}

func passFail(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// markdown is the results table, printed on stdout.
func (res *results) markdown() string {
	var b strings.Builder
	m := res.Machine
	fmt.Fprintf(&b, "\n<!-- bench/run (%s) on %d × %s, %.0f GB, %s, %s, load %s at start; %.0f s in all -->\n\n",
		res.Plan.Name, m.NProc, m.CPU, m.MemoryGB, m.Kernel, m.GoVersion, m.LoadAvg, res.TotalSeconds)
	if a := res.A; a != nil {
		d := res.Data["a"]
		fmt.Fprintf(&b, "**Side by side** — %s documents (%.0f bytes on average, %s RU in all), one %s RU/s container each, local target with ±5 %% charge noise:\n\n",
			n0(float64(d.Records)), float64(d.Bytes)/float64(d.Records), n0(a.Approaches[0].RU), n0(a.RU))
		b.WriteString("| approach | wall time | requests | 429s | lost or failed | achieved RU/s | utilisation |\n")
		b.WriteString("|---|--:|--:|--:|--:|--:|--:|\n")
		names := map[string]string{"paced": "loader (paced, default)", "naive": "loader `--strategy naive`", "sdk-default": "azcosmos defaults, 32 goroutines"}
		for _, ap := range a.Approaches {
			fmt.Fprintf(&b, "| %s | %.1f s | %s | %s (%.1f %%) | %d | %s | %s |\n",
				names[ap.Name], ap.WallSeconds, n0(float64(ap.Requests)), n0(float64(ap.Throttled)), ap.ThrottledPct, ap.Lost, n0(ap.AchievedRU), pct(ap.Utilization))
		}
		fmt.Fprintf(&b, "| ideal (total RU ÷ RU/s) | %.1f s | %s | 0 | 0 | %s | 100 %% |\n", a.IdealSeconds, n0(float64(d.Records)), n0(a.RU))
		if n := a.ModelledNaive; n != nil {
			fmt.Fprintf(&b, "| naive as the loader's report models it (%d passes) | %.1f s | %s | %s | – | – | – |\n", n.Passes, n.Seconds, n0(float64(n.Requests)), n0(float64(n.Throttled)))
		}
		b.WriteString("\n")
	}
	var rows [][2]string
	if bn := res.B; bn != nil && bn.Run != nil {
		rows = append(rows, [2]string{fmt.Sprintf("noisy neighbour: %s RU/s of %s taken from %.0f s to %.0f s", svg.FormatNumber(bn.NoisyRU, 0), svg.FormatNumber(res.Plan.RU, 0), bn.OnAt, bn.OffAt),
			fmt.Sprintf("loader at %s RU/s during it (%s left), %.2f %% throttled; ≥ 95 %% of target %.1f s after; %d lost", n0(bn.EventRUPerSec), n0(res.Plan.RU-bn.NoisyRU), bn.EventThrottlePct, bn.RecoverySeconds, bn.Run.Lost)})
	}
	if c := res.C; c != nil && c.Run != nil {
		var hot, cold []string
		var hotRU float64
		for _, p := range c.Partitions {
			v := fmt.Sprintf("%s (%.0f %%)", n0(p.MeanRU), 100*p.Share)
			if p.Hot {
				hot, hotRU = append(hot, v), p.RU
			} else {
				cold = append(cold, v)
			}
		}
		budget := res.Plan.RU / float64(len(c.Partitions))
		rows = append(rows, [2]string{fmt.Sprintf("skew: half the records on one key, %d partitions × %s RU/s", len(c.Partitions), svg.FormatNumber(budget, 0)),
			fmt.Sprintf("RU/s while active: hot %s, others %s; %.2f %% throttled; %.1f s (hot partition alone: %.1f s)",
				strings.Join(hot, ", "), strings.Join(cold, ", "), c.Run.ThrottledPct, c.Run.WallSeconds, hotRU/budget)})
	}
	if e := res.E; e != nil {
		on := ""
		if e.JSONBytes < e.Bytes {
			on = fmt.Sprintf(", first %.0f MB", float64(e.JSONBytes)/1e6)
		}
		rows = append(rows,
			[2]string{fmt.Sprintf("read path, %.2f GB NDJSON (page cache)", float64(e.Bytes)/1e9),
				fmt.Sprintf("dry-run %s MB/s · `wc -l` %s MB/s · encoding/json into map[string]any %s MB/s (1 goroutine%s)", n0(e.DryRunMBps), n0(e.WcMBps), n0(e.JSONMBps), on)})
	}
	if f := res.F; f != nil {
		rows = append(rows,
			[2]string{"peak RSS importing it (unthrottled)", fmt.Sprintf("%.1f MB", float64(f.PeakRSS)/1e6)},
			[2]string{"local target's writes/s (same run)", n0(f.WritesPerSec)},
			[2]string{"checkpoint time ÷ run time (same run)", fmt.Sprintf("%.2f %% (%d saves, %.3f s)", 100*f.CheckpointShare, f.CheckpointSaves, f.CheckpointSeconds)})
	}
	if g := res.G; g != nil {
		rows = append(rows, [2]string{fmt.Sprintf("checkpointing A/B, %s records unthrottled", n0(float64(g.Records))),
			fmt.Sprintf("default %s rec/s · checkpoints off (1 h) %s rec/s: %.1f %% overhead (2 runs each, alternating)", n0(g.DefaultRate), n0(g.NoCkptRate), g.OverheadPct)})
	}
	if k := res.K; k != nil {
		rows = append(rows, k.rows()...)
	}
	if h := res.H; h != nil {
		for _, arm := range []struct {
			name string
			a    batchArm
		}{{fmt.Sprintf("%d per key, key-sorted", h.PerKey), h.Keyed}, {"unique keys", h.Unique}} {
			rows = append(rows, [2]string{fmt.Sprintf("--batch key vs off, %s records unthrottled, %s", n0(float64(h.Records)), arm.name),
				fmt.Sprintf("CPU %.1f vs %.1f µs per record (×%.2f) · %s vs %s records/s (×%.2f) · %.1f records per request (2 runs each, alternating)",
					arm.a.Auto.MeanCPUMicros, arm.a.Off.MeanCPUMicros, arm.a.CPURatio, n0(arm.a.Auto.MeanRate), n0(arm.a.Off.MeanRate), arm.a.RateRatio, arm.a.Auto.RecordsPerRequest)})
		}
	}
	if rs := res.R; rs != nil {
		rows = append(rows, rs.rows()...)
	}
	rows = append(rows, res.pathRows()...)
	rows = append(rows, res.fleetRows()...)
	rows = append(rows, res.outageRows()...)
	rows = append(rows, res.fleetSortedRows()...)
	if q := res.V; q != nil {
		rows = append(rows, q.rows()...)
	}
	if len(rows) > 0 {
		b.WriteString("| measure | result |\n|---|---|\n")
		for _, r := range rows {
			fmt.Fprintf(&b, "| %s | %s |\n", r[0], r[1])
		}
		b.WriteString("\n")
	}
	if len(res.Checks) > 0 {
		b.WriteString("| scenario | criterion | measured | |\n|---|---|---|---|\n")
		for _, c := range res.Checks {
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", scenarioName[c.Scenario], c.Criterion, c.Measured, passFail(c.Pass))
		}
		b.WriteString("\n")
	}
	for _, e := range res.Errors {
		fmt.Fprintf(&b, "**error:** %s\n\n", e)
	}
	return b.String()
}

var scenarioName = map[string]string{
	"A": "A side by side", "B": "B noisy neighbour", "C": "C skew, 4 partitions",
	"D": "D dry-run accuracy", "E": "E read path", "F": "F memory", "G": "G checkpoints", "H": "H batches", "K": "K key-sorted export",
	"L": "L long path", "M": "M busy machine",
	"N": "N throughput change", "S": "S splits", "P": "P fleet", "O": "O storage outage",
	"Q": "Q fleet, key-sorted export", "R": "R range batches", "V": "V naive model", "W": "W simulated fleet",
}

// chartSVG is RU/s per second of the paced and naive runs of scenario A,
// measured by the target, against the provisioned line, 429s marked: one
// panel each, on one time scale. On one plot both lines sit on the
// provisioned line and hide each other; what tells them apart is the
// 429s, which each panel's title counts.
func (res *results) chartSVG() []byte {
	a := res.A
	colors := map[string]string{"paced": "#2563eb", "naive": "#dc2626"}
	labels := map[string]string{"paced": "loader (paced, default)", "naive": "loader --strategy naive"}
	var panels []svg.Chart
	longest := 0.0
	for _, ap := range a.Approaches {
		if colors[ap.Name] == "" {
			continue // azcosmos defaults: its numbers are in the table and throttles.svg
		}
		c := svg.Chart{
			Title: fmt.Sprintf("%s: %s of %s requests throttled (429), %s", labels[ap.Name],
				n0(float64(ap.Throttled)), n0(float64(ap.Requests)), human.Seconds(ap.WallSeconds)),
			XLabel: "seconds since start",
			YLabel: "RU/s",
			Height: 270,
			HLines: []svg.HLine{{Y: a.RU, Label: fmt.Sprintf("provisioned %s RU/s", n0(a.RU))}},
			// Room above the provisioned line for its label and the 429 marks.
			YMax:         a.RU * 1.3,
			LeftMargin:   72,
			MarkerLegend: "a second with 429s",
		}
		s := svg.Series{Name: labels[ap.Name] + ", RU/s each second", Color: colors[ap.Name], Step: true}
		for _, p := range secondsFromStart(ap.Series) {
			s.Points = append(s.Points, svg.Point{X: p.x, Y: p.s.RU})
			longest = max(longest, p.x+1)
			if p.s.Throttled > 0 {
				// A row of marks above the provisioned line, clear of its label.
				c.Markers = append(c.Markers, svg.Marker{X: p.x + 0.5, Y: a.RU * 1.15,
					Label: fmt.Sprintf("%d throttled (429) of %d requests", p.s.Throttled, p.s.Requests), Color: colors[ap.Name]})
			}
		}
		c.Series = []svg.Series{s}
		panels = append(panels, c)
	}
	for i := range panels {
		panels[i].XMax = longest
	}
	return svg.Stack(fmt.Sprintf("RU/s per second, paced and naive, %s RU/s container (local target, ±5 %% charge noise)", n0(a.RU)), panels...)
}

// throttleChart is the 429s each approach of scenario A received per
// second: where paced and the alternatives differ on this target.
func (res *results) throttleChart() svg.Chart {
	a := res.A
	c := svg.Chart{
		Title:     "Throttled (429) responses per second, same load",
		XLabel:    "time since start",
		YLabel:    "429s per second",
		XDuration: true,
		Height:    260,
	}
	colors := map[string]string{"paced": "#2563eb", "naive": "#dc2626", "sdk-default": "#9333ea"}
	labels := map[string]string{"paced": "loader (paced)", "naive": "loader --strategy naive", "sdk-default": "azcosmos defaults, 32 goroutines"}
	for _, ap := range a.Approaches {
		s := svg.Series{Name: labels[ap.Name], Color: colors[ap.Name], Step: true}
		for _, p := range secondsFromStart(ap.Series) {
			s.Points = append(s.Points, svg.Point{X: p.x, Y: float64(p.s.Throttled)})
		}
		c.Series = append(c.Series, s)
	}
	return c
}

type xSecond struct {
	x float64
	s emulator.UsageSecond
}

// secondsFromStart puts a series on a time axis from its first second,
// filling the seconds the target omits (no requests) with zeros.
func secondsFromStart(series []emulator.UsageSecond) []xSecond {
	if len(series) == 0 {
		return nil
	}
	first := series[0].T
	var out []xSecond
	i := 0
	for t := first; t <= series[len(series)-1].T; t++ {
		s := emulator.UsageSecond{T: t}
		if series[i].T == t {
			s = series[i]
			i++
		}
		out = append(out, xSecond{float64(t - first), s})
	}
	return out
}

// n0 formats a count or rate with thousands separators.
func n0(v float64) string { return svg.FormatNumber(v, 0) }
