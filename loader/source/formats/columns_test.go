package formats

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
)

// writeColumnsFixture writes 3 rows: id, tenant, a struct, a number and a
// string that Snappy compresses (so a damaged chunk fails to decode).
func writeColumnsFixture(t *testing.T, path string) {
	t.Helper()
	str := arrow.BinaryTypes.String
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: str}, {Name: "tenant", Type: str},
		{Name: "addr", Type: arrow.StructOf(arrow.Field{Name: "city", Type: str}, arrow.Field{Name: "zip", Type: arrow.PrimitiveTypes.Int32})},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64}, {Name: "note", Type: str},
	}, nil)
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy), parquet.WithDictionaryDefault(false))
	sourcetest.WriteParquet(t, path, schema, props, func(b *array.RecordBuilder) {
		for i, city := range []string{"Oslo", "Lima", "Pune"} {
			b.Field(0).(*array.StringBuilder).Append(string(rune('a' + i)))
			b.Field(1).(*array.StringBuilder).Append("t")
			st := b.Field(2).(*array.StructBuilder)
			st.Append(true)
			st.FieldBuilder(0).(*array.StringBuilder).Append(city)
			st.FieldBuilder(1).(*array.Int32Builder).Append(int32(100 + i))
			b.Field(3).(*array.Int64Builder).Append(int64(i))
			b.Field(4).(*array.StringBuilder).Append(strings.Repeat("note ", 200))
		}
	})
}

func recordsJSON(recs []source.Record) string {
	var s []string
	for _, r := range recs {
		s = append(s, string(r.Data))
	}
	return strings.Join(s, "\n")
}

// --columns keeps the named top-level fields (a struct whole) and the key
// fields the input has, and a Parquet reader reads no other column: with
// the note column's chunk damaged, the projected read still succeeds.
func TestParquetColumnsProjection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cols.parquet")
	writeColumnsFixture(t, path)
	opts := source.Options{Columns: []string{"addr"}, KeyColumns: []string{"id", "tenant", "absent"}}
	recs, err := readRecordsOf(t, path, opts, source.Position{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"a","tenant":"t","addr":{"city":"Oslo","zip":100}}
{"id":"b","tenant":"t","addr":{"city":"Lima","zip":101}}
{"id":"c","tenant":"t","addr":{"city":"Pune","zip":102}}`
	if got := recordsJSON(recs); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	for _, r := range recs {
		if r.Members == nil {
			t.Fatalf("row %d: a projected row must still be trusted", r.Line)
		}
	}
	// A resume inside the file keeps the projection and the positions.
	if recs, err := readRecordsOf(t, path, opts, source.Position{Line: 2}); err != nil || len(recs) != 1 || recs[0].Line != 3 || !strings.HasPrefix(string(recs[0].Data), `{"id":"c","tenant":"t","addr"`) {
		t.Errorf("resume at row 2: %v %s", err, recordsJSON(recs))
	}

	// Damage the data of the note column only.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := file.NewParquetReader(f)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := pf.MetaData().RowGroup(0).ColumnChunk(5) // id, tenant, city, zip, n, note
	if err != nil {
		t.Fatal(err)
	}
	start, size := cc.DataPageOffset(), cc.TotalCompressedSize()
	junk := []byte(strings.Repeat("\xff", int(size/2)))
	if _, err := f.WriteAt(junk, start+size/4); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := readRecordsOf(t, path, source.Options{}, source.Position{}); err == nil {
		t.Fatal("the damaged note column reads without error: the test damaged nothing")
	}
	recs, err = readRecordsOf(t, path, source.Options{Columns: []string{"n"}}, source.Position{})
	if err != nil {
		t.Fatalf("projected read touched the damaged column: %v", err)
	}
	if got := recordsJSON(recs); got != "{\"n\":0}\n{\"n\":1}\n{\"n\":2}" {
		t.Errorf("got %s", got)
	}
}

// A column --columns names and the input lacks refuses the input, naming
// the column; so does --columns on NDJSON, whose records are not columns.
func TestColumnsRefusals(t *testing.T) {
	dir := t.TempDir()
	pq := filepath.Join(dir, "cols.parquet")
	writeColumnsFixture(t, pq)
	csv := filepath.Join(dir, "a.csv")
	nd := filepath.Join(dir, "a.ndjson")
	os.WriteFile(csv, []byte("id,addr.city\na,Oslo\n"), 0o644)
	os.WriteFile(nd, []byte(`{"id":"a"}`+"\n"), 0o644)
	for _, tt := range []struct {
		path, want string
	}{
		{pq, `--columns names "zip", which is not a column of this input (it has id, tenant, addr, n, note)`},
		{csv, `--columns names "zip", which is not a column of this input (it has id, addr)`},
		{nd, "a.ndjson is NDJSON: --columns selects the columns of CSV and Parquet inputs"},
	} {
		_, err := readRecordsOf(t, tt.path, source.Options{Columns: []string{"id", "zip"}}, source.Position{})
		var ie *source.InputError
		if !errors.As(err, &ie) || ie.Code != source.ReasonColumns || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an InputError %s with %q", filepath.Base(tt.path), err, source.ReasonColumns, tt.want)
		}
	}
}

// CSV columns are selected by their top-level field: "addr" keeps every
// addr.* header. The other cells are still counted.
func TestCSVColumns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.csv")
	os.WriteFile(path, []byte("id,note,addr.city,addr.zip,n\na,x,Oslo,150,1\nb,y,Lima,151\nc,z,Pune,152,3\n"), 0o644)
	recs, err := readRecordsOf(t, path, source.Options{Columns: []string{"addr"}, KeyColumns: []string{"id"}}, source.Position{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 || string(recs[0].Data) != `{"id":"a","addr":{"city":"Oslo","zip":150}}` ||
		recs[1].Err == nil || string(recs[2].Data) != `{"id":"c","addr":{"city":"Pune","zip":152}}` {
		t.Errorf("got %s (row 2: %v)", recordsJSON(recs), recs[1].Err)
	}
}

// readRecordsOf returns every record of path from start, and the error
// that ended reading (nil at EOF).
func readRecordsOf(t *testing.T, path string, opts source.Options, start source.Position) ([]source.Record, error) {
	t.Helper()
	r, err := Open(source.Input{Path: path}, nil, opts, start)
	if err != nil {
		return nil, err
	}
	return sourcetest.ReadRecords(r)
}
