package formats

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
)

// An input whose first records mostly do not read as its format, but do
// as another, is refused before anything is written, naming the --format
// that fits; one that fits, or fits nothing better, is not.
func TestCheckFormatsNamesTheFormatThatFits(t *testing.T) {
	var csvRows, ndjsonRows, broken strings.Builder
	csvRows.WriteString("id,pk,v\n")
	for i := range 30 {
		fmt.Fprintf(&csvRows, "%d,a,\"x, %d\"\n", i, i)
		fmt.Fprintf(&ndjsonRows, `{"id":"%d","pk":"a","v":"x, %d"}`+"\n", i, i)
		fmt.Fprintf(&broken, `{"id":"%d","pk":`+"\n", i)
	}
	dir := t.TempDir()
	write := func(name, data string) source.Input {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return source.Input{Path: p}
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(csvRows.String()))
	zw.Close()
	for _, tc := range []struct {
		name  string
		in    source.Input
		stdin []byte
		opts  source.Options
		want  string // the flag named, "" for none
	}{
		{"csv as ndjson (.txt)", write("rows.txt", csvRows.String()), nil, source.Options{}, "--format csv"},
		{"csv on stdin", source.Input{Path: "-", Stdin: true}, []byte(csvRows.String()), source.Options{}, "--format csv"},
		{"gzip csv on stdin", source.Input{Path: "-", Stdin: true}, gz.Bytes(), source.Options{}, "--format csv"},
		{"gzip csv as ndjson", write("rows.txt.gz", gz.String()), nil, source.Options{}, "--format csv"},
		{"csv blob as ndjson", source.Input{Path: "https://acct.blob.core.windows.net/c/rows.txt", Remote: &sourcetest.MemRemote{Data: []byte(csvRows.String())}}, nil, source.Options{}, "--format csv"},
		{"tsv as ndjson", write("rows.log", strings.ReplaceAll(csvRows.String(), ",", "\t")), nil, source.Options{}, "--format tsv"},
		{"semicolons as ndjson", write("semi.txt", strings.ReplaceAll(csvRows.String(), ",", ";")), nil, source.Options{}, "--format csv --delimiter ';'"},
		{"ndjson as csv (.csv)", write("rows.csv", ndjsonRows.String()), nil, source.Options{}, "--format ndjson"},
		{"ndjson forced to csv", write("rows.ndjson", ndjsonRows.String()), nil, source.Options{Format: "csv"}, "--format ndjson"},
		{"csv as csv", write("good.csv", csvRows.String()), nil, source.Options{}, ""},
		{"ndjson as ndjson", write("good.ndjson", ndjsonRows.String()), nil, source.Options{}, ""},
		{"broken json, not csv either", write("broken.ndjson", broken.String()), nil, source.Options{}, ""},
		{"plain text lines", write("words.txt", "alpha\nbeta\ngamma\n"), nil, source.Options{}, ""},
		{"parquet is not looked at", write("x.parquet", csvRows.String()), nil, source.Options{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdin io.Reader
			if tc.stdin != nil {
				stdin = bytes.NewReader(tc.stdin)
			}
			out, err := CheckFormats([]source.Input{tc.in}, stdin, tc.opts)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("err %v, want none", err)
			case tc.want != "" && (!errors.Is(err, ErrWrongFormat) || !strings.Contains(err.Error(), "give "+tc.want+" ") || !strings.Contains(err.Error(), tc.in.Path)):
				t.Errorf("err %v, want one naming %s and the input", err, tc.want)
			}
			if tc.stdin != nil { // stdin is read whole through the reader returned
				var got bytes.Buffer
				got.ReadFrom(out)
				if !bytes.Equal(got.Bytes(), tc.stdin) {
					t.Errorf("stdin read after the check: %d bytes, want %d", got.Len(), len(tc.stdin))
				}
			}
		})
	}
}
