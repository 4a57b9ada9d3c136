package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"

	"github.com/cosmosloader/loader/loader/report"
)

// scenarioK: a key-sorted export — 8 customers in long runs — into 4
// physical partitions × 2,000 RU/s: read front to back (--segments 1), the
// reader parks on one partition's full queue while the others idle; read at
// several places at once (the default) every partition keeps working. The
// same records shuffled show what no order can beat, and dry-run predicts
// each run. Scaled down: 5,000 records per key with --read-ahead 1,024.
type scenarioK struct {
	Keys, PerKey int
	// BoundSeconds is the busiest partition's RU over its budget (from
	// dry-run): no order can beat it.
	BoundSeconds float64     `json:"bound_seconds"`
	Runs         []sortedRun `json:"runs"`
}

type sortedRun struct {
	Name             string    `json:"name"`
	Segments         string    `json:"segments"`
	Run              *approach `json:"run"`
	BoundSeconds     float64   `json:"bound_seconds"`
	OfBound          float64   `json:"share_of_bound"` // bound ÷ wall time
	EstimatedSeconds float64   `json:"dry_run_estimated_seconds"`
	EstimateErrorPct float64   `json:"dry_run_error_percent"`
}

const (
	sortedKeys   = 8
	sortedPerKey = 5000
	sortedRU     = 8000
)

// writeSorted writes the scenario's records: 8 keys × 5,000 sorted by key,
// shuffled, or skewed (one key holds half the records, the rest spread over
// 200 keys; shuffled).
func writeSorted(path string, shuffle, skewed bool) (dataFile, error) {
	rng := rand.New(rand.NewSource(11))
	var lines []string
	for k := 0; k < sortedKeys; k++ {
		for i := 0; i < sortedPerKey; i++ {
			key := fmt.Sprintf("customer-%02d", k)
			if skewed {
				key = "customer-hot"
				if (k*sortedPerKey+i)%2 == 1 {
					key = fmt.Sprintf("customer-%03d", rng.Intn(200))
				}
			}
			doc := map[string]any{
				"id": fmt.Sprintf("c%d-%05d", k, i), "tenant": key,
				"sku": fmt.Sprintf("sku-%d", rng.Intn(5000)), "qty": 1 + rng.Intn(9),
				"amount": math.Round(rng.Float64()*100000) / 100, "note": strings.Repeat("x", 20+rng.Intn(100)),
			}
			b, _ := json.Marshal(doc)
			lines = append(lines, string(b))
		}
	}
	if shuffle {
		rng.Shuffle(len(lines), func(i, j int) { lines[i], lines[j] = lines[j], lines[i] })
	}
	text := strings.Join(lines, "\n") + "\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return dataFile{}, err
	}
	return dataFile{Path: path, Records: int64(len(lines)), Bytes: int64(len(text))}, nil
}

