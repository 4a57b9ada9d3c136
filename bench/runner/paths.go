package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cosmosloader/loader/internal/emulator"
)

// Scenarios L and M of issue 13: a long, jittery network path, and a
// machine kept busy by another CPU-bound process.

// pathRun is one load measured from outside, with the figures issue 13
// judges: utilisation over the whole run (wall time, start-up and the last
// answers' drain included), over its whole seconds in the middle
// (steady), and in the third second since the loader started.
type pathRun struct {
	Name     string    `json:"name"`
	BaseMs   int       `json:"latency_ms"`
	JitterMs int       `json:"jitter_ms"`
	Busy     int       `json:"busy_goroutines,omitempty"`
	RU       float64   `json:"target_ru_per_sec"`
	Run      *approach `json:"run"`
	// SteadyUtilization is the mean RU/s of the whole seconds between the
	// loader's first and last (both partial, left out) ÷ the target.
	SteadyUtilization float64 `json:"steady_utilization"`
	// ThirdSecond is the RU charged in the third wall-clock second since
	// the loader started (the first is partial) ÷ the target.
	ThirdSecond float64 `json:"third_second_of_target"`
	// LoadAvg is /proc/loadavg's 1-minute figure as the load ended.
	LoadAvg string `json:"load_average_at_end,omitempty"`
}

// smallData is documents of ~7.6 RU on the local target (12 indexed
// leaves), the size issue 13's latency figures were measured with.
func (r *runner) smallData(records int) (dataFile, error) {
	return r.data("l", dataSpec{Seed: 13, Records: records, Small: true})
}

// scenarioL: 8,000 RU/s over 200 ms + ≤ 200 ms and 300 ms + ≤ 300 ms.
func (r *runner) scenarioL(ctx context.Context, _ *target) error {
	const ru = 8000.0
	data, err := r.smallData(int(ru * r.plan.PathSeconds / 7.55))
	if err != nil {
		return err
	}
	// Issue 13 asks ≤ 0.5 % throttled at 200 + ≤ 200 ms; at 300 + ≤ 300 ms
	// only the utilisation, and a wider jitter moves more requests across
	// the service's second boundaries: the bench holds it to 1 %.
	for _, c := range []struct {
		base, jitter int
		want         float64
		throttled    float64
	}{{200, 200, 0.97, 0.5}, {300, 300, 0.95, 1}} {
		name := fmt.Sprintf("l-%d-%d", c.base, c.jitter)
		t, err := startTarget(r.loaderBin, r.work, "--latency", fmt.Sprintf("%dms", c.base), "--latency-jitter", fmt.Sprintf("%dms", c.jitter))
		if err != nil {
			return err
		}
		pr, err := r.pathLoad(ctx, t, name, ru, data, 0)
		t.stop()
		if err != nil {
			return err
		}
		pr.BaseMs, pr.JitterMs = c.base, c.jitter
		r.res.L = append(r.res.L, pr)
		label := fmt.Sprintf("%d + ≤ %d ms", c.base, c.jitter)
		r.check("L", label+": utilisation ≥ "+pct(c.want), fmt.Sprintf("%s (steady %s)", pct(pr.Run.Utilization), pct(pr.SteadyUtilization)), pr.Run.Utilization >= c.want)
		r.check("L", fmt.Sprintf("%s: ≤ %g %% throttled", label, c.throttled), fmt.Sprintf("%.2f %%", pr.Run.ThrottledPct), pr.Run.ThrottledPct <= c.throttled)
		r.check("L", label+": ≥ 90 % of target in the 3rd second", pct(pr.ThirdSecond), pr.ThirdSecond >= 0.9)
		r.check("L", label+": nothing lost", strconv.FormatInt(pr.Run.Lost, 10), pr.Run.Lost == 0)
	}
	return nil
}

// scenarioM: a load while CPU-bound goroutines (twice the cores) spin in
// another process, as on a build machine or a shared VM.
func (r *runner) scenarioM(ctx context.Context, t *target) error {
	ru := r.plan.RU
	data, err := r.data("m", dataSpec{Seed: 14, Records: int(ru * r.plan.PathSeconds / 10.15)})
	if err != nil {
		return err
	}
	busy := 2 * runtime.NumCPU()
	pr, err := r.pathLoad(ctx, t, "m-busy", ru, data, busy)
	if err != nil {
		return err
	}
	r.res.M = pr
	r.check("M", fmt.Sprintf("busy machine (%d spinning goroutines, load %s): utilisation ≥ 98 %%", busy, pr.LoadAvg),
		fmt.Sprintf("%s (steady %s), %.2f %% throttled", pct(pr.Run.Utilization), pct(pr.SteadyUtilization), pr.Run.ThrottledPct), pr.Run.Utilization >= 0.98)
	r.check("M", "busy machine: nothing lost", strconv.FormatInt(pr.Run.Lost, 10), pr.Run.Lost == 0)
	return nil
}

