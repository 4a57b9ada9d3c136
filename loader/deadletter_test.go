package loader

import (
	"path/filepath"
	"testing"

	"github.com/cosmosloader/loader/loader/report"
	"github.com/cosmosloader/loader/loader/source"
)

// The dead-letter file's reasons cover the whole load: a resume counts
// the lines earlier runs left (up to the checkpointed size) as well as
// its own, and keeps the earliest first example.
func TestDeadLetterFileTalliesReasonsAcrossRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dl.ndjson")
	d, err := openDeadLetter(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, reason := range []string{"missing_partition_key", "invalid_json", "missing_partition_key"} {
		if err := d.write(newDeadLetter(&source.Record{Path: "in.ndjson", Line: int64(i + 1)}, reason, "msg", []byte(`{"id":"x","name":"n"}`))); err != nil {
			t.Fatal(err)
		}
	}
	size, err := d.sync()
	if err != nil {
		t.Fatal(err)
	}
	// A line written after the checkpoint: a resume cuts it off.
	if err := d.write(newDeadLetter(&source.Record{Path: "in.ndjson", Line: 4}, "too_large", "msg", nil)); err != nil {
		t.Fatal(err)
	}
	if err := d.close(); err != nil {
		t.Fatal(err)
	}

	d2, err := openDeadLetter(path, size)
	if err != nil {
		t.Fatal(err)
	}
	if err := d2.write(newDeadLetter(&source.Record{Path: "in.ndjson", Line: 9}, "missing_partition_key", "msg", nil)); err != nil {
		t.Fatal(err)
	}
	if err := d2.close(); err != nil {
		t.Fatal(err)
	}
	got := d2.reasons().Counts()
	want := []report.ReasonCount{
		{Reason: "missing_partition_key", Count: 3, First: "in.ndjson:1", Example: "msg"},
		{Reason: "invalid_json", Count: 1, First: "in.ndjson:2", Example: "msg"},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("reasons %+v, want %+v", got, want)
	}
	if h := d2.reasons().Hint(4, []string{"/pk"}, "id"); h != "3 records have no /pk: wrong --partition-key? The file's records have: id, name" {
		t.Errorf("hint %q", h)
	}
}
