package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/cosmosloader/loader/internal/emulator"
)

// Scenario R of issue 42: range batches (--batch auto) on a shuffled file
// of unique keys, against the local target with 4 physical partitions.
// Unthrottled, the loader against the JavaScript SDK's bulk API
// (container.items.executeBulkOperations, all records in one call, from
// the committed npm lock) in alternating rounds; then paced at the plan's
// RU/s, over a 200 ± 100 ms path, and with a hot key.
type scenarioR struct {
	Records int64 `json:"records_per_unthrottled_run"`
	// Loader and JS are the unthrottled runs, in the order they ran
	// (alternating).
	Loader []rangeRun `json:"loader_unthrottled"`
	JS     []rangeRun `json:"javascript_sdk_unthrottled"`
	// Means over the runs (total ÷ total).
	LoaderRate        float64 `json:"loader_records_per_sec"`
	JSRate            float64 `json:"javascript_sdk_records_per_sec"`
	RateRatio         float64 `json:"loader_over_javascript_sdk"`
	LoaderCPUMicros   float64 `json:"loader_cpu_us_per_record"`
	JSCPUMicros       float64 `json:"javascript_sdk_cpu_us_per_record"`
	RequestsPerRecord float64 `json:"loader_requests_per_record"`
	// Paced, Path and Hot are the throttled runs; PathOff is Path's load
	// with point writes (--batch off), for comparison on the same bed.
	Paced   *rangePaced `json:"paced"`
	Path    *rangePaced `json:"paced_200ms_path"`
	PathOff *rangePaced `json:"paced_200ms_path_point_writes"`
	Hot     *rangePaced `json:"paced_hot_key"`
}