func (r *runner) scenarioK(ctx context.Context, _ *target) error {
	sorted, err := writeSorted(filepath.Join(r.work, "k-sorted.ndjson"), false, false)
	if err != nil {
		return err
	}
	shuffled, err := writeSorted(filepath.Join(r.work, "k-shuffled.ndjson"), true, false)
	if err != nil {
		return err
	}
	skewed, err := writeSorted(filepath.Join(r.work, "k-skewed.ndjson"), true, true)
	if err != nil {
		return err
	}
	if r.res.Data == nil {
		r.res.Data = map[string]dataFile{}
	}
	r.res.Data["k-sorted"], r.res.Data["k-shuffled"], r.res.Data["k-skewed"] = sorted, shuffled, skewed
	t, err := startTarget(r.loaderBin, r.work, "--partitions", "4", "--ru", fmt.Sprint(sortedRU))
	if err != nil {
		return err
	}
	defer t.stop()
	k := &scenarioK{Keys: sortedKeys, PerKey: sortedPerKey}
	r.res.K = k
	for _, c := range []struct {
		name, container, segments string
		data                      dataFile
	}{
		{"sorted, front to back (--segments 1)", "k-before", "1", sorted},
		{"sorted, default segments", "k-after", "", sorted},
		{"shuffled", "k-shuffled", "", shuffled},
		{"skewed (one key holds half), shuffled", "k-skewed", "", skewed},
	} {
		// A quarter of the default read-ahead with a fifth of the issue's
		// records per key: the same ratio of key run to read-ahead as
		// 10,000-record keys at the default, in a quarter of the time.
		extra := []string{"--read-ahead", "1024"}
		if c.segments != "" {
			extra = append(extra, "--segments", c.segments)
		}
		// The container's shape without an endpoint: the local target
		// splits its key space evenly, as dry-run's --partitions does.
		dry := append([]string{"dry-run", c.data.Path, "--ru", fmt.Sprint(sortedRU), "--partitions", "4", "--partition-key", "/tenant", "--json"}, extra...)
		dp, err := run(ctx, r.limit(c.container+"-dry", 10), r.loaderBin, dry...)
		if err != nil {
			return err
		}
		var plan report.DryRun
		if err := json.Unmarshal(dp.Stdout, &plan); err != nil {
			return fmt.Errorf("dry-run %s: %w", c.container, err)
		}
		if c.container != "k-skewed" {
			k.BoundSeconds = plan.BoundSeconds
		}
		args := r.importArgs(t, c.container, sortedRU, c.data.Path, extra...)
		p, err := run(ctx, r.limit(c.container, 2*plan.EstimatedSeconds), r.loaderBin, args...)
		if err != nil {
			return err
		}
		m, err := r.measure(t, c.name, c.container, c.data, p)
		if err != nil {
			return err
		}
		m.Series = nil
		sr := sortedRun{Name: c.name, Segments: c.segments, Run: m, EstimatedSeconds: plan.EstimatedSeconds, BoundSeconds: plan.BoundSeconds}
		if m.WallSeconds > 0 && plan.EstimatedSeconds > 0 {
			sr.OfBound = round(plan.BoundSeconds/m.WallSeconds, 4)
			sr.EstimateErrorPct = round(100*(plan.EstimatedSeconds/m.WallSeconds-1), 2)
		}
		k.Runs = append(k.Runs, sr)
		r.check("K", c.name+": dry-run within 10 % of the import", fmt.Sprintf("%.1f s vs %.1f s (%+.1f %%)", plan.EstimatedSeconds, m.WallSeconds, sr.EstimateErrorPct), math.Abs(sr.EstimateErrorPct) <= 10)
		r.check("K", c.name+": nothing lost", fmt.Sprint(m.Lost), m.Lost == 0)
		if c.segments == "" {
			r.check("K", c.name+": within 5 % of the physical bound, ≤ 0.5 % throttled",
				fmt.Sprintf("%s of the bound (%.1f s vs %.1f s), %.2f %% throttled", pct(sr.OfBound), m.WallSeconds, plan.BoundSeconds, m.ThrottledPct),
				sr.OfBound >= 0.95 && m.ThrottledPct <= 0.5)
		}
	}
	return nil
}

// sortedRows are scenario K's lines of the results table.
func (k *scenarioK) rows() [][2]string {
	var rows [][2]string
	for _, s := range k.Runs {
		rows = append(rows, [2]string{
			fmt.Sprintf("input order: %s, %s records, 4 partitions × 2,000 RU/s, --read-ahead 1,024", s.Name, n0(float64(k.Keys*k.PerKey))),
			fmt.Sprintf("%.1f s (%s of the %.1f s bound), %.2f %% throttled, %d lost; dry-run said %.1f s (%+.1f %%)",
				s.Run.WallSeconds, pct(s.OfBound), s.BoundSeconds, s.Run.ThrottledPct, s.Run.Lost, s.EstimatedSeconds, s.EstimateErrorPct),
		})
	}
	return rows
}
