package source

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/thrift/lib/go/thrift"
	"github.com/cosmosloader/loader/loader/record"
)

// chunkStart is where arrow-go starts reading column c of row group g of
// path (chunkRanges), and the chunk's end.
func chunkStart(t *testing.T, path string, g, c int) (start, end int64) {
	t.Helper()
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	r := &parquetReader{pf: pf, size: 1 << 40}
	ranges := r.chunkRanges(g)
	return ranges[c].Start, ranges[c].End
}

// Each page header of a column chunk reads whole, taking its page's bytes
// too, to the chunk's end; every prefix of one is short, not damaged.
func TestPageHeadersReadToTheChunkEnd(t *testing.T) {
	for _, c := range []struct {
		name string
		col  int
	}{{"types.parquet", 17}, {"duckdb.parquet", 16}, {"duckdb.parquet", 0}, {"rows.parquet", 3}} {
		path := parquetDir + c.name
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		start, end := chunkStart(t, path, 0, c.col)
		pages := 0
		for at := start; at < end; pages++ {
			n, err := checkPageHeader(b[at:end])
			if err != nil || n <= 0 {
				t.Fatalf("%s column %d: page at %d: %d, %v", c.name, c.col, at, n, err)
			}
			for k := 0; k < 8; k++ { // the header is longer than 8 bytes
				if _, err := checkPageHeader(b[at : at+int64(k)]); !errors.Is(err, errShortHeader) {
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
		src := parquetDir + c.name
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		start, _ := chunkStart(t, src, c.g, c.col)
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
			opts := Options{}
			if facts {
				opts.Facts = mapper
			}
			in := Input{Path: path}
			if mode.blob {
				in = Input{Path: "https://acct.blob.core.windows.net/c/" + c.name, Remote: &memRemote{data: b}}
			}
			rd, err := Open(in, nil, opts, Position{})
			if err != nil {
				t.Fatal(err)
			}
			rows := 0
			if fr, ok := rd.(FactReader); ok && fr.Facts() {
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
			var ie *InputError
			if !errors.As(err, &ie) || ie.Reason() != ReasonCorruptInput || !strings.Contains(err.Error(), "damaged page header") ||
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
		h := pageHeader(t, pageData, fieldData, stat)
		b := append(append([]byte(nil), h...), page...)
		if n, err := checkPageHeader(b); err != nil || n != int64(len(h)+40) {
			t.Errorf("statistics of %d bytes: %d, %v; want %d", stat, n, err, len(h)+40)
		}
		for _, k := range []int{1, len(h) / 2, len(h) - 1} {
			if _, err := checkPageHeader(h[:k]); !errors.Is(err, errShortHeader) {
				t.Errorf("statistics of %d bytes, %d bytes of the header: %v, want it short", stat, k, err)
			}
		}
	}
	for _, c := range []struct {
		typ int32
		sub int16
	}{{pageDataV2, fieldData}, {pageData, fieldDataV2}, {pageData, fieldDictionary}, {pageDictionary, fieldData}} {
		b := append(pageHeader(t, c.typ, c.sub, 10), page...)
		if _, err := checkPageHeader(b); !errors.Is(err, errPageHeader) {
			t.Errorf("type %d with field %d: %v, want it damaged", c.typ, c.sub, err)
		}
	}
	// DATA_PAGE_V2 with its own header is whole.
	if _, err := checkPageHeader(append(pageHeader(t, pageDataV2, fieldDataV2, 10), page...)); err != nil {
		t.Errorf("DATA_PAGE_V2: %v", err)
	}
}

// pageHeader is a page header as Thrift writes it: of page type typ,
// with the header of field sub, of 40 bytes of page, its statistics'
// max_value stat bytes long.
func pageHeader(t *testing.T, typ int32, sub int16, stat int) []byte {
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
	i32(1, 10)                                         // num_values
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
		b = append(b, pageHeader(t, pageData, fieldData, 3000)...) // longer than a read
		b = append(b, make([]byte, 40)...)
		b = append(b, second...)
		return append(b, make([]byte, 40)...)
	}
	for _, c := range []struct {
		name   string
		second []byte
		bad    bool
	}{
		{"whole", pageHeader(t, pageDictionary, fieldDictionary, 10), false},
		{"damaged", pageHeader(t, pageDataV2, fieldData, 10), true},
	} {
		data := chunk(c.second)
		for _, step := range []int{7, 1000, len(data)} {
			g := newPageGuard(memRandom{bytes.NewReader(data)})
			g.expect([]ByteRange{{Start: start, End: int64(len(data))}})
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
