// Package csv reads CSV and TSV inputs as records, a JSON object a row
// (dotted headers nest), and finds where they may be cut: after a newline
// outside quotes, by following their quoting from a known record start.
package csv

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/source"
)

// csvBufferSize is the read-ahead of the CSV parser.
const csvBufferSize = 64 << 10

// csvReader turns CSV or TSV rows into JSON objects.
//
// encoding/csv reports where a record ends (InputOffset) but not its text, and
// quoted fields can span lines, so the bytes the parser reads are teed into a
// buffer: the span between two InputOffsets is exactly one record (plus any
// empty lines the parser skipped before it), which gives its line count, its
// UTF-8 validity and, for a bad record, its raw text.
type csvReader struct {
	path string
	src  io.ReadCloser
	tee  *teeReader
	cr   *csv.Reader
	base int64           // stream offset at which cr.InputOffset() is 0
	pos  source.Position // just after the last row read
	// lineBase is the number of lines before the parser's first line.
	lineBase int64
	max      int

	header     []string
	root       *node
	opts       source.Options
	strings    bool
	emptyNull  bool
	arena      []byte
	lastRowLen int
	done       bool
}

func openCSV(path string, open source.Opener, opts source.Options, delim rune, folders []source.Folder, start source.Position) (source.Reader, error) {
	if start.Offset < 0 || start.Line < 0 {
		return nil, fmt.Errorf("invalid start position %+v", start)
	}
	if delim == '"' || delim == '\r' || delim == '\n' || delim == utf8.RuneError || !utf8.ValidRune(delim) {
		return nil, fmt.Errorf("invalid CSV delimiter %q", delim)
	}
	head, err := open(0)
	if err != nil {
		return nil, err
	}
	c := newCSVReader(path, head, opts, delim, source.Position{})
	herr := c.readHeader(folders)
	if herr != nil && herr != io.EOF {
		head.Close()
		return nil, herr
	}
	if start.Offset == 0 || herr == io.EOF {
		if herr == io.EOF && start.Offset > 0 {
			head.Close()
			return nil, fmt.Errorf("resume offset %d is past the end of the input", start.Offset)
		}
		return c, nil
	}
	// Resuming: the header came from the head of the input; rows come from
	// a second stream opened at start.
	head.Close()
	if start.Offset < c.pos.Offset {
		return nil, fmt.Errorf("resume offset %d is inside the CSV header (which ends at %d)", start.Offset, c.pos.Offset)
	}
	src, err := open(start.Offset)
	if err != nil {
		return nil, err
	}
	r := newCSVReader(path, src, opts, delim, start)
	r.header, r.root = c.header, c.root
	return r, nil
}

func newCSVReader(path string, src io.ReadCloser, opts source.Options, delim rune, start source.Position) *csvReader {
	MaxRecord := opts.MaxRecord()
	tee := &teeReader{r: src, start: start.Offset, limit: MaxRecord + 2*csvBufferSize}
	br := bufio.NewReaderSize(tee, csvBufferSize)
	c := &csvReader{
		path: path, src: src, tee: tee, base: start.Offset, pos: start, lineBase: start.Line, max: MaxRecord,
		strings: opts.CSVStrings, emptyNull: opts.CSVEmptyNull, opts: opts,
	}
	if start.Offset == 0 {
		// Excel writes a BOM before the header.
		if b, _ := br.Peek(len(source.UTF8BOM)); string(b) == source.UTF8BOM {
			br.Discard(len(source.UTF8BOM))
			tee.head += len(source.UTF8BOM)
			tee.start += int64(len(source.UTF8BOM))
			c.base += int64(len(source.UTF8BOM))
			c.pos.Offset += int64(len(source.UTF8BOM))
		}
	}
	c.cr = csv.NewReader(br)
	c.cr.Comma = delim
	c.cr.FieldsPerRecord = -1
	c.cr.ReuseRecord = true
	c.cr.LazyQuotes = csvLazyQuotes(delim)
	return c
}

// csvLazyQuotes says whether a file of this delimiter is read with lazy
// quotes: TSV files rarely quote and often contain bare quotes. Where such
// a file is cut follows the same rule (newCSVDFA).
func csvLazyQuotes(delim rune) bool { return delim == '\t' }

func (c *csvReader) Close() error { return c.src.Close() }

