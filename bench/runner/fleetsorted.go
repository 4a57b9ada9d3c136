package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/cosmosloader/loader/internal/coord/fleetsim"
	"github.com/cosmosloader/loader/internal/testenv"
	"github.com/cosmosloader/loader/loader/report"
)

// scenarioQ: a fleet on a key-sorted export (issue 43). Scenario K's
// sorted file (8 customers in long runs, 4 partitions × 2,000 RU/s), loaded
// by two and then by three loaders sharing the container through capacity
// leases on Azurite and its input through shards. A loader may spend only
// its share of each partition, so the fleet is as fast as one loader only
// if every loader keeps every partition busy to the end: each claims the
// shard farthest from those it reads, and takes work where it is left.
// The bound is dry-run's (no order can beat it); the wall time runs from
// the first loader's start to the last one's exit.
type scenarioQ struct {
	BoundSeconds float64     `json:"bound_seconds"`
	Shards       int         `json:"shards"`
	Runs         []*fleetSet `json:"runs"`
}

type fleetSet struct {
	Loaders      int     `json:"loaders"`
	Container    string  `json:"container"`
	WallSeconds  float64 `json:"wall_seconds"`
	OfBound      float64 `json:"share_of_bound"` // bound ÷ wall time
	Records      int64   `json:"records_in"`
	Lost         int64   `json:"records_lost_or_failed"`
	Requests     int64   `json:"requests"`
	Throttled    int64   `json:"throttled"`
	ThrottledPct float64 `json:"throttled_percent"`
	WorstWindow  float64 `json:"worst_5s_window_of_target"`
	ExitCodes    []int   `json:"exit_codes"`
	// Merged is `loader report` of the loaders' reports, without series.
	Merged *report.Fleet `json:"merged_report,omitempty"`
}

// qShards cuts the sorted file into about this many shards: enough that
// the last ones, each read by one loader at its share of a partition, are
// a small part of the load.
const qShards = 320

func (r *runner) scenarioQ(ctx context.Context, _ *target) error {
	data, err := writeSorted(filepath.Join(r.work, "q-sorted.ndjson"), false, false)
	if err != nil {
		return err
	}
	t, err := startTarget(r.loaderBin, r.work, "--partitions", "4", "--ru", fmt.Sprint(sortedRU))
	if err != nil {
		return err
	}
	defer t.stop()
	az, err := testenv.StartAzurite(filepath.Join(r.work, "azurite-q"))
	if err != nil {
		return err
	}
	defer az.Stop()
	dry := []string{"dry-run", data.Path, "--ru", fmt.Sprint(sortedRU), "--partitions", "4", "--partition-key", "/tenant", "--json", "--read-ahead", "1024"}
	dp, err := run(ctx, r.limit("q-dry", 10), r.loaderBin, dry...)
	if err != nil {
		return err
	}
	var plan report.DryRun
	if err := json.Unmarshal(dp.Stdout, &plan); err != nil {
		return fmt.Errorf("dry-run: %w", err)
	}
	q := &scenarioQ{BoundSeconds: plan.BoundSeconds, Shards: qShards}
	r.res.Q = q
	for _, n := range []int{2, 3} {
		set, err := r.fleetOnSorted(ctx, t, az, data, n, plan.BoundSeconds)
		if err != nil {
			return err
		}
		q.Runs = append(q.Runs, set)
		name := fmt.Sprintf("%d loaders on the sorted export", n)
		r.check("Q", name+": ≥ 95 % of the physical bound",
			fmt.Sprintf("%s (%.1f s vs the %.1f s bound)", pct(set.OfBound), set.WallSeconds, q.BoundSeconds), set.OfBound >= 0.95)
		r.check("Q", name+": no 5-second window above the target by more than 2 %, ≤ 0.5 % throttled",
			fmt.Sprintf("%+.1f %%, %.2f %% throttled", 100*(set.WorstWindow-1), set.ThrottledPct), set.WorstWindow <= 1.02 && set.ThrottledPct <= 0.5)
		r.check("Q", name+": exactly the input landed", fmt.Sprintf("%d lost", set.Lost), set.Lost == 0)
	}
	return nil
}

