package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/epk"
)

// scenarioN: a live container. The load paces to the container's
// throughput (no --ru); 5 s in it is raised 2,000 → 4,000 RU/s through the
// SDK, 15 s in cut back to 2,000. Measured by the emulator: the new
// target's utilisation from 5 s after the raise to the cut, and the 429s
// in the 10 s after the cut; by the loader's report: when it followed.
type scenarioN struct {
	Run          *approach `json:"run"`
	RaiseAt      float64   `json:"raise_at_seconds"`
	CutAt        float64   `json:"cut_at_seconds"`
	FollowRaise  float64   `json:"target_followed_raise_after_seconds"`
	FollowCut    float64   `json:"target_followed_cut_after_seconds"`
	RaisedUtil   float64   `json:"utilization_of_4000_from_5s_after_raise"`
	CutThrottled float64   `json:"throttled_percent_10s_after_cut"`
	CutRequests  int64     `json:"requests_10s_after_cut"`
	TargetSteps  any       `json:"target_changes"`
}

const (
	nLow, nHigh    = 2000, 4000
	nRaise, nCutAt = 5.0, 15.0
	nContainer     = "n-live"
)

func (r *runner) scenarioN(ctx context.Context, t *target) error {
	// ~5 s at 2,000, 10 s at 4,000, then ~10 s at 2,000: ~80,000 RU.
	data, err := r.data("n", dataSpec{Seed: 8, Records: 8000})
	if err != nil {
		return err
	}
	cc, err := createContainer(ctx, t, nContainer, nLow)
	if err != nil {
		return err
	}
	set := func(ru int32) error {
		_, err := cc.ReplaceThroughput(context.Background(), azcosmos.NewManualThroughputProperties(ru), nil)
		return err
	}
	h := &scenarioN{}
	r.res.N = h
	var start, raised, cut time.Time
	eventDone := make(chan error, 1)
	during := func(s time.Time) {
		start = s
		sleepUntil(ctx, s.Add(secs(nRaise)))
		raised = time.Now()
		if err := set(nHigh); err != nil {
			eventDone <- err
			return
		}
		sleepUntil(ctx, s.Add(secs(nCutAt)))
		cut = time.Now()
		eventDone <- set(nLow)
	}
	w := func(suffix string) string { return filepath.Join(r.work, nContainer+suffix) }
	args := []string{"import", data.Path, "--endpoint", t.URL, "--key", t.Key, "--database", database,
		"--container", nContainer, "--report", w(".report.json"),
		"--checkpoint", w(".ckpt"), "--dead-letter", w(".dead.ndjson"), "--quiet",
		// Point writes: the 429 criterion is a share of requests.
		"--batch", "off"}
	p, err := run(ctx, r.limitDuring(nContainer, 40, during), r.loaderBin, args...)
	if err != nil {
		return err
	}
	if err := <-eventDone; err != nil {
		return err
	}
	m, err := r.measure(t, "paced, throughput changed", nContainer, data, p)
	if err != nil {
		return err
	}
	rep, err := r.readReport(nContainer)
	if err != nil {
		return err
	}
	m.Own = rep
	h.Run = m
	h.RaiseAt, h.CutAt = round(raised.Sub(start).Seconds(), 2), round(cut.Sub(start).Seconds(), 2)
	h.TargetSteps = rep.TargetChanges
	h.FollowRaise, h.FollowCut = -1, -1
	// The report's times are from the loader's own start.
	for _, c := range rep.TargetChanges {
		at := rep.StartedAt.Add(secs(c.AtSeconds))
		if c.RU == nHigh && h.FollowRaise < 0 {
			h.FollowRaise = round(at.Sub(raised).Seconds(), 2)
		}
		if c.RU == nLow && at.After(cut) && h.FollowCut < 0 {
			h.FollowCut = round(at.Sub(cut).Seconds(), 2)
		}
	}
	sum := func(from, to int64) (ru float64, req, thr, n int64) {
		for _, s := range m.Series {
			if s.T >= from && s.T < to {
				ru, req, thr, n = ru+s.RU, req+s.Requests, thr+s.Throttled, n+1
			}
		}
		return
	}
	ru, _, _, n := sum(raised.Unix()+6, cut.Unix())
	if n > 0 {
		h.RaisedUtil = round(ru/float64(n)/nHigh, 4)
	}
	_, req, thr, _ := sum(cut.Unix(), cut.Unix()+10)
	h.CutRequests = req
	if req > 0 {
		h.CutThrottled = round(100*float64(thr)/float64(req), 2)
	}
	r.check("N", "target follows a raise within 5 s", fmt.Sprintf("%.1f s", h.FollowRaise), h.FollowRaise >= 0 && h.FollowRaise <= 5)
	r.check("N", "≥ 95 % of the new 4,000 RU/s from 5 s after the raise", pct(h.RaisedUtil), h.RaisedUtil >= 0.95)
	r.check("N", "≤ 2 % throttled in the 10 s after the cut", fmt.Sprintf("%.2f %% (%d of %d)", h.CutThrottled, thr, req), h.CutThrottled <= 2)
	r.check("N", "nothing lost", fmt.Sprint(m.Lost), m.Lost == 0)
	return nil
}

