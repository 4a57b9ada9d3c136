package parquet

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math/big"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
)

// Files DuckDB wrote (testdata/parquet/duckdb/gen.mjs: every codec it
// writes, v1 and v2 pages with their dictionary and delta encodings,
// decimals, BC timestamps, nested lists, structs and maps) load as DuckDB
// reads them: the same rows, the same values, within the documented type
// mapping (rows.duckdb.json is DuckDB's own reading).
func TestParquetReadsAsDuckDB(t *testing.T) {
	dir := sourcetest.ParquetDir() + "duckdb/"
	want := duckDBRows(t, dir+"rows.duckdb.json")
	for _, name := range []string{"snappy", "gzip", "zstd", "lz4", "brotli", "uncompressed", "v2-snappy", "v2-zstd"} {
		t.Run(name, func(t *testing.T) {
			got := rowsOf(t, dir+name+".parquet", source.Options{})
			if len(got) != len(want) {
				t.Fatalf("%d rows, DuckDB reads %d", len(got), len(want))
			}
			for i, row := range got {
				if g := canonJSON(t, []byte(row)); !reflect.DeepEqual(g, want[i]) {
					t.Fatalf("row %d:\n got %v\nwant %v (DuckDB)", i+1, g, want[i])
				}
			}
		})
	}
}

func duckDBRows(t *testing.T, path string) []any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rows []any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		rows = append(rows, canonJSON(t, sc.Bytes()))
	}
	return rows
}

// canonJSON parses a row and writes its values as the loader's mapping
// would, so DuckDB's JSON and the loader's compare: null members left
// out, numbers (and decimals written as strings) as exact rationals,
// DuckDB's timestamps ("0883-01-06 (BC) 08:00:00") as RFC 3339 with
// astronomical years ("-0882-01-06T08:00:00Z").
func canonJSON(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return canon(v)
}

var duckTime = regexp.MustCompile(`^(\d{4,})-(\d\d)-(\d\d)( \(BC\))?(?: (\d\d:\d\d:\d\d)(\.\d+)?)?$`)

func canon(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			if x != nil {
				out[k] = canon(x)
			}
		}
		return out
	case []any:
		for i := range v {
			v[i] = canon(v[i])
		}
		return v
	case json.Number:
		return ratString(string(v))
	case string:
		if r := ratString(v); r != "" {
			return r
		}
		if m := duckTime.FindStringSubmatch(v); m != nil {
			y, _ := strconv.Atoi(m[1])
			if m[4] != "" {
				y = 1 - y
			}
			s := fmtYear(y) + "-" + m[2] + "-" + m[3]
			if m[5] != "" {
				s += "T" + m[5]
				if f := strings.TrimRight(m[6], "0"); f != "." {
					s += f
				}
				s += "Z"
			}
			return s
		}
		return v
	}
	return v
}

func fmtYear(y int) string {
	if y < 0 {
		return "-" + fmtYear(-y)
	}
	s := strconv.Itoa(y)
	return strings.Repeat("0", max(0, 4-len(s))) + s
}

// ratString is s as an exact rational, or "" when s is not a number.
func ratString(s string) string {
	if s == "" || strings.ContainsAny(s, " :") {
		return ""
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return ""
	}
	return r.RatString()
}
