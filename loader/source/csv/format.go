package csv

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/cosmosloader/loader/internal/parallel"
	"github.com/cosmosloader/loader/loader/source"
)

// Format reads CSV and TSV (FormatCSV, FormatTSV): comma separates
// fields unless source.Options.Delimiter names another byte.
type Format struct {
	Comma rune
	// cuts finds where its inputs may be cut (nil: loaderCuts).
	cuts *csvCuts
}

// formatOf is the format of a CSV or TSV input (format is its name).
func formatOf(format string) Format {
	if format == source.FormatTSV {
		return Format{Comma: '\t'}
	}
	return Format{Comma: ','}
}

func (f Format) delimiter(opts source.Options) rune {
	if opts.Delimiter != 0 {
		return opts.Delimiter
	}
	return f.Comma
}

// delimByte is the byte that separates fields, or 0 when the delimiter
// is not one byte (such a CSV is read with one cursor).
func (f Format) delimByte(opts source.Options) byte {
	if d := f.delimiter(opts); d < 0x80 {
		return byte(d)
	}
	return 0
}

func (f Format) csvCuts() *csvCuts {
	if f.cuts != nil {
		return f.cuts
	}
	return loaderCuts
}

// Open opens a CSV or TSV input at start: its header from its head, its
// rows from start.
func (f Format) Open(in source.Input, stdin io.Reader, opts source.Options, start source.Position) (source.Reader, error) {
	path, open, err := source.Streams(in, stdin, opts, start)
	if err != nil {
		return nil, err
	}
	r, err := openCSV(path, open, opts, f.delimiter(opts), source.Folders(in), start)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return r, nil
}

// Splittable: a plain file or blob. Whether its quoting lets it be cut
// is known when it is (Split, BoundaryAfter, Cuttable).
func (Format) Splittable(in source.Input, _ source.Options) (bool, string) {
	_, why := source.PlainHead(in)
	return why == "", why
}

// Split cuts a splittable input after a newline outside quotes near each
// even target, found by following the quoting from the start of the
// input, with its line numbers: in blocks read at once, each block read
// once per load (csvCuts.boundary). A CSV whose quoting cannot be
// followed safely (a quote inside an unquoted field, or a stray one after
// a closing quote) is not split: Split returns one range and the reason.
func (f Format) Split(in source.Input, opts source.Options, n int) ([]source.Range, string, error) {
	if ok, why := f.Splittable(in, opts); !ok {
		return []source.Range{{}}, why, nil
	}
	size, err := source.RawSize(in)
	if err != nil {
		return nil, "", fmt.Errorf("split %s: %w", in.Path, err)
	}
	return f.csvCuts().split(in, opts, f, size, source.EvenTargets(size, n))
}

// BoundaryAfter is the record start at or after target found by following
// the quoting from from, with its line number, reading the stretch it
// cuts (its whole blocks at once, and only once a load) and not the input
// before it; why says when the quoting cannot be followed there.
func (f Format) BoundaryAfter(in source.Input, opts source.Options, from source.Position, target int64) (source.Position, string, error) {
	delim := f.delimByte(opts)
	if delim == 0 {
		return source.Position{}, "its delimiter is not one byte", nil
	}
	p, why, err := f.csvCuts().boundary(in, newCSVDFA(delim), delim, from, target)
	if err != nil {
		err = fmt.Errorf("find record boundary: %w", err)
	}
	return p, why, err
}

// ReadersAtOnce: no bound of CSV's own.
func (Format) ReadersAtOnce(source.Input, source.Options) int { return math.MaxInt }

// cutsAtOnce is how many cuts of an input are found at once: each walks
// its own stretch, a blob's ranged reads waiting on the network.
const cutsAtOnce = 16

// split cuts a splittable CSV or TSV input of size bytes at the record
// starts after targets.
func (c *csvCuts) split(in source.Input, opts source.Options, f Format, size int64, targets []int64) ([]source.Range, string, error) {
	whole := []source.Range{{}}
	d, delim, why := f.cutter(in, opts)
	if why != "" {
		return whole, why, nil
	}
	// Every cut follows the quoting from the input's start, through the
	// blocks that all cuts share, read once: the cuts are independent, so
	// their own stretches are walked at once, as a blob's round trips
	// want. (A record longer than a segment makes two cuts the same.)
	// The blocks first, csvBlocksAtOnce at a time: cuts asking at once
	// would each read theirs that many at a time.
	blk := c.blockOf(size)
	if _, err := c.flowsOf(in, delim, d, blk, 0, (targets[len(targets)-1]-1)/blk); err != nil {
		return whole, "", fmt.Errorf("split %s: %w", in.Path, err)
	}
	starts := make([]source.Position, len(targets))
	whys := make([]string, len(targets))
	err := parallel.Each(len(targets), cutsAtOnce, func(i int) error {
		var err error
		starts[i], whys[i], err = c.boundary(in, d, delim, source.Position{}, targets[i])
		return err
	})
	if err != nil {
		return whole, "", fmt.Errorf("split %s: %w", in.Path, err)
	}
	for _, why := range whys {
		if why != "" {
			return whole, why, nil
		}
	}
	return source.RangesFrom(starts, size), "", nil
}

// cutter returns the quoting scan of an input that may be cut, or why it
// may not: a delimiter of more than one byte, or a header the reader
// refuses (which refuses the input once, not once a piece).
func (f Format) cutter(in source.Input, opts source.Options) (d *csvDFA, delim byte, why string) {
	delim = f.delimByte(opts)
	if delim == 0 {
		return nil, 0, "its delimiter is not one byte"
	}
	if r, err := f.Open(in, nil, opts, source.Position{}); err != nil {
		var ie *source.InputError
		if errors.As(err, &ie) {
			return nil, 0, "its CSV header is refused"
		}
	} else {
		r.Close()
	}
	return newCSVDFA(delim), delim, ""
}

// Cuttable reports why a splittable CSV or TSV input may not be cut at
// any offset, "" when it may: its delimiter, its header, and its quoting
// followed to its end, reading the input once, in blocks at once, which
// later cuts (BoundaryAfter from its start) reuse. A shared load cuts an
// input into shards before reading any, so it asks first: a bad quote
// found at a shard's start would leave that shard unplaceable.
func Cuttable(in source.Input, opts source.Options) (string, error) {
	format, err := source.ResolveFormat(in, opts)
	if err != nil {
		return "", err
	}
	if format != source.FormatCSV && format != source.FormatTSV {
		return "it is not CSV", nil
	}
	f := formatOf(format)
	if ok, why := f.Splittable(in, opts); !ok {
		return why, nil
	}
	d, delim, why := f.cutter(in, opts)
	if why != "" {
		return why, nil
	}
	size, err := source.RawSize(in)
	if err != nil {
		return "", err
	}
	_, why, err = f.csvCuts().boundary(in, d, delim, source.Position{}, size)
	return why, err
}

// splitBuf is the read size of the CSV boundary walks (the stretch of a
// cut around its whole blocks). The walks of many shards placed at once
// each hold one, and a stream of walkChunk chunks: both are kept small.
const splitBuf = 64 << 10

const walkChunk = 256 << 10
