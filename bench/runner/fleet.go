package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/testenv"
)

// scenarioP: a fleet (issue 13). Three loaders share one input's shards and
// the container's throughput through capacity leases on Azurite, each with
// --reserved-ru 150, pacing to the container (no --ru); one is SIGKILLed
// 10 s in. Then the same on a fresh container whose throughput is cut
// 3,000 → 2,000 RU/s 20 s in. Measured by the target: the worst 5-second
// window against the target of those seconds, the 429s, utilisation over
// the load (first start to last exit), records lost.
type scenarioP struct {
	Runs []*fleetRun `json:"runs"`
}

type fleetRun struct {
	Name         string  `json:"name"`
	Container    string  `json:"container"`
	RU           float64 `json:"provisioned_ru_per_sec"`
	CutTo        float64 `json:"cut_to_ru_per_sec,omitempty"`
	KillAt       float64 `json:"kill_at_seconds"`
	CutAt        float64 `json:"cut_at_seconds,omitempty"`
	WallSeconds  float64 `json:"wall_seconds"`
	Records      int64   `json:"records_in"`
	Items        int     `json:"items_in_container"`
	Lost         int64   `json:"records_lost_or_failed"`
	Requests     int64   `json:"requests"`
	Throttled    int64   `json:"throttled"`
	ThrottledPct float64 `json:"throttled_percent"`
	// WorstWindow is the most RU any 5 whole seconds consumed ÷ the
	// target of those seconds.
	WorstWindow   float64                `json:"worst_5s_window_of_target"`
	WorstWindowAt float64                `json:"worst_5s_window_at_seconds"`
	Utilization   float64                `json:"utilization"` // RU ÷ the target's RU over the load's whole seconds
	ExitCodes     []int                  `json:"exit_codes"`
	LoadAvg       string                 `json:"load_average_at_end,omitempty"`
	Series        []emulator.UsageSecond `json:"series"`
}

const (
	pRU, pCutRU      = 3000, 2000
	pKillAt, pCutAt  = 10.0, 20.0
	pLoaders         = 3
	pReservedRU      = "150"
	pLeasePartitions = "6"
)

func (r *runner) scenarioP(ctx context.Context, t *target) error {
	// ~10 RU each: ~40 s at 3,000 RU/s for the whole fleet.
	data, err := r.data("p", dataSpec{Seed: 10, Records: 12000})
	if err != nil {
		return err
	}
	az, err := testenv.StartAzurite(filepath.Join(r.work, "azurite-p"))
	if err != nil {
		return err
	}
	defer az.Stop()
	h := &scenarioP{}
	r.res.P = h
	for _, cut := range []bool{false, true} {
		run, err := r.fleetRun(ctx, t, az, data, cut)
		if err != nil {
			return err
		}
		h.Runs = append(h.Runs, run)
		r.check("P", run.Name+": no 5-second window above the target by more than 2 %",
			fmt.Sprintf("%+.1f %% (from %.0f s)", 100*(run.WorstWindow-1), run.WorstWindowAt), run.WorstWindow <= 1.02)
		r.check("P", run.Name+": ≤ 0.5 % throttled", fmt.Sprintf("%.2f %% (%d of %d)", run.ThrottledPct, run.Throttled, run.Requests), run.ThrottledPct <= 0.5)
		r.check("P", run.Name+": ≥ 95 % utilisation over the load", pct(run.Utilization), run.Utilization >= 0.95)
		r.check("P", run.Name+": exactly the input landed", fmt.Sprintf("%d lost", run.Lost), run.Lost == 0 && run.Items == int(data.Records))
	}
	return nil
}

