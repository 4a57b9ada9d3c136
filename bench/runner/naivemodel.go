package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/cosmosloader/loader/loader/report"
)

// scenarioQ (issue 39): the naive run the paced run's report models,
// against the loader's own --strategy naive run of the same input on the
// same target, in the three cases where a model that ignored skew, other
// traffic or the path was wrong: a hot key, a noisy neighbour, a long
// path.
type scenarioQ struct {
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
	// Errors are modelled ÷ measured − 1, in per cent.
	RequestsErrorPct  float64   `json:"requests_error_percent"`
	ThrottledErrorPct float64   `json:"throttled_error_percent"`
	SecondsErrorPct   float64   `json:"seconds_error_percent"`
	Paced             *approach `json:"paced"`
	Naive             *approach `json:"naive"`
}

func (r *runner) scenarioQ(ctx context.Context, _ *target) error {
	const ru, parts = 4000.0, 4
	q := &scenarioQ{RU: ru, Partitions: parts}
	r.res.Q = q
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
		r.check("Q", c.name+": modelled naive within 25 % of the measured run (requests, 429s, time)",
			fmt.Sprintf("%+.0f %%, %+.0f %%, %+.0f %%", nm.RequestsErrorPct, nm.ThrottledErrorPct, nm.SecondsErrorPct),
			math.Abs(nm.RequestsErrorPct) <= 25 && math.Abs(nm.ThrottledErrorPct) <= 25 && math.Abs(nm.SecondsErrorPct) <= 25)
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
		p, err := run(ctx, r.limit(cont, expect), r.loaderBin, r.importArgs(t, cont, 4000, data.Path, "--strategy", strategy)...)
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

// rows are the results table's rows for scenario Q.
func (q *scenarioQ) rows() [][2]string {
	var out [][2]string
	for _, c := range q.Cases {
		out = append(out, [2]string{"naive model vs `--strategy naive`, " + c.Name,
			fmt.Sprintf("modelled %s requests, %s throttled, %.1f s; measured %s, %s, %.1f s (%s); paced %.1f s",
				n0(float64(c.Modelled.Requests)), n0(float64(c.Modelled.Throttled)), c.Modelled.Seconds,
				n0(float64(c.MeasuredRequests)), n0(float64(c.MeasuredThrottled)), c.MeasuredSeconds,
				strings.Join([]string{fmt.Sprintf("%+.0f %%", c.RequestsErrorPct), fmt.Sprintf("%+.0f %%", c.ThrottledErrorPct), fmt.Sprintf("%+.0f %%", c.SecondsErrorPct)}, ", "),
				c.PacedSeconds)})
	}
	return out
}
