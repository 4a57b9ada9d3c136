package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/loader/report"
)

const database = "bench"

// approach is one way of loading scenario A's data, measured from outside:
// wall time by the runner, requests, 429s, RU and items by the emulator.
type approach struct {
	Name         string  `json:"name"`
	Container    string  `json:"container"`
	WallSeconds  float64 `json:"wall_seconds"`
	Records      int64   `json:"records_in"`
	Items        int     `json:"items_in_container"`
	Lost         int64   `json:"records_lost_or_failed"` // input records not in the container
	Requests     int64   `json:"requests"`
	Throttled    int64   `json:"throttled"`
	ThrottledPct float64 `json:"throttled_percent"`
	RU           float64 `json:"ru_consumed"`
	AchievedRU   float64 `json:"achieved_ru_per_sec"` // RU ÷ wall time
	Utilization  float64 `json:"utilization"`         // achieved ÷ provisioned
	ExitCode     int     `json:"exit_code"`
	// Own is what the program itself reported (the loader's --report
	// without its series, or sdkdefault's output).
	Own    any                    `json:"own_report,omitempty"`
	Proc   *procResult            `json:"process"`
	Series []emulator.UsageSecond `json:"series"`
}

func (r *runner) measure(t *target, name, container string, data dataFile, p *procResult) (*approach, error) {
	cs, err := t.container(container)
	if err != nil {
		return nil, err
	}
	a := &approach{
		Name: name, Container: container, WallSeconds: round(p.Wall, 2), ExitCode: p.ExitCode,
		Records: data.Records, Items: cs.Items, Lost: data.Records - int64(cs.Items),
		Requests: cs.Requests, Throttled: cs.Throttled, RU: round(cs.RU, 1), Series: cs.Series, Proc: p,
	}
	if a.Requests > 0 {
		a.ThrottledPct = round(100*float64(a.Throttled)/float64(a.Requests), 2)
	}
	a.AchievedRU = round(a.RU/p.Wall, 1)
	a.Utilization = round(a.AchievedRU/cs.ProvisionedRU, 4)
	return a, nil
}

// importArgs is `loader import` into a fresh container of t.
func (r *runner) importArgs(t *target, container string, ru float64, file string, extra ...string) []string {
	w := func(suffix string) string { return filepath.Join(r.work, container+suffix) }
	args := []string{"import", file, "--endpoint", t.URL, "--key", t.Key, "--database", database,
		"--container", container, "--create-container", "--partition-key", "/tenant",
		"--ru", strconv.FormatFloat(ru, 'f', -1, 64), "--report", w(".report.json"),
		"--checkpoint", w(".ckpt"), "--dead-letter", w(".dead.ndjson"), "--quiet"}
	return append(args, extra...)
}

func (r *runner) readReport(container string) (*report.Report, error) {
	b, err := os.ReadFile(filepath.Join(r.work, container+".report.json"))
	if err != nil {
		return nil, fmt.Errorf("read report: %w", err)
	}
	var rep report.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("parse report: %w", err)
	}
	rep.Series = nil
	return &rep, nil
}

func (r *runner) data(name string, s dataSpec) (dataFile, error) {
	if r.res.Data == nil {
		r.res.Data = map[string]dataFile{}
	}
	if d, ok := r.res.Data[name]; ok {
		return d, nil
	}
	d, err := generate(filepath.Join(r.work, name+".ndjson"), s)
	if err == nil {
		r.res.Data[name] = d
	}
	return d, err
}

func (r *runner) aData() (dataFile, error) {
	return r.data("a", dataSpec{Seed: 1, Records: r.plan.ADocs})
}

// scenarioA: paced, naive and the SDK's defaults on the same data, and the ideal.
type scenarioA struct {
	RU            float64     `json:"provisioned_ru_per_sec"`
	Approaches    []*approach `json:"approaches"`
	IdealSeconds  float64     `json:"ideal_seconds"` // paced run's RU ÷ provisioned RU/s
	PacedVsIdeal  float64     `json:"paced_wall_over_ideal"`
	NaiveVsIdeal  float64     `json:"naive_wall_over_ideal"`
	SDKVsIdeal    float64     `json:"sdk_wall_over_ideal"`
	PacedLoaderRU float64     `json:"paced_loader_reported_utilization"`
	// ModelledNaive is what the paced run's report predicts the naive
	// approach would do (send everything, resend the rejected in passes).
	ModelledNaive *report.NaiveFigures `json:"modelled_naive,omitempty"`
}

