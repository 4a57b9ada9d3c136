package loader

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/clock/clocktest"
	"github.com/cosmosloader/loader/loader/report"
)

// A run shorter than a second could spend at most one second's budget:
// its rate is over that second, not "3,959 RU/s" of a 1,000 target.
func TestSubSecondRunIsRatedOverOneSecond(t *testing.T) {
	j := &Job{Clock: clocktest.New(time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC))}
	report := func(elapsed time.Duration) *report.Report {
		res := &Result{Cause: Finished, Snapshot: runSnapshot{Elapsed: elapsed, RU: 724.5, Requests: 100}, Charges: NewHistogram()}
		st := &checkpoint.State{Counters: checkpoint.Counters{RUConsumed: 724.5, RequestsSent: 100, ElapsedSeconds: elapsed.Seconds()}}
		return buildReport(j, res, 1000, 1, checkpoint.Counters{}, st)
	}
	r := report(183 * time.Millisecond)
	if r.AchievedRUPerSec != 724.5 || r.ThisRun.AchievedRUPerSec != 724.5 || r.Utilization != 0.7245 || r.DurationSeconds != 0.18 {
		t.Errorf("achieved %v RU/s (this run %v), utilisation %v, duration %v s; want 724.5, 724.5, 0.7245, 0.18",
			r.AchievedRUPerSec, r.ThisRun.AchievedRUPerSec, r.Utilization, r.DurationSeconds)
	}
	if r := report(2 * time.Second); r.AchievedRUPerSec != 362.25 || r.ThisRun.AchievedRUPerSec != 362.25 {
		t.Errorf("2 s run: achieved %v (this run %v), want 362.25", r.AchievedRUPerSec, r.ThisRun.AchievedRUPerSec)
	}
}

// The JSON report carries retries by class and the inputs refused whole.
func TestReportJSONRetriesAndRefusedInputs(t *testing.T) {
	r := &report.Report{InputsRefused: 1, Retries: report.Retries{Throttled: 4, Timeout: 1, Unavailable: 2, Connection: 3, Other: 1}}
	js, _ := json.Marshal(r)
	var m map[string]any
	json.Unmarshal(js, &m)
	want := map[string]any{"throttled": 4.0, "timeout": 1.0, "unavailable": 2.0, "connection": 3.0, "other": 1.0}
	got, _ := m["retries"].(map[string]any)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("retries.%s = %v, want %v (%s)", k, got[k], v, js)
		}
	}
	if m["inputs_refused"] != 1.0 {
		t.Errorf("inputs_refused = %v", m["inputs_refused"])
	}
}
