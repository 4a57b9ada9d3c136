package cmd

import (
	"os"
	"runtime/debug"

	"github.com/cosmosloader/loader/loader/source"
)

// parquetMemoryLimit is the soft limit on the memory the Go runtime
// manages (debug.SetMemoryLimit) for a dry-run that reads Parquet. Such a
// heap is mostly Arrow's page buffers and JSON arenas, and the default
// target lets it grow to twice what is live: a file whose writer puts a
// column chunk in one page (DuckDB) keeps ~55 MB live, and its 1 GB dry-run
// peaked at 138–147 MB of RSS. Under the limit the collector runs sooner
// only when the heap nears it, and returns freed pages to the system: the
// same run peaks at ~130 MB for ~5 % more CPU, while a file whose heap stays
// small (the 64 MB benchmark files) is not touched. Were a file to need
// more than the limit live (hundreds of columns), the collector would run
// often, with at most half the CPU (Go's GC limiter): slower, not failing.
// NDJSON and CSV keep the runtime's defaults, and so does an import: its
// read-ahead queues hold as many documents as they are set to, whatever
// their size, and a collector held to 100 MiB under them would take CPU
// from the writers.
const parquetMemoryLimit = 100 << 20

// tuneHeapFor sets parquetMemoryLimit when an input is Parquet, unless the
// user tuned the runtime with GOGC or GOMEMLIMIT.
func tuneHeapFor(inputs []source.Input, so source.Options) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	for _, in := range inputs {
		if f, err := source.ResolveFormat(in, so); err == nil && f == source.FormatParquet {
			debug.SetMemoryLimit(parquetMemoryLimit)
			return
		}
	}
}
