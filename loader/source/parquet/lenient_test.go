package parquet

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/cosmosloader/loader/loader/source"
)

// rowsOf reads a file and returns its rows' JSON.
func rowsOf(t *testing.T, path string, opts source.Options) []string {
	t.Helper()
	recs, err := readParquet(t, path, opts, source.Position{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		out = append(out, string(r.Data))
	}
	return out
}

var allCodecs = []compress.Compression{compress.Codecs.Uncompressed, compress.Codecs.Snappy, compress.Codecs.Gzip,
	compress.Codecs.Brotli, compress.Codecs.Zstd, compress.Codecs.Lz4Raw, compress.Codecs.Lz4}

// An empty data page — no values, nothing stored — is read as empty,
// first, between and last in a chunk, in v1 and v2 pages of every codec
// (arrow-go handed the 0 bytes to the codec: "s2: corrupt input").
func TestParquetEmptyPages(t *testing.T) {
	want := []string{`{"v":1}`, `{"v":2}`, `{"v":3}`, `{"v":4}`}
	for _, v2 := range []bool{false, true} {
		for _, codec := range allCodecs {
			empty := hmPage{v2: v2}
			a, b := hmInt64s(1, 2, 3), hmInt64s(4)
			a.v2, b.v2 = v2, v2
			path := handmade(t, hmColumn{name: "v", typ: 2, codec: codec, pages: [][]hmPage{{empty, a, empty, b, empty}}})
			if got := rowsOf(t, path, source.Options{}); !slices.Equal(got, want) {
				t.Errorf("v2 %v, %s: got %q, want %q", v2, codec, got, want)
			}
		}
	}
}

// twoBlocks frames a page as Hadoop does when its buffer is smaller than
// the page: one frame, two LZ4 blocks.
type twoBlocks struct{ compress.Codec }

func (c twoBlocks) Encode(dst, src []byte) []byte {
	raw, _ := compress.GetCodec(compress.Codecs.Lz4Raw)
	half := len(src) / 2
	dst = binary.BigEndian.AppendUint32(dst[:0], uint32(len(src)))
	for _, part := range [][]byte{src[:half], src[half:]} {
		block := raw.Encode(nil, part)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(block)))
		dst = append(dst, block...)
	}
	return dst
}

// LZ4 (codec 5) is read Hadoop-framed, a frame of one block or of
// several, or, not framed, as one LZ4 block (old Arrow C++).
func TestParquetHadoopLZ4(t *testing.T) {
	raw, _ := compress.GetCodec(compress.Codecs.Lz4Raw)
	want := []string{`{"v":1}`, `{"v":2}`, `{"v":3}`, `{"v":4}`}
	for name, c := range map[string]compress.Codec{"one block": nil, "two blocks": twoBlocks{}, "unframed": raw} {
		path := handmade(t, hmColumn{name: "v", typ: 2, codec: compress.Codecs.Lz4, rawCodec: c,
			pages: [][]hmPage{{hmInt64s(1, 2, 3, 4)}}})
		if got := rowsOf(t, path, source.Options{}); !slices.Equal(got, want) {
			t.Errorf("%s: got %q, want %q", name, got, want)
		}
	}
}

func int96(julianDay uint32, nanos int64) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(nanos))
	return binary.LittleEndian.AppendUint32(b, julianDay)
}

// INT96 timestamps outside Arrow's nanoseconds (years 1677–2262) are
// written with their year as it is; the other rows of their row group
// load (arrow-go refused the whole file for one of them).
func TestParquetInt96BeyondNanoseconds(t *testing.T) {
	values := slices.Concat(int96(2440588, 0), int96(5373484, 86399_999999999), int96(1705428, 0), int96(0, 0),
		int96(math32, 0))
	{
		path := handmade(t,
			hmColumn{name: "id", typ: 2, pages: [][]hmPage{{hmInt64s(1, 2, 3, 4, 5)}}},
			hmColumn{name: "ts", typ: 3, codec: compress.Codecs.Snappy, pages: [][]hmPage{{{values: values, n: 5}}}})
		want := []string{
			`{"id":1,"ts":"1970-01-01T00:00:00Z"}`,
			`{"id":2,"ts":"9999-12-31T23:59:59.999999999Z"}`,
			`{"id":3,"ts":"-0043-03-15T00:00:00Z"}`,
			`{"id":4,"ts":"-4713-11-24T00:00:00Z"}`,
			`{"id":5,"ts":"11754508-12-13T00:00:00Z"}`,
		}
		if got := rowsOf(t, path, source.Options{}); !slices.Equal(got, want) {
			t.Errorf("got %q\nwant %q", got, want)
		}
		// A dry-run's rows are the same length.
		recs, err := readParquet(t, path, source.Options{SizeOnly: func(string) bool { return true }}, source.Position{})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range recs {
			if len(r.Data) != len(want[i]) {
				t.Errorf("row %d sized %d, written %d", i+1, len(r.Data), len(want[i]))
			}
		}
	}
}