// fleetOnSorted runs n loaders at once on data into a fresh container.
func (r *runner) fleetOnSorted(ctx context.Context, t *target, az *testenv.AzuriteServer, data dataFile, n int, bound float64) (*fleetSet, error) {
	set := &fleetSet{Loaders: n, Container: fmt.Sprintf("q-fleet-%d", n), Records: data.Records, ExitCodes: make([]int, n)}
	if _, err := createContainer(ctx, t, set.Container, sortedRU); err != nil {
		return nil, err
	}
	shard := strconv.FormatInt(data.Bytes/qShards+1, 10)
	var wg sync.WaitGroup
	errs := make([]error, n)
	var reports []report.NamedReport
	start := time.Now()
	for i := range n {
		w := func(suffix string) string {
			return filepath.Join(r.work, fmt.Sprintf("%s-%d%s", set.Container, i, suffix))
		}
		args := []string{"import", data.Path, "--endpoint", t.URL, "--key", t.Key, "--database", database,
			"--container", set.Container, "--ru", fmt.Sprint(sortedRU), "--read-ahead", "1024",
			"--report", w(".report.json"), "--dead-letter", w(".dead"), "--quiet",
			"--lease-connection-string", az.ConnectionString(), "--capacity-partitions", "12",
			"--shard-size", shard, "--job", set.Container}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := run(ctx, r.limit(fmt.Sprintf("%s-%d", set.Container, i), 2*bound), r.loaderBin, args...)
			if err != nil {
				errs[i] = err
				return
			}
			set.ExitCodes[i] = p.ExitCode
		}()
	}
	wg.Wait()
	set.WallSeconds = round(time.Since(start).Seconds(), 2)
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("loader %d: %w", i, err)
		}
		path := filepath.Join(r.work, fmt.Sprintf("%s-%d.report.json", set.Container, i))
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("loader %d exited %d: %w", i, set.ExitCodes[i], err)
		}
		var rep report.Report
		if err := json.Unmarshal(b, &rep); err != nil {
			return nil, fmt.Errorf("loader %d's report: %w", i, err)
		}
		reports = append(reports, report.NamedReport{Name: filepath.Base(path), Report: &rep})
	}
	if merged, err := report.MergeFleet(reports); err == nil {
		merged.Series = nil
		set.Merged = merged
	}
	if set.WallSeconds > 0 {
		set.OfBound = round(bound/set.WallSeconds, 4)
	}
	cs, err := t.container(set.Container)
	if err != nil {
		return nil, err
	}
	set.Lost = data.Records - int64(cs.Items)
	set.Requests, set.Throttled = cs.Requests, cs.Throttled
	if set.Requests > 0 {
		set.ThrottledPct = round(100*float64(set.Throttled)/float64(set.Requests), 2)
	}
	bySec := map[int64]float64{}
	for _, s := range cs.Series {
		bySec[s.T] = s.RU
	}
	for s := start.Unix() + 1; s+5 <= time.Now().Unix(); s++ {
		var ru float64
		for k := s; k < s+5; k++ {
			ru += bySec[k]
		}
		set.WorstWindow = max(set.WorstWindow, round(ru/(5*sortedRU), 4))
	}
	return set, nil
}

// scenarioW: the fleet simulation of internal/coord/fleetsim at 1,000
// loaders over 10,000 capacity partitions (issue 43): the real lease and
// shard code on a fake clock and an in-memory blob service, with joins, a
// tenth killed, a storage outage, clock skew and a throughput cut. No real
// time is measured; the figures are the simulation's.
func (r *runner) scenarioW(context.Context, *target) error {
	res, err := fleetsim.Run(fleetsim.Full(simLoaders))
	if err != nil {
		return err
	}
	r.res.W = res
	fmt.Fprint(os.Stderr, res)
	for _, g := range res.Goals() {
		r.check("W", g.What, g.Got, g.Met)
	}
	r.check("W", "blob requests at most half a standard storage account's 20,000 a second",
		fmt.Sprintf("%.0f/s (busiest second %.0f/s), %.1f/s a loader", res.RequestsPerSec, res.PeakRequestsPerSec, res.RequestsPerLoaderSec),
		res.RequestsPerSec <= 10000)
	r.check("W", "the busiest second at most three quarters of the account's 20,000 requests",
		fmt.Sprintf("%.0f requests, at %.0f s", res.PeakRequestsPerSec, res.PeakAt),
		res.PeakRequestsPerSec <= 15000)
	return nil
}

// simLoaders is the fleet scenario W simulates.
const simLoaders = 1000

func (res *results) fleetSortedRows() [][2]string {
	var rows [][2]string
	if q := res.Q; q != nil {
		for _, s := range q.Runs {
			rows = append(rows, [2]string{
				fmt.Sprintf("fleet on the key-sorted export: %d loaders, %d shards, 4 partitions × 2,000 RU/s", s.Loaders, q.Shards),
				fmt.Sprintf("%.1f s (%s of the %.1f s bound) · worst 5-s window %+.1f %% · %.2f %% throttled · %d lost",
					s.WallSeconds, pct(s.OfBound), q.BoundSeconds, 100*(s.WorstWindow-1), s.ThrottledPct, s.Lost)})
		}
	}
	if w := res.W; w != nil {
		rows = append(rows, [2]string{
			fmt.Sprintf("simulated fleet: %d loaders, %s capacity partitions (fake clock)", w.Loaders, n0(float64(w.Config.Partitions))),
			fmt.Sprintf("worst 5-s window %+.2f %% · shares %+.1f…%+.1f %% of fair · takeover %.1f s · %.1f blob requests/s a loader, %s/s in all (peak %s/s) · %d lost",
				100*(w.WorstWindow-1), 100*(w.ShareMin-1), 100*(w.ShareMax-1), w.TakeoverSeconds, w.RequestsPerLoaderSec,
				n0(w.RequestsPerSec), n0(w.PeakRequestsPerSec), w.Lost)})
	}
	return rows
}
