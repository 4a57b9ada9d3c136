package report

import "testing"

// A reason's first record is named by file and line, and an input refused
// whole (a truncated gzip file has no line to name) by its file alone.
func TestReasonCountNamesTheFirstRecord(t *testing.T) {
	var tally Reasons
	tally.Add("corrupt_input", "trunc.ndjson.gz", 0, "gzip data truncated", "")
	tally.Add("bad_json", "a.ndjson", 6, "truncated JSON", "")
	tally.Add("bad_json", "a.ndjson", 9, "truncated JSON", "")
	want := map[string]string{"corrupt_input": "trunc.ndjson.gz", "bad_json": "a.ndjson:6"}
	for _, rc := range tally.Counts() {
		if rc.First != want[rc.Reason] {
			t.Errorf("%s: first at %q, want %q", rc.Reason, rc.First, want[rc.Reason])
		}
	}
}
