package parquet

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/thrift/lib/go/thrift"
)

// Hand-made Parquet files, byte by byte from the format's Thrift
// definitions (parquet.thrift), for what no writer at hand writes: empty
// pages, page CRCs, INT96 values at the edges of their range, logical
// types newer than the reader, Hadoop-framed LZ4. Every column is
// REQUIRED (no levels) and PLAIN.

// hmColumn is a column of a hand-made file.
type hmColumn struct {
	name     string
	typ      int32 // the physical type (parquet.thrift Type)
	typeLen  int32 // FIXED_LEN_BYTE_ARRAY's
	logical  tStruct
	codec    compress.Compression
	pages    [][]hmPage     // by row group
	rawCodec compress.Codec // encodes the pages instead of codec's registered codec
}

// hmPage is one data page: its values, PLAIN-encoded.
type hmPage struct {
	values []byte
	n      int32 // values (= rows)
	v2     bool
	crc    bool // the header carries the page's CRC
}

func hmInt64s(vs ...int64) hmPage {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return hmPage{values: b, n: int32(len(vs))}
}

func i32(v int32) tField  { return tField{typ: thrift.I32, v: v} }
func i64(v int64) tField  { return tField{typ: thrift.I64, v: v} }
func str(v string) tField { return tField{typ: thrift.STRING, v: []byte(v)} }
func st(v tStruct) tField { return tField{typ: thrift.STRUCT, v: v} }
func list(e thrift.TType, items ...any) tField {
	return tField{typ: thrift.LIST, v: &tList{elem: e, items: items}}
}

// fields numbers fs 1, 2, … skipping those with a nil value (ids given
// as pairs: id, field).
func fields(pairs ...any) tStruct {
	var s tStruct
	for i := 0; i < len(pairs); i += 2 {
		f := pairs[i+1].(tField)
		if f.v == nil {
			continue
		}
		f.id = int16(pairs[i].(int))
		s = append(s, f)
	}
	return s
}

// hmPageBytes is a page's header and body.
func hmPageBytes(t *testing.T, p hmPage, codec compress.Codec) (header, body []byte, raw int) {
	t.Helper()
	body = p.values
	if len(p.values) > 0 && codec != nil {
		body = codec.Encode(nil, p.values)
	}
	var crc tField
	if p.crc {
		crc = i32(int32(crc32.ChecksumIEEE(body)))
	}
	var h tStruct
	if p.v2 {
		h = fields(1, i32(3), 2, i32(int32(len(p.values))), 3, i32(int32(len(body))), 4, crc,
			8, st(fields(1, i32(p.n), 2, i32(0), 3, i32(p.n), 4, i32(0), 5, i32(0), 6, i32(0))))
	} else {
		h = fields(1, i32(0), 2, i32(int32(len(p.values))), 3, i32(int32(len(body))), 4, crc,
			5, st(fields(1, i32(p.n), 2, i32(0), 3, i32(3), 4, i32(3))))
	}
	hb, err := encodeTree(h)
	if err != nil {
		t.Fatal(err)
	}
	return hb, body, len(hb) + len(p.values)
}

// handmade writes a file of cols to a temporary directory.
func handmade(t *testing.T, cols ...hmColumn) string {
	t.Helper()
	out := []byte("PAR1")
	groups := len(cols[0].pages)
	schema := []any{fields(4, str("schema"), 5, i32(int32(len(cols))))}
	for _, c := range cols {
		e := fields(1, i32(c.typ), 3, i32(0), 4, str(c.name))
		if c.typeLen > 0 {
			e = fields(1, i32(c.typ), 2, i32(c.typeLen), 3, i32(0), 4, str(c.name))
		}
		if c.logical != nil {
			e = append(e, tField{id: 10, typ: thrift.STRUCT, v: c.logical})
		}
		schema = append(schema, e)
	}
	var rowGroups []any
	var total int64
	for g := range groups {
		var chunks []any
		var rows int64
		var size int64
		for _, c := range cols {
			codec := c.rawCodec
			if codec == nil && c.codec != compress.Codecs.Uncompressed {
				var err error
				if codec, err = compress.GetCodec(c.codec); err != nil {
					t.Fatal(err)
				}
			}
			start := int64(len(out))
			var n, raw int64
			for _, p := range c.pages[g] {
				h, body, r := hmPageBytes(t, p, codec)
				out = append(append(out, h...), body...)
				n += int64(p.n)
				raw += int64(r)
			}
			rows = n
			size += raw
			meta := fields(1, i32(c.typ), 2, list(thrift.I32, int32(0), int32(3)), 3, list(thrift.STRING, []byte(c.name)),
				4, i32(int32(c.codec)), 5, i64(n), 6, i64(raw), 7, i64(int64(len(out))-start), 9, i64(start))
			chunks = append(chunks, fields(2, i64(start), 3, st(meta)))
		}
		total += rows
		rowGroups = append(rowGroups, fields(1, list(thrift.STRUCT, chunks...), 2, i64(size), 3, i64(rows)))
	}
	meta := fields(1, i32(1), 2, list(thrift.STRUCT, schema...), 3, i64(total), 4, list(thrift.STRUCT, rowGroups...),
		6, str("loader tests, by hand"))
	mb, err := encodeTree(meta)
	if err != nil {
		t.Fatal(err)
	}
	out = binary.LittleEndian.AppendUint32(append(out, mb...), uint32(len(mb)))
	out = append(out, "PAR1"...)
	path := filepath.Join(t.TempDir(), "handmade.parquet")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