func (r *runner) scenarioA(ctx context.Context, t *target) error {
	data, err := r.aData()
	if err != nil {
		return err
	}
	ru := r.plan.RU
	a := &scenarioA{RU: ru}
	r.res.A = a
	for _, v := range []struct{ name, container, strategy string }{
		{"paced", "a-paced", "paced"}, {"naive", "a-naive", "naive"},
	} {
		p, err := run(ctx, r.limit(v.container, r.idealA()), r.loaderBin, r.importArgs(t, v.container, ru, data.Path, "--strategy", v.strategy)...)
		if err != nil {
			return err
		}
		m, err := r.measure(t, v.name, v.container, data, p)
		if err != nil {
			return err
		}
		if rep, err := r.readReport(v.container); err == nil {
			m.Own = rep
			if v.name == "paced" {
				a.PacedLoaderRU = rep.Utilization
				a.ModelledNaive = &rep.Naive
			}
		}
		a.Approaches = append(a.Approaches, m)
		fmt.Fprintf(os.Stderr, "  %s: %.1f s, %d requests, %d throttled, %d lost\n", v.name, m.WallSeconds, m.Requests, m.Throttled, m.Lost)
	}
	p, err := run(ctx, r.limit("a-sdk", r.idealA()), r.sdkBin, "--endpoint", t.URL, "--key", t.Key, "--database", database,
		"--container", "a-sdk", "--partition-key", "/tenant", "--ru", strconv.Itoa(int(ru)), "--workers", "32", data.Path)
	if err != nil {
		return err
	}
	m, err := r.measure(t, "sdk-default", "a-sdk", data, p)
	if err != nil {
		return err
	}
	var own map[string]any
	if json.Unmarshal(p.Stdout, &own) == nil {
		m.Own = own
	}
	a.Approaches = append(a.Approaches, m)
	fmt.Fprintf(os.Stderr, "  sdk-default: %.1f s, %d requests, %d throttled, %d lost\n", m.WallSeconds, m.Requests, m.Throttled, m.Lost)

	paced := a.Approaches[0]
	a.IdealSeconds = round(paced.RU/ru, 2)
	a.PacedVsIdeal = round(paced.WallSeconds/a.IdealSeconds, 4)
	a.NaiveVsIdeal = round(a.Approaches[1].WallSeconds/a.IdealSeconds, 4)
	a.SDKVsIdeal = round(m.WallSeconds/a.IdealSeconds, 4)
	r.check("A", "paced utilisation ≥ 97 %", pct(paced.Utilization), paced.Utilization >= 0.97)
	r.check("A", "paced ≤ 0.5 % of requests throttled", fmt.Sprintf("%.2f %%", paced.ThrottledPct), paced.ThrottledPct <= 0.5)
	r.check("A", "paced completes within 3 % of ideal", fmt.Sprintf("%.1f s vs %.1f s (%+.1f %%)", paced.WallSeconds, a.IdealSeconds, 100*(a.PacedVsIdeal-1)), a.PacedVsIdeal <= 1.03)
	r.check("A", "paced loses nothing", strconv.FormatInt(paced.Lost, 10), paced.Lost == 0)
	return nil
}

// scenarioD: dry-run's estimate against the paced import of the same data.
type scenarioD struct {
	EstimatedSeconds float64 `json:"estimated_seconds"`
	MeasuredSeconds  float64 `json:"measured_seconds"` // scenario A's paced wall time
	ErrorPct         float64 `json:"error_percent"`
	EstimatedRU      float64 `json:"estimated_ru"`
	MeasuredRU       float64 `json:"measured_ru"`
	RUErrorPct       float64 `json:"ru_error_percent"`
	DryRunSeconds    float64 `json:"dry_run_wall_seconds"`
}

