package cmd

import (
	"runtime/debug"
	"testing"

	"github.com/cosmosloader/loader/loader/source"
)

// A load with a Parquet input runs at parquetGCPercent; one without, or a
// user's GOGC, keeps the target as it was.
func TestTuneHeapForParquet(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	gcPercent := func() int { p := debug.SetGCPercent(100); debug.SetGCPercent(p); return p }
	ndjson := []source.Input{{Path: "a.ndjson"}, {Path: "b.csv"}}
	mixed := append(ndjson, source.Input{Path: "c.parquet"})
	t.Setenv("GOGC", "")
	tuneHeapFor(ndjson, source.Options{})
	if p := gcPercent(); p != 100 {
		t.Errorf("NDJSON and CSV: GOGC %d, want 100", p)
	}
	tuneHeapFor(ndjson, source.Options{Format: source.FormatParquet})
	if p := gcPercent(); p != parquetGCPercent {
		t.Errorf("--format parquet: GOGC %d, want %d", p, parquetGCPercent)
	}
	debug.SetGCPercent(100)
	tuneHeapFor(mixed, source.Options{})
	if p := gcPercent(); p != parquetGCPercent {
		t.Errorf("a .parquet input: GOGC %d, want %d", p, parquetGCPercent)
	}
	debug.SetGCPercent(100)
	t.Setenv("GOGC", "100")
	tuneHeapFor(mixed, source.Options{})
	if p := gcPercent(); p != 100 {
		t.Errorf("GOGC set by the user: %d, want it kept at 100", p)
	}
}
