package csv

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/loader/source"
)

// A CSV read with commas whose header is one column holding a semicolon,
// a tab or a bar is named with the --delimiter it likely needs; nothing is
// said of a header with commas or quotes, of a delimiter given, of TSV,
// gzip or a first line longer than the head.
func TestDelimiterHint(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text string
		opts       source.Options
		want       string // "" for no hint
	}{
		{"semi.csv", "id;name;city\n1;a;b\n", source.Options{}, `"id;name;city": if its fields are separated by semicolons, give --delimiter ';'`},
		{"excel.csv", "\ufeffid;name\r\n1;a\r\n", source.Options{}, `"id;name": if its fields are separated by semicolons`},
		{"tabs.csv", "id\tname\n1\ta\n", source.Options{}, "separated by tabs, give --delimiter tab (or --format tsv)"},
		{"bars.csv", "id|name\n", source.Options{}, "separated by bars, give --delimiter '|'"},
		{"commas.csv", "id,name;x\n1,a\n", source.Options{}, ""},
		{"one.csv", "id\n1\n", source.Options{}, ""},
		{"quoted.csv", "\"id;name\"\n\"1;a\"\n", source.Options{}, ""},
		{"given.csv", "id;name\n1;a\n", source.Options{Delimiter: ';'}, ""},
		{"data.tsv", "id;name\n", source.Options{}, ""},
		{"data.ndjson", "id;name\n", source.Options{}, ""},
		{"as.txt", "id;name\n", source.Options{Format: source.FormatCSV}, `give --delimiter ';'`},
		{"long.csv", strings.Repeat("x;", 300) + "\n", source.Options{}, ""},
	} {
		path := filepath.Join(dir, tc.name)
		if err := os.WriteFile(path, []byte(tc.text), 0o600); err != nil {
			t.Fatal(err)
		}
		got := DelimiterHint(source.Input{Path: path}, tc.opts)
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
	if got := DelimiterHint(source.Input{Path: path}, source.Options{}); got != "" {
		t.Errorf("gzip: %q", got)
	}
}