// rangeRun is one unthrottled load.
type rangeRun struct {
	Seconds       float64 `json:"seconds"` // the load itself (the report's, or the bulk call's)
	WallSeconds   float64 `json:"wall_seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	CPUMicros     float64 `json:"cpu_us_per_record"`
	Requests      int64   `json:"requests"`
	Lost          int64   `json:"lost"`
	cpu           float64
}

// rangePaced is one paced load: the target's view of it and the figures
// its checks judge.
type rangePaced struct {
	Run *approach `json:"run"`
	// BoundSeconds is the busiest partition's RU ÷ its share: the ideal
	// (with a hot key, what the hot partition alone takes).
	BoundSeconds float64 `json:"bound_seconds"`
	OfBound      float64 `json:"of_bound"` // BoundSeconds ÷ wall time
	// ThrottledOps is the loader's own count of records resent after a
	// 429, ÷ records: a response is throttled when any of its operations
	// was, and a range batch is many operations.
	ThrottledOps      float64 `json:"throttled_operations_per_record"`
	RequestsPerRecord float64 `json:"requests_per_record"`
}

func (r *runner) scenarioR(ctx context.Context, _ *target) error {
	rs := &scenarioR{}
	r.res.R = rs
	data, err := r.data("r-unique", dataSpec{Seed: 42, Records: r.plan.RDocs, Unique: true})
	if err != nil {
		return err
	}
	rs.Records = data.Records
	if err := r.rangesUnthrottled(ctx, rs, data); err != nil {
		return err
	}
	ru := r.plan.RU
	paced, err := r.data("r-paced", dataSpec{Seed: 43, Records: int(ru * r.plan.PathSeconds / 10.15), Unique: true})
	if err != nil {
		return err
	}
	hot, err := r.data("r-hot", dataSpec{Seed: 44, Records: int(ru * r.plan.PathSeconds / 10.15 / 2), Unique: true, HotShare: 0.5, HotKey: "tenant-hot"})
	if err != nil {
		return err
	}
	path := []string{"--latency", "100ms", "--latency-jitter", "200ms"}
	for _, v := range []struct {
		name, batch string
		data        dataFile
		into        **rangePaced
		extra       []string
	}{
		{"r-paced", "auto", paced, &rs.Paced, nil},
		{"r-path", "auto", paced, &rs.Path, path},
		{"r-path-off", "off", paced, &rs.PathOff, path},
		{"r-hot", "auto", hot, &rs.Hot, nil},
	} {
		rp, err := r.rangesPaced(ctx, v.name, v.batch, v.data, v.extra)
		if err != nil {
			return err
		}
		*v.into = rp
		if v.batch != "auto" {
			continue // for comparison only
		}
		label := map[string]string{"r-paced": "paced", "r-path": "paced over 200 ± 100 ms", "r-hot": "paced, one key half the records"}[v.name]
		m := rp.Run
		r.check("R", label+": every record landed", strconv.FormatInt(m.Lost, 10), m.Lost == 0 && m.ExitCode == 0)
		r.check("R", label+": ≤ 0.5 % of requests throttled", fmt.Sprintf("%.2f %% of %d requests (%.3f %% of operations)", m.ThrottledPct, m.Requests, 100*rp.ThrottledOps), m.ThrottledPct <= 0.5)
		r.check("R", label+": ≥ 97 % of the target (of the hot partition's bound with a hot key)", fmt.Sprintf("%s: %.1f s against %.1f s", pct(rp.OfBound), m.WallSeconds, rp.BoundSeconds), rp.OfBound >= 0.97)
	}
	return nil
}

// rangesUnthrottled runs the loader and the JavaScript SDK's bulk API
// over data in alternating rounds on one target of 4 partitions with
// more throughput than this machine can use.
func (r *runner) rangesUnthrottled(ctx context.Context, rs *scenarioR, data dataFile) error {
	t, err := startTarget(r.loaderBin, r.work, "--partitions", "4")
	if err != nil {
		return err
	}
	defer t.stop()
	root, err := os.Getwd() // bench/run runs the runner at the repository's root
	if err != nil {
		return err
	}
	ru := strconv.FormatFloat(r.plan.UnlimitedRU, 'f', -1, 64)
	var loaderCPU, loaderSecs, jsCPU, jsSecs float64
	var requests int64
	for i := range 4 {
		container := fmt.Sprintf("r-unthrottled-%d", i+1)
		var rr rangeRun
		if i%2 == 0 {
			p, err := run(ctx, r.limit(container, float64(data.Records)/1000), r.loaderBin,
				r.importArgs(t, container, r.plan.UnlimitedRU, data.Path, "--batch", "auto")...)
			if err != nil {
				return err
			}
			rep, err := r.readReport(container)
			if err != nil {
				return err
			}
			rr = rangeRun{Seconds: rep.DurationSeconds, WallSeconds: round(p.Wall, 2), cpu: p.UserCPU + p.SysCPU}
		} else {
			// node resolves @azure/cosmos from the repository's node_modules.
			p, err := run(ctx, r.limit(container, float64(data.Records)/500), "node", filepath.Join(root, "bench", "jsbulk.mjs"),
				t.URL, t.Key, database, container, "tenant", ru, data.Path)
			if err != nil {
				return err
			}
			var out struct {
				Records int64   `json:"records"`
				Seconds float64 `json:"seconds"`
			}
			if p.ExitCode != 0 || json.Unmarshal(p.Stdout, &out) != nil || out.Records != data.Records {
				return fmt.Errorf("node bench/jsbulk.mjs: exit %d, %q", p.ExitCode, p.Stdout)
			}
			rr = rangeRun{Seconds: round(out.Seconds, 2), WallSeconds: round(p.Wall, 2), cpu: p.UserCPU + p.SysCPU}
		}
		cs, err := t.container(container)
		if err != nil {
			return err
		}
		rr.Requests, rr.Lost = cs.Requests, data.Records-int64(cs.Items)
		if rr.Lost != 0 || rr.Seconds <= 0 {
			return fmt.Errorf("%s: %d records lost, %.2f s", container, rr.Lost, rr.Seconds)
		}
		rr.RecordsPerSec = round(float64(data.Records)/rr.Seconds, 0)
		rr.CPUMicros = round(1e6*rr.cpu/float64(data.Records), 1)
		who := "loader"
		if i%2 == 0 {
			rs.Loader = append(rs.Loader, rr)
			loaderCPU, loaderSecs, requests = loaderCPU+rr.cpu, loaderSecs+rr.Seconds, requests+rr.Requests
		} else {
			who = "JavaScript SDK"
			rs.JS = append(rs.JS, rr)
			jsCPU, jsSecs = jsCPU+rr.cpu, jsSecs+rr.Seconds
		}
		fmt.Fprintf(os.Stderr, "  %s: %.1f s, %.0f records/s, %.1f µs CPU per record, %d requests\n", who, rr.Seconds, rr.RecordsPerSec, rr.CPUMicros, rr.Requests)
	}
	n := float64(data.Records) * 2
	rs.LoaderRate, rs.JSRate = round(n/loaderSecs, 0), round(n/jsSecs, 0)
	rs.RateRatio = round(rs.LoaderRate/rs.JSRate, 2)
	rs.LoaderCPUMicros, rs.JSCPUMicros = round(1e6*loaderCPU/n, 1), round(1e6*jsCPU/n, 1)
	rs.RequestsPerRecord = round(float64(requests)/n, 4)
	r.check("R", "unique keys, unthrottled: ≤ 0.02 requests per record", fmt.Sprintf("%.4f", rs.RequestsPerRecord), rs.RequestsPerRecord <= 0.02)
	r.check("R", "unique keys, unthrottled: ≤ 40 µs client CPU per record", fmt.Sprintf("%.1f µs (the JavaScript SDK: %.1f)", rs.LoaderCPUMicros, rs.JSCPUMicros), rs.LoaderCPUMicros <= 40)
	r.check("R", "unique keys, unthrottled: ≥ 2× the JavaScript SDK's records/s",
		fmt.Sprintf("%s against %s records/s (×%.2f)", n0(rs.LoaderRate), n0(rs.JSRate), rs.RateRatio), rs.RateRatio >= 2)
	return nil
}

// rangesPaced imports data with --batch batch, paced at the plan's RU/s,
// into a new target of 4 partitions started with extra flags.
func (r *runner) rangesPaced(ctx context.Context, name, batch string, data dataFile, extra []string) (*rangePaced, error) {
	t, err := startTarget(r.loaderBin, r.work, append([]string{"--partitions", "4"}, extra...)...)
	if err != nil {
		return nil, err
	}
	defer t.stop()
	ru := r.plan.RU
	p, err := run(ctx, r.limit(name, float64(data.Records)*10.15/ru), r.loaderBin, r.importArgs(t, name, ru, data.Path, "--batch", batch)...)
	if err != nil {
		return nil, err
	}
	m, err := r.measure(t, name, name, data, p)
	if err != nil {
		return nil, err
	}
	rep, err := r.readReport(name)
	if err != nil {
		return nil, err
	}
	m.Own, m.Series = rep, nil
	cs, err := t.container(name)
	if err != nil {
		return nil, err
	}
	rp := &rangePaced{Run: m, RequestsPerRecord: round(float64(m.Requests)/float64(data.Records), 3),
		ThrottledOps: round(float64(rep.Retries.Throttled)/float64(data.Records), 5)}
	rp.BoundSeconds = round(busiest(cs)/(ru/float64(len(cs.Partitions))), 2)
	rp.OfBound = round(rp.BoundSeconds/m.WallSeconds, 4)
	fmt.Fprintf(os.Stderr, "  %s: %.1f s against a bound of %.1f s (%s), %d requests, %d throttled (%.3f %% of operations), %d lost\n",
		name, m.WallSeconds, rp.BoundSeconds, pct(rp.OfBound), m.Requests, m.Throttled, 100*rp.ThrottledOps, m.Lost)
	return rp, nil
}

// busiest is the most RU one partition of a container took.
func busiest(cs *emulator.ContainerStats) float64 {
	var most float64
	for _, p := range cs.Partitions {
		most = max(most, p.RU)
	}
	return most
}

// rows are scenario R's lines of the results table.
func (rs *scenarioR) rows() [][2]string {
	var out [][2]string
	if len(rs.Loader) > 0 && len(rs.JS) > 0 {
		out = append(out, [2]string{fmt.Sprintf("range batches, %s records of unique keys, unthrottled, 4 partitions", n0(float64(rs.Records))),
			fmt.Sprintf("loader %s vs JavaScript SDK `executeBulkOperations` %s records/s (×%.2f) · CPU %.1f vs %.1f µs per record · %.4f requests per record (%d runs each, alternating)",
				n0(rs.LoaderRate), n0(rs.JSRate), rs.RateRatio, rs.LoaderCPUMicros, rs.JSCPUMicros, rs.RequestsPerRecord, len(rs.Loader))})
	}
	for _, v := range []struct {
		label string
		p     *rangePaced
	}{{"range batches, paced", rs.Paced}, {"range batches, paced, 200 ± 100 ms path", rs.Path},
		{"point writes (`--batch off`), paced, 200 ± 100 ms path, for comparison", rs.PathOff},
		{"range batches, paced, one key half the records", rs.Hot}} {
		if v.p == nil || v.p.Run == nil {
			continue
		}
		m := v.p.Run
		out = append(out, [2]string{v.label,
			fmt.Sprintf("%.1f s against a bound of %.1f s (%s); %d requests (%.3f per record), %.2f %% throttled (%.3f %% of operations); %d lost",
				m.WallSeconds, v.p.BoundSeconds, pct(v.p.OfBound), m.Requests, v.p.RequestsPerRecord, m.ThrottledPct, 100*v.p.ThrottledOps, m.Lost)})
	}
	return out
}
