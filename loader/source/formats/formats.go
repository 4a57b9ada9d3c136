// Package formats is the loader's table of input formats, by name: NDJSON,
// CSV, TSV and Parquet. The engine and the commands open, split and
// expand inputs of any format through it; a new format is a package
// implementing source.Format and a line in the table.
package formats

import (
	"io"

	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/csv"
	"github.com/cosmosloader/loader/loader/source/delta"
	"github.com/cosmosloader/loader/loader/source/ndjson"
	"github.com/cosmosloader/loader/loader/source/parquet"
)

// registry is every format the loader reads, by name; it never changes.
var registry = source.Formats{
	source.FormatNDJSON:  ndjson.Format{},
	source.FormatCSV:     csv.Format{Comma: ','},
	source.FormatTSV:     csv.Format{Comma: '\t'},
	source.FormatParquet: parquet.Format{},
}

// Open opens in at start through its format (see Formats.Open).
func Open(in source.Input, stdin io.Reader, opts source.Options, start source.Position) (source.Reader, error) {
	return registry.Open(in, stdin, opts, start)
}

// Splittable reports whether in can be cut at any record boundary, and
// why not (see Formats.Splittable).
func Splittable(in source.Input, opts source.Options) (bool, string) {
	return registry.Splittable(in, opts)
}

// Split divides in into at most n Ranges (see Formats.Split).
func Split(in source.Input, opts source.Options, n int) ([]source.Range, string, error) {
	return registry.Split(in, opts, n)
}

// BoundaryAfter returns the first record boundary at or after target in a
// splittable input, past from (see Formats.BoundaryAfter).
func BoundaryAfter(in source.Input, opts source.Options, from source.Position, target int64) (source.Position, string, error) {
	return registry.BoundaryAfter(in, opts, from, target)
}

// ReadersAtOnce is how many readers of inputs like in may be open at once
// (see Formats.ReadersAtOnce).
func ReadersAtOnce(in source.Input, opts source.Options) int { return registry.ReadersAtOnce(in, opts) }

// Expand resolves command-line arguments into inputs (see
// Expander.Expand): local paths, and remote ones resolved by remote (nil:
// every argument is local); a directory holding a Delta Lake table names
// the files of its current version.
func Expand(args []string, remote source.RemoteExpander) ([]source.Input, error) {
	return source.Expander{Remote: remote, Table: delta.Local}.Expand(args)
}
