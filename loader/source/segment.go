package source

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cosmosloader/loader/internal/parallel"
)

// Range is a byte range of a plain (seekable, uncompressed) input that
// starts on a record boundary: Start is where its first record begins, End
// the offset of the next range's first record (0: the end of the input).
// Segments of one import and the shards of a shared load are both Ranges.
type Range struct {
	Start Position
	End   int64
}

// Splittable reports whether in can be cut at any record boundary, at the
// start or while it is read, and why not when it cannot: a plain NDJSON or
// CSV/TSV file or blob; not stdin, a gzip input (no random access), one
// JSON array, nor Parquet (which Split cuts between row groups). A CSV
// whose quoting turns out ambiguous is then not cut (Split and
// BoundaryAfter say why).
func Splittable(in Input, opts Options) (bool, string) {
	if in.Stdin {
		return false, "standard input is read once, front to back"
	}
	format, err := ResolveFormat(in, opts)
	if err != nil {
		return false, err.Error()
	}
	if format == FormatParquet {
		return false, "it is Parquet (split between row groups when the load starts, never while it runs)"
	}
	ra, closeRA, err := rawReaderAt(in)
	if err != nil {
		return false, err.Error()
	}
	defer closeRA()
	var head [512]byte
	n, _ := ra.ReadAt(head[:], 0)
	if strings.HasSuffix(strings.ToLower(in.Path), ".gz") || (n >= 2 && bytes.Equal(head[:2], gzipMagic)) {
		return false, "it is compressed (gzip cannot be read from the middle)"
	}
	if format == FormatNDJSON {
		if t := bytes.TrimLeft(head[:n], " \t\r\n\ufeff"); len(t) > 0 && t[0] == '[' {
			return false, "it is one JSON array"
		}
	}
	return true, ""
}

// Split divides a splittable input into at most n Ranges of about equal
// size, each starting on a record boundary. NDJSON ranges start after a
// newline, found by reading a little from each cut (LineStart): their
// lines count from their start (Position.Base), so a file or blob of any
// size is cut at once. CSV ranges start after a newline outside quotes,
// found by following the quoting from the start of the input, with their
// line numbers: in blocks read at once, each block read once per load
// (csvCuts.boundary). A CSV whose quoting cannot be followed safely (a quote inside
// an unquoted field, or a stray one after a closing quote) is not split:
// Split returns one range and the reason. A Parquet file or blob, which
// Splittable refuses (nothing can cut it while it is read), is split
// into whole row groups from its footer (splitParquet).
func Split(in Input, opts Options, n int) ([]Range, string, error) {
	whole := []Range{{}}
	if n <= 1 {
		return whole, "", nil
	}
	if format, err := ResolveFormat(in, opts); err == nil && format == FormatParquet && !in.Stdin {
		return splitParquet(in, n)
	}
	if ok, why := Splittable(in, opts); !ok {
		return whole, why, nil
	}
	size, err := RawSize(in)
	if err != nil {
		return nil, "", fmt.Errorf("split %s: %w", in.Path, err)
	}
	format, _ := ResolveFormat(in, opts)
	if format == FormatCSV || format == FormatTSV {
		return loaderCuts.split(in, opts, format, size, evenTargets(size, n))
	}
	return splitLines(in, size, evenTargets(size, n))
}

// evenTargets are the n-1 offsets that cut size bytes in n even pieces.
func evenTargets(size int64, n int) []int64 {
	targets := make([]int64, 0, n-1)
	for i := 1; i < n; i++ {
		targets = append(targets, size*int64(i)/int64(n))
	}
	return targets
}

// splitLines cuts a plain NDJSON input of size bytes at the line starts
// after targets (LineStart), found at once.
func splitLines(in Input, size int64, targets []int64) ([]Range, string, error) {
	starts := make([]Position, len(targets))
	err := parallel.Each(len(targets), linesAtOnce, func(i int) error {
		var err error
		starts[i], err = LineStart(in, targets[i])
		return err
	})
	if err != nil {
		return nil, "", fmt.Errorf("split %s: %w", in.Path, err)
	}
	return rangesFrom(starts, size), "", nil
}

