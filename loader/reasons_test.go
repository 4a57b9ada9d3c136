package loader

import (
	"strings"
	"testing"
)

// A reason's first record is named by file and line, and an input refused
// whole (a truncated gzip file has no line to name) by its file alone.
func TestReasonCountNamesTheFirstRecord(t *testing.T) {
	var tally reasonTally
	tally.add(&DeadLetter{Source: "trunc.ndjson.gz", Line: 0, Reason: "corrupt_input", Error: "gzip data truncated"})
	tally.add(&DeadLetter{Source: "a.ndjson", Line: 6, Reason: "bad_json", Error: "truncated JSON"})
	tally.add(&DeadLetter{Source: "a.ndjson", Line: 9, Reason: "bad_json", Error: "truncated JSON"})
	want := map[string]string{"corrupt_input": "trunc.ndjson.gz", "bad_json": "a.ndjson:6"}
	for _, rc := range tally.counts() {
		if rc.First != want[rc.Reason] {
			t.Errorf("%s: first at %q, want %q", rc.Reason, rc.First, want[rc.Reason])
		}
	}
	// A dry-run's first bad records name them the same way.
	var out strings.Builder
	p := &Plan{BadRecords: 2, BadSamples: []BadLine{{Source: "trunc.ndjson.gz", Error: "gzip data truncated"}, {Source: "a.ndjson", Line: 6, Error: "truncated JSON"}}}
	p.WriteText(&out)
	if !strings.Contains(out.String(), "      trunc.ndjson.gz  gzip data truncated\n      a.ndjson:6  truncated JSON\n") {
		t.Errorf("dry-run's bad records:\n%s", out.String())
	}
}
