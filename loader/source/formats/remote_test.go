package formats

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
	"github.com/cosmosloader/loader/loader/source/parquet"
)

// A remote input resumes with a ranged read at the committed offset; a
// gzip one restarts at 0 and skips, as a local .gz file does.
func TestRemoteResume(t *testing.T) {
	plain := []byte("{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(plain)
	zw.Close()
	for _, tc := range []struct {
		name     string
		data     []byte
		wantOpen int64
	}{
		{"x.ndjson", plain, 8},
		{"x.ndjson.gz", gz.Bytes(), 0},
		{"x.ndjson", gz.Bytes(), 0}, // gzip by magic bytes
	} {
		m := &sourcetest.MemRemote{Data: tc.data}
		in := source.Input{Path: "https://acct.blob.core.windows.net/c/" + tc.name, Remote: m}
		r, err := Open(in, nil, source.Options{}, source.Position{Offset: 8, Line: 1})
		if err != nil {
			t.Fatal(err)
		}
		got := sourcetest.ReadAllRecords(t, r)
		r.Close()
		if strings.Join(got, ",") != `{"a":2},{"a":3}` {
			t.Errorf("%s: records %v", tc.name, got)
		}
		// (A resumed NDJSON input is opened at 0 first, to see whether it
		// is one JSON array.)
		if last := m.Opened[len(m.Opened)-1]; last != tc.wantOpen {
			t.Errorf("%s: opened at %v, want the records read from %d", tc.name, m.Opened, tc.wantOpen)
		}
		raw, err := source.OpenRaw(in, 8, 0)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(raw)
		if !bytes.Equal(b, tc.data[8:]) {
			t.Errorf("%s: OpenRaw read %q", tc.name, b)
		}
	}
}

type fakeExpander struct{}

func (fakeExpander) Match(arg string) bool { return strings.HasPrefix(arg, "https://") }
func (fakeExpander) Expand(arg string) ([]source.Input, error) {
	return []source.Input{{Path: arg + "/a"}, {Path: arg + "/b"}}, nil
}

func TestExpandWithRemote(t *testing.T) {
	got, err := Expand([]string{"https://x/c", "-", "https://x/c"}, fakeExpander{})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, in := range got {
		paths = append(paths, in.Path)
	}
	if strings.Join(paths, " ") != "https://x/c/a https://x/c/b -" {
		t.Errorf("inputs %v", paths)
	}
}

// An NDJSON blob is cut where an NDJSON file is, reading only around each
// cut, and its ranges read every record once with its line.
func TestRemoteNDJSONIsSegmented(t *testing.T) {
	var text strings.Builder
	for i := range 500 {
		fmt.Fprintf(&text, `{"id":"%d","pad":"%s"}`+"\n", i, strings.Repeat("x", i%37))
	}
	m := &sourcetest.MemRemote{Data: []byte(text.String())}
	in := source.Input{Path: "https://acct.blob.core.windows.net/c/x.ndjson", Remote: m}
	wantLines, wantData := sourcetest.ReadRanges(t, registry, in, source.Options{}, []source.Range{{}})
	ranges, why, err := Split(in, source.Options{}, 4)
	if err != nil || len(ranges) != 4 || why != "" {
		t.Fatalf("Split of an NDJSON blob = %v, %q, %v; want 4 ranges", ranges, why, err)
	}
	lines, data := sourcetest.ReadRanges(t, registry, in, source.Options{}, ranges)
	if fmt.Sprint(lines) != fmt.Sprint(wantLines) || strings.Join(data, "\n") != strings.Join(wantData, "\n") {
		t.Errorf("4 ranges of the blob read %d records, want %d in the same order with the same lines", len(data), len(wantData))
	}
}

// A Parquet input in blob storage reads like a local one: rows from its
// footer, a resume from the committed row.
func TestRemoteParquet(t *testing.T) {
	data, err := os.ReadFile(sourcetest.ParquetDir() + "rows.parquet")
	if err != nil {
		t.Fatal(err)
	}
	in := source.Input{Path: "https://acct.blob.core.windows.net/c/rows.parquet", Remote: &sourcetest.MemRemote{Data: data}}
	if rows, ok := parquet.Rows(in, source.Options{}, 0); !ok || rows != 250 {
		t.Fatalf("ParquetRows = %d, %v; want 250", rows, ok)
	}
	r, err := Open(in, nil, source.Options{}, source.Position{Line: 120})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := sourcetest.ReadAllRecords(t, r)
	if len(got) != 130 || !strings.Contains(got[0], `"id":"r121"`) {
		t.Fatalf("resumed at row 120: %d rows, first %.40s", len(got), got[0])
	}
	bad := source.Input{Path: "https://acct.blob.core.windows.net/c/x.parquet", Remote: &sourcetest.MemRemote{Data: data[:len(data)-9]}}
	if _, err := Open(bad, nil, source.Options{}, source.Position{}); err == nil || !strings.Contains(err.Error(), "not a readable Parquet file") {
		t.Errorf("a truncated blob: %v", err)
	}
	// Split between its row groups (100, 100, 50 rows), as a local file.
	ranges, why, err := Split(in, source.Options{}, 3)
	if err != nil || why != "" || len(ranges) != 3 || ranges[1].Start.Line != 100 || ranges[2].Start.Line != 200 {
		t.Fatalf("Split of a Parquet blob = %+v, %q, %v; want ranges from rows 0, 100 and 200", ranges, why, err)
	}
	local, _, _ := Split(source.Input{Path: sourcetest.ParquetDir() + "rows.parquet"}, source.Options{}, 3)
	if fmt.Sprint(local) != fmt.Sprint(ranges) {
		t.Errorf("blob ranges %+v, local file's %+v", ranges, local)
	}
	if ranges, why, _ := Split(bad, source.Options{}, 3); len(ranges) != 1 || !strings.Contains(why, "footer") {
		t.Errorf("Split of a truncated blob = %+v, %q; want one range (its reader refuses it)", ranges, why)
	}
}
