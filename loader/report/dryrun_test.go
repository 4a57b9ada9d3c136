package report

import (
	"strings"
	"testing"
)

// A dry-run's first bad records are named as the reasons' first records
// are (where): by file and line, or by file alone.
func TestDryRunNamesBadRecordsByFileAndLine(t *testing.T) {
	var out strings.Builder
	p := &DryRun{BadRecords: 2, BadSamples: []BadLine{{Source: "trunc.ndjson.gz", Error: "gzip data truncated"}, {Source: "a.ndjson", Line: 6, Error: "truncated JSON"}}}
	p.WriteText(&out)
	if !strings.Contains(out.String(), "      trunc.ndjson.gz  gzip data truncated\n      a.ndjson:6  truncated JSON\n") {
		t.Errorf("dry-run's bad records:\n%s", out.String())
	}
}
