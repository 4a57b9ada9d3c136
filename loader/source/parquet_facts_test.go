package source

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/cosmosloader/loader/loader/record"
)

// factsConfigs add to trustedConfigs what a columnar plan takes: ids from
// "id" or generated, keys that are the id or a field of any type.
var factsConfigs = append([]record.Config{
	{PartitionKeyPaths: []string{"/pk"}},
	{PartitionKeyPaths: []string{"/few"}},
	{PartitionKeyPaths: []string{"/i64", "/ok", "/id"}},
	{PartitionKeyPaths: []string{"/status"}, Policy: record.IndexPolicy{Included: []string{"/*", "/absent/?"}}},
	{PartitionKeyPaths: []string{"/n"}, Policy: record.IndexPolicy{Included: []string{"/*"}, Excluded: []string{"/absent/*"}}},
}, trustedConfigs...)

// writeNumericIDs writes ids that are numbers (a rewrite: build quotes
// them), first among the members or not, some missing, beside a key
// column that is sometimes null.
func writeNumericIDs(t *testing.T, path string) {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "tenant", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	writeArrowParquet(t, path, schema, parquet.NewWriterProperties(), func(b *array.RecordBuilder) {
		for i := range 40 {
			if i%5 == 0 {
				b.Field(0).AppendNull()
			} else {
				b.Field(0).(*array.Int64Builder).Append(int64(i * 37))
			}
			if i%9 == 4 {
				b.Field(1).AppendNull()
			} else {
				b.Field(1).(*array.Int64Builder).Append(int64(i*1000 - 7000))
			}
			if i%7 == 3 {
				b.Field(2).AppendNull()
			} else {
				b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("t%d", i%3))
			}
		}
	})
}

// readFacts returns every batch of path read as Facts under m, or nil
// when the reader maps it by records.
func readFacts(t *testing.T, path string, opts Options) []*Facts {
	t.Helper()
	return readFactsWith(t, parquetFormat{}, path, opts)
}

