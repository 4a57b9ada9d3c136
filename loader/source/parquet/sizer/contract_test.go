package sizer_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/parquet"

	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
	pqreader "github.com/cosmosloader/loader/loader/source/parquet"
	"github.com/cosmosloader/loader/loader/source/parquet/sizer"
)

// factsConfigs add to trustedConfigs what a columnar plan takes: ids from
// "id" or generated, keys that are the id or a field of any type.
var factsConfigs = append([]record.Config{
	{PartitionKeyPaths: []string{"/pk"}},
	{PartitionKeyPaths: []string{"/few"}},
	{PartitionKeyPaths: []string{"/i64", "/ok", "/id"}},
	{PartitionKeyPaths: []string{"/status"}, Policy: record.IndexPolicy{Included: []string{"/*", "/absent/?"}}},
	{PartitionKeyPaths: []string{"/n"}, Policy: record.IndexPolicy{Included: []string{"/*"}, Excluded: []string{"/absent/*"}}},
}, sourcetest.TrustedConfigs...)

// readFacts returns every batch of path read as Facts under m, or nil
// when the reader maps it by records.
func readFacts(t *testing.T, path string, opts source.Options) []*sizer.Facts {
	t.Helper()
	rd, err := pqreader.Format{}.Open(source.Input{Path: path}, nil, opts, source.Position{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rd.Close() })
	fr, ok := rd.(sizer.Reader)
	if !ok || !fr.Facts() {
		return nil
	}
	var out []*sizer.Facts
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
	paths := sourcetest.WriteFixtures(t, map[string]func(*testing.T, string){
		"encoder.parquet": func(t *testing.T, path string) { sourcetest.WriteEncoderFixture(t, path) }, "big.parquet": sourcetest.WriteBigRows, "odd.parquet": sourcetest.WriteOddNames,
		"known.parquet": sourcetest.WriteKnownSizesFixture, "dict.parquet": sourcetest.WriteDictionaryFixture, "nums.parquet": sourcetest.WriteNumericIDs,
		"paged.parquet":   func(t *testing.T, path string) { sourcetest.WritePagedFixture(t, path, parquet.DataPageV1) },
		"pagedv2.parquet": func(t *testing.T, path string) { sourcetest.WritePagedFixture(t, path, parquet.DataPageV2) }})
	for _, name := range []string{"types.parquet", "rows.parquet", "logical.parquet", "legacy.parquet", "duckdb.parquet"} {
		paths = append(paths, sourcetest.ParquetDir()+name)
	}
	const genLen = 36
	genID := func(row int64) string { return fmt.Sprintf("%036d", row) }
	tally := map[string]int{}
	for _, path := range paths {
		for _, keep := range []bool{false, true} {
			want, err := importRows(t, path, source.Options{CSVEmptyNull: keep})
			if err != nil {
				t.Fatal(err)
			}
			for ci, cfg := range factsConfigs {
				m, err := record.NewMapper(cfg)
				if err != nil {
					t.Fatal(err)
				}
				sizeOnly := func(f string) bool { return !m.ReadsValue(f) }
				facts := readFacts(t, path, source.Options{CSVEmptyNull: keep, Facts: m, SizeOnly: sizeOnly})
				if facts == nil {
					tally["records"]++
					continue
				}
				where := func(row int64) string {
					return fmt.Sprintf("%s keep=%v config %d row %d", filepath.Base(path), keep, ci, row+1)
				}
				if len(facts) > 0 {
					sizer.PagedTally(facts[0], tally)
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

// importRows reads path's rows as an import does.
func importRows(t *testing.T, path string, opts source.Options) ([]source.Record, error) {
	t.Helper()
	r, err := pqreader.Format{}.Open(source.Input{Path: path}, nil, opts, source.Position{})
	if err != nil {
		return nil, err
	}
	return sourcetest.ReadRecords(r)
}
