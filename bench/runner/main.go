// Command runner drives the end-to-end benchmark behind bench/README.md's
// results: it starts `loader emulator` children, generates
// deterministic data, runs the scenarios of issues 4 and 7 against them
// with the built loader (and bench/sdkdefault for "what people write"),
// and writes results.json, chart.svg and a Markdown table. bench/run
// builds the binaries and calls it; see bench/README.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// plan sizes a run. Full is the run bench/README.md quotes; quick is a
// smoke test of every scenario.
type plan struct {
	Name string `json:"name"`
	// RU is the provisioned RU/s of scenarios A–C.
	RU float64 `json:"ru"`
	// ADocs is scenario A's (and B's and D's) data: ~10 RU each, so
	// ADocs × 10 ÷ RU is the ideal duration.
	ADocs int `json:"a_docs"`
	// CDocs is the skewed file of scenario C; its hot partition holds
	// ~62 % of the RU and bounds the duration at ~CDocs × 6.3 ÷ (RU/4).
	// It has no duration requirement, so it is half of A's length.
	CDocs int `json:"c_docs"`
	// NoisyAt and NoisyFor place the noisy neighbour of scenario B.
	NoisyAt  float64 `json:"noisy_at_seconds"`
	NoisyFor float64 `json:"noisy_for_seconds"`
	// BigBytes is the read-path and memory file of scenarios E and F.
	BigBytes int64 `json:"big_bytes"`
	// JSONBytes caps the encoding/json baseline of scenario E (it is a
	// rate; the whole file would add ~15 s at ~55 MB/s). 0 = whole file.
	JSONBytes int64 `json:"json_baseline_bytes"`
	// GDocs is the checkpoint A/B file of scenario G.
	GDocs int `json:"g_docs"`
	// UnlimitedRU is the throughput of F's and G's containers: more
	// than this machine can send, so the target is the limit.
	UnlimitedRU float64 `json:"unlimited_ru"`
	// PathSeconds is the ideal length of each load of scenarios L and M.
	PathSeconds float64 `json:"path_seconds"`
	// HDocs is each run of scenario H (batches); the paced run of its
	// keyed data takes about HDocs × 10 ÷ RU seconds.
	HDocs int `json:"h_docs"`
	// QDocs is each file of scenario Q (the naive model against measured
	// naive runs), ~10 RU each into 4 × 1,000 RU/s.
	QDocs int `json:"q_docs"`
	// RDocs is each unthrottled run of scenario R (range batches).
	RDocs int `json:"r_docs"`
}

var (
	fullPlan  = plan{Name: "full", RU: 5000, ADocs: 30000, CDocs: 6000, NoisyAt: 20, NoisyFor: 20, BigBytes: 1e9, JSONBytes: 256e6, GDocs: 50000, UnlimitedRU: 1000000, PathSeconds: 60, HDocs: 20000, QDocs: 6000, RDocs: 50000}
	quickPlan = plan{Name: "quick", RU: 5000, ADocs: 7500, CDocs: 3000, NoisyAt: 5, NoisyFor: 5, BigBytes: 128e6, GDocs: 10000, UnlimitedRU: 1000000, PathSeconds: 10, HDocs: 5000, QDocs: 1500, RDocs: 10000}
)

type runner struct {
	plan      plan
	loaderBin string
	sdkBin    string
	work      string // scratch: data, reports, checkpoints, logs
	res       *results
}