// readFactsWith reads the file's facts with a reader of cfg.
func readFactsWith(t *testing.T, cfg parquetFormat, path string, opts Options) []*Facts {
	t.Helper()
	rd, err := cfg.open(Input{Path: path}, opts, Position{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rd.Close() })
	var fr FactReader = rd
	if !fr.Facts() {
		return nil
	}
	var out []*Facts
	for {
		f, err := fr.NextFacts()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
}

// A dry-run's Parquet rows come summed by columns (Options.Facts): every
// row's sums must be those of the record the reader writes, and what the
// plan makes of them what MapTrusted makes of that record — length, terms,
// id, partition key — or the row must be left to MapTrusted, as the very
// record Next gives. Over every fixture, nulls omitted and kept, under
// every mapper configuration.
func TestParquetFactsMatchTheRecords(t *testing.T) {
	paths := writeFixtures(t, map[string]func(*testing.T, string){
		"encoder.parquet": func(t *testing.T, path string) { writeEncoderFixture(t, path) }, "big.parquet": writeBigRows, "odd.parquet": writeOddNames,
		"known.parquet": writeKnownSizesFixture, "dict.parquet": writeDictionaryFixture, "nums.parquet": writeNumericIDs,
		"paged.parquet":   func(t *testing.T, path string) { writePagedFixture(t, path, parquet.DataPageV1) },
		"pagedv2.parquet": func(t *testing.T, path string) { writePagedFixture(t, path, parquet.DataPageV2) }})
	for _, name := range []string{"types.parquet", "rows.parquet", "logical.parquet", "legacy.parquet", "duckdb.parquet"} {
		paths = append(paths, parquetDir+name)
	}
	const genLen = 36
	genID := func(row int64) string { return fmt.Sprintf("%036d", row) }
	tally := map[string]int{}
	for _, path := range paths {
		for _, keep := range []bool{false, true} {
			want, err := readParquet(t, path, Options{CSVEmptyNull: keep}, Position{})
			if err != nil {
				t.Fatal(err)
			}
			for ci, cfg := range factsConfigs {
				m, err := record.NewMapper(cfg)
				if err != nil {
					t.Fatal(err)
				}
				sizeOnly := func(f string) bool { return !m.ReadsValue(f) }
				facts := readFacts(t, path, Options{CSVEmptyNull: keep, Facts: m, SizeOnly: sizeOnly})
				if facts == nil {
					tally["records"]++
					continue
				}
				where := func(row int64) string {
					return fmt.Sprintf("%s keep=%v config %d row %d", filepath.Base(path), keep, ci, row+1)
				}
				if len(facts) > 0 {
					for _, pf := range facts[0].sizing.paged {
						tally["paged"]++
						if pf.root.leaf < 0 {
							tally["paged structs"]++
						}
						if pf.list {
							tally["paged lists"]++
						}
						if pf.values {
							tally["paged ids"]++
						}
					}
				}
				row := int64(0)
				for _, f := range facts {
					if f.First != row {
						t.Fatalf("%s: facts start at row %d", where(row), f.First+1)
					}
					plan := f.Plan
					for i := range f.Len() {
						w := want[row]
						if f.Offset(i) != w.At() || f.Offset(i+1) != w.Next.Offset || f.Line(i) != w.Line {
							t.Fatalf("%s: at %d, next %d, line %d; the record's %d, %d, %d", where(row), f.Offset(i), f.Offset(i+1), f.Line(i), w.At(), w.Next.Offset, w.Line)
						}
						rec := f.Record(i)
						if rec.Line != w.Line || rec.Offset != w.Offset || rec.Next != w.Next || rec.At() != w.At() ||
							len(rec.Data) != len(w.Data) || !reflect.DeepEqual(rec.Members, w.Members) || !reflect.DeepEqual(rec.Schema.Names, w.Schema.Names) {
							t.Fatalf("%s: Record %+v\nNext gives %+v", where(row), rec, w)
						}
						for _, mb := range rec.Members {
							if !sizeOnly(rec.Schema.Names[mb.Field]) && !bytes.Equal(rec.Data[mb.ValStart:mb.ValEnd], w.Data[mb.ValStart:mb.ValEnd]) {
								t.Fatalf("%s: Record's %s is %s, Next's %s", where(row), rec.Schema.Names[mb.Field], rec.Data[mb.ValStart:mb.ValEnd], w.Data[mb.ValStart:mb.ValEnd])
							}
						}
						gen := func() string { return genID(w.Offset) }
						doc, derr := m.Map(w.Data, gen)
						if f.Slow {
							tally["slow"]++
							row++
							continue
						}
						if int(f.Size[i]) != len(w.Data) || int(f.Members[i]) != len(w.Members) {
							t.Fatalf("%s: summed %d bytes, %d members; written %d, %d: %s", where(row), f.Size[i], f.Members[i], len(w.Data), len(w.Members), w.Data)
						}
						var id []byte
						if plan.IDField() >= 0 {
							id = bytes.Clone(f.Value(plan.IDField(), i))
						}
						body, terms, ok := plan.Doc(int(f.Size[i]), int(f.Terms[i]), int(f.Members[i]), id, genLen)
						var pk []any
						for k, fld := range plan.KeyFields() {
							if !ok {
								break
							}
							var v any
							switch {
							case fld < 0 && plan.IDField() >= 0:
								v = plan.ID(id)
							case fld < 0:
								v = gen()
							default:
								v, ok = plan.Key(k, f.Value(fld, i))
							}
							pk = append(pk, v)
						}
						if !ok {
							tally["to MapTrusted"]++
							row++
							continue
						}
						if derr != nil {
							t.Fatalf("%s: the plan maps a record Map refuses (%v): %s", where(row), derr, w.Data)
						}
						gotID := gen()
						if plan.IDField() >= 0 {
							gotID = plan.ID(id)
						}
						if body != len(doc.Body) || terms != doc.Terms || gotID != doc.ID || !reflect.DeepEqual(pk, doc.PK) {
							t.Fatalf("%s: the plan makes %d bytes, %d terms, id %q, key %v; Map %d, %d, %q, %v: %s",
								where(row), body, terms, gotID, pk, len(doc.Body), doc.Terms, doc.ID, doc.PK, w.Data)
						}
						tally["by columns"]++
						row++
					}
					f.Release()
				}
				if row != int64(len(want)) {
					t.Fatalf("%s: %d rows as facts, %d records", where(row), row, len(want))
				}
			}
		}
	}
	t.Logf("%v", tally)
	if tally["by columns"] == 0 || tally["to MapTrusted"] == 0 || tally["records"] == 0 || tally["paged structs"] == 0 || tally["paged lists"] == 0 || tally["paged ids"] == 0 {
		t.Errorf("a path untaken: %v", tally)
	}
}

// writePagedFixture writes the columns a dry-run sizes from their pages
// (see parquet_paged.go) in data pages of version v: every type it
// sizes, nulls at each level of nested structs, strings that need
// escaping, dictionaries that fall back to plain pages, pages of a few
// rows, three row groups.
func writePagedFixture(t *testing.T, path string, v parquet.DataPageVersion) {
	t.Helper()
	str := arrow.BinaryTypes.String
	inner := arrow.StructOf(arrow.Field{Name: "x", Type: str, Nullable: true}, arrow.Field{Name: "y", Type: arrow.FixedWidthTypes.Boolean})
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: str}, {Name: "pk", Type: str, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "i8", Type: arrow.PrimitiveTypes.Int8}, {Name: "u16", Type: arrow.PrimitiveTypes.Uint16},
		{Name: "u32", Type: arrow.PrimitiveTypes.Uint32, Nullable: true}, {Name: "i64", Type: arrow.PrimitiveTypes.Int64},
		{Name: "u64", Type: arrow.PrimitiveTypes.Uint64},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32}, {Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "d", Type: arrow.FixedWidthTypes.Date32},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "tsus", Type: &arrow.TimestampType{Unit: arrow.Microsecond}},
		{Name: "s", Type: str, Nullable: true}, {Name: "few", Type: str},
		{Name: "st", Type: arrow.StructOf(
			arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "inner", Type: inner, Nullable: true},
			arrow.Field{Name: "z", Type: str}), Nullable: true},
		{Name: "req", Type: arrow.StructOf(arrow.Field{Name: "k", Type: arrow.PrimitiveTypes.Int64})},
		{Name: "tags", Type: arrow.ListOf(str), Nullable: true},
		{Name: "items", Type: arrow.ListOf(arrow.StructOf(
			arrow.Field{Name: "sku", Type: str},
			arrow.Field{Name: "qty", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "in", Type: arrow.StructOf(arrow.Field{Name: "x", Type: arrow.FixedWidthTypes.Boolean}), Nullable: true}))},
	}, nil)
	// Version 2's pages in Snappy: their levels are not compressed, and the
	// page guard finds each block's length after them.
	codec := compress.Codecs.Uncompressed
	if v == parquet.DataPageV2 {
		codec = compress.Codecs.Snappy
	}
	props := parquet.NewWriterProperties(parquet.WithDataPageVersion(v), parquet.WithDataPageSize(256),
		parquet.WithDictionaryPageSizeLimit(512), parquet.WithMaxRowGroupLength(1000), parquet.WithBatchSize(64),
		parquet.WithCompression(codec))
	odd := []string{`quo"te`, "back\\slash", "tab\tbed", "Zürich", "ctl\x01", "\xffbad", ""}
	writeArrowParquet(t, path, schema, props, func(b *array.RecordBuilder) {
		for i := range 3000 {
			null := func(k int, every int) bool {
				if i%every == k%every {
					b.Field(k).AppendNull()
					return true
				}
				return false
			}
			b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("id-%d", i))
			if !null(1, 11) {
				b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("tenant-%d", i%7))
			}
			if !null(2, 5) {
				b.Field(2).(*array.BooleanBuilder).Append(i%3 == 0)
			}
			b.Field(3).(*array.Int8Builder).Append(int8(i*37 - 100))
			b.Field(4).(*array.Uint16Builder).Append(uint16(i * 997))
			if !null(5, 4) {
				b.Field(5).(*array.Uint32Builder).Append(uint32(i) * 2654435761)
			}
			b.Field(6).(*array.Int64Builder).Append(int64(i-1500) * 1_000_000_007)
			b.Field(7).(*array.Uint64Builder).Append(uint64(i) * 11400714819323198485)
			b.Field(8).(*array.Float32Builder).Append(float32(i) / 7)
			if !null(9, 6) {
				b.Field(9).(*array.Float64Builder).Append(float64(i%500) / 100)
			}
			b.Field(10).(*array.Date32Builder).Append(arrow.Date32(i*13 - 20000))
			if !null(11, 9) {
				b.Field(11).(*array.TimestampBuilder).Append(arrow.Timestamp(int64(i) * 86_400_123))
			}
			b.Field(12).(*array.TimestampBuilder).Append(arrow.Timestamp(int64(i) * 1_000_001))
			if !null(13, 8) {
				b.Field(13).(*array.StringBuilder).Append(odd[i%len(odd)] + fmt.Sprint(i))
			}
			b.Field(14).(*array.StringBuilder).Append(odd[i%len(odd)])
			st := b.Field(15).(*array.StructBuilder)
			if i%10 == 3 {
				st.AppendNull()
			} else {
				st.Append(true)
				if i%4 == 1 {
					st.FieldBuilder(0).AppendNull()
				} else {
					st.FieldBuilder(0).(*array.Int32Builder).Append(int32(i))
				}
				in := st.FieldBuilder(1).(*array.StructBuilder)
				if i%6 == 2 {
					in.AppendNull()
				} else {
					in.Append(true)
					if i%5 == 4 {
						in.FieldBuilder(0).AppendNull()
					} else {
						in.FieldBuilder(0).(*array.StringBuilder).Append(odd[i%len(odd)])
					}
					in.FieldBuilder(1).(*array.BooleanBuilder).Append(i%2 == 0)
				}
				st.FieldBuilder(2).(*array.StringBuilder).Append(fmt.Sprintf("z%d", i%3))
			}
			req := b.Field(16).(*array.StructBuilder)
			req.Append(true)
			req.FieldBuilder(0).(*array.Int64Builder).Append(int64(i))
			// Lists: null, empty, of null elements, and long enough that a
			// row's elements span pages.
			tags := b.Field(17).(*array.ListBuilder)
			switch {
			case i%7 == 0:
				tags.AppendNull()
			case i%5 == 0:
				tags.AppendEmptyValue()
			default:
				tags.Append(true)
				for e := range (i * 7) % 45 {
					if e%6 == 5 {
						tags.ValueBuilder().AppendNull()
					} else {
						tags.ValueBuilder().(*array.StringBuilder).Append(odd[(i+e)%len(odd)])
					}
				}
			}
			items := b.Field(18).(*array.ListBuilder)
			items.Append(true)
			el := items.ValueBuilder().(*array.StructBuilder)
			for e := range i % 4 {
				if (i+e)%9 == 8 {
					el.AppendNull()
					continue
				}
				el.Append(true)
				el.FieldBuilder(0).(*array.StringBuilder).Append(fmt.Sprintf("SKU-%d", (i*e)%97))
				if e == 2 {
					el.FieldBuilder(1).AppendNull()
				} else {
					el.FieldBuilder(1).(*array.Int32Builder).Append(int32(e * i))
				}
				in := el.FieldBuilder(2).(*array.StructBuilder)
				if (i+e)%5 == 1 {
					in.AppendNull()
				} else {
					in.Append(true)
					in.FieldBuilder(0).(*array.BooleanBuilder).Append(e%2 == 0)
				}
			}
		}
	})
}
