package parquet

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
	"github.com/cosmosloader/loader/loader/source/parquet/arrowjson"
	"github.com/cosmosloader/loader/loader/source/parquet/sizer"
)

// The reader's output on the fixtures and on writeEncoderFixture, hashed:
// the figures are those of the encoder before it was made faster (commit
// a124b3a), so any change in output fails here.
func TestParquetEncoderOutputUnchanged(t *testing.T) {
	gen := filepath.Join(t.TempDir(), "encoder.parquet")
	sourcetest.WriteEncoderFixture(t, gen)
	want := map[string]string{
		"types.parquet omit":   "97a1b675e73d5561",
		"types.parquet keep":   "3438fcc54dfadf2b",
		"rows.parquet omit":    "41b3c22bedcad5e3",
		"rows.parquet keep":    "1ed18fe609373838",
		"encoder.parquet omit": "a0154eb85334173c",
		"encoder.parquet keep": "78f24710dda6bb85",
	}
	for _, path := range []string{sourcetest.ParquetDir() + "types.parquet", sourcetest.ParquetDir() + "rows.parquet", gen} {
		for _, keep := range []bool{false, true} {
			recs, err := readParquet(t, path, source.Options{CSVEmptyNull: keep}, source.Position{})
			if err != nil {
				t.Fatal(err)
			}
			h := sha256.New()
			for _, rec := range recs {
				h.Write(rec.Data)
				h.Write([]byte{'\n'})
			}
			name := filepath.Base(path) + map[bool]string{false: " omit", true: " keep"}[keep]
			got := hex.EncodeToString(h.Sum(nil))[:16]
			t.Logf("%s: %d rows, %s", name, len(recs), got)
			if got != want[name] {
				t.Errorf("%s: output hash %s, want %s", name, got, want[name])
			}
		}
	}
}

// BenchmarkParquetRead is the reader alone (decode and encode, no mapping)
// on writeEncoderFixture's file; MB/s are of JSON produced.
func BenchmarkParquetRead(b *testing.B) {
	path := filepath.Join(b.TempDir(), "encoder.parquet")
	sourcetest.WriteEncoderFixture(b, path)
	var rows, bytes int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := Format{}.Open(source.Input{Path: path}, nil, source.Options{}, source.Position{})
		if err != nil {
			b.Fatal(err)
		}
		for {
			rec, err := r.Next()
			if err != nil {
				break
			}
			rows++
			bytes += int64(len(rec.Data))
		}
		r.Close()
	}
	b.SetBytes(bytes / int64(b.N))
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
}

// Row groups of every size, below and above a chunk and a batch, decoded
// by two workers at once, come out in file order, from the start and from
// a resume inside any of them.
// writeRowGroups writes a file of one column, n, counting rows from 0, in
// row groups of the given sizes; value(row) is n's value (nil: the row).
func writeRowGroups(t *testing.T, path string, sizes []int, value func(row int64) int64) (total int64) {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pqarrow.NewFileWriter(schema, f, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, n := range sizes {
		for range n {
			v := total
			if value != nil {
				v = value(total)
			}
			b.Field(0).(*array.Int64Builder).Append(v)
			total++
		}
		rec := b.NewRecordBatch()
		err := w.Write(rec) // one row group each
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if n := pf.NumRowGroups(); n != len(sizes) {
		t.Fatalf("wrote %d row groups, want %d", n, len(sizes))
	}
	pf.Close()
	return total
}

var manyRowGroups = []int{1, 3, 1024, 1025, 7, 2048, 2049, 5000, 2, 1, 1}

func TestParquetManyRowGroupsComeOutInOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "groups.parquet")
	total := writeRowGroups(t, path, manyRowGroups, nil)
	for _, from := range []int64{0, 1, 4, 1028, 2052, 5000, 9000, total - 1, total} {
		recs, err := readParquet(t, path, source.Options{}, source.Position{Line: from})
		if err != nil {
			t.Fatalf("from row %d: %v", from, err)
		}
		if int64(len(recs)) != total-from {
			t.Fatalf("from row %d: %d rows, want %d", from, len(recs), total-from)
		}
		for i, rec := range recs {
			row := from + int64(i)
			if want := fmt.Sprintf(`{"n":%d}`, row); string(rec.Data) != want || rec.Line != row+1 || rec.Next.Line != row+1 {
				t.Fatalf("from row %d: record %d is line %d %s, want line %d %s", from, i, rec.Line, rec.Data, row+1, want)
			}
		}
	}
}