// readHeader reads and checks the header row. A header that cannot name
// every column exactly once (unparsable, invalid UTF-8, a repeated or empty
// name, a runaway quote) is an *InputError: no row of the input can be
// mapped without guessing, so the whole input is refused.
func (c *csvReader) readHeader(folders []source.Folder) error {
	fields, rec, raw, err := c.readRow()
	if err != nil {
		if errors.Is(err, source.ErrCSVRecordTooLong) {
			return headerError(source.ReasonCSVHeader, 0, err)
		}
		return err
	}
	if rec.Err != nil {
		return headerError(source.ReasonCSVHeader, rec.Offset, fmt.Errorf("read CSV header: %w", rec.Err))
	}
	if !utf8.Valid(raw) {
		return headerError(source.ReasonCSVHeader, rec.Offset, fmt.Errorf("read CSV header: %w", source.InvalidUTF8(raw, rec.Offset)))
	}
	c.header = make([]string, len(fields))
	for i, f := range fields {
		c.header[i] = strings.TrimSpace(f)
	}
	if c.root, err = buildTree(c.header); err != nil {
		return headerError(source.ReasonCSVHeader, rec.Offset, err)
	}
	names := make([]string, len(c.root.children))
	for i, ch := range c.root.children {
		names[i] = ch.name
	}
	keep, err := c.opts.SelectColumns(append(names[:len(names):len(names)], source.FolderNames(folders)...))
	if err != nil {
		return headerError(source.ReasonColumns, rec.Offset, err)
	}
	parts := source.PartitionFields(folders, names, keep, c.opts.CSVEmptyNull)
	if keep != nil { // the other cells are still read, and counted
		kept := c.root.children[:0:0]
		for i, ch := range c.root.children {
			if keep[i] {
				kept = append(kept, ch)
			}
		}
		c.root.children = kept
	}
	for _, p := range parts {
		c.root.children = append(c.root.children, &node{name: p.Name, key: p.Key, col: -1, value: p.JSON})
	}
	return nil
}

// headerError refuses the input for its header (ReasonCSVHeader, or
// ReasonColumns for --columns), found at stream offset off.
func headerError(code string, off int64, err error) error {
	return &source.InputError{Code: code, Offset: off, Err: err}
}

// readRow reads one CSV row. rec has its positions set; rec.Err is set for a
// row the CSV parser rejected. raw is the row's text, valid until the next
// read.
func (c *csvReader) readRow() (fields []string, rec source.Record, raw []byte, err error) {
	fields, err = c.cr.Read()
	var perr *csv.ParseError
	if err != nil && err != io.EOF && !errors.As(err, &perr) {
		if errors.Is(err, source.ErrCSVRecordTooLong) {
			return nil, rec, nil, fmt.Errorf("read %s: CSV record starting at line %d is longer than %s (unclosed quote?): %w",
				c.path, c.pos.Line+1, source.SizeString(c.max), source.ErrCSVRecordTooLong)
		}
		return nil, rec, nil, fmt.Errorf("read %s: %w", c.path, err)
	}
	end := c.base + c.cr.InputOffset()
	span := c.tee.span(c.pos.Offset, end)
	// The parser skips empty lines before a record.
	lead, blank := 0, int64(0)
	for {
		if lead < len(span) && span[lead] == '\n' {
			lead++
		} else if lead+1 < len(span) && span[lead] == '\r' && span[lead+1] == '\n' {
			lead += 2
		} else {
			break
		}
		blank++
	}
	rec = source.Record{
		Path:   c.path,
		Offset: c.pos.Offset + int64(lead),
		Line:   c.pos.Line + blank + 1,
		Next:   source.Position{Offset: end, Line: c.pos.Line + int64(bytes.Count(span, []byte{'\n'}))},
	}
	raw = bytes.TrimRight(span[lead:], "\r\n")
	c.pos = rec.Next
	c.tee.discard(end)
	if err == io.EOF {
		return nil, rec, nil, io.EOF
	}
	if perr != nil {
		rec.Raw = source.CapRaw(raw)
		rec.Err = source.BadRecordf(source.ReasonCSVSyntax, "invalid CSV (line %d, column %d): %w", c.lineBase+int64(perr.Line), perr.Column, perr.Err)
		return nil, rec, raw, nil
	}
	return fields, rec, raw, nil
}