func (r *runner) scenarioD(ctx context.Context, t *target) error {
	if r.res.A == nil || len(r.res.A.Approaches) == 0 {
		return fmt.Errorf("needs scenario A")
	}
	data, err := r.aData()
	if err != nil {
		return err
	}
	p, err := run(ctx, r.limit("d-dry-run", 10), r.loaderBin, "dry-run", data.Path, "--endpoint", t.URL, "--key", t.Key,
		"--database", database, "--container", "a-paced", "--json")
	if err != nil {
		return err
	}
	var plan report.DryRun
	if err := json.Unmarshal(p.Stdout, &plan); err != nil {
		return fmt.Errorf("parse dry-run output: %w", err)
	}
	paced := r.res.A.Approaches[0]
	d := &scenarioD{
		EstimatedSeconds: round(plan.EstimatedSeconds, 2), MeasuredSeconds: paced.WallSeconds,
		EstimatedRU: round(plan.EstimatedRU, 1), MeasuredRU: paced.RU, DryRunSeconds: round(p.Wall, 2),
	}
	d.ErrorPct = round(100*(d.EstimatedSeconds/d.MeasuredSeconds-1), 2)
	d.RUErrorPct = round(100*(d.EstimatedRU/d.MeasuredRU-1), 2)
	r.res.D = d
	r.check("D", "dry-run duration within 10 % of the paced import", fmt.Sprintf("%.1f s vs %.1f s (%+.1f %%)", d.EstimatedSeconds, d.MeasuredSeconds, d.ErrorPct), math.Abs(d.ErrorPct) <= 10)
	return nil
}

// scenarioB: a noisy neighbour takes 30 % of the budget mid-run.
type scenarioB struct {
	NoisyRU          float64                `json:"noisy_ru_per_sec"`
	OnAt             float64                `json:"on_at_seconds"`  // after the loader started
	OffAt            float64                `json:"off_at_seconds"` // after the loader started
	Run              *approach              `json:"run"`
	EventRequests    int64                  `json:"event_requests"`
	EventThrottled   int64                  `json:"event_throttled"`
	EventThrottlePct float64                `json:"event_throttled_percent"`
	EventRUPerSec    float64                `json:"event_ru_per_sec"` // the loader's mean during the event
	RecoverySeconds  float64                `json:"recovery_seconds"` // -1: never back to ≥ 95 % before the end
	Series           []emulator.UsageSecond `json:"-"`
}

func (r *runner) scenarioB(ctx context.Context, t *target) error {
	data, err := r.aData()
	if err != nil {
		return err
	}
	ru := r.plan.RU
	b := &scenarioB{NoisyRU: 0.3 * ru, RecoverySeconds: -1}
	r.res.B = b
	var on, off time.Time
	var start time.Time
	eventDone := make(chan error, 1)
	during := func(s time.Time) {
		start = s
		sleepUntil(ctx, s.Add(secs(r.plan.NoisyAt)))
		on = time.Now()
		if err := t.setNoisy(ctx, b.NoisyRU); err != nil {
			eventDone <- err
			return
		}
		sleepUntil(ctx, on.Add(secs(r.plan.NoisyFor)))
		off = time.Now()
		eventDone <- t.setNoisy(context.Background(), 0)
	}
	p, err := run(ctx, r.limitDuring("b-noisy", r.idealA()+r.plan.NoisyFor, during), r.loaderBin, r.importArgs(t, "b-noisy", ru, data.Path)...)
	if err != nil {
		t.setNoisy(context.Background(), 0)
		return err
	}
	if err := <-eventDone; err != nil {
		t.setNoisy(context.Background(), 0)
		return err
	}
	m, err := r.measure(t, "paced, noisy neighbour", "b-noisy", data, p)
	if err != nil {
		return err
	}
	if rep, err := r.readReport("b-noisy"); err == nil {
		m.Own = rep
	}
	b.Run = m
	b.OnAt, b.OffAt = round(on.Sub(start).Seconds(), 2), round(off.Sub(start).Seconds(), 2)
	onSec, offSec := on.Unix(), off.Unix()
	var eventRU float64
	for _, s := range m.Series {
		if s.T >= onSec && s.T <= offSec {
			b.EventRequests += s.Requests
			b.EventThrottled += s.Throttled
			eventRU += s.RU
		}
	}
	b.EventRUPerSec = round(eventRU/float64(offSec-onSec+1), 1)
	if b.EventRequests > 0 {
		b.EventThrottlePct = round(100*float64(b.EventThrottled)/float64(b.EventRequests), 2)
	}
	for _, s := range m.Series {
		if s.T > offSec && s.RU >= 0.95*ru {
			b.RecoverySeconds = round(float64(s.T+1)-float64(off.UnixNano())/1e9, 1)
			break
		}
	}
	r.check("B", "≤ 5 % throttled during the event", fmt.Sprintf("%.2f %% (%d of %d)", b.EventThrottlePct, b.EventThrottled, b.EventRequests), b.EventThrottlePct <= 5)
	recovered := "never"
	if b.RecoverySeconds >= 0 {
		recovered = fmt.Sprintf("%.1f s", b.RecoverySeconds)
	}
	r.check("B", "≥ 95 % of target within 10 s after the event", recovered, b.RecoverySeconds >= 0 && b.RecoverySeconds <= 10)
	r.check("B", "nothing lost", strconv.FormatInt(m.Lost, 10), m.Lost == 0)
	return nil
}

