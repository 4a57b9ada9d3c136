package parquet

import (
	"bytes"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
)

// dictionaryLeaves names the leaf columns of path that are read as
// dictionaries.
func dictionaryLeaves(t *testing.T, path string) []string {
	t.Helper()
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	var names []string
	for _, c := range dictionaryColumns(pf.MetaData()) {
		names = append(names, pf.MetaData().Schema.Column(c).Path())
	}
	return names
}

// Strings dictionary-encoded in every row group are read as Arrow
// dictionaries; a column with a plain row group is not. Either way
// every record is what a plain read gives, byte for byte, with nulls
// omitted or kept, written or only sized (a dry-run), from the start and
// from a resume inside a row group.
func TestParquetDictionaryColumns(t *testing.T) {
	gen := filepath.Join(t.TempDir(), "dict.parquet")
	sourcetest.WriteDictionaryFixture(t, gen)
	duck := sourcetest.ParquetDir() + "duckdb.parquet"
	for path, want := range map[string][]string{
		// arrow-go's writer leaves the plain pages it falls back to out of
		// its page statistics: grows is read as a dictionary, through
		// arrow-go's fallback, and must read the same all the same.
		gen: {"few", "grows", "tags.list.element", "st.city"},
		// DuckDB keeps no statistics; its chunks without a dictionary page
		// (every tenant and description of some row group) are plain.
		duck: {"status", "tags.list.element", "address.city"},
	} {
		if got := dictionaryLeaves(t, path); !slices.Equal(got, want) {
			t.Errorf("%s: dictionary columns %q, want %q", filepath.Base(path), got, want)
		}
	}
	sizeOnly := func(f string) bool { return f != "id" && f != "tenant" && f != "few" }
	for _, path := range []string{gen, duck} {
		for _, opts := range []source.Options{{}, {CSVEmptyNull: true}, {SizeOnly: sizeOnly}, {SizeOnly: sizeOnly, CSVEmptyNull: true}} {
			starts := []source.Position{{}, {Line: 777}}
			if path == gen {
				starts = append(starts, source.Position{Line: 5077}) // in the row group of plain pages
			}
			for _, start := range starts {
				want, err := readParquetWith(t, Format{plainStrings: true}, path, opts, start)
				if err != nil {
					t.Fatal(err)
				}
				got, err := readParquet(t, path, opts, start)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(want) || len(got) == 0 {
					t.Fatalf("%s: %d rows with dictionaries, %d without", path, len(got), len(want))
				}
				for i := range got {
					g, w := got[i], want[i]
					same := len(g.Data) == len(w.Data) && slices.Equal(g.Members, w.Members)
					for _, m := range g.Members {
						if opts.SizeOnly != nil && opts.SizeOnly(g.Schema.Names[m.Field]) {
							continue // left unwritten
						}
						same = same && bytes.Equal(g.Data[m.ValStart:m.ValEnd], w.Data[m.ValStart:m.ValEnd])
					}
					if g.Members == nil {
						same = same && bytes.Equal(g.Data, w.Data)
					}
					if !same {
						t.Fatalf("%s row %d (%+v): with dictionaries\n%s\nwithout\n%s", filepath.Base(path), g.Line, opts.CSVEmptyNull, g.Data, w.Data)
					}
				}
			}
		}
	}
}

// A string column is read as a dictionary only when its values repeat:
// an id's dictionary is as long as its row group, and arrow-go hashes
// every entry of a dictionary it reads as one. dictionaryEntries, from
// the footer alone, comes within a factor of two of each chunk's real
// count of entries.
func TestParquetDictionaryOnlyWhenValuesRepeat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "repeat.parquet")
	str := arrow.BinaryTypes.String
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "tenant", Type: str}, {Name: "id", Type: str}, {Name: "street", Type: str},
		{Name: "tags", Type: arrow.ListOf(str)},
	}, nil)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	// Compressed: arrow-go writes uncompressed unique strings plainly.
	props := parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(2000), parquet.WithCompression(compress.Codecs.Snappy))
	w, err := pqarrow.NewFileWriter(schema, f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	// Random values, as real ones are: a pattern that repeats compresses
	// its indexes, and fewer bytes look like fewer entries.
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 6000 {
		b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("tenant-%d", rng.IntN(20)))
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("order-%08d", i))
		b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("%d Main Street", rng.IntN(1000)))
		tags := b.Field(3).(*array.ListBuilder)
		tags.Append(true)
		for range rng.IntN(4) {
			tags.ValueBuilder().(*array.StringBuilder).Append(fmt.Sprintf("tag-%d", rng.IntN(6)))
		}
	}
	rec := b.NewRecordBatch()
	err = w.Write(rec)
	rec.Release()
	if err == nil {
		err = w.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	// Every chunk is dictionary-encoded; the ids' and streets' entries
	// stand for one and about two values each (the streets' 2,000 draws
	// of 1,000 are ~865 entries). A list's estimate is rougher (its
	// levels), but its 6 tags still stand for many values each.
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	md := pf.MetaData()
	for g := range md.NumRowGroups() {
		for c, want := range []int{20, 2000, 1000, 6} {
			cc, err := md.RowGroup(g).ColumnChunk(c)
			if err != nil || !dictionaryEncoded(cc) {
				t.Fatalf("row group %d column %d: not dictionary-encoded (%v)", g, c, err)
			}
			got := dictionaryEntries(cc, bits.Len(uint(md.Schema.Column(c).MaxRepetitionLevel())))
			lo, hi := float64(want)/2, float64(want)*2
			if c == 3 { // the list's
				lo, hi = 1, float64(cc.NumValues())/dictionaryRepeats/4
			}
			if got < lo || got > hi {
				t.Errorf("row group %d column %s: %.0f entries estimated, %d in its dictionary", g, md.Schema.Column(c).Path(), got, want)
			}
		}
	}
	if got, want := dictionaryLeaves(t, path), []string{"tenant", "tags.list.element"}; !slices.Equal(got, want) {
		t.Errorf("dictionary columns %q, want %q", got, want)
	}

	// Row groups longer than a batch: zip codes that repeat eight times
	// each, but whose dictionaries are longer than a batch, which arrow-go
	// copies into every batch of the row group, are read plainly; a
	// region's few values are still read as a dictionary.
	long := filepath.Join(t.TempDir(), "long.parquet")
	schema = arrow.NewSchema([]arrow.Field{{Name: "zip", Type: str}, {Name: "region", Type: str}}, nil)
	props = parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(20000), parquet.WithCompression(compress.Codecs.Snappy))
	sourcetest.WriteParquet(t, long, schema, props, func(b *array.RecordBuilder) {
		for range 40000 {
			b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("%05d", rng.IntN(2500)))
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("region-%d", rng.IntN(8)))
		}
	})
	if got, want := dictionaryLeaves(t, long), []string{"region"}; !slices.Equal(got, want) {
		t.Errorf("row groups of 20,000 rows: dictionary columns %q, want %q", got, want)
	}
}
