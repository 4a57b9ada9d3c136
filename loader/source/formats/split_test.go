package formats

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
)

// readRanges reads every range of path and returns the records' lines
// (counted from the file's start) and data, checking each range's records
// start inside it.
func readRanges(t *testing.T, path string, opts source.Options, ranges []source.Range) (lines []int64, data []string) {
	t.Helper()
	return sourcetest.ReadRanges(t, registry, source.Input{Path: path}, opts, ranges)
}

func TestSplitReadsEveryRecordOnce(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	var nd, csv strings.Builder
	csv.WriteString("id,note\n")
	for i := 0; i < 3000; i++ {
		pad := strings.Repeat("x", rnd.IntN(300))
		fmt.Fprintf(&nd, `{"id":"%d","pad":"%s"}`+"\n", i, pad)
		if i%7 == 0 {
			// A quoted field spanning lines, with an escaped quote.
			fmt.Fprintf(&csv, "%d,\"line one\nline \"\"two\"\" %s\"\n", i, pad)
		} else {
			fmt.Fprintf(&csv, "%d,%s\n", i, pad)
		}
	}
	dir := t.TempDir()
	for _, tc := range []struct{ name, text string }{{"in.ndjson", nd.String()}, {"in.csv", csv.String()}} {
		path := filepath.Join(dir, tc.name)
		if err := os.WriteFile(path, []byte(tc.text), 0o600); err != nil {
			t.Fatal(err)
		}
		opts := source.Options{CSVStrings: true}
		wantLines, wantData := readRanges(t, path, opts, []source.Range{{}})
		for _, n := range []int{2, 3, 8, 64} {
			ranges, why, err := Split(source.Input{Path: path}, opts, n)
			if err != nil || why != "" {
				t.Fatalf("%s: Split(%d): %v %q", tc.name, n, err, why)
			}
			if len(ranges) < n/2 {
				t.Errorf("%s: Split(%d) made %d ranges", tc.name, n, len(ranges))
			}
			for i := 1; i < len(ranges); i++ {
				if ranges[i-1].End != ranges[i].Start.Offset {
					t.Fatalf("%s: ranges not contiguous: %+v", tc.name, ranges)
				}
			}
			lines, data := readRanges(t, path, opts, ranges)
			if fmt.Sprint(lines) != fmt.Sprint(wantLines) || strings.Join(data, "\n") != strings.Join(wantData, "\n") {
				t.Fatalf("%s: %d ranges read %d records, want %d in the same order with the same lines", tc.name, len(ranges), len(data), len(wantData))
			}
		}
	}
}

func TestSplitFallsBackToOneCursor(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	big := strings.Repeat(`{"id":"1"}`+"\n", 1000)
	for _, tc := range []struct {
		path, why string
	}{
		{write("array.json", "["+strings.Repeat(`{"id":"1"},`, 1000)+`{"id":"2"}]`), "JSON array"},
		{write("bad.csv", "id,v\n"+strings.Repeat("1,2\n", 500)+"3,5\"4\n"+strings.Repeat("1,2\n", 500)), "quote inside an unquoted field on line 502"},
		{write("in.ndjson.gz", big), "compressed"},
	} {
		ranges, why, err := Split(source.Input{Path: tc.path}, source.Options{}, 4)
		if err != nil || len(ranges) != 1 || !strings.Contains(why, tc.why) {
			t.Errorf("%s: %d ranges, why %q, err %v; want one range because %q", tc.path, len(ranges), why, err, tc.why)
		}
	}
	if ranges, why, _ := Split(source.Input{Path: "-", Stdin: true}, source.Options{}, 4); len(ranges) != 1 || why == "" {
		t.Errorf("stdin split into %d (%q)", len(ranges), why)
	}
}