// scenarioC: one partition key holds half the records, 4 physical partitions.
type scenarioC struct {
	Run        *approach       `json:"run"`
	Partitions []partitionRate `json:"partitions"`
}

type partitionRate struct {
	ID        string  `json:"id"`
	Hot       bool    `json:"hot"`
	Items     int     `json:"items"`
	RU        float64 `json:"ru"`
	Requests  int64   `json:"requests"`
	Throttled int64   `json:"throttled"`
	BudgetRU  float64 `json:"budget_ru_per_sec"`
	// ActiveSeconds is from the run's first second to this partition's
	// last; MeanRU is its RU/s over the whole seconds inside that window
	// (the first and last, partial, are left out), Share = MeanRU ÷ budget.
	ActiveSeconds int64   `json:"active_seconds"`
	MeanRU        float64 `json:"mean_ru_per_sec_while_active"`
	Share         float64 `json:"share_of_budget_while_active"`
}

func (r *runner) scenarioC(ctx context.Context, _ *target) error {
	data, err := r.data("c", dataSpec{Seed: 3, Records: r.plan.CDocs, HotShare: 0.5, HotKey: "tenant-hot"})
	if err != nil {
		return err
	}
	t, err := startTarget(r.loaderBin, r.work, "--partitions", "4")
	if err != nil {
		return err
	}
	defer t.stop()
	p, err := run(ctx, r.limit("c-skew", float64(r.plan.CDocs)*6.5/(r.plan.RU/4)), r.loaderBin, r.importArgs(t, "c-skew", r.plan.RU, data.Path)...)
	if err != nil {
		return err
	}
	m, err := r.measure(t, "paced, skewed", "c-skew", data, p)
	if err != nil {
		return err
	}
	if rep, err := r.readReport("c-skew"); err == nil {
		m.Own = rep
	}
	cs, err := t.container("c-skew")
	if err != nil {
		return err
	}
	c := &scenarioC{Run: m}
	r.res.C = c
	var first int64
	if len(m.Series) > 0 {
		first = m.Series[0].T
	}
	hot := 0
	for i, p := range cs.Partitions {
		if p.Items > cs.Partitions[hot].Items {
			hot = i
		}
	}
	for i, p := range cs.Partitions {
		pr := partitionRate{ID: p.ID, Hot: i == hot, Items: p.Items, RU: round(p.RU, 1), Requests: p.Requests,
			Throttled: p.Throttled, BudgetRU: cs.PartitionBudgetRU}
		if n := len(p.Series); n > 0 {
			last := p.Series[n-1].T
			pr.ActiveSeconds = last - first + 1
			var sum float64
			for _, s := range p.Series {
				if s.T > first && s.T < last {
					sum += s.RU
				}
			}
			if full := last - first - 1; full > 0 {
				pr.MeanRU = round(sum/float64(full), 1)
				pr.Share = round(pr.MeanRU/pr.BudgetRU, 4)
			}
		}
		c.Partitions = append(c.Partitions, pr)
	}
	r.check("C", "≤ 2 % throttled", fmt.Sprintf("%.2f %%", m.ThrottledPct), m.ThrottledPct <= 2)
	minShare, worst := 1e9, ""
	for _, pr := range c.Partitions {
		if !pr.Hot && pr.Share < minShare {
			minShare, worst = pr.Share, pr.ID
		}
	}
	// 90 % is this benchmark's own bar for "keep their rate"; issue 4 sets no number.
	r.check("C", "non-hot partitions keep ≥ 90 % of their budget while they have work", fmt.Sprintf("lowest %s (partition %s)", pct(minShare), worst), minShare >= 0.9)
	r.check("C", "nothing lost", strconv.FormatInt(m.Lost, 10), m.Lost == 0)
	return nil
}

