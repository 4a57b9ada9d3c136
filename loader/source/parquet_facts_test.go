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
	rd, err := Open(Input{Path: path}, nil, opts, Position{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rd.Close() })
	fr, ok := rd.(FactReader)
	if !ok || !fr.Facts() {
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
		"known.parquet": writeKnownSizesFixture, "dict.parquet": writeDictionaryFixture, "nums.parquet": writeNumericIDs})
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
	if tally["by columns"] == 0 || tally["to MapTrusted"] == 0 || tally["records"] == 0 {
		t.Errorf("a path untaken: %v", tally)
	}
}
