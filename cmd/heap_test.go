package cmd

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/cosmosloader/loader/loader/source"
)

// A load with a Parquet input runs under parquetMemoryLimit; one without,
// or a user's GOGC or GOMEMLIMIT, keeps the runtime as it was.
func TestTuneHeapForParquet(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	limit := func() int64 { return debug.SetMemoryLimit(-1) } // -1 reads it
	ndjson := []source.Input{{Path: "a.ndjson"}, {Path: "b.csv"}}
	mixed := append(ndjson, source.Input{Path: "c.parquet"})
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	tuneHeapFor(ndjson, source.Options{})
	if l := limit(); l != math.MaxInt64 {
		t.Errorf("NDJSON and CSV: limit %d, want none", l)
	}
	tuneHeapFor(ndjson, source.Options{Format: source.FormatParquet})
	if l := limit(); l != parquetMemoryLimit {
		t.Errorf("--format parquet: limit %d, want %d", l, parquetMemoryLimit)
	}
	debug.SetMemoryLimit(math.MaxInt64)
	tuneHeapFor(mixed, source.Options{})
	if l := limit(); l != parquetMemoryLimit {
		t.Errorf("a .parquet input: limit %d, want %d", l, parquetMemoryLimit)
	}
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		debug.SetMemoryLimit(math.MaxInt64)
		t.Setenv(env, "200")
		tuneHeapFor(mixed, source.Options{})
		if l := limit(); l != math.MaxInt64 {
			t.Errorf("%s set by the user: limit %d, want none", env, l)
		}
		t.Setenv(env, "")
	}
}
