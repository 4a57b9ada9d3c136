package parquet

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/thrift/lib/go/thrift"

	"github.com/cosmosloader/loader/loader/source"
)

// arrow-go trusts a page header's type to match the header it carries: a
// data page whose type was damaged into DATA_PAGE_V2 (or a dictionary page
// into DATA_PAGE, …) is a nil dereference inside its page reader. Where
// that reader runs on a goroutine of arrow-go's own — a struct's members,
// or every column of a batch decoded at once (parquetReader.start) — the
// panic cannot be recovered and ends the process: one damaged file in a
// directory, and nothing else is loaded. Randomly damaged files from the
// test data did that.
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
	source.RandomReader
	mu      sync.Mutex
	chunks  map[int64]guardedChunk // each chunk expected and not begun, by its start
	streams map[int64]*pageStream  // chunks begun, by where their next read starts
	// damaged are the chunks with a damaged header: every read of them
	// fails, for arrow-go reads again after a failed read (its buffered
	// reader forgets the error once it has returned it).
	damaged []damagedChunk
}

// pageStream is a column chunk being read: where it starts, where its
// next page header starts, where it ends, and, while a header is only
// partly read, its bytes so far.
type pageStream struct {
	start, next, end int64
	typ              parquet.Type
	snappy           bool
	partial          []byte
}

// guardedChunk is a column chunk the guard follows: its bytes and its
// values' physical type.
type guardedChunk struct {
	source.ByteRange
	typ parquet.Type
	// snappy: the chunk's pages are Snappy blocks, each of which says how
	// long it decodes to (see checkPage).
	snappy bool
}

type damagedChunk struct {
	source.ByteRange
	err error
}

// maxPageHeader bounds the bytes a guard keeps of a header it has not yet
// read whole; a header longer than that (its statistics are kept in it)
// is left to arrow-go.
const maxPageHeader = 1 << 20

func newPageGuard(r source.RandomReader) *pageGuard {
	return &pageGuard{RandomReader: r, chunks: map[int64]guardedChunk{}, streams: map[int64]*pageStream{}}
}