// pathLoad imports data into a new container of t at ru RU/s, with busy
// spinning goroutines in a child process alongside when busy > 0.
func (r *runner) pathLoad(ctx context.Context, t *target, name string, ru float64, data dataFile, busy int) (*pathRun, error) {
	pr := &pathRun{Name: name, RU: ru, Busy: busy}
	if busy > 0 {
		stop, err := startSpinner(busy)
		if err != nil {
			return nil, err
		}
		defer stop()
		time.Sleep(2 * time.Second) // let the load average feel it
	}
	var start time.Time
	p, err := run(ctx, r.limitDuring(name, r.plan.PathSeconds, func(s time.Time) { start = s }), r.loaderBin, r.importArgs(t, name, ru, data.Path)...)
	if err != nil {
		return nil, err
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		pr.LoadAvg = strings.Fields(string(b))[0]
	}
	m, err := r.measure(t, name, name, data, p)
	if err != nil {
		return nil, err
	}
	if rep, err := r.readReport(name); err == nil {
		m.Own = rep
	}
	pr.Run = m
	pr.SteadyUtilization, pr.ThirdSecond = steady(m.Series, ru), nthSecond(m.Series, start.Unix()+2)/ru
	pr.SteadyUtilization, pr.ThirdSecond = round(pr.SteadyUtilization, 4), round(pr.ThirdSecond, 4)
	fmt.Fprintf(os.Stderr, "  %s: %.1f s, utilisation %s (steady %s), 3rd second %s, %d requests, %d throttled, %d lost\n",
		name, m.WallSeconds, pct(m.Utilization), pct(pr.SteadyUtilization), pct(pr.ThirdSecond), m.Requests, m.Throttled, m.Lost)
	return pr, nil
}

// steady is the mean RU of a series' whole seconds (all but the first and
// the last) ÷ ru.
func steady(series []emulator.UsageSecond, ru float64) float64 {
	if len(series) < 3 {
		return 0
	}
	sum := 0.0
	first, last := series[0].T, series[len(series)-1].T
	for _, s := range series {
		if s.T > first && s.T < last {
			sum += s.RU
		}
	}
	return sum / float64(last-first-1) / ru
}

func nthSecond(series []emulator.UsageSecond, t int64) float64 {
	for _, s := range series {
		if s.T == t {
			return s.RU
		}
	}
	return 0
}

// startSpinner starts this runner again as a child that keeps n goroutines
// busy until stopped.
func startSpinner(n int) (stop func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("start spinner: %w", err)
	}
	cmd := exec.Command(self, "--spin", strconv.Itoa(n))
	cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(n))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start spinner: %w", err)
	}
	return func() { cmd.Process.Kill(); cmd.Wait() }, nil
}

// spin keeps n goroutines on the CPU for ever: the other process of the
// busy-machine scenario.
func spin(n int) {
	for range n {
		go func() {
			x := uint64(1)
			for {
				x = x*6364136223846793005 + 1442695040888963407
			}
		}()
	}
	select {}
}

// pathRows are scenarios L's and M's lines of the Markdown table.
func (res *results) pathRows() [][2]string {
	var rows [][2]string
	line := func(p *pathRun) string {
		return fmt.Sprintf("%s utilisation (steady %s, 3rd second %s), %.2f %% throttled, %.1f s, %d lost",
			pct(p.Run.Utilization), pct(p.SteadyUtilization), pct(p.ThirdSecond), p.Run.ThrottledPct, p.Run.WallSeconds, p.Run.Lost)
	}
	for _, p := range res.L {
		rows = append(rows, [2]string{fmt.Sprintf("long path: %d ms + ≤ %d ms, %s RU/s, %s records of %.1f RU", p.BaseMs, p.JitterMs, n0(p.RU), n0(float64(p.Run.Records)), p.Run.RU/float64(p.Run.Requests-p.Run.Throttled)), line(p)})
	}
	if p := res.M; p != nil {
		rows = append(rows, [2]string{fmt.Sprintf("busy machine: %d goroutines spinning in another process (load %s), %s RU/s", p.Busy, p.LoadAvg, n0(p.RU)), line(p)})
	}
	return rows
}
