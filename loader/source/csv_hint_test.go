package source

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A CSV read with commas whose header is one column holding a semicolon,
// a tab or a bar is named with the --delimiter it likely needs; nothing is
// said of a header with commas or quotes, of a delimiter given, of TSV,
// gzip or a first line longer than the head.
func TestDelimiterHint(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text string
		opts       Options
		want       string // "" for no hint
	}{
		{"semi.csv", "id;name;city\n1;a;b\n", Options{}, `"id;name;city": if its fields are separated by semicolons, give --delimiter ';'`},
		{"excel.csv", "\ufeffid;name\r\n1;a\r\n", Options{}, `"id;name": if its fields are separated by semicolons`},
		{"tabs.csv", "id\tname\n1\ta\n", Options{}, "separated by tabs, give --delimiter tab (or --format tsv)"},
		{"bars.csv", "id|name\n", Options{}, "separated by bars, give --delimiter '|'"},
		{"commas.csv", "id,name;x\n1,a\n", Options{}, ""},
		{"one.csv", "id\n1\n", Options{}, ""},
		{"quoted.csv", "\"id;name\"\n\"1;a\"\n", Options{}, ""},
		{"given.csv", "id;name\n1;a\n", Options{Delimiter: ';'}, ""},
		{"data.tsv", "id;name\n", Options{}, ""},
		{"data.ndjson", "id;name\n", Options{}, ""},
		{"as.txt", "id;name\n", Options{Format: FormatCSV}, `give --delimiter ';'`},
		{"long.csv", strings.Repeat("x;", 300) + "\n", Options{}, ""},
	} {
		path := filepath.Join(dir, tc.name)
		if err := os.WriteFile(path, []byte(tc.text), 0o600); err != nil {
			t.Fatal(err)
		}
		got := DelimiterHint(Input{Path: path}, tc.opts)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) || (got != "" && !strings.HasPrefix(got, path+": ")) {
			t.Errorf("%s: hint %q, want one with %q", tc.name, got, tc.want)
		}
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("id;name\n1;a\n"))
	zw.Close()
	path := filepath.Join(dir, "semi.csv.gz")
	if err := os.WriteFile(path, gz.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := DelimiterHint(Input{Path: path}, Options{}); got != "" {
		t.Errorf("gzip: %q", got)
	}
}
