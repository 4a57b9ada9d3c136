package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFleetReportMergesTheLoadersReports: three loaders share one input's
// shards; each report names the load and the loader's part of the
// throughput, and `loader report` adds them up: every record once, one
// line per loader, the page written.
func TestFleetReportMergesTheLoadersReports(t *testing.T) {
	az, tg := sharedTarget(t)
	fleet, want := startShardFleet(t, 3, 6000, sharedArgs(tg, az)...)
	waitLanded(t, tg, fleet, want)

	page := filepath.Join(t.TempDir(), "fleet.html")
	res := runLoader(t, nil, append([]string{"report", "--json", "--html", page}, reports(fleet)...)...)
	if res.code != 0 {
		t.Fatalf("loader report: exit %d\n%s", res.code, res.stderr)
	}
	var merged struct {
		RecordsWritten int64   `json:"records_written"`
		Target         float64 `json:"target_ru_per_sec"`
		Fleet          struct {
			Job string `json:"job"`
		} `json:"fleet"`
		Loaders []struct {
			Job    string  `json:"job"`
			Loader string  `json:"loader"`
			Share  float64 `json:"share_of_target"`
			Shards int     `json:"shards"`
		} `json:"loaders"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &merged); err != nil {
		t.Fatalf("loader report --json: %v\n%s", err, res.stdout)
	}
	if merged.RecordsWritten != int64(len(want)) {
		t.Errorf("the fleet wrote %d records, the input has %d", merged.RecordsWritten, len(want))
	}
	if len(merged.Loaders) != 3 || merged.Fleet.Job == "" || merged.Target != sharedRU {
		t.Fatalf("merged %+v", merged)
	}
	shards := 0
	for _, l := range merged.Loaders {
		if l.Job != merged.Fleet.Job || l.Loader == "" || !(l.Share > 0 && l.Share <= 1) {
			t.Errorf("loader %+v: want the fleet's job, a name and a share of the target", l)
		}
		shards += l.Shards
	}
	if shards < 12 {
		t.Errorf("the loaders loaded %d shards, the input has about 12", shards)
	}
	if b, err := os.ReadFile(page); err != nil || !strings.Contains(string(b), "loader fleet "+merged.Fleet.Job) {
		t.Errorf("fleet page: %v", err)
	}
	text := runLoader(t, nil, append([]string{"report"}, reports(fleet)...)...)
	t.Logf("loader report:\n%s", text.stdout)
}

// reports lists the fleet's report files.
func reports(fleet []*fleetProc) []string {
	var r []string
	for _, p := range fleet {
		r = append(r, p.report)
	}
	return r
}