// scenarioS: partition splits under load, paced to the container's
// throughput (4,000 RU/s), point writes (the 429 criterion is a share of
// requests). Run 1 splits its one partition in two 5 s in, on uniform
// keys; run 2 starts with two partitions and splits both 5 s in (2 → 4)
// while one key holds half the records. The local target sends no 410: the
// loader learns of a split from its 5 s ranges read or from 429s
// concentrating on one partition, as a client of the gateway does.
// Measured by the emulator from 5 s after the split to the load's last
// whole second: run 1 the container's utilisation; run 2 that of the
// partition holding the hot key, which bounds a skewed load (at 4
// partitions it holds ~62 % of the RU with a quarter of the throughput);
// and the 429s in the 10 s after the split.
type scenarioS struct {
	Uniform *splitRun `json:"split_1_to_2_uniform"`
	Skewed  *splitRun `json:"split_2_to_4_skewed"`
}

type splitRun struct {
	Run        *approach `json:"run"`
	SplitAt    float64   `json:"split_at_seconds"`
	Partitions any       `json:"partition_changes"`
	// Util is the container's (uniform), while every partition still
	// had records to write, or the hot key's partition's (skewed)
	// utilisation from 5 s after the split. ContainerUtil is the
	// container's to the end of the load: its last seconds are the
	// child with fewer records done and the other writing alone at its
	// half of the target, which no pacing can change.
	Util          float64 `json:"utilization_from_5s_after_split"`
	ContainerUtil float64 `json:"container_utilization_from_5s_after_split"`
	// BusyUntil is the second (unix) the first partition ran out of
	// records; the uniform Util is measured up to it.
	BusyUntil int64   `json:"every_partition_busy_until"`
	Throttled float64 `json:"throttled_percent_10s_after_split"`
	Requests  int64   `json:"requests_10s_after_split"`
}

const (
	sRU      = 4000
	sSplitAt = 5.0
	sHotKey  = "tenant-hot"
)

func (r *runner) scenarioS(ctx context.Context, t *target) error {
	h := &scenarioS{}
	r.res.S = h
	var err error
	// ~10 RU a record: ~25 s at 4,000 RU/s.
	if h.Uniform, err = r.splitRun(ctx, t, "s-split-1to2", dataSpec{Seed: 10, Records: 10000}, 0, 1); err != nil {
		return err
	}
	// The hot partition bounds it: ~5 s at 2 partitions, then ~25 s.
	h.Skewed, err = r.splitRun(ctx, t, "s-split-2to4", dataSpec{Seed: 11, Records: 5000, HotShare: 0.5, HotKey: sHotKey}, 1, 2)
	return err
}

