package cmd

import (
	"os"
	"runtime/debug"

	"github.com/cosmosloader/loader/loader/source"
)

// parquetGCPercent is the garbage collector's target (GOGC) for a load
// that reads Parquet. Such a heap is mostly Arrow's page buffers and the
// JSON arenas, which hold no pointers, so the collector scans little of
// it, while the default target of 100 lets the heap grow to twice what is
// live: a 1 GB DuckDB export's dry-run peaked at 149–152 MB RSS at 100 and
// 126–127 MB at 60, for the same CPU within the noise (a 64 MB file:
// 82–85 MB against 94–96). NDJSON and CSV keep the default: their heap is
// records full of pointers, and 60 cost their read path ~20 % of its speed.
const parquetGCPercent = 60

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