// split cuts a splittable CSV or TSV input of size bytes at the record
// starts after targets.
func (c *csvCuts) split(in Input, opts Options, format string, size int64, targets []int64) ([]Range, string, error) {
	whole := []Range{{}}
	d, delim, why := csvCutter(in, opts, format)
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
	starts := make([]Position, len(targets))
	whys := make([]string, len(targets))
	err := parallel.Each(len(targets), linesAtOnce, func(i int) error {
		var err error
		starts[i], whys[i], err = c.boundary(in, d, delim, Position{}, targets[i])
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
	return rangesFrom(starts, size), "", nil
}

// csvCutter returns the quoting scan of a CSV or TSV input that may be
// cut, or why it may not: a delimiter of more than one byte, or a header
// the reader refuses (which refuses the input once, not once a piece).
func csvCutter(in Input, opts Options, format string) (d *csvDFA, delim byte, why string) {
	delim = csvDelimiter(format, opts)
	if delim == 0 {
		return nil, 0, "its delimiter is not one byte"
	}
	if r, err := Open(in, nil, opts, Position{}); err != nil {
		var ie *InputError
		if errors.As(err, &ie) {
			return nil, 0, "its CSV header is refused"
		}
	} else {
		r.Close()
	}
	return newCSVDFA(delim), delim, ""
}

// CSVCuttable reports why a splittable CSV or TSV input may not be cut at
// any offset, "" when it may: its delimiter, its header, and its quoting
// followed to its end, reading the input once, in blocks at once, which
// later cuts (BoundaryAfter from its start) reuse. A shared load cuts an
// input into shards before reading any, so it asks first: a bad quote
// found at a shard's start would leave that shard unplaceable.
func CSVCuttable(in Input, opts Options) (string, error) {
	format, err := ResolveFormat(in, opts)
	if err != nil {
		return "", err
	}
	if format != FormatCSV && format != FormatTSV {
		return "it is not CSV", nil
	}
	if ok, why := Splittable(in, opts); !ok {
		return why, nil
	}
	d, delim, why := csvCutter(in, opts, format)
	if why != "" {
		return why, nil
	}
	size, err := RawSize(in)
	if err != nil {
		return "", err
	}
	_, why, err = loaderCuts.boundary(in, d, delim, Position{}, size)
	return why, err
}

// RawSize is the size of a local file or blob as stored.
func RawSize(in Input) (int64, error) {
	if in.Remote != nil {
		return in.Remote.Identity().Size, nil
	}
	st, err := os.Stat(in.Path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// rangesFrom turns the first-record positions after each target into
// ranges, dropping empty ones (targets inside one long record).
func rangesFrom(starts []Position, size int64) []Range {
	out := []Range{{}}
	for _, s := range starts {
		last := &out[len(out)-1]
		if s.Offset <= last.Start.Offset || s.Offset >= size {
			continue
		}
		last.End = s.Offset
		out = append(out, Range{Start: s})
	}
	return out
}

// BoundaryAfter returns the first record boundary at or after target in a
// splittable input, past from (a record boundary, where CSV quoting starts
// afresh): an NDJSON line start found by LineStart, whose lines count from
// itself, or a CSV record start found by following the quoting from from,
// with its line number, reading the stretch it cuts (its whole blocks at
// once, and only once a load) and not the input before it. why says when
// a CSV's quoting cannot be followed there.
func BoundaryAfter(in Input, opts Options, from Position, target int64) (Position, string, error) {
	format, _ := ResolveFormat(in, opts)
	if format != FormatCSV && format != FormatTSV {
		p, err := LineStart(in, max(target, from.Offset+1))
		return p, "", err
	}
	delim := csvDelimiter(format, opts)
	if delim == 0 {
		return Position{}, "its delimiter is not one byte", nil
	}
	p, why, err := loaderCuts.boundary(in, newCSVDFA(delim), delim, from, target)
	if err != nil {
		err = fmt.Errorf("find record boundary: %w", err)
	}
	return p, why, err
}

// splitBuf is the read size of the CSV boundary walks (the stretch of a
// cut around its whole blocks). The walks of many shards placed at once
// each hold one, and a stream of walkChunk chunks: both are kept small.
const splitBuf = 64 << 10

const walkChunk = 256 << 10

// csvDelimiter is the byte that separates fields, or 0 when the delimiter
// is not one byte (such a CSV is read with one cursor).
func csvDelimiter(format string, opts Options) byte {
	d := rune(',')
	if format == FormatTSV {
		d = '\t'
	}
	if opts.Delimiter != 0 {
		d = opts.Delimiter
	}
	if d >= 0x80 {
		return 0
	}
	return byte(d)
}