// scenarioE: the read path on a big file.
type scenarioE struct {
	Bytes          int64   `json:"bytes"`
	Records        int64   `json:"records"`
	WcSeconds      float64 `json:"wc_l_seconds"`
	WcMBps         float64 `json:"wc_l_mb_per_sec"`
	DryRunSeconds  float64 `json:"dry_run_seconds"`
	DryRunMBps     float64 `json:"dry_run_mb_per_sec"`
	DryRunPeakRSS  int64   `json:"dry_run_peak_rss_bytes"`
	JSONBytes      int64   `json:"encoding_json_bytes"`
	JSONSeconds    float64 `json:"encoding_json_seconds"`
	JSONMBps       float64 `json:"encoding_json_mb_per_sec"`
	GenerateSecond float64 `json:"generate_seconds"`
}

func (r *runner) bigData() (dataFile, float64, error) {
	t0 := time.Now()
	d, err := r.data("big", dataSpec{Seed: 5, Bytes: r.plan.BigBytes})
	return d, time.Since(t0).Seconds(), err
}

func (r *runner) scenarioE(ctx context.Context, _ *target) error {
	data, genSecs, err := r.bigData()
	if err != nil {
		return err
	}
	e := &scenarioE{Bytes: data.Bytes, Records: data.Records, GenerateSecond: round(genSecs, 1)}
	r.res.E = e
	mb := float64(data.Bytes) / 1e6
	// The file was just written, so every reader below finds it in the
	// page cache: these are CPU rates, not disk rates.
	p, err := run(ctx, procOpts{}, "wc", "-l", data.Path)
	if err != nil {
		return err
	}
	e.WcSeconds, e.WcMBps = round(p.Wall, 2), round(mb/p.Wall, 0)
	p, err = run(ctx, r.limit("e-dry-run", 30), r.loaderBin, "dry-run", data.Path, "--partition-key", "/tenant", "--ru", "5000", "--json")
	if err != nil {
		return err
	}
	if p.ExitCode != 0 {
		return fmt.Errorf("dry-run exited %d", p.ExitCode)
	}
	e.DryRunSeconds, e.DryRunMBps, e.DryRunPeakRSS = round(p.Wall, 2), round(mb/p.Wall, 0), p.PeakRSS
	n, s, err := decodeBaseline(data.Path, r.plan.JSONBytes)
	if err != nil {
		return err
	}
	e.JSONBytes, e.JSONSeconds, e.JSONMBps = n, round(s, 2), round(float64(n)/1e6/s, 0)
	return nil
}

// scenarioF: peak RSS and the target's writes/s importing the big file unthrottled.
type scenarioF struct {
	Run               *approach `json:"run"`
	PeakRSS           int64     `json:"peak_rss_bytes"`
	WritesPerSec      float64   `json:"writes_per_sec"` // records written ÷ the loader's duration
	CheckpointSaves   int64     `json:"checkpoint_saves"`
	CheckpointSeconds float64   `json:"checkpoint_seconds"`
	CheckpointShare   float64   `json:"checkpoint_share"` // checkpoint_seconds ÷ duration_seconds
}

