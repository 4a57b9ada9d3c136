package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/cosmosloader/loader/loader/report"
)

// scenarioV (issue 39): the naive run the paced run's report models,
// against the loader's own --strategy naive run of the same input on the
// same target, in the three cases where a model that ignored skew, other
// traffic or the path was wrong: a hot key, a noisy neighbour, a long
// path.
type scenarioV struct {
	RU         float64      `json:"provisioned_ru_per_sec"`
	Partitions int          `json:"partitions"`
	Cases      []naiveModel `json:"cases"`
}

// naiveModel is one case: the model from the paced run, what the naive
// run measured (its own report and the target's counts), and the paced
// run for scale.
type naiveModel struct {
	Name     string              `json:"name"`
	Modelled report.NaiveFigures `json:"modelled"`
	// Measured are the naive run's requests and 429s as the target
	// counted them, and its wall time.
	MeasuredRequests  int64   `json:"measured_requests"`
	MeasuredThrottled int64   `json:"measured_throttled"`
	MeasuredSeconds   float64 `json:"measured_seconds"`
	// PacedSeconds is the paced run's duration by its report, as
	// MeasuredSeconds is the naive run's.
	PacedSeconds float64 `json:"paced_seconds"`
	// ETAs are the paced run's progress lines from 3 s on: the ETA it
	// showed against the time its load actually had left;
	// ETAWorstErrorPct the farthest of them, in per cent of the time left
	// (the last second's lines left out); ETAWorstBeyondPct the farthest
	// once one progress interval is allowed for the lines' granularity
	// (the engine measures once a second, and the drain takes a moment),
	// the rule e2e/numbers_test.go holds the ETA to.
	ETAs              []etaSample `json:"etas,omitempty"`
	ETAWorstErrorPct  float64     `json:"eta_worst_error_percent"`
	ETAWorstBeyondPct float64     `json:"eta_worst_error_beyond_interval_percent"`
	// Errors are modelled ÷ measured − 1, in per cent.
	RequestsErrorPct  float64   `json:"requests_error_percent"`
	ThrottledErrorPct float64   `json:"throttled_error_percent"`
	SecondsErrorPct   float64   `json:"seconds_error_percent"`
	Paced             *approach `json:"paced"`
	Naive             *approach `json:"naive"`
}

func (r *runner) scenarioV(ctx context.Context, _ *target) error {
	const ru, parts = 4000.0, 4
	q := &scenarioV{RU: ru, Partitions: parts}
	r.res.V = q
	uniform, err := r.data("q", dataSpec{Seed: 21, Records: r.plan.QDocs})
	if err != nil {
		return err
	}
	hot, err := r.data("q-hot", dataSpec{Seed: 22, Records: r.plan.QDocs, HotShare: 0.5, HotKey: "tenant-hot"})
	if err != nil {
		return err
	}
	for _, c := range []struct {
		name, container string
		data            dataFile
		target          []string
	}{
		{"hot key (half the records on one key)", "q-hot", hot, nil},
		{"noisy neighbour (1,600 of 4,000 RU/s taken)", "q-noisy", uniform, []string{"--noisy-ru", "1600"}},
		{"path of 100 + ≤ 200 ms", "q-path", uniform, []string{"--latency", "100ms", "--latency-jitter", "200ms"}},
	} {
		nm, err := r.naiveCase(ctx, c.name, c.container, c.data, append([]string{"--partitions", fmt.Sprint(parts), "--ru", fmt.Sprint(ru)}, c.target...))
		if err != nil {
			return err
		}
		q.Cases = append(q.Cases, *nm)
		fmt.Fprintf(os.Stderr, "  %s: modelled %d requests, %d throttled, %.1f s; measured %d, %d, %.1f s; paced %.1f s\n", c.name,
			nm.Modelled.Requests, nm.Modelled.Throttled, nm.Modelled.Seconds, nm.MeasuredRequests, nm.MeasuredThrottled, nm.MeasuredSeconds, nm.PacedSeconds)
		// 429s a hundredth of the requests or fewer apart agree whatever
		// their ratio: a naive run on a long path meets one or two.
		throttlesAgree := math.Abs(nm.ThrottledErrorPct) <= 25 ||
			math.Abs(float64(nm.Modelled.Throttled-nm.MeasuredThrottled)) <= 0.01*float64(max(nm.MeasuredRequests, 1))
		r.check("V", c.name+": modelled naive within 25 % of the measured run (requests, 429s, time)",
			fmt.Sprintf("%+.0f %%, %+.0f %% (%s against %s), %+.0f %%", nm.RequestsErrorPct, nm.ThrottledErrorPct,
				n0(float64(nm.Modelled.Throttled)), n0(float64(nm.MeasuredThrottled)), nm.SecondsErrorPct),
			math.Abs(nm.RequestsErrorPct) <= 25 && throttlesAgree && math.Abs(nm.SecondsErrorPct) <= 25)
		r.check("V", c.name+": the paced run's ETA from 3 s within 30 % of the time left",
			fmt.Sprintf("worst %.0f %% beyond a second (%.0f %% without that allowance) over %d progress lines", nm.ETAWorstBeyondPct, nm.ETAWorstErrorPct, len(nm.ETAs)),
			len(nm.ETAs) > 0 && nm.ETAWorstBeyondPct <= 30)
	}
	return nil
}

