package csv

import (
	"bytes"
	"encoding/csv"
	"io"
)

// The CSV reader's own record scanner. encoding/csv cannot read CSV as it
// was written: it turns a \r\n inside quotes into \n, it does not say
// whether an empty field was quoted (RFC 4180 and PostgreSQL tell "" from
// nothing), and after a record longer than its buffer it cannot go on. So
// a record is found in two steps: its end, by following the quoting byte
// by byte from its start (rowState.scan — the same quoting the cut
// automaton follows, so a reader and a cut agree where records end), then
// its fields, from its text (splitFields).

// The states of a record being scanned.
const (
	rowFieldStart uint8 = iota
	rowUnquoted         // in a field that did not start with a quote
	rowQuoted           // between a field's quotes
	rowQuote            // just after a quote inside a quoted field
	rowQuoteCR          // a \r after that quote: the record's end if \n follows
	rowBad              // a quote out of place: the record ends with its line
)

// rowSyntax is what a scan follows: the delimiter, and whether bare quotes
// are text.
type rowSyntax struct {
	delim []byte
	lazy  bool
	// plain marks the bytes an unquoted field goes on over.
	plain [256]bool
}

func newRowSyntax(delim []byte, lazy bool) *rowSyntax {
	x := &rowSyntax{delim: delim, lazy: lazy}
	for i := range x.plain {
		x.plain[i] = true
	}
	x.plain[delim[0]], x.plain['\n'], x.plain['"'] = false, false, false
	return x
}

// rowState follows one record's quoting across the reads it spans.
type rowState struct {
	st uint8
	// errAt is the record's byte at which the quoting went wrong (rowBad),
	// and err what was wrong (encoding/csv's words for it).
	errAt int64
	err   error
	// seen is how many bytes of the record the scan has consumed.
	seen int64
}

// scan consumes b, the record's bytes after the seen ones, up to and
// including the newline that ends the record (done), or all of b. It
// stops short of b's end only when it must see more bytes to decide (a
// delimiter of more bytes) and atEOF is false.
func (s *rowState) scan(x *rowSyntax, b []byte, atEOF bool) (n int, done bool) {
	n, done = s.follow(x, b, atEOF)
	s.seen += int64(n)
	return n, done
}

func (s *rowState) follow(x *rowSyntax, b []byte, atEOF bool) (n int, done bool) {
	for n < len(b) && !done {
		switch s.st {
		case rowQuoted:
			j := bytes.IndexByte(b[n:], '"')
			if j < 0 {
				return len(b), false
			}
			n, s.st = n+j+1, rowQuote
			continue
		case rowBad:
			j := bytes.IndexByte(b[n:], '\n')
			if j < 0 {
				return len(b), false
			}
			return n + j + 1, true
		case rowQuoteCR:
			if b[n] == '\n' {
				s.st = rowFieldStart
				return n + 1, true
			}
		default:
			var wait, ok bool
			if n, done, wait, ok = s.boundary(x, b, n, atEOF); wait {
				return n, false
			} else if ok {
				continue
			}
		}
		n = s.step(x, b, n)
	}
	return n, done
}

// boundary consumes the newline or the delimiter at b[n] that ends a
// field (ok), or says it must see more bytes to know (wait).
func (s *rowState) boundary(x *rowSyntax, b []byte, n int, atEOF bool) (next int, done, wait, ok bool) {
	switch {
	case b[n] == '\n':
		s.st = rowFieldStart
		return n + 1, true, false, true
	case b[n] != x.delim[0]:
		return n, false, false, false
	case len(b)-n < len(x.delim):
		return n, false, !atEOF, false
	case !bytes.HasPrefix(b[n:], x.delim):
		return n, false, false, false
	}
	s.st = rowFieldStart
	return n + len(x.delim), false, false, true
}

// step consumes b[n], which ends no field, and the plain bytes after it
// in an unquoted field.
func (s *rowState) step(x *rowSyntax, b []byte, n int) int {
	c := b[n]
	switch s.st {
	case rowFieldStart, rowUnquoted:
		switch {
		case c == '"' && s.st == rowFieldStart:
			s.st = rowQuoted
		case x.plain[c]:
			for n++; n < len(b) && x.plain[b[n]]; n++ {
			}
			s.st = rowUnquoted
			return n
		case c == '"' && !x.lazy:
			s.fail(n, csv.ErrBareQuote)
		default:
			s.st = rowUnquoted
		}
	case rowQuote:
		switch {
		case c == '"':
			s.st = rowQuoted
		case c == '\r':
			s.st = rowQuoteCR
		case x.lazy: // the quote was text, and so is c
			s.st = rowQuoted
		default:
			s.fail(n, csv.ErrQuote)
		}
	case rowQuoteCR:
		switch {
		case x.lazy && c == '"': // the quote and the \r were text
			s.st = rowQuote
		case x.lazy:
			s.st = rowQuoted
		default:
			s.fail(n, csv.ErrQuote)
		}
	}
	return n + 1
}

