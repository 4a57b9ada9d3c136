package source

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/apache/thrift/lib/go/thrift"
)

// arrow-go trusts a page header's type to match the header it carries: a
// data page whose type was damaged into DATA_PAGE_V2 (or a dictionary page
// into DATA_PAGE, …) is a nil dereference inside its page reader. Where
// that reader runs on a goroutine of arrow-go's own — a struct's members,
// or every column of a batch decoded at once (parquetReader.start) — the
// panic cannot be recovered and ends the process: one damaged file in a
// directory, and nothing else is loaded. A randomly damaged file from the
// test data did that once in 400 (2026-11-29).
//
// pageGuard stands between arrow-go and the input's bytes and reads each
// page header as its bytes pass on their way to arrow-go, in the column
// chunks it is told of (expect): a header whose type lacks its own header
// fails the read, so arrow-go's page reader returns that error as it
// returns any failed read, and the row group is refused with a reason.
// Nothing is read twice: arrow-go reads a column chunk from its start to
// its end, each read where the last ended, and the guard follows each
// chunk from read to read. A read anywhere else (the footer, a chunk
// entered part-way) passes as it is, and a header the guard cannot make
// out is left to arrow-go: the guard refuses only what would panic.
type pageGuard struct {
	RandomReader
	mu      sync.Mutex
	chunks  map[int64]int64       // start → end of each chunk expected and not begun
	streams map[int64]*pageStream // chunks begun, by where their next read starts
}

// pageStream is a column chunk being read: where its next page header
// starts, where the chunk ends, and, while a header is only partly read,
// its bytes so far.
type pageStream struct {
	next, end int64
	partial   []byte
}

// maxPageHeader bounds the bytes a guard keeps of a header it has not yet
// read whole; a header longer than that (its statistics are kept in it)
// is left to arrow-go.
const maxPageHeader = 1 << 20

func newPageGuard(r RandomReader) *pageGuard {
	return &pageGuard{RandomReader: r, chunks: map[int64]int64{}, streams: map[int64]*pageStream{}}
}

// expect tells the guard of column chunks about to be read.
func (g *pageGuard) expect(chunks []ByteRange) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range chunks {
		g.chunks[c.Start] = c.End
	}
}

func (g *pageGuard) ReadAt(p []byte, off int64) (int, error) {
	n, err := g.RandomReader.ReadAt(p, off)
	if n > 0 {
		if bad := g.pass(p[:n], off); bad != nil {
			return 0, bad
		}
	}
	return n, err
}

// pass reads the page headers in b, the bytes at off, of the chunk whose
// read they are.
func (g *pageGuard) pass(b []byte, off int64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.streams[off]
	if s != nil {
		delete(g.streams, off)
	} else if end, ok := g.chunks[off]; ok {
		delete(g.chunks, off)
		s = &pageStream{next: off, end: end}
	} else {
		return nil
	}
	follow, err := s.pass(b, off)
	if follow {
		g.streams[off+int64(len(b))] = s
	}
	return err
}

// pass reads the headers that start in b, the bytes at off, and reports
// whether the chunk goes on past them.
func (s *pageStream) pass(b []byte, off int64) (follow bool, err error) {
	buf, base := b, off
	if len(s.partial) > 0 { // the bytes from s.next to off
		s.partial = append(s.partial, b...)
		buf, base = s.partial, s.next
	}
	for s.next < s.end && s.next < base+int64(len(buf)) {
		h := buf[s.next-base:]
		n, err := checkPageHeader(h)
		switch {
		case errors.Is(err, errShortHeader):
			if len(h) > maxPageHeader {
				return false, nil
			}
			s.partial = append([]byte(nil), h...)
			return true, nil
		case errors.Is(err, errPageHeader):
			return false, fmt.Errorf("page at byte %d: %w", s.next, err)
		case err != nil:
			return false, nil // arrow-go's to judge
		}
		s.next += n
	}
	s.partial = nil
	return s.next < s.end, nil
}

var (
	errShortHeader = errors.New("page header not read whole")
	errPageHeader  = errors.New("damaged page header")
)

// The page types and the fields of their headers in the Parquet format's
// PageHeader (parquet.thrift).
const (
	pageData       = 0
	pageDictionary = 2
	pageDataV2     = 3

	fieldType       = 1
	fieldCompressed = 3
	fieldData       = 5
	fieldDictionary = 7
	fieldDataV2     = 8
)

// checkPageHeader reads the page header at the start of b (Thrift's
// compact protocol) and returns how many bytes the header and its page
// take: errShortHeader when b ends inside the header, errPageHeader when
// its type lacks the header of that type, another error when it cannot
// be made out.
func checkPageHeader(b []byte) (int64, error) {
	// Thrift reads from a copy: of the bytes a header usually fits in,
	// more only when it does not (b is the rest of a read, 256 KiB).
	for w := 1 << 10; ; w *= 8 {
		h := b[:min(w, len(b))]
		buf := thrift.NewTMemoryBufferLen(len(h))
		buf.Write(h)
		p := thrift.NewTCompactProtocolConf(buf, &thrift.TConfiguration{})
		n, err := readPageHeader(p)
		switch {
		case err == nil:
			return int64(len(h)-buf.Len()) + n, nil
		case buf.Len() > 0:
			return 0, err
		case len(h) == len(b):
			return 0, errShortHeader
		}
	}
}

// readPageHeader reads a page header and returns its page's compressed size.
func readPageHeader(p *thrift.TCompactProtocol) (int64, error) {
	ctx := context.Background()
	if _, err := p.ReadStructBegin(ctx); err != nil {
		return 0, err
	}
	typ, size := int32(-1), int32(-1)
	var structs uint64 // the fields, below 64, that are structs
	for {
		_, t, id, err := p.ReadFieldBegin(ctx)
		if err != nil {
			return 0, err
		}
		if t == thrift.STOP {
			break
		}
		switch {
		case id == fieldType && t == thrift.I32:
			typ, err = p.ReadI32(ctx)
		case id == fieldCompressed && t == thrift.I32:
			size, err = p.ReadI32(ctx)
		default:
			if t == thrift.STRUCT && id >= 0 && id < 64 {
				structs |= 1 << id
			}
			err = p.Skip(ctx, t)
		}
		if err != nil {
			return 0, err
		}
		if err := p.ReadFieldEnd(ctx); err != nil {
			return 0, err
		}
	}
	if err := p.ReadStructEnd(ctx); err != nil {
		return 0, err
	}
	if size < 0 {
		return 0, errors.New("no page size") // arrow-go says what is wrong
	}
	for _, c := range []struct {
		typ   int32
		field int16
		name  string
	}{{pageData, fieldData, "DATA_PAGE"}, {pageDictionary, fieldDictionary, "DICTIONARY_PAGE"}, {pageDataV2, fieldDataV2, "DATA_PAGE_V2"}} {
		if typ == c.typ && structs&(1<<c.field) == 0 {
			return 0, fmt.Errorf("%w: a %s without its header", errPageHeader, c.name)
		}
	}
	return int64(size), nil
}