func (c *csvReader) Next() (source.Record, error) {
	if c.done || c.root == nil {
		return source.Record{}, io.EOF
	}
	fields, rec, raw, err := c.readRow()
	if err != nil {
		if err == io.EOF {
			c.done = true
		}
		return source.Record{}, err
	}
	if rec.Err != nil {
		return rec, nil
	}
	if !utf8.Valid(raw) {
		rec.Raw = source.CapRaw(raw)
		rec.Err = source.InvalidUTF8(raw, rec.Offset)
		return rec, nil
	}
	if len(fields) != len(c.header) {
		rec.Raw = source.CapRaw(raw)
		rec.Err = source.BadRecordf(source.ReasonCSVFieldCount, "wrong number of CSV fields: expected %d (the header's), got %d", len(c.header), len(fields))
		return rec, nil
	}
	if cap(c.arena)-len(c.arena) < 2*c.lastRowLen+4096 {
		c.arena = make([]byte, 0, max(256<<10, 4*c.lastRowLen))
	}
	startLen := len(c.arena)
	c.arena, _ = c.appendObject(c.arena, c.root, fields)
	rec.Data = c.arena[startLen:len(c.arena):len(c.arena)]
	c.lastRowLen = len(rec.Data)
	return rec, nil
}

// node is a key of the JSON object built from a row: a column (col >= 0) or
// a nested object made by dotted header names.
type node struct {
	name     string
	key      []byte // "name": as JSON
	col      int
	header   string // the header that created the node, for error messages
	children []*node
	// value is the JSON of a partition folder's field (see
	// source.PartitionFields), the same in every row.
	value []byte
}

func buildTree(header []string) (*node, error) {
	root := &node{col: -1}
	for i, h := range header {
		if h == "" {
			return nil, fmt.Errorf("CSV header column %d has an empty name", i+1)
		}
		parts := strings.Split(h, ".")
		for _, p := range parts {
			if p == "" {
				return nil, fmt.Errorf("CSV header column %d %q has an empty part between dots", i+1, h)
			}
		}
		n := root
		for j, p := range parts {
			last := j == len(parts)-1
			var child *node
			for _, ch := range n.children {
				if ch.name == p {
					child = ch
					break
				}
			}
			switch {
			case child == nil:
				child = &node{name: p, key: append(record.AppendJSONString(nil, p), ':'), col: -1, header: h}
				if last {
					child.col = i
				}
				n.children = append(n.children, child)
			case last && child.col >= 0:
				return nil, fmt.Errorf("duplicate CSV header %q (columns %d and %d)", h, child.col+1, i+1)
			case last || child.col >= 0:
				return nil, fmt.Errorf("CSV header %q conflicts with %q: a field cannot be both a value and an object", h, child.header)
			}
			n = child
		}
	}
	return root, nil
}

// appendObject writes the object for n, in header order. Nested objects whose
// cells are all omitted are omitted too.
func (c *csvReader) appendObject(dst []byte, n *node, fields []string) ([]byte, bool) {
	dst = append(dst, '{')
	wrote := false
	for _, ch := range n.children {
		mark := len(dst)
		if wrote {
			dst = append(dst, ',')
		}
		if ch.value != nil {
			dst = append(append(dst, ch.key...), ch.value...)
		} else if ch.col < 0 {
			dst = append(dst, ch.key...)
			var any bool
			if dst, any = c.appendObject(dst, ch, fields); !any {
				dst = dst[:mark]
				continue
			}
		} else {
			v := fields[ch.col]
			if v == "" {
				if !c.emptyNull {
					dst = dst[:mark]
					continue
				}
				dst = append(dst, ch.key...)
				dst = append(dst, "null"...)
			} else {
				dst = append(dst, ch.key...)
				dst = appendValue(dst, v, c.strings)
			}
		}
		wrote = true
	}
	return append(dst, '}'), wrote
}

// appendValue writes a CSV cell as a JSON value: integers that fit in int64,
// finite floats in JSON spelling and true/false become numbers and booleans
// unless asStrings; everything else — "007", "1.", "+1", "NaN", 20-digit ids —
// stays a string so that no value is silently changed.
func appendValue(dst []byte, v string, asStrings bool) []byte {
	if !asStrings {
		if isInt, ok := jsonNumber(v); ok {
			if isInt {
				if _, err := strconv.ParseInt(v, 10, 64); err == nil {
					return append(dst, v...)
				}
			} else if f, err := strconv.ParseFloat(v, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
				return append(dst, v...)
			}
		} else if len(v) == 4 && strings.EqualFold(v, "true") {
			return append(dst, "true"...)
		} else if len(v) == 5 && strings.EqualFold(v, "false") {
			return append(dst, "false"...)
		}
	}
	return record.AppendJSONString(dst, v)
}