// splitRun loads data into a fresh container split before times before
// the load and during times sSplitAt seconds in.
func (r *runner) splitRun(ctx context.Context, t *target, name string, spec dataSpec, before, during int) (*splitRun, error) {
	data, err := r.data(name, spec)
	if err != nil {
		return nil, err
	}
	if _, err := createContainer(ctx, t, name, sRU); err != nil {
		return nil, err
	}
	for range before {
		if err := t.split(ctx, name); err != nil {
			return nil, err
		}
	}
	h := &splitRun{}
	var start, split time.Time
	splitDone := make(chan error, 1)
	w := func(suffix string) string { return filepath.Join(r.work, name+suffix) }
	args := []string{"import", data.Path, "--endpoint", t.URL, "--key", t.Key, "--database", database,
		"--container", name, "--report", w(".report.json"),
		"--checkpoint", w(".ckpt"), "--dead-letter", w(".dead.ndjson"), "--quiet", "--batch", "off"}
	p, err := run(ctx, r.limitDuring(name, 40, func(s time.Time) {
		start = s
		sleepUntil(ctx, s.Add(secs(sSplitAt)))
		split = time.Now()
		for range during {
			if err := t.split(ctx, name); err != nil {
				splitDone <- err
				return
			}
		}
		splitDone <- nil
	}), r.loaderBin, args...)
	if err != nil {
		return nil, err
	}
	if err := <-splitDone; err != nil {
		return nil, err
	}
	hot := spec.HotShare > 0
	parts := 1 + before + during // each split adds one partition
	what := fmt.Sprintf("split %d → %d", 1+before, parts)
	m, err := r.measure(t, "paced, "+what, name, data, p)
	if err != nil {
		return nil, err
	}
	rep, err := r.readReport(name)
	if err != nil {
		return nil, err
	}
	m.Own = rep
	h.Run, h.Partitions = m, rep.PartitionChanges
	h.SplitAt = round(split.Sub(start).Seconds(), 2)
	from, to := split.Unix()+int64(sSplitAt)+1, rep.FinishedAt.Unix()
	perSec := func(series []emulator.UsageSecond, to int64) float64 {
		var ru float64
		for _, s := range series {
			if s.T >= from && s.T < to {
				ru += s.RU
			}
		}
		return ru / float64(max(to-from, 1))
	}
	cs, err := t.container(name)
	if err != nil {
		return nil, err
	}
	h.ContainerUtil = round(perSec(m.Series, to)/sRU, 4)
	// The first partition's last second with a write (partial: left out).
	h.BusyUntil = to
	for _, pt := range cs.Partitions {
		last := int64(0)
		for _, s := range pt.Series {
			if s.RU > 0 {
				last = max(last, s.T)
			}
		}
		h.BusyUntil = min(h.BusyUntil, last)
	}
	h.Util = round(perSec(m.Series, h.BusyUntil)/sRU, 4)
	if hot {
		key := epk.Of([]any{sHotKey})
		for _, pt := range cs.Partitions {
			if epk.Compare(key, pt.MinInclusive) >= 0 && (pt.MaxExclusive == epk.Max || epk.Compare(key, pt.MaxExclusive) < 0) {
				h.Util = round(perSec(pt.Series, to)/(sRU/float64(parts)), 4)
			}
		}
	}
	var req, thr int64
	for _, s := range m.Series {
		if s.T >= split.Unix() && s.T < split.Unix()+10 {
			req, thr = req+s.Requests, thr+s.Throttled
		}
	}
	h.Requests = req
	if req > 0 {
		h.Throttled = round(100*float64(thr)/float64(req), 2)
	}
	seen := len(rep.PartitionChanges) > 0 && rep.PartitionChanges[len(rep.PartitionChanges)-1].Partitions == parts
	if hot {
		r.check("S", what+", one key half the records: ≥ 95 % of the hot key's partition from 5 s after", pct(h.Util)+fmt.Sprintf(" (container %s)", pct(h.ContainerUtil)), h.Util >= 0.95)
		r.check("S", what+": the loader saw the new partitions", fmt.Sprint(rep.PartitionChanges), seen)
	} else {
		r.check("S", what+": ≥ 95 % of 4,000 RU/s from 5 s after, while both children had records", pct(h.Util)+
			fmt.Sprintf(" (%d s; to the end %s)", h.BusyUntil-from, pct(h.ContainerUtil)), h.Util >= 0.95)
	}
	r.check("S", what+": ≤ 2 % throttled in the 10 s after", fmt.Sprintf("%.2f %% (%d of %d)", h.Throttled, thr, req), h.Throttled <= 2)
	r.check("S", what+": nothing lost", fmt.Sprint(m.Lost), m.Lost == 0)
	return h, nil
}
