package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
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

func isConflict(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusConflict
}
