package parquet

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
)

// Each row group's footer, cut from the file's, parses to the row group
// the whole footer has, with the file's schema and metadata, over every
// fixture (DuckDB's, pyarrow's, a legacy writer's, arrow-go's) and a file
// of many row groups; the reader keeps the cut footer, not the parsed
// one; and the rows read through cut footers, from the start and from
// inside a row group, are those read through the whole footer.
func TestParquetRowGroupFooters(t *testing.T) {
	many := filepath.Join(t.TempDir(), "many.parquet")
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: "at", Type: arrow.StructOf(arrow.Field{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true})},
	}, nil)
	sourcetest.WriteParquet(t, many, schema, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(7)), func(b *array.RecordBuilder) {
		for i := range 300 {
			b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("id-%d", i))
			tags := b.Field(1).(*array.ListBuilder)
			if i%5 == 0 {
				tags.AppendNull()
			} else {
				tags.Append(true)
				for k := range i % 3 {
					tags.ValueBuilder().(*array.StringBuilder).Append(fmt.Sprintf("t%d", k))
				}
			}
			at := b.Field(2).(*array.StructBuilder)
			at.Append(true)
			if i%4 == 0 {
				at.FieldBuilder(0).(*array.Int64Builder).AppendNull()
			} else {
				at.FieldBuilder(0).(*array.Int64Builder).Append(int64(i * i))
			}
		}
	})
	paths := []string{many}
	for _, name := range []string{"duckdb.parquet", "types.parquet", "rows.parquet", "legacy.parquet", "logical.parquet"} {
		paths = append(paths, sourcetest.ParquetDir()+name)
	}
	for _, path := range paths {
		name := filepath.Base(path)
		pf, err := file.OpenParquetFile(path, false)
		if err != nil {
			t.Fatal(err)
		}
		md := pf.MetaData()
		f, size, err := openRandom(source.Input{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		raw, parsed, ok := plainFooter(f, size)
		f.Close()
		if !ok || !reflect.DeepEqual(parsed.FileMetaData, md.FileMetaData) {
			t.Fatalf("%s: the plain footer (%v) does not parse as arrow-go's", name, ok)
		}
		if _, err := cutFooter(raw, md.NumRowGroups()+1); err == nil {
			t.Errorf("%s: cut into %d row groups, one more than it has", name, md.NumRowGroups()+1)
		}
		cuts, err := cutFooter(raw, md.NumRowGroups())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if name == "many.parquet" && md.NumRowGroups() != 43 {
			t.Fatalf("%s: %d row groups, want 43", name, md.NumRowGroups())
		}
		for g := range md.NumRowGroups() {
			one, err := cuts.rowGroupFooter(g, size)
			if err != nil {
				t.Fatalf("%s row group %d: %v", name, g, err)
			}
			if one.NumRowGroups() != 1 || !reflect.DeepEqual(one.RowGroups[0], md.RowGroups[g]) {
				t.Fatalf("%s row group %d: its footer has %d row groups, the first\n%v\nwant\n%v", name, g, one.NumRowGroups(), one.RowGroups[0], md.RowGroups[g])
			}
			if !one.Schema.Equals(md.Schema) || !one.KeyValueMetadata().Equals(md.KeyValueMetadata()) || one.GetCreatedBy() != md.GetCreatedBy() {
				t.Fatalf("%s row group %d: the schema or metadata differ from the file's", name, g)
			}
		}
		pf.Close()

		rd, err := Format{}.Open(source.Input{Path: path}, nil, source.Options{Format: source.FormatParquet}, source.Position{})
		if err != nil {
			t.Fatal(err)
		}
		if pr := rd.(*parquetReader); pr.cuts == nil || pr.md != nil {
			t.Errorf("%s: the reader keeps the parsed footer", name)
		}
		rd.Close()
		for _, start := range []source.Position{{}, {Line: md.NumRows / 2}} {
			got, gerr := readParquet(t, path, source.Options{}, start)
			want, werr := readParquetWith(t, Format{wholeFooter: true}, path, source.Options{}, start)
			if fmt.Sprint(gerr) != fmt.Sprint(werr) || len(got) != len(want) || len(got) == 0 {
				t.Fatalf("%s from %d: %d rows (%v) through cut footers, %d (%v) through the whole", name, start.Line, len(got), gerr, len(want), werr)
			}
			for i := range got {
				if got[i].Line != want[i].Line || !bytes.Equal(got[i].Data, want[i].Data) {
					t.Fatalf("%s row %d: %s through cut footers, %s through the whole", name, want[i].Line, got[i].Data, want[i].Data)
				}
			}
		}
	}
}

// Planning a Parquet input (its rows, its ranges, its readers at once)
// parses its footer once per version of the file: the facts are kept,
// and a file rewritten in place is read anew, never planned by its old
// footer.
func TestParquetFooterFactsKeptPerVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.parquet")
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}}, nil)
	write := func(rows int) {
		sourcetest.WriteParquet(t, path, schema, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(10)), func(b *array.RecordBuilder) {
			for i := range rows {
				b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("id-%d", i))
			}
		})
	}
	write(95)
	in := source.Input{Path: path}
	first, err := footerFactsOf(in)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := footerFactsOf(in); again != first {
		t.Errorf("the footer was parsed again for the same file")
	}
	if first.rows != 95 || len(first.groupRows) != 10 || first.groupRows[9] != 5 {
		t.Errorf("facts %+v, want 95 rows in 10 row groups, the last of 5", first)
	}
	if rows, ok := Rows(in, source.Options{}, 0); !ok || rows != 95 {
		t.Errorf("ParquetRows = %d, %v; want 95", rows, ok)
	}
	// The same path, rewritten: other rows, and a later modification time
	// (set a second on: a rewrite within the clock's tick may keep it).
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	write(140)
	if err := os.Chtimes(path, st.ModTime().Add(time.Second), st.ModTime().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if rows, ok := Rows(in, source.Options{}, 0); !ok || rows != 140 {
		t.Errorf("rewritten: ParquetRows = %d, %v; want 140", rows, ok)
	}
}

// With paged fields each row group is read by two readers, the decoder's
// and the paged group's: its footer is parsed once, for both.
func TestParquetRowGroupFooterParsedOnceForBothReaders(t *testing.T) {
	path := filepath.Join(t.TempDir(), "paged.parquet")
	sourcetest.WritePagedFixture(t, path, parquet.DataPageV1)
	m, err := record.NewMapper(record.Config{PartitionKeyPaths: []string{"/pk"}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	parsed := map[int]int{}
	cfg := Format{footerParsed: func(g int) {
		mu.Lock()
		parsed[g]++
		mu.Unlock()
	}}
	r, err := cfg.open(source.Input{Path: path}, source.Options{Facts: m, SizeOnly: func(f string) bool { return !m.ReadsValue(f) }}, source.Position{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !r.sizing.Paged() {
		t.Fatal("no paged fields read")
	}
	for {
		f, err := r.NextFacts()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		f.Release()
	}
	groups := len(r.rgRows)
	if groups < 2 {
		t.Fatalf("%d row groups: the fixture needs several", groups)
	}
	mu.Lock()
	defer mu.Unlock()
	for g := range groups {
		if parsed[g] != 1 {
			t.Errorf("row group %d's footer parsed %d times, want once", g, parsed[g])
		}
	}
}