func (r *runner) scenarioF(ctx context.Context, _ *target) error {
	data, _, err := r.bigData()
	if err != nil {
		return err
	}
	// A target of its own: the big file's documents stay in its memory.
	t, err := startTarget(r.loaderBin, r.work)
	if err != nil {
		return err
	}
	defer t.stop()
	p, err := run(ctx, r.limitRSS("f-big", float64(data.Records)/5000), r.loaderBin, r.importArgs(t, "f-big", r.plan.UnlimitedRU, data.Path)...)
	if err != nil {
		return err
	}
	m, err := r.measure(t, "paced, unthrottled, big file", "f-big", data, p)
	if err != nil {
		return err
	}
	m.Series = nil
	f := &scenarioF{Run: m, PeakRSS: p.PeakRSS}
	r.res.F = f
	rep, err := r.readReport("f-big")
	if err != nil {
		return err
	}
	m.Own = rep
	if rep.DurationSeconds > 0 {
		f.WritesPerSec = round(float64(rep.RecordsWritten)/rep.DurationSeconds, 0)
		f.CheckpointShare = round(rep.CheckpointSeconds/rep.DurationSeconds, 5)
	}
	f.CheckpointSaves, f.CheckpointSeconds = rep.CheckpointSaves, rep.CheckpointSeconds
	r.check("F", "peak RSS < 100 MB", fmt.Sprintf("%.1f MB", float64(f.PeakRSS)/1e6), f.PeakRSS < 100e6)
	r.check("F", "nothing lost", strconv.FormatInt(m.Lost, 10), m.Lost == 0)
	return nil
}

// scenarioG: checkpoint overhead, default checkpointing against (almost)
// none, unthrottled, alternating A B A B so drift on a shared machine
// falls on both arms.
type scenarioG struct {
	Records      int64     `json:"records_per_run"`
	DefaultRate  float64   `json:"default_records_per_sec"`
	NoCkptRate   float64   `json:"no_checkpoint_records_per_sec"`
	OverheadPct  float64   `json:"overhead_percent"` // 1 − default ÷ none
	DefaultRates []float64 `json:"default_runs_records_per_sec"`
	NoCkptRates  []float64 `json:"no_checkpoint_runs_records_per_sec"`
	DefaultSaves int64     `json:"default_checkpoint_saves"`
	DefaultCkptS float64   `json:"default_checkpoint_seconds"`
	NoCkptSaves  int64     `json:"no_checkpoint_saves"`
}

func (r *runner) scenarioG(ctx context.Context, _ *target) error {
	data, err := r.data("g", dataSpec{Seed: 7, Records: r.plan.GDocs})
	if err != nil {
		return err
	}
	t, err := startTarget(r.loaderBin, r.work)
	if err != nil {
		return err
	}
	defer t.stop()
	g := &scenarioG{Records: data.Records}
	r.res.G = g
	var secs [2]float64
	for i := range 4 {
		arm := i % 2
		container := fmt.Sprintf("g-default-%d", i/2+1)
		var extra []string
		if arm == 1 {
			container = fmt.Sprintf("g-nockpt-%d", i/2+1)
			extra = []string{"--checkpoint-interval", "1h", "--checkpoint-every", "1000000000"}
		}
		if _, err := run(ctx, r.limit(container, float64(data.Records)/5000), r.loaderBin, r.importArgs(t, container, r.plan.UnlimitedRU, data.Path, extra...)...); err != nil {
			return err
		}
		rep, err := r.readReport(container)
		if err != nil {
			return err
		}
		if rep.RecordsWritten != data.Records || rep.DurationSeconds <= 0 {
			return fmt.Errorf("%s wrote %d of %d records", container, rep.RecordsWritten, data.Records)
		}
		secs[arm] += rep.DurationSeconds
		rate := round(float64(rep.RecordsWritten)/rep.DurationSeconds, 0)
		if arm == 0 {
			g.DefaultRates = append(g.DefaultRates, rate)
			g.DefaultSaves += rep.CheckpointSaves
			g.DefaultCkptS += rep.CheckpointSeconds
		} else {
			g.NoCkptRates = append(g.NoCkptRates, rate)
			g.NoCkptSaves += rep.CheckpointSaves
		}
	}
	g.DefaultRate = round(2*float64(data.Records)/secs[0], 0)
	g.NoCkptRate = round(2*float64(data.Records)/secs[1], 0)
	g.DefaultCkptS = round(g.DefaultCkptS, 4)
	g.OverheadPct = round(100*(1-g.DefaultRate/g.NoCkptRate), 2)
	return nil
}

// limit gives a child three times what it should take, plus a minute,
// before the runner stops it and keeps its goroutine dump.
func (r *runner) limit(name string, expectSeconds float64) procOpts {
	return procOpts{Timeout: secs(3*expectSeconds + 60), DumpTo: filepath.Join(r.work, name+".stack.txt")}
}

