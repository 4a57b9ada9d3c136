package formats

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
)

// The CSV corpus (testdata/input/csvcorpus): hand-made RFC 4180 edge
// cases — CR and CRLF inside and outside quotes, quoted empties, a BOM, a
// last line without a line ending — and a file DuckDB wrote, each beside
// the rows DuckDB reads from it (generate.mjs). Read with --csv-strings
// and --csv-empty null, every row is exactly DuckDB's, whole and cut into
// segments.
func TestCSVCorpus(t *testing.T) {
	files, _ := filepath.Glob(sourcetest.Fixture("csvcorpus/*.csv"))
	if len(files) < 3 {
		t.Fatalf("corpus files: %v", files)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			want := corpusRows(t, strings.TrimSuffix(path, ".csv")+".ndjson")
			in := source.Input{Path: path}
			opts := source.Options{CSVStrings: true, CSVEmptyNull: true}
			check := func(how string, recs []source.Record) {
				t.Helper()
				if len(recs) != len(want) {
					t.Fatalf("%s: %d records, DuckDB reads %d", how, len(recs), len(want))
				}
				for i, r := range recs {
					var got map[string]any
					if err := json.Unmarshal(r.Data, &got); err != nil || r.Err != nil {
						t.Fatalf("%s: record %d: %v %v (%q)", how, i, r.Err, err, r.Raw)
					}
					if !reflect.DeepEqual(got, want[i]) {
						t.Errorf("%s: record %d: %q\nDuckDB reads %q", how, i, got, want[i])
					}
				}
			}
			check("whole", readAll(t, in, nil, opts, source.Position{}))
			ranges, why, err := Split(in, opts, 3)
			if err != nil || why != "" {
				t.Fatalf("split: %v %s", err, why)
			}
			var recs []source.Record
			for _, rg := range ranges {
				for _, r := range readAll(t, in, nil, opts, rg.Start) {
					if rg.End > 0 && r.Offset >= rg.End {
						break
					}
					recs = append(recs, r)
				}
			}
			check("in segments", recs)
		})
	}
}

func corpusRows(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var row map[string]any
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row)
	}
	return rows
}

// Typed, DuckDB's file keeps every value: an integer beyond 2^53 and a
// decimal a double does not hold stay the strings they were.
func TestCSVCorpusTypedKeepsValues(t *testing.T) {
	recs := readAll(t, source.Input{Path: sourcetest.Fixture("csvcorpus/duckdb_written.csv")}, nil, source.Options{}, source.Position{})
	want := `{"id":8,"text":"9007199254740993","note":"0.1000000000000000055511151231257827"}`
	if len(recs) != 8 || string(recs[7].Data) != want {
		t.Fatalf("%d records, the last %s; want 8, the last %s", len(recs), recs[len(recs)-1].Data, want)
	}
}