// fleetRun runs the three loaders on a fresh container, kills the first at
// pKillAt and, with cut, cuts the throughput at pCutAt.
func (r *runner) fleetRun(ctx context.Context, t *target, az *testenv.AzuriteServer, data dataFile, cut bool) (*fleetRun, error) {
	fr := &fleetRun{Name: "one of three killed", Container: "p-fleet", RU: pRU, KillAt: pKillAt, Records: data.Records}
	if cut {
		fr.Name, fr.Container, fr.CutTo, fr.CutAt = "killed, and 3,000 → 2,000 RU/s", "p-fleet-cut", pCutRU, pCutAt
	}
	cc, err := createContainer(ctx, t, fr.Container, pRU)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(data.Path)
	if err != nil {
		return nil, err
	}
	shard := strconv.FormatInt(st.Size()/12+1, 10)
	var wg sync.WaitGroup
	fr.ExitCodes = make([]int, pLoaders)
	errs := make([]error, pLoaders)
	victimCtx, kill := context.WithCancel(ctx)
	defer kill()
	start := time.Now()
	for i := 0; i < pLoaders; i++ {
		w := func(suffix string) string {
			return filepath.Join(r.work, fmt.Sprintf("%s-%d%s", fr.Container, i, suffix))
		}
		args := []string{"import", data.Path, "--endpoint", t.URL, "--key", t.Key, "--database", database,
			"--container", fr.Container, "--report", w(".report.json"),
			"--checkpoint", w(".ckpt"), "--dead-letter", w(".dead.ndjson"), "--quiet",
			"--lease-connection-string", az.ConnectionString(), "--capacity-partitions", pLeasePartitions,
			"--reserved-ru", pReservedRU, "--shard-size", shard, "--batch", "off"}
		lctx := ctx
		if i == 0 {
			lctx = victimCtx // cancelling it SIGKILLs the process
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := run(lctx, r.limit(fmt.Sprintf("%s-%d", fr.Container, i), 60), r.loaderBin, args...)
			if err != nil {
				errs[i] = err
				return
			}
			fr.ExitCodes[i] = p.ExitCode
		}()
	}
	sleepUntil(ctx, start.Add(secs(pKillAt)))
	kill()
	var cutAt time.Time
	if cut {
		sleepUntil(ctx, start.Add(secs(pCutAt)))
		if _, err := cc.ReplaceThroughput(ctx, azcosmos.NewManualThroughputProperties(pCutRU), nil); err != nil {
			return nil, fmt.Errorf("cut throughput: %w", err)
		}
		cutAt = time.Now()
	}
	wg.Wait()
	fr.WallSeconds = round(time.Since(start).Seconds(), 2)
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("loader %d: %w", i, err)
		}
		if i > 0 && fr.ExitCodes[i] != 0 {
			return nil, fmt.Errorf("loader %d exited %d: see %s", i, fr.ExitCodes[i], r.work)
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fr.LoadAvg = string(b[:min(len(b), 14)])
	}
	cs, err := t.container(fr.Container)
	if err != nil {
		return nil, err
	}
	fr.Items, fr.Lost = cs.Items, data.Records-int64(cs.Items)
	fr.Requests, fr.Throttled, fr.Series = cs.Requests, cs.Throttled, cs.Series
	if fr.Requests > 0 {
		fr.ThrottledPct = round(100*float64(fr.Throttled)/float64(fr.Requests), 2)
	}
	targetAt := func(sec int64) float64 { return targetInSecond(sec, cutAt, pRU, pCutRU) }
	bySec := map[int64]float64{}
	for _, s := range cs.Series {
		bySec[s.T] = s.RU
	}
	// Whole seconds from the first start to the last exit.
	first, last := start.Unix()+1, time.Now().Unix()-1
	var ru, target float64
	for s := first; s < last; s++ {
		ru += bySec[s]
		target += targetAt(s)
	}
	if target > 0 {
		fr.Utilization = round(ru/target, 4)
	}
	for s := first; s+5 <= last; s++ {
		var wru, wt float64
		for k := s; k < s+5; k++ {
			wru += bySec[k]
			wt += targetAt(k)
		}
		if w := wru / wt; w > fr.WorstWindow {
			fr.WorstWindow, fr.WorstWindowAt = round(w, 4), float64(s-start.Unix())
		}
	}
	return fr, nil
}

// targetInSecond is the target of unix second sec when it changed from
// before to after at at (zero: never): the second of the change gets each
// in proportion, as the target's budget did.
func targetInSecond(sec int64, at time.Time, before, after float64) float64 {
	switch {
	case at.IsZero() || sec < at.Unix():
		return before
	case sec > at.Unix():
		return after
	}
	f := float64(at.Nanosecond()) / 1e9
	return f*before + (1-f)*after
}

// createContainer creates database/name on t with manual throughput ru.
func createContainer(ctx context.Context, t *target, name string, ru int32) (*azcosmos.ContainerClient, error) {
	cred, err := azcosmos.NewKeyCredential(t.Key)
	if err != nil {
		return nil, err
	}
	c, err := azcosmos.NewClientWithKey(t.URL, cred, nil)
	if err != nil {
		return nil, err
	}
	return testenv.CreateContainer(ctx, c, database, azcosmos.ContainerProperties{ID: name, PartitionKeyDefinition: testenv.TenantKey}, ru)
}

func (res *results) fleetRows() [][2]string {
	if res.P == nil {
		return nil
	}
	var rows [][2]string
	for _, run := range res.P.Runs {
		what := fmt.Sprintf("one SIGKILLed at %.0f s", run.KillAt)
		if run.CutTo > 0 {
			what += fmt.Sprintf(", cut to %s RU/s at %.0f s", n0(run.CutTo), run.CutAt)
		}
		rows = append(rows, [2]string{
			fmt.Sprintf("fleet: 3 loaders, --reserved-ru 150 each, %s RU/s, %s", n0(run.RU), what),
			fmt.Sprintf("worst 5-s window %+.1f %% of the target · %.2f %% throttled · utilisation %s over the load (%.1f s) · %d lost",
				100*(run.WorstWindow-1), run.ThrottledPct, pct(run.Utilization), run.WallSeconds, run.Lost)})
	}
	return rows
}
