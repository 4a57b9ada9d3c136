package parquet

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/thrift/lib/go/thrift"

	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
	"github.com/cosmosloader/loader/loader/source/parquet/sizer"
)

// chunkStart is where arrow-go starts reading column c of row group g of
// path (chunkRanges), the chunk's end and its values' type.
func chunkStart(t *testing.T, path string, g, c int) (start, end int64, typ parquet.Type) {
	t.Helper()
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	cs, err := guardedChunksOf(pf.MetaData(), g, nil, 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	ch := cs[c]
	return ch.Start, ch.End, ch.typ
}

// Each page header of a column chunk reads whole, taking its page's bytes
// too, to the chunk's end; every prefix of one is short, not damaged.
func TestPageHeadersReadToTheChunkEnd(t *testing.T) {
	for _, c := range []struct {
		name string
		col  int
	}{{"types.parquet", 17}, {"duckdb.parquet", 16}, {"duckdb.parquet", 0}, {"rows.parquet", 3}} {
		path := sourcetest.ParquetDir() + c.name
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		start, end, typ := chunkStart(t, path, 0, c.col)
		pages := 0
		for at := start; at < end; pages++ {
			n, err := checkPageHeader(b[at:end], typ)
			if err != nil || n <= 0 {
				t.Fatalf("%s column %d: page at %d: %d, %v", c.name, c.col, at, n, err)
			}
			for k := 0; k < 8; k++ { // the header is longer than 8 bytes
				if _, err := checkPageHeader(b[at:at+int64(k)], typ); !errors.Is(err, errShortHeader) {
					t.Fatalf("%s column %d: %d bytes of the header at %d: %v, want it short", c.name, c.col, k, at, err)
				}
			}
			at += n
			if at > end {
				t.Fatalf("%s column %d: pages end at %d, past the chunk's end %d", c.name, c.col, at, end)
			}
		}
		if pages == 0 {
			t.Fatalf("%s column %d: no page", c.name, c.col)
		}
	}
}

// A page whose type was damaged into another (a data page called a
// DATA_PAGE_V2, a dictionary page a DATA_PAGE) is a nil dereference in
// arrow-go; in a struct's member, read on a goroutine of arrow-go's own,
// it ended the process. The row group is refused with a reason instead,
// the rows before it read, as a dry-run (Facts) and as an import reads,
// a file and a blob.
func TestParquetDamagedPageTypeIsRefused(t *testing.T) {
	mapper, err := record.NewMapper(record.Config{PartitionKeyPaths: []string{"/pk"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		g, col    int
		wantRows  int
		wantGroup string
	}{
		{"types.parquet", 1, 17, 2, "row group 2 of 3"},  // addr.city, a data page
		{"duckdb.parquet", 0, 16, 0, "row group 1 of 1"}, // address.city, its dictionary page
		{"rows.parquet", 2, 0, 200, "row group 3 of 3"},  // id, a top-level column
	} {
		src := sourcetest.ParquetDir() + c.name
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		start, _, _ := chunkStart(t, src, c.g, c.col)
		// The header's first field is its type, an i32 (0x15), then the
		// type's zigzag varint: DATA_PAGE 0x00, DICTIONARY_PAGE 0x04.
		if b[start] != 0x15 {
			t.Fatalf("%s: byte %d is %#x, not a page header's type field", c.name, start, b[start])
		}
		if b[start+1] == 0x00 {
			b[start+1] = 0x06 // DATA_PAGE_V2
		} else {
			b[start+1] = 0x00 // DATA_PAGE
		}
		path := filepath.Join(t.TempDir(), c.name)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, mode := range []struct {
			facts, blob bool
		}{{false, false}, {true, false}, {false, true}, {true, true}} {
			facts := mode.facts
			opts := source.Options{}
			if facts {
				opts.Facts = mapper
			}
			in := source.Input{Path: path}
			if mode.blob {
				in = source.Input{Path: "https://acct.blob.core.windows.net/c/" + c.name, Remote: &sourcetest.MemRemote{Data: b}}
			}
			rd, err := Format{}.Open(in, nil, opts, source.Position{})
			if err != nil {
				t.Fatal(err)
			}
			rows := 0
			if fr, ok := rd.(sizer.Reader); ok && fr.Facts() {
				for {
					f, e := fr.NextFacts()
					if e != nil {
						err = e
						break
					}
					rows += f.Len()
					f.Release()
				}
			} else {
				for {
					if _, err = rd.Next(); err != nil {
						break
					}
					rows++
				}
			}
			rd.Close()
			var ie *source.InputError
			if !errors.As(err, &ie) || ie.Reason() != source.ReasonCorruptInput || !strings.Contains(err.Error(), "damaged page header") ||
				!strings.Contains(err.Error(), c.wantGroup) || rows != c.wantRows {
				t.Errorf("%s (facts %v, blob %v): %d rows, then %v; want %d rows, then %s refused for a damaged page header", c.name, facts, mode.blob, rows, err, c.wantRows, c.wantGroup)
			}
		}
	}
}

// A header longer than the first window the guard reads it through (its
// statistics hold long values) reads whole all the same, and a header
// whose type lacks its own header is damaged, written here as Thrift
// writes them.
func TestLongAndDamagedPageHeaders(t *testing.T) {
	page := make([]byte, 40+300) // the page, and the next one's start
	for _, stat := range []int{10, 5000, 70000} {
		h := thriftPageHeader(t, pageData, fieldData, -1, stat)
		b := append(append([]byte(nil), h...), page...)
		if n, err := checkPageHeader(b, parquet.Types.ByteArray); err != nil || n != int64(len(h)+40) {
			t.Errorf("statistics of %d bytes: %d, %v; want %d", stat, n, err, len(h)+40)
		}
		for _, k := range []int{1, len(h) / 2, len(h) - 1} {
			if _, err := checkPageHeader(h[:k], parquet.Types.ByteArray); !errors.Is(err, errShortHeader) {
				t.Errorf("statistics of %d bytes, %d bytes of the header: %v, want it short", stat, k, err)
			}
		}
	}
	for _, c := range []struct {
		typ int32
		sub int16
	}{{pageDataV2, fieldData}, {pageData, fieldDataV2}, {pageData, fieldDictionary}, {pageDictionary, fieldData}} {
		b := append(thriftPageHeader(t, c.typ, c.sub, -1, 10), page...)
		if _, err := checkPageHeader(b, parquet.Types.ByteArray); !errors.Is(err, errPageHeader) {
			t.Errorf("type %d with field %d: %v, want it damaged", c.typ, c.sub, err)
		}
	}
	// DATA_PAGE_V2 with its own header is whole.
	if _, err := checkPageHeader(append(thriftPageHeader(t, pageDataV2, fieldDataV2, -1, 10), page...), parquet.Types.ByteArray); err != nil {
		t.Errorf("DATA_PAGE_V2: %v", err)
	}
	// Encodings arrow-go's decoders have for the type, and others, which
	// made them panic.
	ty := parquet.Types
	for _, c := range []struct {
		typ     int32
		values  parquet.Type
		enc     int32
		damaged bool
	}{
		{pageData, ty.ByteArray, 6, false}, // DELTA_LENGTH_BYTE_ARRAY
		{pageData, ty.Int32, 6, true},      //
		{pageData, ty.Int32, 5, false},     // DELTA_BINARY_PACKED
		{pageData, ty.Double, 5, true},     //
		{pageData, ty.FixedLenByteArray, 7, true},
		{pageData, ty.Int96, 9, true}, // BYTE_STREAM_SPLIT
		{pageData, ty.Float, 9, false},
		{pageData, ty.ByteArray, 8, false}, // RLE_DICTIONARY
		{pageData, ty.Boolean, 8, true},
		{pageData, ty.Boolean, 3, false}, // RLE
		{pageData, ty.Int64, 3, false},   // RLE: arrow-go refuses it itself
		{pageData, ty.Int64, 99, false},  // unknown: likewise
		{pageDictionary, ty.Boolean, 0, true},
		{pageDictionary, ty.Int64, 0, false},
		{pageDataV2, ty.Int64, 9, false},
		{pageDataV2, ty.Int96, 5, true},
	} {
		sub := pageTypeField[c.typ]
		b := append(thriftPageHeader(t, c.typ, sub, c.enc, 10), page...)
		if _, err := checkPageHeader(b, c.values); errors.Is(err, errPageHeader) != c.damaged || (!c.damaged && err != nil) {
			t.Errorf("page type %d of %s values in encoding %d: %v, want damaged %v", c.typ, c.values, c.enc, err, c.damaged)
		}
	}
}

// thriftPageHeader is a page header as Thrift writes it: of page type typ,
// with the header of field sub naming encoding enc (-1: none), of 40
// bytes of page, its statistics' max_value stat bytes long.
func thriftPageHeader(t *testing.T, typ int32, sub int16, enc int32, stat int) []byte {
	buf := thrift.NewTMemoryBuffer()
	p := thrift.NewTCompactProtocolConf(buf, &thrift.TConfiguration{})
	ctx := context.Background()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	i32 := func(id int16, v int32) {
		must(p.WriteFieldBegin(ctx, "", thrift.I32, id))
		must(p.WriteI32(ctx, v))
		must(p.WriteFieldEnd(ctx))
	}
	must(p.WriteStructBegin(ctx, "PageHeader"))
	i32(fieldType, typ)
	i32(2, 100) // uncompressed_page_size
	i32(fieldCompressed, 40)
	must(p.WriteFieldBegin(ctx, "", thrift.STRUCT, sub))
	must(p.WriteStructBegin(ctx, ""))
	i32(1, 10) // num_values
	if enc >= 0 {
		at := int16(2)
		if sub == fieldDataV2 {
			at = 4
		}
		i32(at, enc)
	}
	must(p.WriteFieldBegin(ctx, "", thrift.STRUCT, 5)) // statistics
	must(p.WriteStructBegin(ctx, ""))
	must(p.WriteFieldBegin(ctx, "", thrift.STRING, 5)) // max_value
	must(p.WriteBinary(ctx, []byte(strings.Repeat("x", stat))))
	must(p.WriteFieldEnd(ctx))
	must(p.WriteFieldStop(ctx))
	must(p.WriteStructEnd(ctx))
	must(p.WriteFieldEnd(ctx))
	must(p.WriteFieldStop(ctx))
	must(p.WriteStructEnd(ctx))
	must(p.WriteFieldEnd(ctx))
	must(p.WriteFieldStop(ctx))
	must(p.WriteStructEnd(ctx))
	must(p.Flush(ctx))
	return buf.Bytes()
}

// The guard follows a chunk from read to read, however its reads cut its
// headers, and refuses the read where a damaged header ends; reads
// elsewhere pass unread.
func TestPageGuardFollowsAChunk(t *testing.T) {
	const start = 100
	chunk := func(second []byte) []byte {
		b := make([]byte, start)
		b = append(b, thriftPageHeader(t, pageData, fieldData, -1, 3000)...) // longer than a read
		b = append(b, make([]byte, 40)...)
		b = append(b, second...)
		return append(b, make([]byte, 40)...)
	}
	for _, c := range []struct {
		name   string
		second []byte
		bad    bool
	}{
		{"whole", thriftPageHeader(t, pageDictionary, fieldDictionary, -1, 10), false},
		{"damaged", thriftPageHeader(t, pageDataV2, fieldData, -1, 10), true},
	} {
		data := chunk(c.second)
		for _, step := range []int{7, 1000, len(data)} {
			g := newPageGuard(sourcetest.MemRandom{Reader: bytes.NewReader(data)})
			g.expect([]guardedChunk{{source.ByteRange{Start: start, End: int64(len(data))}, parquet.Types.ByteArray, false}})
			if _, err := g.ReadAt(make([]byte, 50), 0); err != nil { // elsewhere
				t.Fatal(err)
			}
			var failed error
			for off := start; off < len(data) && failed == nil; off += step {
				n := min(step, len(data)-off)
				if _, err := g.ReadAt(make([]byte, n), int64(off)); err != nil {
					failed = err
				}
			}
			if c.bad != errors.Is(failed, errPageHeader) || (!c.bad && failed != nil) {
				t.Errorf("%s, reads of %d bytes: %v", c.name, step, failed)
			}
			if !c.bad && (len(g.streams) != 0 || len(g.chunks) != 0) {
				t.Errorf("%s, reads of %d bytes: the chunk is still followed: %d, %d", c.name, step, len(g.streams), len(g.chunks))
			}
		}
	}
}

// A chunk that starts where the one before it ended is followed from its
// own start, though the one before is still waiting for the rest of a
// header (here cut short by the chunk's end); and once a chunk is found
// damaged, every read of it fails, as arrow-go reads again after a failed
// read: the second read of a damaged header once passed unread, and
// arrow-go panicked on it (FuzzParquetDamage).
func TestPageGuardChunksBackToBack(t *testing.T) {
	cut := thriftPageHeader(t, pageData, fieldData, -1, 3000)
	a := cut[:len(cut)-10] // chunk A: a header its chunk ends inside
	b := append(thriftPageHeader(t, pageDataV2, fieldData, -1, 10), make([]byte, 40)...)
	data := append(append(make([]byte, 0, len(a)+len(b)), a...), b...)
	g := newPageGuard(sourcetest.MemRandom{Reader: bytes.NewReader(data)})
	g.expect([]guardedChunk{{source.ByteRange{Start: 0, End: int64(len(a))}, parquet.Types.ByteArray, false},
		{source.ByteRange{Start: int64(len(a)), End: int64(len(data))}, parquet.Types.ByteArray, false}})
	if _, err := g.ReadAt(make([]byte, len(a)), 0); err != nil {
		t.Fatalf("chunk A: %v", err)
	}
	for k := range 3 {
		if _, err := g.ReadAt(make([]byte, len(b)), int64(len(a))); !errors.Is(err, errPageHeader) {
			t.Fatalf("chunk B, read %d: %v, want it damaged", k+1, err)
		}
	}
	if _, err := g.ReadAt(make([]byte, 5), int64(len(a)+20)); !errors.Is(err, errPageHeader) {
		t.Fatalf("chunk B, a read inside it: %v, want it damaged", err)
	}
	if _, err := g.ReadAt(make([]byte, 5), 0); err != nil {
		t.Fatalf("chunk A again: %v", err)
	}
}

// A Snappy block whose length claims more than its page's uncompressed
// size is refused before arrow-go's decoder allocates it: s2 makes a
// buffer of the claimed length (up to 4 GiB) and only then finds the
// block damaged. FuzzParquetDamage found a DuckDB page whose damage
// claimed ~1.6 GB.
func TestParquetSnappyBlockLongerThanItsPageIsRefused(t *testing.T) {
	b, err := os.ReadFile(sourcetest.ParquetDir() + "duckdb.parquet")
	if err != nil {
		t.Fatal(err)
	}
	pf, err := file.OpenParquetFile(sourcetest.ParquetDir()+"duckdb.parquet", false)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := pf.MetaData().RowGroup(0).ColumnChunk(0)
	if err != nil {
		t.Fatal(err)
	}
	if cc.Compression() != compress.Codecs.Snappy {
		t.Fatalf("the fixture's chunk is %s, not Snappy", cc.Compression())
	}
	chunks, _ := guardedChunksOf(pf.MetaData(), 0, nil, int64(len(b)))
	pf.Close()
	if !chunks[0].snappy {
		t.Fatal("the guard does not know the chunk is Snappy")
	}
	// The first page's header, then its block's length: claim 1 GiB.
	at := chunks[0].Start
	buf := thrift.NewTMemoryBufferLen(1 << 10)
	buf.Write(b[at : at+1<<10])
	hd, err := readPageHeader(thrift.NewTCompactProtocolConf(buf, &thrift.TConfiguration{}))
	if err != nil {
		t.Fatal(err)
	}
	body := at + 1<<10 - int64(buf.Len())
	if hd.typ == pageDataV2 {
		body += int64(hd.levels)
	}
	copy(b[body:], binary.AppendUvarint(nil, 1<<30))
	path := filepath.Join(t.TempDir(), "claims.parquet")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	mapper, err := record.NewMapper(record.Config{PartitionKeyPaths: []string{"/tenant"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, opts := range []source.Options{{}, {Facts: mapper}} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		var err error
		if opts.Facts != nil {
			for _, f := range readFactsErr(t, path, opts, &err) {
				f.Release()
			}
		} else {
			_, err = readParquet(t, path, opts, source.Position{})
		}
		runtime.ReadMemStats(&after)
		var ie *source.InputError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), "Snappy block claims 1073741824 bytes") {
			t.Fatalf("facts %v: got %v, want the row group refused for its Snappy block", opts.Facts != nil, err)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 256<<20 {
			t.Fatalf("facts %v: reading allocated %d MB", opts.Facts != nil, grew>>20)
		}
	}
}

// readFactsErr reads path's facts until an error, which it stores in
// *err (nil at the end of the rows).
func readFactsErr(t *testing.T, path string, opts source.Options, err *error) []*sizer.Facts {
	t.Helper()
	rd, e := Format{}.Open(source.Input{Path: path}, nil, opts, source.Position{})
	if e != nil {
		*err = e
		return nil
	}
	defer rd.Close()
	fr, ok := rd.(sizer.Reader)
	if !ok || !fr.Facts() {
		t.Fatal("not read as facts")
	}
	var out []*sizer.Facts
	for {
		f, e := fr.NextFacts()
		if e != nil {
			if errors.Is(e, io.EOF) {
				e = nil
			}
			*err = e
			return out
		}
		out = append(out, f)
	}
}