func main() {
	quick := flag.Bool("quick", false, "smoke-test sizes (~2 minutes)")
	loaderBin := flag.String("loader", "", "the built loader binary")
	sdkBin := flag.String("sdkdefault", "", "the built bench/sdkdefault binary")
	work := flag.String("work", "", "scratch directory (data, reports, logs)")
	out := flag.String("out", "bench", "where results.json and chart.svg go")
	only := flag.String("only", "", "comma-separated scenarios to run (A,B,C,D,E,F,G,H,K,L,M,N,S,P,O,Q,R,V,W; D needs A); default all")
	render := flag.String("render", "", "only print the table and redraw the chart of this results.json")
	spinN := flag.Int("spin", 0, "internal: keep this many goroutines busy until killed (scenario M's other process)")
	flag.Parse()
	if *spinN > 0 {
		spin(*spinN)
	}
	if *render != "" {
		if err := rerender(*render, *out); err != nil {
			fmt.Fprintln(os.Stderr, "runner:", err)
			os.Exit(1)
		}
		return
	}
	if *loaderBin == "" || *sdkBin == "" || *work == "" {
		fmt.Fprintln(os.Stderr, "usage: runner --loader BIN --sdkdefault BIN --work DIR [--quick] [--out DIR] [--only A,B,...]\n       runner --render results.json [--out DIR]")
		os.Exit(2)
	}
	p := fullPlan
	if *quick {
		p = quickPlan
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r := &runner{plan: p, loaderBin: *loaderBin, sdkBin: *sdkBin, work: *work}
	if err := r.main(ctx, *out, *only); err != nil {
		fmt.Fprintln(os.Stderr, "runner:", err)
		os.Exit(1)
	}
}

func (r *runner) main(ctx context.Context, out, only string) error {
	start := time.Now()
	r.res = &results{Plan: r.plan, Machine: describeMachine(), StartedAt: start.UTC()}
	want := func(s string) bool { return only == "" || strings.Contains(strings.ToUpper(only), s) }

	shared, err := startTarget(r.loaderBin, r.work)
	if err != nil {
		return err
	}
	defer shared.stop()
	steps := []struct {
		name string
		fn   func(context.Context, *target) error
	}{
		{"A", r.scenarioA}, {"D", r.scenarioD}, {"B", r.scenarioB}, {"C", r.scenarioC},
		{"G", r.scenarioG}, {"H", r.scenarioH}, {"K", r.scenarioK}, {"E", r.scenarioE}, {"F", r.scenarioF},
		{"L", r.scenarioL}, {"M", r.scenarioM}, {"N", r.scenarioN}, {"S", r.scenarioS},
		{"P", r.scenarioP}, {"O", r.scenarioO}, {"Q", r.scenarioQ}, {"R", r.scenarioR}, {"V", r.scenarioV}, {"W", r.scenarioW},
	}
	for _, s := range steps {
		if !want(s.name) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		t0 := time.Now()
		fmt.Fprintf(os.Stderr, "[%s] scenario %s\n", time.Since(start).Round(time.Second), s.name)
		if err := s.fn(ctx, shared); err != nil {
			r.res.Errors = append(r.res.Errors, fmt.Sprintf("scenario %s: %v", s.name, err))
			fmt.Fprintf(os.Stderr, "  scenario %s failed: %v\n", s.name, err)
		}
		fmt.Fprintf(os.Stderr, "  %s took %s\n", s.name, time.Since(t0).Round(time.Second))
	}
	r.res.FinishedAt = time.Now().UTC()
	r.res.TotalSeconds = round(time.Since(start).Seconds(), 1)

	b, err := json.MarshalIndent(r.res, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	if err := os.WriteFile(filepath.Join(out, "results.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return r.res.publish(out)
}

// publish draws the chart and prints the table.
func (res *results) publish(out string) error {
	if res.A != nil {
		if err := os.WriteFile(filepath.Join(out, "chart.svg"), res.chartSVG(), 0o644); err != nil {
			return fmt.Errorf("write chart: %w", err)
		}
		if err := os.WriteFile(filepath.Join(out, "throttles.svg"), res.throttleChart().SVG(), 0o644); err != nil {
			return fmt.Errorf("write chart: %w", err)
		}
	}
	fmt.Print(res.markdown())
	return nil
}

// rerender publishes an earlier run's results again, so the table and
// chart can change form without measuring again.
func rerender(path, out string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read results: %w", err)
	}
	var res results
	if err := json.Unmarshal(b, &res); err != nil {
		return fmt.Errorf("parse results: %w", err)
	}
	return res.publish(out)
}

// machine is what the numbers were measured on.
type machine struct {
	NProc     int     `json:"nproc"`
	CPU       string  `json:"cpu_model"`
	MemoryGB  float64 `json:"memory_gb"`
	Kernel    string  `json:"kernel"`
	GoVersion string  `json:"go_version"`
	Date      string  `json:"date"`
	LoadAvg   string  `json:"load_average_at_start"`
}

func describeMachine() machine {
	m := machine{NProc: runtime.NumCPU(), GoVersion: runtime.Version(), Date: time.Now().UTC().Format(time.RFC3339)}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		fmt.Sscanf(strings.TrimPrefix(strings.SplitN(string(b), "\n", 2)[0], "MemTotal:"), "%d", &kb)
		m.MemoryGB = round(float64(kb)/(1<<20), 1)
	}
	if b, err := exec.Command("uname", "-sr").Output(); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvg = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return m
}