// fail marks the record bad at b[n] (b as scan has it), its line to be
// skipped.
func (s *rowState) fail(n int, err error) {
	s.st = rowBad
	s.errAt = s.seen + int64(n)
	s.err = err
}

// open reports whether the record ends inside quotes: an unclosed quote
// when its input ends there.
func (s *rowState) open() bool { return s.st == rowQuoted }

// rowText is a record's text without its line ending: the \n that ends
// it and a \r before that, or a \r at the very end of the input.
func rowText(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

// fieldSplitter cuts a record's text into fields, keeping each value's
// bytes as written between its quotes (a "" is one quote) and whether it
// was quoted. Its memory is reused from record to record.
type fieldSplitter struct {
	delim  []byte
	vals   []byte
	ends   []int
	quoted []bool
	fields []string
}

// split cuts text (rowText of a record the scan found well quoted). The
// fields are valid until the next split.
func (p *fieldSplitter) split(text []byte) []string {
	p.vals, p.ends, p.quoted = p.vals[:0], p.ends[:0], p.quoted[:0]
	i := 0
	for {
		quoted := i < len(text) && text[i] == '"'
		if quoted {
			i = p.quotedField(text, i+1)
		} else {
			j := bytes.Index(text[i:], p.delim)
			if j < 0 {
				j = len(text) - i
			}
			p.vals = append(p.vals, text[i:i+j]...)
			i += j
		}
		p.ends = append(p.ends, len(p.vals))
		p.quoted = append(p.quoted, quoted)
		if i >= len(text) {
			break
		}
		i += len(p.delim) // at a delimiter
	}
	all := string(p.vals)
	p.fields = p.fields[:0]
	from := 0
	for _, e := range p.ends {
		p.fields = append(p.fields, all[from:e])
		from = e
	}
	return p.fields
}

// quotedField appends the value of the quoted field whose text starts at
// text[i] (after its opening quote) and returns where it ends: at a
// delimiter or the text's end. A quote followed by anything else is text
// (only a lazy scan lets one through).
func (p *fieldSplitter) quotedField(text []byte, i int) int {
	for {
		j := bytes.IndexByte(text[i:], '"')
		if j < 0 {
			p.vals = append(p.vals, text[i:]...)
			return len(text)
		}
		p.vals = append(p.vals, text[i:i+j]...)
		i += j + 1
		switch {
		case i < len(text) && text[i] == '"':
			p.vals = append(p.vals, '"')
			i++
		case i == len(text) || bytes.HasPrefix(text[i:], p.delim):
			return i
		default:
			p.vals = append(p.vals, '"')
		}
	}
}

// rowBuffer holds the bytes read ahead of the scan: buf[head:end] is read
// and not yet consumed.
type rowBuffer struct {
	src       io.Reader
	buf       []byte
	head, end int
	eof       bool
	err       error // a read error other than EOF
}

// more reads at least one more byte after buf[end] unless the input is at
// its end, keeping buf[head:end]: it moves it to the buffer's start or
// grows the buffer when there is no room after it.
func (r *rowBuffer) more() {
	if r.eof || r.err != nil {
		return
	}
	if r.end == len(r.buf) {
		if kept := r.end - r.head; kept > len(r.buf)/2 {
			grown := make([]byte, 2*len(r.buf))
			copy(grown, r.buf[r.head:r.end])
			r.buf = grown
		} else {
			copy(r.buf, r.buf[r.head:r.end])
		}
		r.end -= r.head
		r.head = 0
	}
	for {
		n, err := r.src.Read(r.buf[r.end:])
		r.end += n
		if err == io.EOF {
			r.eof = true
		} else if err != nil {
			r.err = err
		}
		if n > 0 || err != nil {
			return
		}
	}
}

// shrink lets a buffer grown for a long record go, once it is consumed.
func (r *rowBuffer) shrink(size int) {
	if len(r.buf) > 4*size && r.end-r.head <= size {
		small := make([]byte, size)
		r.end = copy(small, r.buf[r.head:r.end])
		r.head = 0
		r.buf = small
	}
}
