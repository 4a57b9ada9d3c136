package formats

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
)

// A Parquet file below Hive-style partition folders (as Spark writes a
// table partitioned by region and date) gets their fields: the folders are
// the only place those values are.
func TestParquetGetsItsPartitionFolders(t *testing.T) {
	src, err := os.ReadFile(sourcetest.ParquetDir() + "rows.parquet") // id, pk, n, name; 250 rows
	if err != nil {
		t.Fatal(err)
	}
	put := func(rel string) string {
		p := filepath.Join(t.TempDir(), filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, src, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, rel string
		opts      source.Options
		want      string // the first row
	}{
		{"strings, numbers, dates", "sales/region=eu/year=2026/date=2026-11-01/part-0.parquet", source.Options{},
			`{"id":"r1","pk":"k1","n":1,"name":"row 1","region":"eu","year":2026,"date":"2026-11-01"}`},
		{"leading zeros and long digits stay strings, decimals are numbers", "t/zip=02134/code=1234567890123456/rate=-0.25/part-0.parquet", source.Options{},
			`{"id":"r1","pk":"k1","n":1,"name":"row 1","zip":"02134","code":"1234567890123456","rate":-0.25}`},
		{"escaped as Hive escapes", "t/ts=2026-11-01 10%3A00%3A00/city=S%C3%A3o Paulo/part-0.parquet", source.Options{},
			`{"id":"r1","pk":"k1","n":1,"name":"row 1","ts":"2026-11-01 10:00:00","city":"São Paulo"}`},
		{"a null partition is omitted", "t/region=__HIVE_DEFAULT_PARTITION__/day=1/part-0.parquet", source.Options{},
			`{"id":"r1","pk":"k1","n":1,"name":"row 1","day":1}`},
		{"or null with --null keep", "t/region=__HIVE_DEFAULT_PARTITION__/part-0.parquet", source.Options{CSVEmptyNull: true},
			`{"id":"r1","pk":"k1","n":1,"name":"row 1","region":null}`},
		{"a column wins over a folder, a deeper folder over a shallower one", "t/pk=folder/day=1/day=2/part-0.parquet", source.Options{},
			`{"id":"r1","pk":"k1","n":1,"name":"row 1","day":2}`},
		{"--columns keeps what it names", "t/region=eu/day=1/part-0.parquet", source.Options{Columns: []string{"n", "day"}, KeyColumns: []string{"id", "pk"}},
			`{"id":"r1","pk":"k1","n":1,"day":1}`},
		{"folders without = are just folders", "t/exports/2026/part-0.parquet", source.Options{},
			`{"id":"r1","pk":"k1","n":1,"name":"row 1"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Format = source.FormatParquet
			recs, err := readRecordsOf(t, put(tc.rel), tc.opts, source.Position{})
			if err != nil || len(recs) != 250 {
				t.Fatalf("%d records, %v", len(recs), err)
			}
			if got := string(recs[0].Data); got != tc.want {
				t.Errorf("first row\n%s\nwant\n%s", got, tc.want)
			}
			// Every row gets the same fields, after its own.
			tail := tc.want[strings.LastIndex(tc.want, `"n":1`)+len(`"n":1`):]
			if i := strings.Index(tail, `"name":"row 1"`); i >= 0 {
				tail = tail[i+len(`"name":"row 1"`):]
			}
			for i, rec := range recs {
				if !strings.HasSuffix(string(rec.Data), tail) {
					t.Fatalf("row %d: %s, want it to end %s", i, rec.Data, tail)
				}
			}
		})
	}
	t.Run("--columns naming neither a column nor a folder", func(t *testing.T) {
		_, err := readRecordsOf(t, put("t/region=eu/part-0.parquet"), source.Options{Format: source.FormatParquet, Columns: []string{"nope"}}, source.Position{})
		if err == nil || !strings.Contains(err.Error(), "region") {
			t.Errorf("err %v, want a refusal listing the folder's field among the columns", err)
		}
	})
}

func TestPartitionFoldersOfABlob(t *testing.T) {
	in := source.Input{Path: "https://acct.blob.core.windows.net/lake/sales/region=eu/date=2026-11-01%2010%253A00/part-0.parquet", Remote: &sourcetest.MemRemote{}}
	// The URL escapes the blob's name, which holds Hive's escape of ":".
	if got, want := source.Folders(in), []source.Folder{{Name: "region", Value: "eu"}, {Name: "date", Value: "2026-11-01 10:00"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("folders %q, want %q", got, want)
	}
	if names := source.PartitionFolders(source.Input{Path: "-", Stdin: true}); names != nil {
		t.Errorf("stdin has folders %q", names)
	}
}

func TestPartitionFoldersNotes(t *testing.T) {
	ins := []source.Input{
		{Path: "/lake/t/region=eu/day=1/a.parquet"}, {Path: "/lake/t/region=us/day=1/b.parquet"},
		{Path: "/lake/j/kind=x/c.ndjson"}, {Path: "/lake/plain.parquet"}, {Path: "-", Stdin: true},
	}
	notes := source.PartitionFoldersNotes(ins, source.Options{})
	if len(notes) != 1 || !strings.HasPrefix(notes[0], "3 inputs sit in partition folders (region=…, day=…, kind=…): each record gets") {
		t.Errorf("notes %q", notes)
	}
	if notes := source.PartitionFoldersNotes(ins[3:], source.Options{}); notes != nil {
		t.Errorf("inputs in no partition folder: notes %q", notes)
	}
}

// A CSV file below partition folders gets their fields as a Parquet file
// does, after its columns, from any row a resume starts at.
func TestCSVGetsItsPartitionFolders(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "orders", "region=eu", "day=2026-11-01", "kind=__HIVE_DEFAULT_PARTITION__", "year=2026")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "part-0.csv")
	if err := os.WriteFile(path, []byte("id,total,year\no1,12.5,1999\no2,7,1999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	read := func(opts source.Options, start source.Position) []string {
		t.Helper()
		r, err := Open(source.Input{Path: path}, nil, opts, start)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var out []string
		for {
			rec, err := r.Next()
			if err != nil {
				return out
			}
			out = append(out, string(rec.Data))
		}
	}
	want := []string{
		`{"id":"o1","total":12.5,"year":1999,"region":"eu","day":"2026-11-01"}`,
		`{"id":"o2","total":7,"year":1999,"region":"eu","day":"2026-11-01"}`,
	}
	if got := read(source.Options{}, source.Position{}); !reflect.DeepEqual(got, want) {
		t.Errorf("rows\n%q\nwant\n%q", got, want)
	}
	if got := read(source.Options{}, source.Position{Offset: int64(len("id,total,year\no1,12.5,1999\n")), Line: 2}); !reflect.DeepEqual(got, want[1:]) {
		t.Errorf("resumed at row 2: %q, want %q", got, want[1:])
	}
	if got, w := read(source.Options{CSVEmptyNull: true}, source.Position{}), `{"id":"o1","total":12.5,"year":1999,"region":"eu","day":"2026-11-01","kind":null}`; len(got) != 2 || got[0] != w {
		t.Errorf("--null keep: %q, want %s first", got, w)
	}
	if got, w := read(source.Options{Columns: []string{"day"}, KeyColumns: []string{"id"}}, source.Position{}), `{"id":"o1","day":"2026-11-01"}`; len(got) != 2 || got[0] != w {
		t.Errorf("--columns day: %q, want %s first", got, w)
	}
}

// An NDJSON record below partition folders gets their fields first, but
// for those it has a member of (never a duplicate name: Cosmos DB would
// store it, and the Java SDK fail to read it); lines and array elements alike,
// from any line a resume starts at; the input's text stays in Raw.
func TestNDJSONGetsItsPartitionFolders(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "events", "tenant=acme", "day=2026-11-01", "kind=__HIVE_DEFAULT_PARTITION__")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	lines := "{\"id\":\"e1\",\"n\":1}\r\n  { }\n{\"id\":\"e3\",\"tenant\":\"own\"}\n[1]\n{\"id\":\"e5\",\"tenan\\u0074\":\"esc\",\"x\":\"tenant\"}\n{\"id\":\n"
	path := filepath.Join(dir, "part-0.json")
	arrayPath := filepath.Join(dir, "part-1.json")
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(arrayPath, []byte(`[{"id":"a1"}, {}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	read := func(path string, opts source.Options, start source.Position) (data, raw []string) {
		t.Helper()
		r, err := Open(source.Input{Path: path}, nil, opts, start)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		for {
			rec, err := r.Next()
			if err != nil {
				return data, raw
			}
			data, raw = append(data, string(rec.Data)), append(raw, string(rec.Raw))
		}
	}
	const f = `"tenant":"acme","day":"2026-11-01"`
	want := []string{`{` + f + `,"id":"e1","n":1}`, `  {` + f + ` }`, `{"day":"2026-11-01","id":"e3","tenant":"own"}`, `[1]`,
		`{"day":"2026-11-01","id":"e5","tenan\u0074":"esc","x":"tenant"}`, `{` + f + `,"id":`}
	data, raw := read(path, source.Options{}, source.Position{})
	if !reflect.DeepEqual(data, want) {
		t.Errorf("records\n%q\nwant\n%q", data, want)
	}
	if raw[0] != `{"id":"e1","n":1}` || raw[3] != "" {
		t.Errorf("raw %q: want the input's text of the records added to", raw)
	}
	second := int64(len("{\"id\":\"e1\",\"n\":1}\r\n"))
	if data, _ := read(path, source.Options{}, source.Position{Offset: second, Line: 1}); !reflect.DeepEqual(data, want[1:]) {
		t.Errorf("resumed at line 2: %q, want %q", data, want[1:])
	}
	if data, _ := read(path, source.Options{CSVEmptyNull: true}, source.Position{}); data[0] != `{`+f+`,"kind":null,"id":"e1","n":1}` {
		t.Errorf("--null keep: %q", data[0])
	}
	if data, _ := read(arrayPath, source.Options{}, source.Position{}); !reflect.DeepEqual(data, []string{`{` + f + `,"id":"a1"}`, `{` + f + `}`}) {
		t.Errorf("array elements %q", data)
	}
}
