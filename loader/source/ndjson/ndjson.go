// Package ndjson reads NDJSON inputs, and inputs that are one JSON array of
// objects, as records (source.FormatNDJSON), and cuts plain ones at line
// starts.
package ndjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"unicode/utf8"

	"github.com/cosmosloader/loader/internal/parallel"
	"github.com/cosmosloader/loader/loader/source"
)

// defaultBlockSize is the read size of the NDJSON reader. Records are handed
// out as sub-slices of these blocks, so one allocation serves ~1,700 records
// of 600 bytes and no byte is copied between the file and the mapper.
const defaultBlockSize = 1 << 20

var bom = []byte(source.UTF8BOM)

// Modes of an NDJSON input.
const (
	modeDetect = iota // first call: is it NDJSON or one JSON array?
	modeLines
	modeArray
)

// States of the JSON-array element scanner.
const (
	arrBetween = iota // between elements: skipping whitespace and commas
	arrValue          // inside an element
	arrAfter          // after the closing ']'
	arrDone
)

// ndjsonReader reads NDJSON, and JSON arrays of objects.
//
// Blocks are never reused: when a block is full, the unconsumed tail is copied
// to a fresh block and the old one is left to the records that point into it
// (see Record). buf[r:w] is the unread window; off and line are the stream
// position of buf[r].
//
// A JSON array ("[" as the first non-space byte of the file) is scanned for
// element boundaries — string, escape and bracket-depth state only, no
// parsing — and each element is a record. Separators are lenient: any run of
// whitespace and commas separates elements. source.Record.Next of an element
// is the offset just after it; opening an array file at such an offset
// resumes element scanning there (the file's head is read first to know it is
// an array).
type ndjsonReader struct {
	path      string
	src       io.ReadCloser
	max       int
	blockSize int

	buf  []byte
	r, w int
	off  int64
	line int64
	base int64 // source.Position.Base of the positions handed out
	// folders are the fields of the input's partition folders, put
	// first in each record (addFolders); foldersLen their JSON's length.
	folders    []source.PartitionField
	foldersLen int
	p          int // bytes of buf[r:] already scanned without finding the end of the record
	eof        bool
	rerr       error // sticky fatal read error, returned once the window is used up

	mode int

	// array element scanner state
	ast        int
	kind       byte // first byte of the element
	depth      int
	inStr, esc bool
	elemOff    int64
	elemLine   int64
	discarding bool   // element longer than max: consumed as scanned
	raw        []byte // the start of a discarded element, for source.Record.Raw
}

// Format reads NDJSON, and JSON arrays of objects
// (FormatNDJSON).
type Format struct{}

// Open opens an NDJSON input at start; --columns refuses it (its records
// are not columns).
func (Format) Open(in source.Input, stdin io.Reader, opts source.Options, start source.Position) (source.Reader, error) {
	if len(opts.Columns) > 0 {
		path := in.Path
		if in.Stdin && path == "" {
			path = "-"
		}
		return nil, &source.InputError{Code: source.ReasonColumns, Line: start.Line + 1, Offset: start.Offset,
			Err: fmt.Errorf("%s is NDJSON: --columns selects the columns of CSV and Parquet inputs", path)}
	}
	path, open, err := source.Streams(in, stdin, opts, start)
	if err != nil {
		return nil, err
	}
	r, err := openNDJSON(path, open, opts, source.Folders(in), start)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return r, nil
}

// Splittable: a plain file or blob, not one JSON array.
func (Format) Splittable(in source.Input, _ source.Options) (bool, string) {
	head, why := source.PlainHead(in)
	if why != "" {
		return false, why
	}
	if t := bytes.TrimLeft(head, " \t\r\n\ufeff"); len(t) > 0 && t[0] == '[' {
		return false, "it is one JSON array"
	}
	return true, ""
}