// expect tells the guard of column chunks about to be read.
func (g *pageGuard) expect(chunks []guardedChunk) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range chunks {
		g.chunks[c.Start] = c
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
	for _, d := range g.damaged {
		if off < d.End && off+int64(len(b)) > d.Start {
			return d.err
		}
	}
	// A chunk may start where the one before it ended.
	s := g.streams[off]
	delete(g.streams, off)
	if c, ok := g.chunks[off]; ok {
		delete(g.chunks, off)
		s = &pageStream{start: off, next: off, end: c.End, typ: c.typ, snappy: c.snappy}
	}
	if s == nil {
		return nil
	}
	follow, err := s.pass(b, off)
	if follow {
		g.streams[off+int64(len(b))] = s
	}
	if err != nil {
		g.damaged = append(g.damaged, damagedChunk{source.ByteRange{Start: s.start, End: s.end}, err})
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
		n, err := checkPage(h, s.typ, s.snappy)
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

	fieldType         = 1
	fieldUncompressed = 2
	fieldCompressed   = 3
	fieldData         = 5
	fieldDictionary   = 7
	fieldDataV2       = 8
)

// checkPageHeader reads the page header at the start of b (Thrift's
// compact protocol), of a chunk of values of type typ, and returns how
// many bytes the header and its page take: errShortHeader when b ends
// inside the header, errPageHeader when it would make arrow-go panic (see
// damage), another error when it cannot be made out.
func checkPageHeader(b []byte, typ parquet.Type) (int64, error) {
	return checkPage(b, typ, false)
}

// checkPage is checkPageHeader, and, for a page of a Snappy chunk whose
// block starts in b, a check of the length the block says it decodes to:
// arrow-go's Snappy decoder (klauspost/compress's s2) allocates that
// length when it exceeds the page's buffer, up to 4 GiB, before it finds
// the block damaged (FuzzParquetDamage found a damaged page of a fixture
// that claimed GBs). A block longer than the header's uncompressed size
// is damage.
func checkPage(b []byte, typ parquet.Type, snappy bool) (int64, error) {
	// Thrift reads from a copy: of the bytes a header usually fits in,
	// more only when it does not (b is the rest of a read, 256 KiB).
	for w := 1 << 10; ; w *= 8 {
		h := b[:min(w, len(b))]
		buf := thrift.NewTMemoryBufferLen(len(h))
		buf.Write(h)
		p := thrift.NewTCompactProtocolConf(buf, &thrift.TConfiguration{})
		hd, err := readPageHeader(p)
		switch {
		case err == nil:
			if why := hd.damage(typ); why != "" {
				return 0, fmt.Errorf("%w: %s", errPageHeader, why)
			}
			n := len(h) - buf.Len()
			if snappy {
				if why := hd.snappyDamage(b[n:]); why != "" {
					return 0, fmt.Errorf("%w: %s", errPageHeader, why)
				}
			}
			return int64(n) + int64(hd.size), nil
		case buf.Len() > 0:
			return 0, err
		case len(h) == len(b):
			return 0, errShortHeader
		}
	}
}

// pageHeader is what the guard reads of a page header: the page's type
// and compressed size, which of the headers of each type it carries, and
// the encoding each of those names (-1: none).
type pageHeader struct {
	typ, size int32
	has       [fieldDataV2 + 1]bool
	encoding  [fieldDataV2 + 1]int32
	// raw is the page's uncompressed size; a DATA_PAGE_V2's levels (not
	// compressed) take levels bytes before its values, which are
	// compressed unless plainV2.
	raw, levels int32
	plainV2     bool
}

// snappyDamage says, given body, the bytes after the header (the page's,
// or its first part), whether the page's Snappy block claims to decode to
// more than the header's uncompressed size, or "" (also when body ends
// before the block's length does).
func (h *pageHeader) snappyDamage(body []byte) string {
	want := h.raw
	switch {
	case h.typ == pageDataV2 && h.plainV2:
		return ""
	case h.typ == pageDataV2:
		if h.levels < 0 || int(h.levels) > len(body) {
			return ""
		}
		body, want = body[h.levels:], h.raw-h.levels
	case h.typ != pageData && h.typ != pageDictionary:
		return ""
	}
	claim, k := binary.Uvarint(body)
	if k <= 0 || want < 0 || claim <= uint64(want) {
		return ""
	}
	return fmt.Sprintf("a %s whose Snappy block claims %d bytes, where its header says %d", pageTypeName[h.typ], claim, want)
}

// The encodings (parquet.thrift) of a page's values.
const (
	encPlain           = 0
	encPlainDictionary = 2
	encRLEDictionary   = 8
)

// decodable are the encodings, besides dictionary indices, of the data
// pages of each physical type that arrow-go decodes; another one of
// these (PLAIN, the DELTA ones, BYTE_STREAM_SPLIT) makes its decoder
// panic ("unimplemented encoding type"): encodingDecoderTraits.Decoder.
var decodable = map[parquet.Type][]int32{
	parquet.Types.Boolean:           {encPlain, 3},    // RLE
	parquet.Types.Int32:             {encPlain, 5, 9}, // DELTA_BINARY_PACKED, BYTE_STREAM_SPLIT
	parquet.Types.Int64:             {encPlain, 5, 9}, //
	parquet.Types.Int96:             {encPlain},       //
	parquet.Types.Float:             {encPlain, 9},    // BYTE_STREAM_SPLIT
	parquet.Types.Double:            {encPlain, 9},    //
	parquet.Types.ByteArray:         {encPlain, 6, 7}, // DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY
	parquet.Types.FixedLenByteArray: {encPlain, 9},    // BYTE_STREAM_SPLIT
}

// panicking are the encodings that arrow-go hands to a decoder without
// checking that it has one (the others it refuses with an error).
var panicking = []int32{encPlain, 5, 6, 7, 9}

// The header field of each page type the guard checks, and its name.
var (
	pageTypeField = map[int32]int16{pageData: fieldData, pageDictionary: fieldDictionary, pageDataV2: fieldDataV2}
	pageTypeName  = map[int32]string{pageData: "DATA_PAGE", pageDictionary: "DICTIONARY_PAGE", pageDataV2: "DATA_PAGE_V2"}
)

// damage says what in the header would make arrow-go panic on a page of
// values of type typ, or "": a type without its header (a nil
// dereference), an encoding its decoders lack for the type, a dictionary
// of booleans.
func (h *pageHeader) damage(typ parquet.Type) string {
	f, ok := pageTypeField[h.typ]
	if !ok {
		return ""
	}
	if !h.has[f] {
		return fmt.Sprintf("a %s without its header", pageTypeName[h.typ])
	}
	e := h.encoding[f]
	switch {
	case typ == parquet.Types.Boolean && (h.typ == pageDictionary || e == encPlainDictionary || e == encRLEDictionary):
		return "a dictionary of booleans"
	case h.typ != pageDictionary && slices.Contains(panicking, e) && !slices.Contains(decodable[typ], e):
		return fmt.Sprintf("a %s of %s values in encoding %d", pageTypeName[h.typ], typ, e)
	}
	return ""
}

// readPageHeader reads a page header.
func readPageHeader(p *thrift.TCompactProtocol) (*pageHeader, error) {
	ctx := context.Background()
	h := &pageHeader{typ: -1, size: -1}
	for i := range h.encoding {
		h.encoding[i] = -1
	}
	err := readStruct(ctx, p, func(t thrift.TType, id int16) (err error) {
		switch {
		case id == fieldType && t == thrift.I32:
			h.typ, err = p.ReadI32(ctx)
		case id == fieldCompressed && t == thrift.I32:
			h.size, err = p.ReadI32(ctx)
		case id == fieldUncompressed && t == thrift.I32:
			h.raw, err = p.ReadI32(ctx)
		case (id == fieldData || id == fieldDictionary || id == fieldDataV2) && t == thrift.STRUCT:
			// The encoding is field 2 of a data or dictionary page's
			// header, field 4 of a DATA_PAGE_V2's.
			at := int16(2)
			if id == fieldDataV2 {
				at = 4
			}
			h.has[id] = true
			sub := id
			err = readStruct(ctx, p, func(t thrift.TType, id int16) (err error) {
				var n int32
				switch {
				case id == at && t == thrift.I32:
					h.encoding[sub], err = p.ReadI32(ctx)
				case sub == fieldDataV2 && (id == 5 || id == 6) && t == thrift.I32: // the levels' lengths
					n, err = p.ReadI32(ctx)
					h.levels += n
				case sub == fieldDataV2 && id == 7 && t == thrift.BOOL: // is_compressed
					var c bool
					c, err = p.ReadBool(ctx)
					h.plainV2 = !c
				default:
					err = p.Skip(ctx, t)
				}
				return err
			})
		default:
			err = p.Skip(ctx, t)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if h.size < 0 {
		return nil, errors.New("no page size") // arrow-go says what is wrong
	}
	return h, nil
}

// readStruct reads a struct, handing each field's type and id to field,
// which reads the field's value or skips it.
func readStruct(ctx context.Context, p *thrift.TCompactProtocol, field func(t thrift.TType, id int16) error) error {
	if _, err := p.ReadStructBegin(ctx); err != nil {
		return err
	}
	for {
		_, t, id, err := p.ReadFieldBegin(ctx)
		if err != nil {
			return err
		}
		if t == thrift.STOP {
			break
		}
		if err := field(t, id); err != nil {
			return err
		}
		if err := p.ReadFieldEnd(ctx); err != nil {
			return err
		}
	}
	return p.ReadStructEnd(ctx)
}