// jsonNumber reports whether v is spelled as a JSON number, and whether it is
// an integer (no fraction or exponent).
func jsonNumber(v string) (isInt, ok bool) {
	i := 0
	if i < len(v) && v[i] == '-' {
		i++
	}
	switch {
	case i < len(v) && v[i] == '0':
		i++
	case i < len(v) && v[i] >= '1' && v[i] <= '9':
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
		}
	default:
		return false, false
	}
	isInt = true
	if i < len(v) && v[i] == '.' {
		isInt = false
		i++
		d := i
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
		}
		if i == d {
			return false, false
		}
	}
	if i < len(v) && (v[i] == 'e' || v[i] == 'E') {
		isInt = false
		i++
		if i < len(v) && (v[i] == '+' || v[i] == '-') {
			i++
		}
		d := i
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
		}
		if i == d {
			return false, false
		}
	}
	return isInt, i == len(v)
}

// teeReader keeps the bytes read through it from stream offset start on, so
// that the text of each CSV record can be recovered.
type teeReader struct {
	r     io.Reader
	buf   []byte
	head  int   // buf[:head] is discarded
	start int64 // stream offset of buf[head]
	limit int   // most bytes kept before reads fail with ErrCSVRecordTooLong
}

func (t *teeReader) Read(p []byte) (int, error) {
	if len(t.buf)-t.head > t.limit {
		return 0, source.ErrCSVRecordTooLong
	}
	if t.head > 0 && t.head >= len(t.buf)/2 {
		t.buf = t.buf[:copy(t.buf, t.buf[t.head:])]
		t.head = 0
	}
	n, err := t.r.Read(p)
	t.buf = append(t.buf, p[:n]...)
	return n, err
}

// span returns the kept bytes between stream offsets a and b.
func (t *teeReader) span(a, b int64) []byte {
	return t.buf[t.head+int(a-t.start) : t.head+int(b-t.start)]
}

// discard forgets the bytes before stream offset b.
func (t *teeReader) discard(b int64) {
	t.head += int(b - t.start)
	t.start = b
}

// DelimiterHint reads the first line of a CSV input read with commas (no
// --delimiter, no .tsv) and, when that header is one column whose name
// holds a semicolon, a tab or a bar, says which --delimiter the file
// likely needs. Spreadsheets in many locales export with semicolons: read
// with commas, every record loads as one field under an id the loader
// makes up, and nothing is refused. "" when there is nothing to say, or
// the head cannot be read (gzip, stdin, an error: the load says why).
func DelimiterHint(in source.Input, opts source.Options) string {
	if in.Stdin || opts.Delimiter != 0 {
		return ""
	}
	if f, err := source.ResolveFormat(in, opts); err != nil || f != source.FormatCSV {
		return ""
	}
	ra, done, err := source.RawReaderAt(in)
	if err != nil {
		return ""
	}
	defer done()
	var head [512]byte
	n, _ := ra.ReadAt(head[:], 0)
	line, _, found := bytes.Cut(head[:n], []byte{'\n'})
	if (!found && n == len(head)) || source.HasGzipMagic(head[:n]) {
		return ""
	}
	line = bytes.TrimPrefix(bytes.TrimSuffix(line, []byte{'\r'}), []byte("\ufeff"))
	if bytes.IndexByte(line, ',') >= 0 || bytes.IndexByte(line, '"') >= 0 {
		return ""
	}
	for _, d := range []struct {
		sep  byte
		name string
		flag string
	}{{';', "semicolons", "';'"}, {'\t', "tabs", "tab (or --format tsv)"}, {'|', "bars", "'|'"}} {
		if bytes.IndexByte(line, d.sep) >= 0 {
			return fmt.Sprintf("%s: its CSV header is one column, %q: if its fields are separated by %s, give --delimiter %s; read with commas, each record loads as one field", in.Path, line, d.name, d.flag)
		}
	}
	return ""
}
