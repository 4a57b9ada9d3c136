package cmd

import (
	"os"
	"runtime/debug"

	"github.com/cosmosloader/loader/loader/source"
)

// parquetGCPercent is the garbage collector's target (GOGC) for a load
// that reads Parquet. Such a heap is mostly Arrow's page buffers and the
// JSON arenas, which hold no pointers, while the default target of 100
// lets the heap grow to twice what is live. The dry-run of a 1 GB DuckDB
// export (bench/duckdb-export.mjs; a page per column chunk) peaked at
// 151 MB RSS at 100, 134 MB at 75 and 125 MB at 60, for 6 % and 9 % more
// CPU; the 64 MB orders file took 4.6 % and 8.8 % more CPU. 75 keeps a
// margin under 150 MB for the smaller cost. NDJSON and CSV keep the
// default: their heap is records full of pointers, and 60 cost their read
// path ~20 % of its speed.
const parquetGCPercent = 75

// tuneHeapFor sets parquetGCPercent when an input is Parquet, unless the
// user chose a target with GOGC.
func tuneHeapFor(inputs []source.Input, so source.Options) {
	if os.Getenv("GOGC") != "" {
		return
	}
	for _, in := range inputs {
		if f, err := source.ResolveFormat(in, so); err == nil && f == source.FormatParquet {
			debug.SetGCPercent(parquetGCPercent)
			return
		}
	}
}
