// Package csv reads CSV and TSV inputs as records, a JSON object a row
// (dotted headers nest), and finds where they may be cut: after a newline
// outside quotes, by following their quoting from a known record start.
package csv

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/source"
)

// csvBufferSize is the CSV reader's read size; a longer record grows its
// buffer, up to the record limit.
const csvBufferSize = 64 << 10

// csvReader turns CSV or TSV rows into JSON objects.
type csvReader struct {
	path   string
	src    io.ReadCloser
	in     rowBuffer
	split  fieldSplitter
	syntax *rowSyntax
	pos    source.Position // just after the last row read
	max    int

	header    []string
	root      *node
	opts      source.Options
	strings   bool
	emptyNull bool
	// emptyString reads an empty cell as "" (--csv-empty string).
	emptyString bool
	arena       []byte
	lastRowLen  int
	done        bool
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
	d := utf8.AppendRune(nil, delim)
	c := &csvReader{
		path: path, src: src, pos: start, max: opts.MaxRecord(),
		in:    rowBuffer{src: src, buf: make([]byte, csvBufferSize)},
		split: fieldSplitter{delim: d}, syntax: newRowSyntax(d, csvLazyQuotes(delim)),
		strings: opts.CSVStrings, emptyNull: opts.CSVEmptyNull, emptyString: opts.CSVEmptyString, opts: opts,
	}
	if start.Offset == 0 {
		// Excel writes a BOM before the header.
		for c.in.end < len(source.UTF8BOM) && !c.in.eof && c.in.err == nil {
			c.in.more()
		}
		if bytes.HasPrefix(c.in.buf[:c.in.end], []byte(source.UTF8BOM)) {
			c.in.head += len(source.UTF8BOM)
			c.pos.Offset += int64(len(source.UTF8BOM))
		}
	}
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
		if !c.split.quoted[i] && strings.Contains(f, "\r") {
			return headerError(source.ReasonCSVHeader, rec.Offset, fmt.Errorf("read CSV header: its lines end with a lone carriage return (classic Mac OS line endings), which is not read as the end of a record: convert them to LF or CRLF"))
		}
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

// readRow reads one CSV row. rec has its positions set; rec.Err is set for
// a bad row: misplaced quotes, an unclosed quote at the end of the input
// (the rest of it is that row), a row longer than the record limit (read
// past, not kept). raw is the row's text, valid until the next read.
func (c *csvReader) readRow() (fields []string, rec source.Record, raw []byte, err error) {
	blank, lead := c.skipBlankLines()
	b := &c.in
	if b.head == b.end {
		if b.err != nil {
			return nil, rec, nil, fmt.Errorf("read %s: %w", c.path, b.err)
		}
		return nil, rec, nil, io.EOF
	}
	rec = source.Record{Path: c.path, Offset: c.pos.Offset + lead, Line: c.pos.Line + blank + 1}
	var st rowState
	for {
		_, done := st.scan(c.syntax, b.buf[b.head+int(st.seen):b.end], b.eof)
		if done || (b.eof && b.head+int(st.seen) == b.end) {
			break
		}
		if b.err != nil {
			return nil, rec, nil, fmt.Errorf("read %s: %w", c.path, b.err)
		}
		if st.seen > int64(c.max)+2 { // longer than the limit and a line ending
			rec, err = c.skipLong(rec, &st)
			return nil, rec, nil, err
		}
		b.more()
	}
	text := b.buf[b.head : b.head+int(st.seen)]
	b.head += int(st.seen)
	lines := int64(bytes.Count(text, []byte{'\n'}))
	rec.Next = source.Position{Offset: rec.Offset + st.seen, Line: rec.Line - 1 + lines}
	c.pos = rec.Next
	raw = rowText(text)
	switch {
	case st.err != nil:
		before := text[:st.errAt]
		line := rec.Line + int64(bytes.Count(before, []byte{'\n'}))
		col := len(before) - bytes.LastIndexByte(before, '\n')
		rec.Raw = source.CapRaw(raw)
		rec.Err = source.BadRecordf(source.ReasonCSVSyntax, "invalid CSV (line %d, column %d): %w", line, col, st.err)
		return nil, rec, raw, nil
	case st.open():
		rec.Raw = source.CapRaw(raw)
		rec.Err = unclosedQuote(rec, st.seen)
		return nil, rec, raw, nil
	case len(raw) > c.max:
		rec.Raw = source.CapRaw(raw)
		rec.Err = c.tooLarge(rec, rec.Line+int64(bytes.Count(raw, []byte{'\n'})), int64(len(raw)))
		return nil, rec, raw, nil
	}
	return c.split.split(raw), rec, raw, nil
}

// skipBlankLines consumes the empty lines before a record (encoding/csv
// skips them too), and a lone \r ending the input; it returns the lines
// and the bytes skipped.
func (c *csvReader) skipBlankLines() (blank, lead int64) {
	b := &c.in
	for {
		for b.end-b.head < 2 && !b.eof && b.err == nil {
			b.more()
		}
		p := b.buf[b.head:b.end]
		switch {
		case len(p) > 0 && p[0] == '\n':
			b.head++
			blank++
			lead++
		case len(p) > 1 && p[0] == '\r' && p[1] == '\n':
			b.head += 2
			blank++
			lead += 2
		case len(p) == 1 && p[0] == '\r' && b.eof:
			b.head++
			lead++
		default:
			return blank, lead
		}
	}
}

// skipLong reads past a record longer than the record limit, keeping only
// the start of its text, and returns it as one bad record: too_large when
// it ends, or an unclosed quote when the input ends inside it. Reading
// goes on at the next record.
func (c *csvReader) skipLong(rec source.Record, st *rowState) (source.Record, error) {
	b := &c.in
	text := b.buf[b.head : b.head+int(st.seen)]
	rec.Raw = source.CapRaw(text)
	lines := int64(bytes.Count(text, []byte{'\n'}))
	b.head += int(st.seen)
	last := rec.Line          // the record's last line
	size := st.seen           // its length without its line ending
	prev := text[len(text)-1] // the byte before the bytes scanned
	for {
		n, done := st.scan(c.syntax, b.buf[b.head:b.end], b.eof)
		chunk := b.buf[b.head : b.head+n]
		rec.Raw = source.AppendRaw(rec.Raw, chunk)
		lines += int64(bytes.Count(chunk, []byte{'\n'}))
		b.head += n
		last, size = rec.Line+lines, st.seen
		if done {
			last-- // the newline ending it
			size--
			if n > 1 && chunk[n-2] == '\r' || n == 1 && prev == '\r' {
				size--
			}
			break
		}
		if n > 0 {
			prev = chunk[n-1]
		}
		if b.eof && b.head == b.end {
			break
		}
		if b.err != nil {
			return rec, fmt.Errorf("read %s: %w", c.path, b.err)
		}
		b.more()
	}
	b.shrink(csvBufferSize)
	rec.Next = source.Position{Offset: rec.Offset + st.seen, Line: rec.Line - 1 + lines}
	c.pos = rec.Next
	if st.open() {
		rec.Err = unclosedQuote(rec, st.seen)
	} else {
		rec.Err = c.tooLarge(rec, last, size)
	}
	return rec, nil
}

// tooLarge is the error of a record, on lines rec.Line to last, size
// bytes long, over the record limit.
func (c *csvReader) tooLarge(rec source.Record, last, size int64) error {
	return source.BadRecordf(record.ReasonTooLarge, "CSV record on lines %d to %d is %d bytes, longer than the %s limit (a quoted field that long, or a quote opened by mistake): it is not loaded, and reading goes on after it",
		rec.Line, last, size, source.SizeString(c.max))
}

// unclosedQuote is the error of a record that the input's end leaves
// inside quotes, seen bytes long: the rest of the input.
func unclosedQuote(rec source.Record, seen int64) error {
	return source.BadRecordf(source.ReasonCSVSyntax, "unclosed quote: a quoted field of the CSV record starting on line %d is still open at the end of the input, so the rest of the input (%d bytes) is this one record, not loaded", rec.Line, seen)
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

// appendObject writes the object for n, in header order, from the fields
// split last. A quoted empty field ("") is an empty string; an empty cell
// is omitted (or null, or "" with --csv-empty string). Nested objects
// whose cells are all omitted are omitted too.
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
			if v == "" && !c.split.quoted[ch.col] && !c.emptyString {
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

// appendValue writes a CSV cell as a JSON value. Unless asStrings, a cell
// spelled as a JSON number becomes one when a reader gets the same value
// back (sameAsDouble), and true/false (any case) become booleans;
// everything else — "007", "1.", "+1", "NaN", ids beyond 2^53, decimals
// with more digits than a double holds — stays a string, so that typing
// never changes a value.
func appendValue(dst []byte, v string, asStrings bool) []byte {
	if !asStrings {
		if isInt, ok := jsonNumber(v); ok {
			if sameAsDouble(v, isInt) {
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

// maxExactInt is the largest integer below which every integer is a
// double: most JSON readers (JavaScript's, Cosmos DB's query engine) hold
// numbers as IEEE 754 doubles.
const maxExactInt = 1 << 53

// sameAsDouble reports whether the JSON number v reads back from a double
// as the value it spells: an integer within ±2^53, or a decimal whose
// nearest double, written shortest, is the same decimal (0.1, 1.50 and
// 1e3 are; 0.1234567890123456789 and 1e400 are not).
func sameAsDouble(v string, isInt bool) bool {
	if isInt {
		n, err := strconv.ParseInt(v, 10, 64)
		return err == nil && n >= -maxExactInt && n <= maxExactInt
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsInf(f, 0) {
		return false
	}
	var shortest, da, db [32]byte
	a, ok := decimalOf(da[:0], v)
	d, _ := decimalOf(db[:0], string(strconv.AppendFloat(shortest[:0], f, 'e', -1, 64)))
	return ok && a.neg == d.neg && a.exp == d.exp && bytes.Equal(a.digits, d.digits)
}

// decimal is a number's value as sign, significant digits (no leading or
// trailing zeros; none for zero) and the power of ten of the last digit.
type decimal struct {
	neg    bool
	digits []byte
	exp    int
}

// decimalOf is the value of v, spelled as a JSON number, its digits
// appended to dst; false when its exponent does not fit an int.
func decimalOf(dst []byte, v string) (decimal, bool) {
	d := decimal{neg: strings.HasPrefix(v, "-")}
	v = strings.TrimPrefix(v, "-")
	if i := strings.IndexAny(v, "eE"); i >= 0 {
		e, err := strconv.Atoi(v[i+1:])
		if err != nil {
			return d, false
		}
		d.exp, v = e, v[:i]
	}
	whole, frac, _ := strings.Cut(v, ".")
	d.exp -= len(frac)
	digits := bytes.TrimLeft(append(append(dst, whole...), frac...), "0")
	d.digits = bytes.TrimRight(digits, "0")
	d.exp += len(digits) - len(d.digits)
	if len(d.digits) == 0 {
		d.exp = 0
	}
	return d, true
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
