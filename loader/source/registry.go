package source

import "io"

// registry is every format the loader reads, by name; it never changes.
var registry = Formats{
	FormatNDJSON:  ndjsonFormat{},
	FormatCSV:     csvFormat{comma: ','},
	FormatTSV:     csvFormat{comma: '\t'},
	FormatParquet: parquetFormat{},
}

// Open opens in at start through its format (see Formats.Open).
func Open(in Input, stdin io.Reader, opts Options, start Position) (Reader, error) {
	return registry.Open(in, stdin, opts, start)
}

// Splittable reports whether in can be cut at any record boundary, and
// why not (see Formats.Splittable).
func Splittable(in Input, opts Options) (bool, string) { return registry.Splittable(in, opts) }

// Split divides in into at most n Ranges (see Formats.Split).
func Split(in Input, opts Options, n int) ([]Range, string, error) {
	return registry.Split(in, opts, n)
}

// BoundaryAfter returns the first record boundary at or after target in a
// splittable input, past from (see Formats.BoundaryAfter).
func BoundaryAfter(in Input, opts Options, from Position, target int64) (Position, string, error) {
	return registry.BoundaryAfter(in, opts, from, target)
}

// ReadersAtOnce is how many readers of inputs like in may be open at once
// (see Formats.ReadersAtOnce).
func ReadersAtOnce(in Input, opts Options) int { return registry.ReadersAtOnce(in, opts) }

// Expand resolves command-line arguments into inputs (see
// Expander.Expand): local paths, and remote ones resolved by remote (nil:
// every argument is local); a directory holding a Delta Lake table names
// the files of its current version.
func Expand(args []string, remote RemoteExpander) ([]Input, error) {
	return Expander{Remote: remote, Table: localDeltaTable}.Expand(args)
}
