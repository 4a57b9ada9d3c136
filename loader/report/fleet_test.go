package report

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestMeanLimitIsTheTimeWeightedLimit(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	leases := []LeaseSample{
		{Time: t0.Add(-time.Second), LimitRU: 0},
		{Time: t0, LimitRU: 1000},
		{Time: t0.Add(6 * time.Second), LimitRU: 2000},
	}
	// 6 s at 1,000 and 4 s at 2,000 over 10 s.
	if got := MeanLimit(leases, t0, t0.Add(10*time.Second)); got != 1400 {
		t.Errorf("MeanLimit = %v, want 1400", got)
	}
}

func fleetReport(job string, start time.Time, ru float64, secs ...float64) *Report {
	r := &Report{Status: "finished", Database: "d", Container: "c", TargetRUPerSec: 1000,
		StartedAt: start, FinishedAt: start.Add(time.Duration(len(secs)) * time.Second),
		RecordsWritten: 10, RequestsSent: 10, RUConsumed: ru, Shards: []string{job + "-s"},
		Fleet: &FleetShare{Job: job, Loader: "h/1", Share: 0.5}}
	for i, v := range secs {
		r.Series = append(r.Series, Second{T: int64(i), RU: v})
	}
	return r
}

// A fleet's reports add up: figures summed, seconds aligned by wall-clock
// time, the fleet's window against the target from them.
func TestMergeFleet(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := fleetReport("j", t0, 3000, 500, 500, 500, 500, 500, 500)
	b := fleetReport("j", t0.Add(2*time.Second), 2400, 600, 600, 600, 600)
	b.Status, b.ExitCode = "finished", 3
	f, err := MergeFleet([]NamedReport{{"b.json", b}, {"a.json", a}})
	if err != nil {
		t.Fatal(err)
	}
	if f.RecordsWritten != 20 || f.RUConsumed != 5400 || f.DurationSeconds != 6 || f.AchievedRUPerSec != 900 ||
		f.Utilization != 0.9 || f.ExitCode != 3 || len(f.Shards) != 2 || f.Fleet.Job != "j" {
		t.Errorf("merged %+v", f.Report)
	}
	if f.Loaders[0].Name != "a.json" || f.Loaders[1].Share != 0.5 {
		t.Errorf("loaders %+v", f.Loaders)
	}
	// Seconds 2–5 hold 1,100 RU each.
	if f.Series[2].RU != 1100 || f.WorstWindow != (500+1100*4)/5000.0 {
		t.Errorf("series %+v, worst window %v", f.Series, f.WorstWindow)
	}
	var text bytes.Buffer
	if err := f.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"fleet j: 2 loaders into d/c", "a.json (h/1)", "50.0%"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, text.String())
		}
	}
	if _, err := MergeFleet([]NamedReport{{"a", a}, {"x", fleetReport("other", t0, 1)}}); err == nil {
		t.Error("reports of two loads merged")
	}
}
