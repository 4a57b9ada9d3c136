package parquet

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
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
// pageGuard stands between arrow-go and the input's bytes and reads the
// page headers of the column chunks it is told of (expect) as their bytes
// pass on their way to arrow-go:
//
//   - a header whose type lacks its own header fails the read, so
//     arrow-go's page reader returns that error as it returns any failed
//     read, and the row group is refused with a reason;
//   - a page whose header carries a CRC (Parquet's page-level crc: the
//     CRC-32 of the bytes after the header) fails the read that completes
//     it when the bytes do not match, before arrow-go decodes it;
//   - an empty data page (no values) is left out of what arrow-go reads:
//     its column reader takes a page of no values for the end of the
//     column chunk, and every row after it was lost ("decoded 0 rows").
//     arrow-go reads a chunk from its start, each read where the last
//     ended, so the guard hands it the chunk without those pages, its
//     reads shifted past them; the bytes after the chunk's end (what
//     arrow-go's buffer reads ahead) are the input's.
//
// A read anywhere else (the footer, a chunk entered part-way) passes as
// it is, and a header the guard cannot make out is left to arrow-go, the
// rest of its chunk passed as it is: the guard refuses only damage.
type pageGuard struct {
	source.RandomReader
	mu      sync.Mutex
	chunks  map[int64]guardedChunk // each chunk expected and not begun, by its start
	streams map[int64]*pageStream  // chunks begun, by where arrow-go's next read starts
	// damaged are the chunks found damaged: every read of them fails, for
	// arrow-go reads again after a failed read (its buffered reader
	// forgets the error once it has returned it).
	damaged []damagedChunk
}

// pageStream is a column chunk being read: its bytes, where arrow-go's
// next read starts (virtual: the chunk less the empty pages left out)
// and the input's byte that is (real), and the page being passed.
type pageStream struct {
	start, end    int64
	virtual, real int64
	typ           parquet.Type
	snappy        bool
	// blind: a header could not be made out; the rest passes as it is.
	blind bool
	// The page being passed: where its body starts and it ends, and, when
	// its header carries one, its CRC and the CRC of its bytes so far.
	body, pageEnd int64
	hasCRC        bool
	crc, sum      uint32
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

// maxPageHeader bounds the bytes a guard reads of a header it has not yet
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
	s, err := g.take(off, int64(len(p)))
	if err != nil {
		return 0, err
	}
	if s == nil {
		return g.RandomReader.ReadAt(p, off)
	}
	n, err := s.read(g.RandomReader, p)
	g.mu.Lock()
	defer g.mu.Unlock()
	if errors.Is(err, errPageHeader) || errors.Is(err, errPageCRC) {
		g.damaged = append(g.damaged, damagedChunk{source.ByteRange{Start: s.start, End: s.end}, err})
		return 0, err
	}
	if s.virtual < s.end {
		g.streams[s.virtual] = s
	}
	return n, err
}

// take returns the chunk whose next read starts at off, no longer
// waiting for it (nil: none), or the error of a damaged chunk that the
// read of n bytes at off overlaps.
func (g *pageGuard) take(off, n int64) (*pageStream, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, d := range g.damaged {
		if off < d.End && off+n > d.Start {
			return nil, d.err
		}
	}
	// A chunk may start where the one before it ended.
	if c, ok := g.chunks[off]; ok {
		delete(g.chunks, off)
		delete(g.streams, off)
		return &pageStream{start: off, end: c.End, virtual: off, real: off, body: off, pageEnd: off, typ: c.typ, snappy: c.snappy}, nil
	}
	s := g.streams[off]
	delete(g.streams, off)
	return s, nil
}