// Split cuts a splittable input after a newline near each even target,
// found by reading a little from each cut (LineStart): the ranges' lines
// count from their start (source.Position.Base), so a file or blob of any size
// is cut at once.
func (f Format) Split(in source.Input, opts source.Options, n int) ([]source.Range, string, error) {
	if ok, why := f.Splittable(in, opts); !ok {
		return []source.Range{{}}, why, nil
	}
	size, err := source.RawSize(in)
	if err != nil {
		return nil, "", fmt.Errorf("split %s: %w", in.Path, err)
	}
	targets := source.EvenTargets(size, n)
	starts := make([]source.Position, len(targets))
	err = parallel.Each(len(targets), startsAtOnce, func(i int) error {
		var err error
		starts[i], err = source.LineStart(in, targets[i])
		return err
	})
	if err != nil {
		return nil, "", fmt.Errorf("split %s: %w", in.Path, err)
	}
	return source.RangesFrom(starts, size), "", nil
}

// startsAtOnce is how many line starts Split looks for at once: a blob's
// reads wait on the network.
const startsAtOnce = 16

// BoundaryAfter is the line start at or after target (LineStart), past
// from.
func (Format) BoundaryAfter(in source.Input, _ source.Options, from source.Position, target int64) (source.Position, string, error) {
	p, err := source.LineStart(in, max(target, from.Offset+1))
	return p, "", err
}

// ReadersAtOnce: no bound of NDJSON's own.
func (Format) ReadersAtOnce(source.Input, source.Options) int { return math.MaxInt }

func openNDJSON(path string, open source.Opener, opts source.Options, folders []source.Folder, start source.Position) (source.Reader, error) {
	if start.Offset < 0 || start.Line < 0 {
		return nil, fmt.Errorf("invalid start position %+v", start)
	}
	s := &ndjsonReader{path: path, max: opts.MaxRecord(), blockSize: opts.BlockSize,
		folders: source.PartitionFields(folders, nil, nil, opts.CSVEmptyNull)}
	for _, f := range s.folders {
		s.foldersLen += len(f.Key) + len(f.JSON) + 1 // and a comma
	}
	if s.blockSize <= 0 {
		s.blockSize = defaultBlockSize
	}
	if start.Offset > 0 {
		// Only the head of the file says whether it is one JSON array.
		head, err := open(0)
		if err != nil {
			return nil, err
		}
		h := &ndjsonReader{path: path, src: head, max: s.max, blockSize: 64 << 10}
		isArray, err := h.detect()
		head.Close()
		if err != nil {
			return nil, err
		}
		s.mode = modeLines
		if isArray {
			s.mode, s.ast = modeArray, arrBetween
		}
	}
	src, err := open(start.Offset)
	if err != nil {
		return nil, err
	}
	s.src = src
	s.off, s.line, s.base = start.Offset, start.Line, start.Base
	return s, nil
}

func (s *ndjsonReader) Close() error { return s.src.Close() }

// addFolders puts the fields of the input's partition folders
// (source.PartitionFields) first in rec's object, but for those the record
// has a member of: its own value wins, as a column does over a folder.
// (Cosmos DB stores a document with duplicate names as it is sent, and the
// Java SDK and the Spark connector then fail to read it.) Raw keeps the
// input's text, for a dead letter. A record that is not an object is left for
// the mapper to refuse.
func (s *ndjsonReader) addFolders(rec *source.Record) {
	if len(s.folders) == 0 {
		return
	}
	data := rec.Data
	i := 0
	for i < len(data) && isSpace(data[i]) {
		i++
	}
	if i == len(data) || data[i] != '{' {
		return
	}
	j := i + 1
	for j < len(data) && isSpace(data[j]) {
		j++
	}
	out := make([]byte, 0, len(data)+s.foldersLen)
	out = append(out, data[:i+1]...)
	added := 0
	for _, f := range s.folders {
		if hasMember(data[i:], f.Name) {
			continue
		}
		if added > 0 {
			out = append(out, ',')
		}
		out = append(out, f.Key...)
		out = append(out, f.JSON...)
		added++
	}
	if added == 0 {
		return
	}
	if j < len(data) && data[j] != '}' {
		out = append(out, ',')
	}
	out = append(out, data[i+1:]...)
	rec.Raw, rec.Data = rec.Data, out
}

