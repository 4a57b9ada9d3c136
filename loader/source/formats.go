package source

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// A Format reads the inputs of one format (ResolveFormat names them): it
// opens their readers and says where they may be cut. Each format is a
// package of its own (ndjson, csv, parquet); package formats lists the
// loader's, by name, so that this package imports none of them.
type Format interface {
	// Open opens in at start, a Position previously returned in
	// Record.Next (the zero Position is the beginning).
	Open(in Input, stdin io.Reader, opts Options, start Position) (Reader, error)
	// Splittable reports whether in, a file or blob, can be cut at any
	// record boundary, at the start or while it is read, and why not.
	Splittable(in Input, opts Options) (bool, string)
	// Split divides in, a file or blob, into at most n Ranges (n ≥ 2) of
	// about equal size, each starting on a record boundary, or returns
	// one range and why the input is read whole.
	Split(in Input, opts Options, n int) ([]Range, string, error)
	// BoundaryAfter returns the first record boundary at or after target
	// in a splittable input, past from (a record boundary), or why there
	// is none to be found.
	BoundaryAfter(in Input, opts Options, from Position, target int64) (Position, string, error)
	// ReadersAtOnce is how many readers of inputs like in may be open at
	// once (math.MaxInt: no bound of the format's own).
	ReadersAtOnce(in Input, opts Options) int
}

// Formats are the formats a load reads, by name; each method reads an
// input through its format's.
type Formats map[string]Format

// stdinWhy is why standard input is never cut.
const stdinWhy = "standard input is read once, front to back"

// format is in's format under opts.
func (fs Formats) format(in Input, opts Options) (Format, error) {
	name, err := ResolveFormat(in, opts)
	if err != nil {
		return nil, err
	}
	f := fs[name]
	if f == nil {
		return nil, fmt.Errorf("input format %q is not read by this command", name)
	}
	return f, nil
}

// Open opens in at start, a Position previously returned in Record.Next
// (the zero Position is the beginning). Plain files seek to start.Offset;
// gzip inputs (by .gz extension or magic bytes) are decompressed and the
// first start.Offset bytes discarded; stdin refuses a non-zero start.
//
// A JSON-array or CSV input resumed at a non-zero offset is opened twice:
// once to read its head (is it an array? the CSV header), once at start.
func (fs Formats) Open(in Input, stdin io.Reader, opts Options, start Position) (Reader, error) {
	f, err := fs.format(in, opts)
	if err != nil {
		return nil, err
	}
	return f.Open(in, stdin, opts, start)
}

// Splittable reports whether in can be cut at any record boundary, at the
// start or while it is read, and why not when it cannot: a plain NDJSON or
// CSV/TSV file or blob; not stdin, a gzip input (no random access), one
// JSON array, nor Parquet (which Split cuts between row groups). A CSV
// whose quoting turns out ambiguous is then not cut (Split and
// BoundaryAfter say why).
func (fs Formats) Splittable(in Input, opts Options) (bool, string) {
	if in.Stdin {
		return false, stdinWhy
	}
	f, err := fs.format(in, opts)
	if err != nil {
		return false, err.Error()
	}
	return f.Splittable(in, opts)
}

// Split divides an input into at most n Ranges of about equal size, each
// starting on a record boundary, or returns one range and why the input
// is read whole (see each format's Split). NDJSON ranges start after a
// newline, CSV ranges after a newline outside quotes, Parquet ranges (cut
// when the load starts, never while it runs) at a row group.
func (fs Formats) Split(in Input, opts Options, n int) ([]Range, string, error) {
	whole := []Range{{}}
	if n <= 1 {
		return whole, "", nil
	}
	if in.Stdin {
		return whole, stdinWhy, nil
	}
	f, err := fs.format(in, opts)
	if err != nil {
		return whole, err.Error(), nil
	}
	return f.Split(in, opts, n)
}

// BoundaryAfter returns the first record boundary at or after target in a
// splittable input, past from (a record boundary, where CSV quoting starts
// afresh): an NDJSON line start found by LineStart, whose lines count from
// itself, or a CSV record start found by following the quoting from from,
// with its line number, reading the stretch it cuts and not the input
// before it. why says when the input cannot be cut there.
func (fs Formats) BoundaryAfter(in Input, opts Options, from Position, target int64) (Position, string, error) {
	f, err := fs.format(in, opts)
	if err != nil {
		return Position{}, err.Error(), nil
	}
	return f.BoundaryAfter(in, opts, from, target)
}

// ReadersAtOnce is how many readers of inputs like in may be open at once:
// Parquet readers within the memory the readers of one split file may
// take; NDJSON and CSV, local or blobs, without a bound (math.MaxInt), as
// the caller divides their read blocks, and a blob stream's chunks
// (Options.StreamChunk), among its readers.
func (fs Formats) ReadersAtOnce(in Input, opts Options) int {
	f, err := fs.format(in, opts)
	if err != nil {
		return math.MaxInt
	}
	return f.ReadersAtOnce(in, opts)
}

// PlainHead reads the first bytes (at most 512) of a file or blob that
// may be cut, or says why it may not: it is stdin, it cannot be read, or
// it is gzip, which cannot be read from the middle.
func PlainHead(in Input) (head []byte, why string) {
	if in.Stdin {
		return nil, stdinWhy
	}
	ra, closeRA, err := RawReaderAt(in)
	if err != nil {
		return nil, err.Error()
	}
	defer closeRA()
	var b [512]byte
	n, _ := ra.ReadAt(b[:], 0)
	if strings.HasSuffix(strings.ToLower(in.Path), ".gz") || HasGzipMagic(b[:n]) {
		return nil, "it is compressed (gzip cannot be read from the middle)"
	}
	return b[:n], ""
}