// read fills p with the chunk's next bytes as arrow-go sees them: the
// chunk's pages but the empty ones, then the input's bytes after it.
func (s *pageStream) read(r io.ReaderAt, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if s.real >= s.end || s.blind {
			m, err := r.ReadAt(p[n:], s.real)
			n += m
			s.real += int64(m)
			s.virtual += int64(m)
			return n, err
		}
		want := int(min(int64(len(p)-n), s.end-s.real))
		m, err := r.ReadAt(p[n:n+want], s.real)
		if m < want {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return n, err
		}
		kept, err := s.pass(r, p[n:n+m])
		n += kept
		s.virtual += int64(kept)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// pass walks b, the input's bytes at s.real, page by page: it checks
// each header and CRC, and drops the bytes of empty pages, moving those
// after them down; it returns how many bytes of b are kept.
func (s *pageStream) pass(r io.ReaderAt, b []byte) (int, error) {
	c := 0 // bytes of b walked and kept
	for c < len(b) {
		if s.blind {
			s.real += int64(len(b) - c)
			return len(b), nil
		}
		if s.real == s.pageEnd {
			hd, hlen, err := s.header(r, b[c:])
			switch {
			case errors.Is(err, errPageHeader):
				return c, fmt.Errorf("page at byte %d: %w", s.real, err)
			case err != nil: // arrow-go's to judge
				s.blind = true
				continue
			}
			s.body, s.pageEnd = s.real+int64(hlen), s.real+int64(hlen)+int64(hd.size)
			s.hasCRC, s.crc, s.sum = hd.hasCRC, uint32(hd.crc), 0
			if hd.empty() {
				drop := int(min(s.pageEnd-s.real, int64(len(b)-c)))
				copy(b[c:], b[c+drop:])
				b = b[:len(b)-drop]
				s.real = s.pageEnd
				continue
			}
		}
		k := int(min(s.pageEnd-s.real, int64(len(b)-c)))
		if s.hasCRC {
			from := int(max(0, min(s.body-s.real, int64(k))))
			s.sum = crc32.Update(s.sum, crc32.IEEETable, b[c+from:c+k])
		}
		c += k
		s.real += int64(k)
		if s.real == s.pageEnd && s.hasCRC && s.sum != s.crc {
			return c, fmt.Errorf("page at byte %d: %w: the header says %08x, its bytes %08x", s.body, errPageCRC, s.crc, s.sum)
		}
	}
	return c, nil
}

// header reads the page header at s.real, whose first bytes start b,
// reading more of the input when b ends inside it; hlen is its length.
func (s *pageStream) header(r io.ReaderAt, b []byte) (hd *pageHeader, hlen int, err error) {
	hd, hlen, err = parsePage(b, s.typ, s.snappy)
	for w := 1 << 12; errors.Is(err, errShortHeader) && w <= maxPageHeader; w *= 8 {
		more := make([]byte, min(int64(w), s.end-s.real))
		if m, rerr := r.ReadAt(more, s.real); m < len(more) {
			return nil, 0, rerr
		}
		hd, hlen, err = parsePage(more, s.typ, s.snappy)
		if len(more) < w {
			break // the chunk ends within
		}
	}
	return hd, hlen, err
}

var (
	errShortHeader = errors.New("page header not read whole")
	errPageHeader  = errors.New("damaged page header")
	errPageCRC     = errors.New("page CRC does not match")
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
	fieldCRC          = 4
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
	hd, n, err := parsePage(b, typ, false)
	if err != nil {
		return 0, err
	}
	return int64(n) + int64(hd.size), nil
}

// parsePage reads the page header at the start of b as checkPageHeader
// does, and returns it and its length. For a page of a Snappy chunk
// whose block starts in b, it also checks the length the block says it
// decodes to: arrow-go's Snappy decoder (klauspost/compress's s2)
// allocates that length when it exceeds the page's buffer, up to 4 GiB,
// before it finds the block damaged (FuzzParquetDamage found a damaged
// page of a fixture that claimed GBs). A block longer than the header's
// uncompressed size is damage.
func parsePage(b []byte, typ parquet.Type, snappy bool) (*pageHeader, int, error) {
	// Thrift reads from a copy: of the bytes a header usually fits in,
	// more only when it does not.
	for w := 1 << 10; ; w *= 8 {
		h := b[:min(w, len(b))]
		buf := thrift.NewTMemoryBufferLen(len(h))
		buf.Write(h)
		p := thrift.NewTCompactProtocolConf(buf, &thrift.TConfiguration{})
		hd, err := readPageHeader(p)
		switch {
		case err == nil:
			if why := hd.damage(typ); why != "" {
				return nil, 0, fmt.Errorf("%w: %s", errPageHeader, why)
			}
			n := len(h) - buf.Len()
			if snappy {
				body := b[n:]
				body = body[:min(len(body), int(hd.size))] // a page's, not the next's
				if why := hd.snappyDamage(body); why != "" {
					return nil, 0, fmt.Errorf("%w: %s", errPageHeader, why)
				}
			}
			return hd, n, nil
		case buf.Len() > 0:
			return nil, 0, err
		case len(h) == len(b):
			return nil, 0, errShortHeader
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
	// values is a data page's number of values (-1: not said); crc its
	// CRC, when hasCRC.
	values int32
	crc    int32
	hasCRC bool
}

// empty reports whether the page is a data page of no values.
func (h *pageHeader) empty() bool {
	return (h.typ == pageData || h.typ == pageDataV2) && h.values == 0
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
	h := &pageHeader{typ: -1, size: -1, values: -1}
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
		case id == fieldCRC && t == thrift.I32:
			h.crc, err = p.ReadI32(ctx)
			h.hasCRC = true
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
				case id == 1 && t == thrift.I32 && sub != fieldDictionary: // num_values
					h.values, err = p.ReadI32(ctx)
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