func (r *runner) limitDuring(name string, expectSeconds float64, during func(time.Time)) procOpts {
	o := r.limit(name, expectSeconds)
	o.During = during
	return o
}

func (r *runner) limitRSS(name string, expectSeconds float64) procOpts {
	o := r.limit(name, expectSeconds)
	o.SampleRSS = true
	return o
}

// idealA is scenario A's expected duration: ~10.15 RU per document.
func (r *runner) idealA() float64 { return float64(r.plan.ADocs) * 10.15 / r.plan.RU }

func sleepUntil(ctx context.Context, t time.Time) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(t)):
	}
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func round(v float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(v*p) / p
}

func pct(f float64) string { return fmt.Sprintf("%.1f %%", 100*f) }

// scenarioH: transactional batches (issue 14). Unthrottled, the loader's
// own CPU (getrusage user+sys of the child) per record written and its
// records/s with --batch auto against --batch off, alternating auto, off,
// auto, off on the same target so drift on a shared machine falls on both
// arms; on key-sorted data (HPerKey records per key) and on unique keys.
// Then the keyed data paced at the plan's RU/s, with scenario A's criteria.
type scenarioH struct {
	Records int64     `json:"records_per_run"`
	PerKey  int       `json:"records_per_key"`
	Keyed   batchArm  `json:"keyed"`
	Unique  batchArm  `json:"unique_keys"`
	Paced   *approach `json:"keyed_paced"`
	// PacedRecordsPerRequest is the paced run's records per request.
	PacedRecordsPerRequest float64 `json:"keyed_paced_records_per_request"`
}

// batchArm compares --batch auto with --batch off on one data set.
type batchArm struct {
	Auto batchRuns `json:"auto"`
	Off  batchRuns `json:"off"`
	// CPURatio is auto's CPU per record over off's; RateRatio auto's
	// records/s over off's.
	CPURatio  float64 `json:"cpu_per_record_auto_over_off"`
	RateRatio float64 `json:"records_per_sec_auto_over_off"`
}

type batchRuns struct {
	CPUMicros         []float64 `json:"cpu_us_per_record"`
	RecordsPerSec     []float64 `json:"records_per_sec"`
	RecordsPerRequest float64   `json:"records_per_request"`
	// Mean CPU per record and records/s over the runs (total ÷ total).
	MeanCPUMicros float64 `json:"mean_cpu_us_per_record"`
	MeanRate      float64 `json:"mean_records_per_sec"`
	cpu, secs     float64
	records       int64
}