func (s *ndjsonReader) pos() source.Position {
	return source.Position{Offset: s.off, Line: s.line, Base: s.base}
}

// fill reads more input into the window, moving the unread tail to a new
// block when the current one is full.
func (s *ndjsonReader) fill() {
	if s.w == len(s.buf) {
		tail := s.w - s.r
		n := s.blockSize
		for n < 2*tail {
			n *= 2
		}
		nb := make([]byte, n)
		copy(nb, s.buf[s.r:s.w])
		s.buf, s.r, s.w = nb, 0, tail
	}
	n, err := s.src.Read(s.buf[s.w:])
	s.w += n
	if err == io.EOF {
		s.eof = true
	} else if err != nil {
		s.rerr = fmt.Errorf("read %s: %w", s.path, err)
	}
}

// hasMember reports whether obj, a JSON object, has a top-level member
// named name. Most records cannot (the name's quoted bytes appear nowhere,
// and no escape could spell them): only the others are decoded. Invalid
// JSON reports false; the mapper refuses it.
func hasMember(obj []byte, name string) bool {
	if !bytes.Contains(obj, []byte(`"`+name+`"`)) && !bytes.Contains(obj, []byte(`\u`)) {
		return false
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(obj, &members) != nil {
		return false
	}
	_, ok := members[name]
	return ok
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// detect reports whether the stream is one JSON array, consuming the BOM,
// leading whitespace and '[' if it is, and nothing if it is not.
func (s *ndjsonReader) detect() (bool, error) {
	for {
		b := s.buf[s.r:s.w]
		i := 0
		if bytes.HasPrefix(b, bom) {
			i = len(bom)
		} else if len(b) < len(bom) && bytes.HasPrefix(bom, b) && !s.eof && s.rerr == nil {
			s.fill()
			continue
		}
		for i < len(b) && isSpace(b[i]) {
			i++
		}
		if i < len(b) {
			if b[i] != '[' {
				return false, nil
			}
			s.line += int64(bytes.Count(b[:i], []byte{'\n'}))
			s.r += i + 1
			s.off += int64(i + 1)
			return true, nil
		}
		if s.rerr != nil {
			return false, s.rerr
		}
		if s.eof || len(b) > s.max {
			return false, nil
		}
		s.fill()
	}
}

func (s *ndjsonReader) Next() (source.Record, error) {
	switch s.mode {
	case modeDetect:
		isArray, err := s.detect()
		if err != nil {
			return source.Record{}, err
		}
		s.mode = modeLines
		if isArray {
			s.mode, s.ast = modeArray, arrBetween
			return s.nextElement()
		}
		return s.nextLine()
	case modeArray:
		return s.nextElement()
	}
	return s.nextLine()
}

func (s *ndjsonReader) nextLine() (source.Record, error) {
	for {
		i := bytes.IndexByte(s.buf[s.r+s.p:s.w], '\n')
		var data []byte
		rec := source.Record{Path: s.path, Offset: s.off, Line: s.line + 1, Base: s.base}
		if i >= 0 {
			i += s.p
			data = s.buf[s.r : s.r+i]
			s.r += i + 1
			s.off += int64(i + 1)
			s.line++
		} else {
			s.p = s.w - s.r
			if s.p > s.max {
				return s.skipLongLine()
			}
			if s.rerr != nil {
				return source.Record{}, s.rerr
			}
			if !s.eof {
				s.fill()
				continue
			}
			if s.r == s.w {
				return source.Record{}, io.EOF
			}
			data = s.buf[s.r:s.w]
			s.off += int64(s.w - s.r)
			s.r = s.w
			rec.Unterminated = true
		}
		s.p = 0
		rec.Next = s.pos()
		if n := len(data); n > 0 && data[n-1] == '\r' {
			data = data[:n-1]
		}
		dataOff := rec.Offset
		if rec.Offset == 0 && bytes.HasPrefix(data, bom) {
			data = data[len(bom):]
			dataOff += int64(len(bom))
		}
		if isBlank(data) {
			continue
		}
		switch {
		case len(data) > s.max:
			rec.Raw = source.CapRaw(data)
			rec.Err = source.BadRecordf(source.ReasonTooLong, "line longer than %s", source.SizeString(s.max))
		case !validUTF8(data):
			rec.Raw = source.CapRaw(data)
			rec.Err = source.InvalidUTF8(data, dataOff)
		default:
			rec.Data = data[:len(data):len(data)]
			s.addFolders(&rec)
		}
		return rec, nil
	}
}

// skipLongLine consumes a line longer than max without buffering it.
func (s *ndjsonReader) skipLongLine() (source.Record, error) {
	rec := source.Record{
		Path:   s.path,
		Offset: s.off,
		Line:   s.line + 1,
		Base:   s.base,
		Err:    source.BadRecordf(source.ReasonTooLong, "line longer than %s", source.SizeString(s.max)),
	}
	for {
		if i := bytes.IndexByte(s.buf[s.r:s.w], '\n'); i >= 0 {
			rec.Raw = source.AppendRaw(rec.Raw, s.buf[s.r:s.r+i])
			s.r += i + 1
			s.off += int64(i + 1)
			s.line++
			break
		}
		rec.Raw = source.AppendRaw(rec.Raw, s.buf[s.r:s.w])
		s.off += int64(s.w - s.r)
		s.r = s.w
		if s.rerr != nil {
			return source.Record{}, s.rerr
		}
		if s.eof {
			rec.Unterminated = true
			break
		}
		s.fill()
	}
	s.p = 0
	rec.Next = s.pos()
	return rec, nil
}

func isBlank(b []byte) bool {
	if len(b) == 0 {
		return true
	}
	if !isSpace(b[0]) {
		return false // the common case: a line starting with '{'
	}
	for _, c := range b {
		if !isSpace(c) {
			return false
		}
	}
	return true
}

// validUTF8 is utf8.Valid; named so the fast path stays in one place.
func validUTF8(b []byte) bool { return utf8.Valid(b) }

func (s *ndjsonReader) nextElement() (source.Record, error) {
	for {
		switch s.ast {
		case arrBetween:
			b := s.buf[s.r:s.w]
			i := 0
			for i < len(b) && (isSpace(b[i]) || b[i] == ',') {
				if b[i] == '\n' {
					s.line++
				}
				i++
			}
			s.r += i
			s.off += int64(i)
			if i == len(b) {
				if s.rerr != nil {
					return source.Record{}, s.rerr
				}
				if s.eof {
					// An array missing its ']' after a complete element has
					// lost nothing that could be reported as a record.
					s.ast = arrDone
					continue
				}
				s.fill()
				continue
			}
			if b[i] == ']' {
				s.r++
				s.off++
				s.ast = arrAfter
				continue
			}
			s.ast = arrValue
			s.kind, s.depth, s.inStr, s.esc, s.p = b[i], 0, false, false, 0
			s.elemOff, s.elemLine = s.off, s.line+1
			s.discarding, s.raw = false, nil
		case arrValue:
			if s.scanValue() {
				return s.emitElement(), nil
			}
			if !s.discarding && s.p > s.max {
				s.discarding = true
			}
			if s.discarding {
				s.raw = source.AppendRaw(s.raw, s.buf[s.r:s.r+s.p])
				s.consume(s.p)
			}
			if s.rerr != nil {
				return source.Record{}, s.rerr
			}
			if s.eof {
				if !isComposite(s.kind) {
					return s.emitElement(), nil // a scalar ends at the end of input
				}
				raw := source.AppendRaw(s.raw, s.buf[s.r:s.r+s.p])
				s.consume(s.p)
				s.ast = arrDone
				return source.Record{
					Path: s.path, Line: s.elemLine, Base: s.base, Offset: s.elemOff, Next: s.pos(), Raw: raw,
					Err:          source.BadRecordf(source.ReasonTruncated, "truncated JSON array element: the input ends inside it"),
					Unterminated: true,
				}, nil
			}
			s.fill()
		case arrAfter:
			b := s.buf[s.r:s.w]
			i := 0
			for i < len(b) && isSpace(b[i]) {
				if b[i] == '\n' {
					s.line++
				}
				i++
			}
			s.r += i
			s.off += int64(i)
			if i < len(b) {
				rec := source.Record{Path: s.path, Line: s.line + 1, Base: s.base, Offset: s.off,
					Err: source.BadRecordf(source.ReasonTrailingData, "data after the closing ']' of the JSON array")}
				for {
					rec.Raw = source.AppendRaw(rec.Raw, s.buf[s.r:s.w])
					s.consume(s.w - s.r)
					if s.rerr != nil {
						return source.Record{}, s.rerr
					}
					if s.eof {
						break
					}
					s.fill()
				}
				rec.Next = s.pos()
				s.ast = arrDone
				return rec, nil
			}
			if s.rerr != nil {
				return source.Record{}, s.rerr
			}
			if s.eof {
				s.ast = arrDone
				continue
			}
			s.fill()
		default:
			if s.rerr != nil {
				return source.Record{}, s.rerr
			}
			return source.Record{}, io.EOF
		}
	}
}

// consume drops n scanned bytes of the window, counting their newlines.
func (s *ndjsonReader) consume(n int) {
	s.line += int64(bytes.Count(s.buf[s.r:s.r+n], []byte{'\n'}))
	s.r += n
	s.off += int64(n)
	s.p -= n
}

func isComposite(c byte) bool { return c == '{' || c == '[' || c == '"' || c == '}' }

func (s *ndjsonReader) emitElement() source.Record {
	elem := s.buf[s.r : s.r+s.p]
	discarded := s.discarding
	s.consume(s.p)
	s.ast = arrBetween
	rec := source.Record{Path: s.path, Line: s.elemLine, Base: s.base, Offset: s.elemOff, Next: s.pos()}
	switch {
	case discarded:
		rec.Raw = source.AppendRaw(s.raw, elem)
		rec.Err = source.BadRecordf(source.ReasonTooLong, "array element longer than %s", source.SizeString(s.max))
	case len(elem) > s.max:
		rec.Raw = source.CapRaw(elem)
		rec.Err = source.BadRecordf(source.ReasonTooLong, "array element longer than %s", source.SizeString(s.max))
	case !validUTF8(elem):
		rec.Raw = source.CapRaw(elem)
		rec.Err = source.InvalidUTF8(elem, rec.Offset)
	default:
		rec.Data = elem[:len(elem):len(elem)]
		s.addFolders(&rec)
	}
	s.discarding, s.raw = false, nil
	return rec
}

// scanValue advances s.p over the current element and reports whether its
// end was found (then s.p is its length).
func (s *ndjsonReader) scanValue() bool {
	b := s.buf[s.r:s.w]
	i := s.p
	if !isComposite(s.kind) {
		for ; i < len(b); i++ {
			if c := b[i]; isSpace(c) || c == ',' || c == ']' {
				s.p = i
				return true
			}
		}
		s.p = i
		return false
	}
	for i < len(b) {
		if s.inStr {
			if s.esc {
				s.esc = false
				i++
				continue
			}
			j := indexQuoteOrBackslash(b[i:])
			if j < 0 {
				i = len(b)
				break
			}
			i += j
			if b[i] == '\\' {
				s.esc = true
				i++
				continue
			}
			s.inStr = false
			i++
			if s.depth <= 0 {
				s.p = i
				return true
			}
			continue
		}
		switch b[i] {
		case '"':
			s.inStr = true
		case '{', '[':
			s.depth++
		case '}', ']':
			s.depth--
			if s.depth <= 0 {
				s.p = i + 1
				return true
			}
		}
		i++
	}
	s.p = i
	return false
}

func indexQuoteOrBackslash(b []byte) int {
	q := bytes.IndexByte(b, '"')
	if q < 0 {
		q = len(b)
	}
	if k := bytes.IndexByte(b[:q], '\\'); k >= 0 {
		return k
	}
	if q == len(b) {
		return -1
	}
	return q
}
