package formats

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/cosmosloader/loader/internal/parallel"
	"github.com/cosmosloader/loader/loader/source"
)

// A CSV read as NDJSON (on stdin, or named .txt) dead-letters every line,
// and an NDJSON read as CSV refuses its header: nothing is written, and a
// dry-run plans a load of dead letters. Before either, the first records
// of each input are read as its format and, when most of them are bad, as
// the other: when those read, the run stops and says which --format fits.

// misreadHead is how much of an input's start is read to compare formats;
// misreadRecords, how many of its first records count.
const (
	misreadHead    = 64 << 10
	misreadRecords = 20
)

// ErrWrongFormat marks the error of an input read as a format its first
// records do not fit, while another fits them.
var ErrWrongFormat = errors.New("wrong input format")

// CheckFormats reads the first records of each input, NDJSON, CSV or TSV,
// and returns an error wrapping ErrWrongFormat naming the --format that
// fits an input whose first records mostly do not read as the format it
// is read as, but do as another. Stdin is peeked through the returned
// reader, which the caller reads it through from then on.
func CheckFormats(inputs []source.Input, stdin io.Reader, opts source.Options) (io.Reader, error) {
	var peek *bufio.Reader
	for _, in := range inputs {
		if in.Stdin && stdin != nil {
			peek = bufio.NewReaderSize(stdin, misreadHead)
			stdin = peek
		}
	}
	errs := make([]error, len(inputs))
	parallel.Each(len(inputs), parallel.InputsAtOnce, func(i int) error {
		in := inputs[i]
		var head []byte
		var cut bool
		if in.Stdin {
			if peek == nil {
				return nil
			}
			head, cut = stdinHead(peek)
		} else {
			var err error
			if head, cut, err = fileHead(in); err != nil {
				return nil // the load says why it cannot be read
			}
		}
		errs[i] = misread(in, head, cut, opts)
		return nil
	})
	return stdin, errors.Join(errs...)
}

// fileHead is the start of a file or blob, decompressed; cut when there
// is more. A blob's is one small ranged read.
func fileHead(in source.Input) ([]byte, bool, error) {
	ra, done, err := source.RawReaderAt(in)
	if err != nil {
		return nil, false, err
	}
	defer done()
	raw := make([]byte, misreadHead)
	n, err := ra.ReadAt(raw, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, false, err
	}
	head, cut := decompressedHead(raw[:n], n == misreadHead)
	return head, cut, nil
}

// stdinHead is what stdin holds at once (it waits for its first read, not
// for more: a slow pipe starts loading as soon as it did), decompressed;
// more may follow (cut).
func stdinHead(peek *bufio.Reader) ([]byte, bool) {
	if _, err := peek.Peek(1); err != nil {
		return nil, false
	}
	raw, _ := peek.Peek(peek.Buffered())
	return decompressedHead(raw, true)
}

// decompressedHead is raw, the first bytes of an input (cut: more
// follow), decompressed as far as they go when they are gzip.
func decompressedHead(raw []byte, cut bool) ([]byte, bool) {
	if !source.HasGzipMagic(raw) {
		return raw, cut
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, false
	}
	head := make([]byte, misreadHead)
	n, _ := io.ReadFull(zr, head)
	return head[:n], cut || n == misreadHead
}

// A reading is a format to try an input's head as.
type reading struct {
	format string
	delim  rune
	flag   string
}

// misread says which --format fits head, the start of in (cut: more
// follows), when the format it is read as does not.
func misread(in source.Input, head []byte, cut bool, opts source.Options) error {
	format, err := source.ResolveFormat(in, opts)
	if err != nil || len(head) == 0 {
		return nil
	}
	var as reading
	var others []reading
	switch format {
	case source.FormatNDJSON:
		as = reading{format: format}
		others = []reading{{source.FormatCSV, ',', "--format csv"}, {source.FormatTSV, '\t', "--format tsv"}, {source.FormatCSV, ';', "--format csv --delimiter ';'"}}
	case source.FormatCSV, source.FormatTSV:
		as = reading{format: format, delim: opts.Delimiter}
		others = []reading{{source.FormatNDJSON, 0, "--format ndjson"}}
	default:
		return nil
	}
	bad, n := tally(head, cut, as, opts)
	if 2*bad <= n {
		return nil
	}
	for _, o := range others {
		if o.delim != 0 && !bytes.ContainsRune(firstLine(head), o.delim) {
			continue // a header of one column fits anything
		}
		if obad, on := tally(head, cut, o, opts); on > 0 && 2*obad < on {
			return fmt.Errorf("%w: %s is read as %s, but %d of its first %d records %s, while %d of %d read as %s: give %s (nothing was written)",
				ErrWrongFormat, in.Path, name(format), bad, n, notA(format), on-obad, on, rows(o.format), o.flag)
		}
	}
	return nil
}

func name(format string) string {
	switch format {
	case source.FormatNDJSON:
		return "NDJSON"
	case source.FormatTSV:
		return "TSV"
	}
	return "CSV"
}

// notA says what the bad records of a format are not; rows, what the good
// ones are.
func notA(format string) string {
	if format == source.FormatNDJSON {
		return "are not JSON objects"
	}
	return "do not read as " + name(format) + " rows"
}

func rows(format string) string {
	if format == source.FormatNDJSON {
		return "JSON objects"
	}
	return name(format) + " rows"
}

func firstLine(head []byte) []byte {
	line, _, _ := bytes.Cut(bytes.TrimPrefix(head, []byte(source.UTF8BOM)), []byte{'\n'})
	return line
}

// tally reads the first records of head as r: how many of them are bad
// (refused by the reader, or not a JSON object), of how many. A refused
// input (a CSV header) counts as one bad record of one. The last record
// of a cut head may be cut short and is not counted.
func tally(head []byte, cut bool, r reading, opts source.Options) (bad, n int) {
	o := source.Options{Format: r.format, Delimiter: r.delim, MaxRecordBytes: opts.MaxRecordBytes}
	rd, err := registry.Open(source.Input{Path: "-", Stdin: true}, bytes.NewReader(head), o, source.Position{})
	if err != nil {
		return 1, 1
	}
	defer rd.Close()
	var recs []source.Record
	for len(recs) <= misreadRecords {
		rec, err := rd.Next()
		if err != nil {
			break
		}
		recs = append(recs, rec)
	}
	if len(recs) > misreadRecords {
		recs = recs[:misreadRecords]
	} else if cut && len(recs) > 0 {
		recs = recs[:len(recs)-1]
	}
	for _, rec := range recs {
		if rec.Err != nil || !isObject(rec.Data) {
			bad++
		}
	}
	return bad, len(recs)
}

// isObject reports whether data is one JSON object.
func isObject(data []byte) bool {
	t := bytes.TrimLeft(data, " \t\r\n")
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}