func (r *runner) scenarioH(ctx context.Context, shared *target) error {
	h := &scenarioH{Records: int64(r.plan.HDocs), PerKey: 40}
	r.res.H = h
	keyed, err := r.data("h-keyed", dataSpec{Seed: 8, Records: r.plan.HDocs, PerKey: h.PerKey})
	if err != nil {
		return err
	}
	unique, err := r.data("h-unique", dataSpec{Seed: 9, Records: r.plan.HDocs, Unique: true})
	if err != nil {
		return err
	}
	t, err := startTarget(r.loaderBin, r.work)
	if err != nil {
		return err
	}
	defer t.stop()
	for _, set := range []struct {
		name string
		data dataFile
		arm  *batchArm
	}{{"keyed", keyed, &h.Keyed}, {"unique", unique, &h.Unique}} {
		for i := range 4 {
			mode, runs := "auto", &set.arm.Auto
			if i%2 == 1 {
				mode, runs = "off", &set.arm.Off
			}
			container := fmt.Sprintf("h-%s-%s-%d", set.name, mode, i/2+1)
			p, err := run(ctx, r.limit(container, float64(set.data.Records)/1000), r.loaderBin,
				r.importArgs(t, container, r.plan.UnlimitedRU, set.data.Path, "--batch", mode)...)
			if err != nil {
				return err
			}
			rep, err := r.readReport(container)
			if err != nil {
				return err
			}
			if rep.RecordsWritten != set.data.Records || rep.DurationSeconds <= 0 {
				return fmt.Errorf("%s wrote %d of %d records", container, rep.RecordsWritten, set.data.Records)
			}
			cpu := p.UserCPU + p.SysCPU
			runs.CPUMicros = append(runs.CPUMicros, round(1e6*cpu/float64(rep.RecordsWritten), 1))
			runs.RecordsPerSec = append(runs.RecordsPerSec, round(float64(rep.RecordsWritten)/rep.DurationSeconds, 0))
			runs.RecordsPerRequest = rep.RecordsPerRequest
			runs.cpu += cpu
			runs.secs += rep.DurationSeconds
			runs.records += rep.RecordsWritten
			fmt.Fprintf(os.Stderr, "  %s --batch %s: %.0f µs CPU per record, %.0f records/s, %.2f records per request\n",
				set.name, mode, runs.CPUMicros[len(runs.CPUMicros)-1], runs.RecordsPerSec[len(runs.RecordsPerSec)-1], rep.RecordsPerRequest)
		}
		for _, runs := range []*batchRuns{&set.arm.Auto, &set.arm.Off} {
			runs.MeanCPUMicros = round(1e6*runs.cpu/float64(runs.records), 1)
			runs.MeanRate = round(float64(runs.records)/runs.secs, 0)
		}
		set.arm.CPURatio = round(set.arm.Auto.MeanCPUMicros/set.arm.Off.MeanCPUMicros, 3)
		set.arm.RateRatio = round(set.arm.Auto.MeanRate/set.arm.Off.MeanRate, 2)
	}
	r.check("H", "keyed data: CPU per record with batches ≤ 1/4 of --batch off",
		fmt.Sprintf("%.1f vs %.1f µs (×%.3f)", h.Keyed.Auto.MeanCPUMicros, h.Keyed.Off.MeanCPUMicros, h.Keyed.CPURatio), h.Keyed.CPURatio <= 0.25)
	r.check("H", "keyed data: records/s with batches ≥ 3× --batch off",
		fmt.Sprintf("%.0f vs %.0f (×%.2f)", h.Keyed.Auto.MeanRate, h.Keyed.Off.MeanRate, h.Keyed.RateRatio), h.Keyed.RateRatio >= 3)
	// Unique keys send exactly the same requests either way: the bar
	// allows the run-to-run noise of a shared machine (5 %).
	r.check("H", "unique keys: --batch auto no slower than off (within 5 %)",
		fmt.Sprintf("%.0f vs %.0f records/s (×%.2f)", h.Unique.Auto.MeanRate, h.Unique.Off.MeanRate, h.Unique.RateRatio), h.Unique.RateRatio >= 0.95)
	r.check("H", "unique keys: --batch auto no more CPU than off (within 5 %)",
		fmt.Sprintf("%.1f vs %.1f µs per record (×%.3f)", h.Unique.Auto.MeanCPUMicros, h.Unique.Off.MeanCPUMicros, h.Unique.CPURatio), h.Unique.CPURatio <= 1.05)

	// Paced, batched: scenario A's criteria on the keyed data.
	ru := r.plan.RU
	ideal := float64(keyed.Records) * 10.15 / ru
	p, err := run(ctx, r.limit("h-paced", ideal), r.loaderBin, r.importArgs(shared, "h-paced", ru, keyed.Path, "--batch", "auto")...)
	if err != nil {
		return err
	}
	m, err := r.measure(shared, "paced, --batch auto", "h-paced", keyed, p)
	if err != nil {
		return err
	}
	if rep, err := r.readReport("h-paced"); err == nil {
		m.Own = rep
		h.PacedRecordsPerRequest = rep.RecordsPerRequest
	}
	m.Series = nil
	h.Paced = m
	idealSecs := m.RU / ru
	r.check("H", "keyed, paced with batches: utilisation ≥ 97 %", pct(m.Utilization), m.Utilization >= 0.97)
	r.check("H", "keyed, paced with batches: ≤ 0.5 % of requests throttled", fmt.Sprintf("%.2f %% of %d requests", m.ThrottledPct, m.Requests), m.ThrottledPct <= 0.5)
	r.check("H", "keyed, paced with batches: within 3 % of ideal", fmt.Sprintf("%.1f s vs %.1f s (%+.1f %%)", m.WallSeconds, idealSecs, 100*(m.WallSeconds/idealSecs-1)), m.WallSeconds/idealSecs <= 1.03)
	r.check("H", "keyed, paced with batches: loses nothing", strconv.FormatInt(m.Lost, 10), m.Lost == 0)
	return nil
}