// naiveCase loads data paced and then with --strategy naive, each into a
// container of its own on one target started with targetArgs.
func (r *runner) naiveCase(ctx context.Context, name, container string, data dataFile, targetArgs []string) (*naiveModel, error) {
	t, err := startTarget(r.loaderBin, r.work, targetArgs...)
	if err != nil {
		return nil, err
	}
	defer t.stop()
	nm := &naiveModel{Name: name}
	expect := float64(data.Records) * 10 / 1000 // the hot partition's share, at worst
	for _, strategy := range []string{"paced", "naive"} {
		cont := container + "-" + strategy
		// The progress events, as JSON lines, every second: the ETA's.
		args := append(withoutQuiet(r.importArgs(t, cont, 4000, data.Path, "--strategy", strategy)), "--log-format", "json")
		p, err := run(ctx, r.limit(cont, expect), r.loaderBin, args...)
		if err != nil {
			return nil, err
		}
		m, err := r.measure(t, strategy, cont, data, p)
		if err != nil {
			return nil, err
		}
		rep, err := r.readReport(cont)
		if err != nil {
			return nil, err
		}
		m.Own = rep
		if strategy == "paced" {
			nm.Paced, nm.Modelled, nm.PacedSeconds = m, rep.Naive, rep.DurationSeconds
			nm.ETAs, nm.ETAWorstErrorPct, nm.ETAWorstBeyondPct = etaAccuracy(p.Stderr, rep.DurationSeconds)
			continue
		}
		nm.Naive, nm.MeasuredRequests, nm.MeasuredThrottled, nm.MeasuredSeconds = m, m.Requests, m.Throttled, rep.DurationSeconds
	}
	errPct := func(model, measured float64) float64 {
		if measured == 0 {
			return 0
		}
		return round(100*(model/measured-1), 1)
	}
	nm.RequestsErrorPct = errPct(float64(nm.Modelled.Requests), float64(nm.MeasuredRequests))
	nm.ThrottledErrorPct = errPct(float64(nm.Modelled.Throttled), float64(nm.MeasuredThrottled))
	nm.SecondsErrorPct = errPct(nm.Modelled.Seconds, nm.MeasuredSeconds)
	return nm, nil
}

// etaSample is one progress line's ETA against the time actually left.
type etaSample struct {
	AtSeconds   float64 `json:"at_seconds"`
	ETASeconds  float64 `json:"eta_seconds"`
	LeftSeconds float64 `json:"left_seconds"`
}

// etaAccuracy reads a --log-format json run's progress lines and sets
// each ETA from 3 s on against the time the run had left (its duration
// less the line's elapsed time): the farthest, in per cent of the time
// left, without the last second's lines, and the farthest once a progress
// interval is allowed, with them.
func etaAccuracy(stderr []byte, duration float64) (out []etaSample, worst, beyond float64) {
	const interval = 1.0 // seconds between the engine's progress events
	for _, line := range strings.Split(string(stderr), "\n") {
		var ev struct {
			Event   string   `json:"event"`
			Elapsed float64  `json:"elapsed_s"`
			ETA     *float64 `json:"eta_s"`
		}
		if json.Unmarshal([]byte(line), &ev) != nil || ev.Event != "progress" || ev.ETA == nil || ev.Elapsed < 3 {
			continue
		}
		left := duration - ev.Elapsed
		if left <= 0 {
			continue
		}
		off := math.Abs(*ev.ETA - left)
		beyond = max(beyond, 100*max(off-interval, 0)/left)
		if left <= 1 {
			continue // the last second: any error is a large share of it
		}
		out = append(out, etaSample{AtSeconds: ev.Elapsed, ETASeconds: *ev.ETA, LeftSeconds: round(left, 2)})
		worst = max(worst, 100*off/left)
	}
	return out, round(worst, 1), round(beyond, 1)
}

// withoutQuiet is args without --quiet.
func withoutQuiet(args []string) []string {
	var out []string
	for _, a := range args {
		if a != "--quiet" {
			out = append(out, a)
		}
	}
	return out
}

// rows are the results table's rows for scenario Q.
func (q *scenarioV) rows() [][2]string {
	var out [][2]string
	for _, c := range q.Cases {
		out = append(out, [2]string{"naive model vs `--strategy naive`, " + c.Name,
			fmt.Sprintf("modelled %s requests, %s throttled, %.1f s; measured %s, %s, %.1f s (%s); paced %.1f s, its ETA from 3 s within %.0f %% of the time left beyond a second's allowance (%.0f %% without it)",
				n0(float64(c.Modelled.Requests)), n0(float64(c.Modelled.Throttled)), c.Modelled.Seconds,
				n0(float64(c.MeasuredRequests)), n0(float64(c.MeasuredThrottled)), c.MeasuredSeconds,
				strings.Join([]string{fmt.Sprintf("%+.0f %%", c.RequestsErrorPct), fmt.Sprintf("%+.0f %%", c.ThrottledErrorPct), fmt.Sprintf("%+.0f %%", c.SecondsErrorPct)}, ", "),
				c.PacedSeconds, c.ETAWorstBeyondPct, c.ETAWorstErrorPct)})
	}
	return out
}
