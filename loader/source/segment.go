package source

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
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
// start or while it is read, and why not when it cannot: only a plain
// NDJSON or CSV/TSV file can be, not stdin, a gzip file (no random
// access), one JSON array nor a Parquet file (which Split cuts between
// row groups).
func Splittable(in Input, opts Options) (bool, string) {
	if in.Stdin {
		return false, "standard input is read once, front to back"
	}
	if in.Remote != nil {
		// Finding record boundaries reads everything before them: for a
		// blob, a download of most of it before the load starts.
		return false, "it is a blob (finding record boundaries would download it before the load)"
	}
	format, err := ResolveFormat(in, opts)
	if err != nil {
		return false, err.Error()
	}
	if format == FormatParquet {
		return false, "it is Parquet (split between row groups when the load starts, never while it runs)"
	}
	f, err := os.Open(in.Path)
	if err != nil {
		return false, err.Error()
	}
	defer f.Close()
	var head [512]byte
	n, _ := io.ReadFull(f, head[:])
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
// size, each starting on a record boundary with its line number known, in
// one pass over the file (bytes.Count at memory speed; the load itself is
// far slower). NDJSON ranges start after a newline; CSV ranges after a
// newline outside quotes, found by following the quoting from the start of
// the file. A CSV whose quoting cannot be followed safely (a quote inside
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
	st, err := os.Stat(in.Path)
	if err != nil {
		return nil, "", fmt.Errorf("split %s: %w", in.Path, err)
	}
	size := st.Size()
	format, _ := ResolveFormat(in, opts)
	targets := make([]int64, 0, n-1)
	for i := 1; i < n; i++ {
		targets = append(targets, size*int64(i)/int64(n))
	}
	f, err := os.Open(in.Path)
	if err != nil {
		return nil, "", fmt.Errorf("split %s: %w", in.Path, err)
	}
	defer f.Close()
	var starts []Position
	if format == FormatCSV || format == FormatTSV {
		delim := csvDelimiter(format, opts)
		if delim == 0 {
			return whole, "its delimiter is not one byte", nil
		}
		// A refused header refuses the file once, not once per segment.
		if r, err := Open(in, nil, opts, Position{}); err != nil {
			var ie *InputError
			if errors.As(err, &ie) {
				return whole, "its CSV header is refused", nil
			}
		} else {
			r.Close()
		}
		var why string
		starts, why, err = csvBoundaries(f, targets, delim)
		if why != "" || err != nil {
			return whole, why, err
		}
	} else {
		starts, err = lineBoundaries(f, targets)
		if err != nil {
			return nil, "", fmt.Errorf("split %s: %w", in.Path, err)
		}
	}
	return rangesFrom(starts, size), "", nil
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

// AlignStart returns the first record boundary (a line start) at or after
// offset in a plain NDJSON file, with its line number: 0 for offset 0,
// otherwise the byte after the first '\n' at or after offset-1, or the end
// of the file when there is none. A range starting at offset owns the
// records that start there.
func AlignStart(path string, offset int64) (Position, error) {
	return AlignFrom(func(int64) (io.ReadCloser, error) { return os.Open(path) }, offset)
}

// AlignFrom is AlignStart over any source of the input's raw bytes (a
// blob), read from its start to count the lines before the boundary.
func AlignFrom(open func(offset int64) (io.ReadCloser, error), offset int64) (Position, error) {
	return AlignAfter(open, Position{}, offset)
}

// AlignAfter is AlignFrom reading only from from, a record boundary
// before offset whose line number is known, to count the lines between.
func AlignAfter(open func(offset int64) (io.ReadCloser, error), from Position, offset int64) (Position, error) {
	if offset <= 0 {
		return Position{}, nil
	}
	if from.Offset >= offset {
		return Position{}, fmt.Errorf("align range start: boundary %d is not before %d", from.Offset, offset)
	}
	r, err := open(from.Offset)
	if err != nil {
		return Position{}, fmt.Errorf("align range start: %w", err)
	}
	defer r.Close()
	starts, err := lineBoundaries(r, []int64{offset - from.Offset})
	if err != nil {
		return Position{}, fmt.Errorf("align range start: %w", err)
	}
	return Position{Offset: from.Offset + starts[0].Offset, Line: from.Line + starts[0].Line}, nil
}

// BoundaryAfter returns the first record boundary at or after target in a
// splittable plain file, reading only from from (a record boundary, where
// CSV quoting starts afresh) to count the lines: a split while loading
// reads the stretch it cuts, not the file before it. why says when a CSV's
// quoting cannot be followed there.
func BoundaryAfter(in Input, opts Options, from Position, target int64) (Position, string, error) {
	f, err := os.Open(in.Path)
	if err != nil {
		return Position{}, "", fmt.Errorf("find record boundary: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(from.Offset, io.SeekStart); err != nil {
		return Position{}, "", fmt.Errorf("find record boundary: %w", err)
	}
	rel := []int64{max(target-from.Offset, 0)}
	var starts []Position
	var why string
	switch format, _ := ResolveFormat(in, opts); format {
	case FormatCSV, FormatTSV:
		delim := csvDelimiter(format, opts)
		if delim == 0 {
			return Position{}, "its delimiter is not one byte", nil
		}
		starts, why, err = csvBoundaries(f, rel, delim)
	default:
		starts, err = lineBoundaries(f, rel)
	}
	if why != "" || err != nil {
		return Position{}, why, err
	}
	return Position{Offset: from.Offset + starts[0].Offset, Line: from.Line + starts[0].Line}, "", nil
}

// splitBuf is the read size of the boundary scans; tests shrink it to cross
// buffer boundaries.
var splitBuf = 1 << 20

// lineBoundaries reads r from its start and returns, for each target offset
// (ascending), the first line start at or after it: the byte after the
// first '\n' at or after target-1, or the end of the input.
func lineBoundaries(r io.Reader, targets []int64) ([]Position, error) {
	out := make([]Position, 0, len(targets))
	buf := make([]byte, splitBuf)
	var pos, lines int64 // stream offset of buf[0], newlines before it
	for len(out) < len(targets) {
		n, err := io.ReadFull(r, buf)
		b := buf[:n]
		for len(out) < len(targets) {
			from := max(targets[len(out)]-1-pos, 0)
			if from >= int64(len(b)) {
				break
			}
			i := bytes.IndexByte(b[from:], '\n')
			if i < 0 {
				break
			}
			end := from + int64(i) + 1
			out = append(out, Position{Offset: pos + end, Line: lines + int64(bytes.Count(b[:end], []byte{'\n'}))})
		}
		lines += int64(bytes.Count(b, []byte{'\n'}))
		pos += int64(n)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	for len(out) < len(targets) {
		out = append(out, Position{Offset: pos, Line: lines})
	}
	return out, nil
}

const csvQuote = '"'

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

// csvBoundaries follows RFC 4180 quoting from the start of r and returns,
// for each target, the first record start (after a newline outside quotes)
// at or after it; or why the quoting cannot be followed.
func csvBoundaries(r io.Reader, targets []int64, delim byte) ([]Position, string, error) {
	const (
		fieldStart = iota
		unquoted
		quoted
		quoteInQuoted
	)
	br := bufio.NewReaderSize(r, splitBuf)
	out := make([]Position, 0, len(targets))
	var pos, lines int64
	state := fieldStart
	for len(out) < len(targets) {
		c, err := br.ReadByte()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, "", err
		}
		pos++
		if c == '\n' {
			lines++
			if state == quoted {
				continue // a newline inside a quoted field
			}
			state = fieldStart
			for len(out) < len(targets) && targets[len(out)] <= pos {
				out = append(out, Position{Offset: pos, Line: lines})
			}
			continue
		}
		switch state {
		case fieldStart:
			switch c {
			case csvQuote:
				state = quoted
			case delim:
			default:
				state = unquoted
			}
		case unquoted:
			switch c {
			case csvQuote:
				return nil, fmt.Sprintf("a quote inside an unquoted field on line %d makes its quoting ambiguous", lines+1), nil
			case delim:
				state = fieldStart
			}
		case quoted:
			if c == csvQuote {
				state = quoteInQuoted
			}
		case quoteInQuoted:
			switch c {
			case csvQuote:
				state = quoted // "" inside quotes
			case delim:
				state = fieldStart
			case '\r':
				state = unquoted // before the record's '\n'
			default:
				return nil, fmt.Sprintf("a stray quote on line %d makes its quoting ambiguous", lines+1), nil
			}
		}
	}
	for len(out) < len(targets) {
		out = append(out, Position{Offset: pos, Line: lines})
	}
	return out, "", nil
}