// Map keys that are not strings become their JSON text as a string; a
// string key (a timestamp's included) is written as it is.
func TestParquetMapKeysAsStrings(t *testing.T) {
	ts := &arrow.TimestampType{Unit: arrow.Second, TimeZone: "UTC"}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "i", Type: arrow.MapOf(arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int32)},
		{Name: "t", Type: arrow.MapOf(ts, arrow.FixedWidthTypes.Boolean)},
		{Name: "l", Type: arrow.MapOf(arrow.ListOf(arrow.BinaryTypes.String), arrow.PrimitiveTypes.Int32)},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	mi := b.Field(0).(*array.MapBuilder)
	mi.Append(true)
	mi.KeyBuilder().(*array.Int32Builder).AppendValues([]int32{7, -3}, nil)
	mi.ItemBuilder().(*array.Int32Builder).AppendValues([]int32{1, 2}, nil)
	mt := b.Field(1).(*array.MapBuilder)
	mt.Append(true)
	mt.KeyBuilder().(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000))
	mt.ItemBuilder().(*array.BooleanBuilder).Append(true)
	ml := b.Field(2).(*array.MapBuilder)
	ml.Append(true)
	lb := ml.KeyBuilder().(*array.ListBuilder)
	lb.Append(true)
	lb.ValueBuilder().(*array.StringBuilder).AppendValues([]string{"a", `q"`}, nil)
	ml.ItemBuilder().(*array.Int32Builder).Append(5)
	rec := b.NewRecordBatch()
	defer rec.Release()
	got := arrowjson.Bind(rec, nil, arrowjson.RowConfig{}).AppendRow(nil, 0, nil)
	want := `{"i":{"7":1,"-3":2},"t":{"2023-11-14T22:13:20Z":true},"l":{"[\"a\",\"q\\\"\"]":5}}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// INT96 timestamps, which Spark (its default output type), Hive and Impala
// write, are RFC 3339 instants like any other timestamp: a fraction to the
// nanosecond, before 1970 too, a null omitted. The file is written in the
// Impala layout (nanoseconds of the day, then the Julian day) that those
// writers use; the reader's answer is checked in its own file, the sized
// one (dry-run) alike.
func TestParquetInt96Timestamps(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}, Nullable: true}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).AppendValues([]string{"a", "b", "c", "d"}, nil)
	b.Field(1).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{1_764_000_000_123_456_789, -1, 0, -8_520_336_000_000_000_000},
		[]bool{true, true, false, true})
	rec := b.NewRecordBatch()
	defer rec.Release()
	path := filepath.Join(t.TempDir(), "int96.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pqarrow.NewFileWriter(schema, f, parquet.NewWriterProperties(),
		pqarrow.NewArrowWriterProperties(pqarrow.WithDeprecatedInt96Timestamps(true)))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if typ := pf.MetaData().Schema.Column(1).PhysicalType(); typ != parquet.Types.Int96 {
		t.Fatalf("ts written as %s, want INT96", typ)
	}
	pf.Close()
	want := []string{
		`{"id":"a","ts":"2025-11-24T16:00:00.123456789Z"}`,
		`{"id":"b","ts":"1969-12-31T23:59:59.999999999Z"}`,
		`{"id":"c"}`,
		`{"id":"d","ts":"1700-01-01T00:00:00Z"}`,
	}
	for _, sized := range []bool{false, true} {
		opts := source.Options{}
		if sized {
			opts.SizeOnly = func(name string) bool { return name == "ts" }
		}
		recs, err := readParquet(t, path, opts, source.Position{})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != len(want) {
			t.Fatalf("%d rows, want %d", len(recs), len(want))
		}
		for i, r := range recs {
			if sized {
				if len(r.Data) != len(want[i]) {
					t.Errorf("row %d sized to %d bytes, written %d: %s", i+1, len(r.Data), len(want[i]), want[i])
				}
			} else if string(r.Data) != want[i] {
				t.Errorf("row %d:\n got %s\nwant %s", i+1, r.Data, want[i])
			}
		}
	}
}

// Two decoders read a file of small row groups; one reads a file whose
// row groups hold a page of MBs per column (here ten columns of 1.2 MB of
// random text each, in each of two row groups), where two would hold twice
// that. A dry-run's local file (its rows summed: Facts) has two when it
// has paged fields (sized from their pages), one whatever its row groups
// when Arrow decodes every field (here: in an encoding pagedColumn does
// not read). A lone decoder has decoded batches queued for
// its encoder (parquetDecoded) and, reading a local file, decodes a
// batch's columns at once; one of a segmented load's readers has one
// decoder and no more. Every row comes back, in order.
func TestParquetDecodersFollowPageMemory(t *testing.T) {
	if parquetWorkers() < 2 {
		t.Skip("one core: one decoder whatever the file")
	}
	str := arrow.BinaryTypes.String
	var fields []arrow.Field
	for k := range 10 {
		fields = append(fields, arrow.Field{Name: fmt.Sprintf("c%d", k), Type: str})
	}
	schema := arrow.NewSchema(fields, nil)
	write := func(path string, rows, rowGroup int, delta bool) {
		opts := []parquet.WriterProperty{parquet.WithMaxRowGroupLength(int64(rowGroup)), parquet.WithDictionaryDefault(false),
			parquet.WithDataPageSize(64 << 20)}
		if delta {
			opts = append(opts, parquet.WithEncoding(parquet.Encodings.DeltaLengthByteArray))
		}
		props := parquet.NewWriterProperties(opts...)
		sourcetest.WriteParquet(t, path, schema, props, func(b *array.RecordBuilder) {
			rng := rand.New(rand.NewSource(5))
			for range rows {
				for k := range fields {
					v := make([]byte, 600)
					for i := range v {
						v[i] = byte('a' + rng.Intn(26))
					}
					b.Field(k).(*array.StringBuilder).Append(string(v))
				}
			}
		})
	}
	dir := t.TempDir()
	mapper, err := record.NewMapper(record.Config{PartitionKeyPaths: []string{"/c0"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name         string
		blob, facts  bool
		rows, rgRows int
		cursors      int // Options.Cursors: one of a segmented load's readers
		delta        bool
		wantDecoders int
		wantQueued   int  // batches queued for the encoder
		wantParallel bool // columns decoded at once
	}{
		{"small blob", true, false, 4000, 100, 0, false, 2, 0, false},
		{"big blob", true, false, 4000, 2000, 0, false, 1, parquetDecoded, false},
		{"small blob dry-run", true, true, 4000, 100, 0, false, 2, 0, false},
		{"small file", false, false, 4000, 100, 0, false, 2, 0, false},
		{"big file", false, false, 4000, 2000, 0, false, 1, parquetDecoded, true},
		{"small file dry-run", false, true, 4000, 100, 0, false, 2, 0, false},
		{"small file dry-run by Arrow", false, true, 4000, 100, 0, true, 1, parquetDecoded, true},
		{"segment", false, false, 4000, 100, 4, false, 1, 0, false},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".parquet")
		write(path, c.rows, c.rgRows, c.delta)
		in := source.Input{Path: path}
		if c.blob {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			in = source.Input{Path: "https://acct.blob.core.windows.net/c/" + filepath.Base(path), Remote: &sourcetest.MemRemote{Data: data}}
		}
		opts := source.Options{Format: source.FormatParquet, Cursors: c.cursors}
		if c.facts {
			opts.Facts = mapper
		}
		rd, err := Format{}.Open(in, nil, opts, source.Position{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		if fr, ok := rd.(sizer.Reader); ok && fr.Facts() {
			for {
				f, err := fr.NextFacts()
				if err != nil {
					break
				}
				if f.First != int64(n) {
					t.Fatalf("%s: row %d came as row %d", c.name, n+1, f.First+1)
				}
				n += f.Len()
				f.Release()
			}
		} else {
			if c.facts {
				t.Fatalf("%s: not read as Facts", c.name)
			}
			for ; ; n++ {
				rec, err := rd.Next()
				if err != nil {
					break
				}
				if rec.Line != int64(n+1) {
					t.Fatalf("%s: row %d came as row %d", c.name, n+1, rec.Line)
				}
			}
		}
		pr := rd.(*parquetReader)
		if c.facts && !pr.sizing.Paged() != c.delta {
			t.Errorf("%s: paged fields %v", c.name, pr.sizing.Paged())
		}
		if got := len(pr.outs); got != c.wantDecoders || n != c.rows {
			t.Errorf("%s: %d decoders, %d rows; want %d decoders, %d rows", c.name, got, n, c.wantDecoders, c.rows)
		}
		if pr.queued != c.wantQueued || pr.arrowProps.Parallel != c.wantParallel {
			t.Errorf("%s: %d batches queued, columns at once %v; want %d, %v", c.name, pr.queued, pr.arrowProps.Parallel, c.wantQueued, c.wantParallel)
		}
		rd.Close()
	}
}
