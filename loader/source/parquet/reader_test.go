package parquet

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
)

// readParquet returns every record of path from start, and the error that
// ended reading (nil at EOF).
func readParquet(t *testing.T, path string, opts source.Options, start source.Position) ([]source.Record, error) {
	t.Helper()
	r, err := Format{}.Open(source.Input{Path: path}, nil, opts, start)
	if err != nil {
		return nil, err
	}
	return sourcetest.ReadRecords(r)
}

// readParquetWith reads the file with a reader of cfg.
func readParquetWith(t *testing.T, cfg Format, path string, opts source.Options, start source.Position) ([]source.Record, error) {
	t.Helper()
	r, err := cfg.open(source.Input{Path: path}, opts, start)
	if err != nil {
		return nil, err
	}
	return sourcetest.ReadRecords(r)
}

// parquetRowsAre reads a fixture and checks its rows' JSON, exactly; it
// returns the records for further checks.
func parquetRowsAre(t *testing.T, name string, opts source.Options, want []string) []source.Record {
	t.Helper()
	recs, err := readParquet(t, sourcetest.ParquetDir()+name, opts, source.Position{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(want) {
		t.Fatalf("got %d records, want %d", len(recs), len(want))
	}
	for i, rec := range recs {
		if string(rec.Data) != want[i] {
			t.Errorf("row %d:\n got %s\nwant %s", i+1, rec.Data, want[i])
		}
	}
	return recs
}

// types.parquet is written by parquetjs (testdata/parquet/gen.mjs): every
// value below is what an independent writer put there.
func TestParquetTypesExactJSON(t *testing.T) {
	omit := []string{
		`{"id":"a1","pk":"p1","i32":-7,"i64":9007199254740993,"i8":-128,"u32":2147483647,"f32":1.5,"f64":0.1,"ok":true,"s":"héllo \"quoted\"\n\ttab","bin":"AAEC/w==","ts":"2026-11-24T05:08:27.123Z","tsus":"2025-11-25T05:08:27.123456Z","day":"2026-02-28","price":123.5,"big":"900719925474099.2","tags":["x","y"],"addr":{"city":"Oslo","zip":150},"attrs":{"a":1,"b":2}}`,
		`{"id":"a2","pk":"p2"}`,
		`{"id":"a3","pk":"p1","i32":0,"i64":0,"f64":-2.5e-300,"ok":false,"s":"","tags":["z",null],"addr":{},"attrs":{}}`,
		`{"id":"a4","pk":"p3","price":-0.5,"tags":[],"addr":{}}`,
		`{"id":"a5","pk":"p2","s":"日本語","day":"1969-12-31"}`,
	}
	keep := []string{
		omit[0],
		`{"id":"a2","pk":"p2","i32":null,"i64":null,"i8":null,"u32":null,"f32":null,"f64":null,"ok":null,"s":null,"bin":null,"ts":null,"tsus":null,"day":null,"price":null,"big":null,"tags":null,"addr":null,"attrs":null}`,
		`{"id":"a3","pk":"p1","i32":0,"i64":0,"i8":null,"u32":null,"f32":null,"f64":-2.5e-300,"ok":false,"s":"","bin":null,"ts":null,"tsus":null,"day":null,"price":null,"big":null,"tags":["z",null],"addr":{"city":null,"zip":null},"attrs":{"n":null}}`,
		`{"id":"a4","pk":"p3","i32":null,"i64":null,"i8":null,"u32":null,"f32":null,"f64":null,"ok":null,"s":null,"bin":null,"ts":null,"tsus":null,"day":null,"price":-0.5,"big":null,"tags":[],"addr":{"city":null,"zip":null},"attrs":null}`,
		`{"id":"a5","pk":"p2","i32":null,"i64":null,"i8":null,"u32":null,"f32":null,"f64":null,"ok":null,"s":"日本語","bin":null,"ts":null,"tsus":null,"day":"1969-12-31","price":null,"big":null,"tags":null,"addr":null,"attrs":null}`,
	}
	for _, tc := range []struct {
		name string
		opts source.Options
		want []string
	}{
		{"omit", source.Options{}, omit},
		{"keep", source.Options{CSVEmptyNull: true}, keep},
		{"format flag", source.Options{Format: "parquet"}, omit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs := parquetRowsAre(t, "types.parquet", tc.opts, tc.want)
			for i, rec := range recs {
				if rec.Line != int64(i+1) || rec.Offset != int64(i) || rec.Next.Line != int64(i+1) || rec.Path != sourcetest.ParquetDir()+"types.parquet" {
					t.Errorf("row %d: position line %d offset %d next %+v", i+1, rec.Line, rec.Offset, rec.Next)
				}
			}
		})
	}
}

// Resuming at any row — the start, inside a row group, on a row-group
// boundary, the end — yields exactly the rows after it, and progress
// offsets end at the file size.
func TestParquetResumeAtEveryKindOfRow(t *testing.T) {
	path := sourcetest.ParquetDir() + "rows.parquet"
	all, err := readParquet(t, path, source.Options{}, source.Position{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 250 {
		t.Fatalf("got %d rows, want 250", len(all))
	}
	st, _ := os.Stat(path)
	if last := all[len(all)-1].Next.Offset; last != st.Size() {
		t.Fatalf("last Next.Offset %d, want the file size %d", last, st.Size())
	}
	for i := 1; i < len(all); i++ {
		if all[i].Next.Offset < all[i-1].Next.Offset {
			t.Fatalf("Next.Offset went back at row %d", i+1)
		}
	}
	if rows, ok := Rows(source.Input{Path: path}, source.Options{}, 0); !ok || rows != 250 {
		t.Fatalf("ParquetRows = %d, %v", rows, ok)
	}
	for _, k := range []int{0, 1, 57, 99, 100, 101, 199, 200, 249, 250} {
		start := source.Position{}
		if k > 0 {
			start = all[k-1].Next
		}
		got, err := readParquet(t, path, source.Options{}, start)
		if err != nil {
			t.Fatalf("from row %d: %v", k, err)
		}
		if len(got) != 250-k {
			t.Fatalf("from row %d: got %d rows, want %d", k, len(got), 250-k)
		}
		for i, rec := range got {
			w := all[k+i]
			if string(rec.Data) != string(w.Data) || rec.Line != w.Line || rec.Next != w.Next {
				t.Fatalf("from row %d: record %d = %d %s, want %d %s", k, i, rec.Line, rec.Data, w.Line, w.Data)
			}
		}
	}
	if _, err := readParquet(t, path, source.Options{}, source.Position{Line: 251}); err == nil {
		t.Fatal("a start past the end was accepted")
	}
}

// Resuming inside a row group whose lists span pages of many rows yields
// the rows as a read from the start has them. arrow-go's SeekToRow read
// a list column's repetition levels to the end of the page it landed in,
// so the rows after the first got the wrong elements (a row of two tags
// came out with one), silently.
func TestParquetResumeInsideRowGroupsOfLists(t *testing.T) {
	paths := sourcetest.WriteFixtures(t, map[string]func(*testing.T, string){
		"dict.parquet": sourcetest.WriteDictionaryFixture, "encoder.parquet": func(t *testing.T, path string) { sourcetest.WriteEncoderFixture(t, path) }})
	for _, path := range append(paths, sourcetest.ParquetDir()+"duckdb.parquet") {
		all, err := readParquet(t, path, source.Options{}, source.Position{})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []int{1, 7, 2048, 2049, 3001, len(all) / 2, len(all) - 1} {
			if k >= len(all) {
				continue
			}
			got, err := readParquet(t, path, source.Options{}, all[k-1].Next)
			if err != nil {
				t.Fatalf("%s from row %d: %v", filepath.Base(path), k+1, err)
			}
			if len(got) != len(all)-k {
				t.Fatalf("%s from row %d: %d rows, want %d", filepath.Base(path), k+1, len(got), len(all)-k)
			}
			for i, rec := range got {
				if w := all[k+i]; string(rec.Data) != string(w.Data) || rec.Next != w.Next {
					t.Fatalf("%s from row %d: row %d = %s, want %s", filepath.Base(path), k+1, w.Line, rec.Data, w.Data)
				}
			}
		}
	}
}

func TestParquetTruncatedFileIsRefusedAtOpen(t *testing.T) {
	_, err := Format{}.Open(source.Input{Path: sourcetest.ParquetDir() + "truncated.parquet"}, nil, source.Options{}, source.Position{})
	var ie *source.InputError
	if !errors.As(err, &ie) || ie.Reason() != source.ReasonCorruptInput {
		t.Fatalf("got %v (%T), want an InputError %s", err, err, source.ReasonCorruptInput)
	}
}

// A row group whose pages do not decode refuses the rest of the file; the
// row groups before it were read.
func TestParquetCorruptRowGroupRefusesTheRest(t *testing.T) {
	b, err := os.ReadFile(sourcetest.ParquetDir() + "rows.parquet")
	if err != nil {
		t.Fatal(err)
	}
	pf, err := file.OpenParquetFile(sourcetest.ParquetDir()+"rows.parquet", false)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := pf.MetaData().RowGroup(1).ColumnChunk(0)
	if err != nil {
		t.Fatal(err)
	}
	off := cc.DataPageOffset()
	pf.Close()
	for i := off; i < off+24; i++ {
		b[i] = 0xff // the page header of row group 2, first column
	}
	path := filepath.Join(t.TempDir(), "bad.parquet")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	recs, err := readParquet(t, path, source.Options{}, source.Position{})
	var ie *source.InputError
	if !errors.As(err, &ie) || ie.Reason() != source.ReasonCorruptInput {
		t.Fatalf("got %v (%T) after %d rows, want an InputError %s", err, err, len(recs), source.ReasonCorruptInput)
	}
	if len(recs) != 100 || ie.Line != 101 || !strings.Contains(err.Error(), "row group 2 of 3") {
		t.Fatalf("read %d rows, refused from line %d: %v", len(recs), ie.Line, err)
	}
}

func TestParquetFromStdinIsRefused(t *testing.T) {
	if _, err := (Format{}).Open(source.Input{Path: "-", Stdin: true}, strings.NewReader("PAR1"), source.Options{Format: "parquet"}, source.Position{}); err == nil {
		t.Fatal("stdin Parquet accepted")
	}
}

// Closing in the middle stops the read-ahead goroutine.
func TestParquetCloseMidFile(t *testing.T) {
	for range 3 {
		r, err := Format{}.Open(source.Input{Path: sourcetest.ParquetDir() + "rows.parquet"}, nil, source.Options{}, source.Position{})
		if err != nil {
			t.Fatal(err)
		}
		if rec, err := r.Next(); err != nil || rec.Line != 1 {
			t.Fatalf("first row: %+v %v", rec, err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// Splittable is about cutting an input anywhere, also while it is read: a
// Parquet file is split only between row groups, at the start (Split).
func TestParquetIsNotCutWhileRead(t *testing.T) {
	if ok, why := (Format{}).Splittable(source.Input{Path: sourcetest.ParquetDir() + "rows.parquet"}, source.Options{}); ok || !strings.Contains(why, "Parquet") {
		t.Fatalf("Splittable = %v, %q", ok, why)
	}
}