const math32 = 1<<32 - 1

// A logical type the reader does not know (a member of the LogicalType
// union added after it) is read as its physical type, with one notice
// naming the column; the file's other logical types stay.
func TestParquetUnknownLogicalType(t *testing.T) {
	unknown := fields(40, st(tStruct{}))
	text := fields(1, st(tStruct{})) // STRING
	path := handmade(t,
		hmColumn{name: "v", typ: 2, logical: unknown, pages: [][]hmPage{{hmInt64s(7, 8)}}},
		hmColumn{name: "s", typ: 6, logical: text, pages: [][]hmPage{{{values: []byte("\x01\x00\x00\x00a\x01\x00\x00\x00b"), n: 2}}}})
	var mu sync.Mutex
	var notes []string
	opts := source.Options{Notice: func(m string) { mu.Lock(); notes = append(notes, m); mu.Unlock() }}
	want := []string{`{"v":7,"s":"a"}`, `{"v":8,"s":"b"}`}
	if got := rowsOf(t, path, opts); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], `column "v": logical type 40 is unknown`) {
		t.Errorf("notices %q, want one naming column v", notes)
	}
}

// A MAP whose key is declared optional (the format says required; other
// readers read it) is read as the map it is; arrow-go refused the file.
func TestParquetMapWithOptionalKey(t *testing.T) {
	key, err := schema.NewPrimitiveNodeLogical("key", parquet.Repetitions.Optional, schema.StringLogicalType{}, parquet.Types.ByteArray, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	value := schema.NewInt64Node("value", parquet.Repetitions.Optional, -1)
	kv, err := schema.NewGroupNode("key_value", parquet.Repetitions.Repeated, schema.FieldList{key, value}, -1)
	if err != nil {
		t.Fatal(err)
	}
	m, err := schema.NewGroupNodeLogical("m", parquet.Repetitions.Optional, schema.FieldList{kv}, schema.MapLogicalType{}, -1)
	if err != nil {
		t.Fatal(err)
	}
	id := schema.NewInt64Node("id", parquet.Repetitions.Required, -1)
	root, err := schema.NewGroupNode("schema", parquet.Repetitions.Required, schema.FieldList{id, m}, -1)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "map.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := file.NewParquetWriter(f, root)
	rg := w.AppendRowGroup()
	// Rows: {a:1, b:null}, a null map, an empty map.
	cw, _ := rg.NextColumn()
	if _, err := cw.(*file.Int64ColumnChunkWriter).WriteBatch([]int64{1, 2, 3}, nil, nil); err != nil {
		t.Fatal(err)
	}
	cw.Close()
	cw, _ = rg.NextColumn()
	if _, err := cw.(*file.ByteArrayColumnChunkWriter).WriteBatch([]parquet.ByteArray{parquet.ByteArray("a"), parquet.ByteArray("b")},
		[]int16{3, 3, 0, 1}, []int16{0, 1, 0, 0}); err != nil {
		t.Fatal(err)
	}
	cw.Close()
	cw, _ = rg.NextColumn()
	if _, err := cw.(*file.Int64ColumnChunkWriter).WriteBatch([]int64{1}, []int16{3, 2, 0, 1}, []int16{0, 1, 0, 0}); err != nil {
		t.Fatal(err)
	}
	cw.Close()
	rg.Close()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{`{"id":1,"m":{"a":1}}`, `{"id":2}`, `{"id":3,"m":{}}`}
	if got := rowsOf(t, path, source.Options{}); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	keep := []string{`{"id":1,"m":{"a":1,"b":null}}`, `{"id":2,"m":null}`, `{"id":3,"m":{}}`}
	if got := rowsOf(t, path, source.Options{CSVEmptyNull: true}); !slices.Equal(got, keep) {
		t.Errorf("--null keep: got %q, want %q", got, keep)
	}
}

// The LZO codec, which arrow-go cannot decode, refuses its file with a
// reason that names it.
func TestParquetLZOIsRefusedByName(t *testing.T) {
	plain, _ := compress.GetCodec(compress.Codecs.Uncompressed)
	path := handmade(t, hmColumn{name: "v", typ: 2, codec: compress.Codecs.Lzo, rawCodec: plain, pages: [][]hmPage{{hmInt64s(1, 2)}}})
	recs, err := readParquet(t, path, source.Options{}, source.Position{})
	if err == nil || !strings.Contains(err.Error(), "LZO") || len(recs) != 0 {
		t.Fatalf("got %d rows, %v; want the file refused naming LZO", len(recs), err)
	}
}
