package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cosmosloader/loader/loader/report"
)

func TestReportFlagsToOptions(t *testing.T) {
	f, _, _ := testFactory(nil)
	var got *ReportOptions
	cmd := NewCmdReport(f, func(_ context.Context, o *ReportOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"a.json", "dir", "--html", "f.html", "--json"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.Paths, " ") != "a.json dir" || got.HTML != "f.html" || !got.JSON {
		t.Errorf("got %+v", got)
	}
	cmd = NewCmdReport(f, func(context.Context, *ReportOptions) error { return nil })
	cmd.SetArgs([]string{}) // not nil: cobra reads os.Args for nil
	var ec *ExitCodeError
	if err := cmd.Execute(); !errors.As(err, &ec) || ec.Code != ExitUsage {
		t.Errorf("no reports: %v, want a usage error", err)
	}
}

// The reports in a directory merge into the fleet's summary; a file that
// is not a report is a usage error naming it.
func TestReportMergesADirectory(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, name := range []string{"loader-0.json", "loader-1.json"} {
		r := report.Report{Status: "finished", Database: "d", Container: "c", TargetRUPerSec: 1000,
			StartedAt: t0, FinishedAt: t0.Add(10 * time.Second), RecordsWritten: int64(100 * (i + 1)), RUConsumed: 4000,
			Fleet: &report.FleetShare{Job: "orders", Loader: "pod-" + name, Share: 0.5}}
		b, _ := json.Marshal(r)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, out, _ := testFactory(nil)
	cmd := NewCmdReport(f, nil)
	cmd.SetArgs([]string{dir})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"fleet orders: 2 loaders into d/c", "300 records written", "800 RU/s of the 1,000 RU/s target", "loader-1.json"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	bad := filepath.Join(dir, "notes.json")
	os.WriteFile(bad, []byte("not json"), 0o644)
	cmd = NewCmdReport(f, nil)
	cmd.SetArgs([]string{dir})
	var ec *ExitCodeError
	if err := cmd.Execute(); !errors.As(err, &ec) || ec.Code != ExitUsage || !strings.Contains(err.Error(), "notes.json") {
		t.Errorf("a directory with a file that is no report: %v, want a usage error naming it", err)
	}
}
