package delta

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
	"github.com/cosmosloader/loader/loader/source/parquet"
)

// filepath.Join(Testdata(), "delta", "events") is the Delta table of testdata/parquet/gen.mjs: versions 0–2,
// a checkpoint at 1; its current files are eu/part-0, us/part-0 and
// us/part-1, and region=eu/part-old was removed at version 1.

var deltaCurrent = []string{"region=eu/part-0.parquet", "region=us/part-0.parquet", "region=us/part-1.parquet"}

// copyDelta copies the fixture table to a temporary directory, where a
// test can change its log.
func copyDelta(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "events")
	err := filepath.WalkDir(filepath.Join(sourcetest.Testdata(), "delta", "events"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(filepath.Join(sourcetest.Testdata(), "delta", "events"), p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func deltaRels(t *testing.T, root string, ins []source.Input) []string {
	t.Helper()
	var out []string
	for _, in := range ins {
		rel, err := filepath.Rel(root, in.Path)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

func writeCommit(t *testing.T, root string, version int, lines ...string) {
	t.Helper()
	name := filepath.Join(root, source.DeltaLog, strings.Repeat("0", 19)+string(rune('0'+version))+".json")
	if err := os.WriteFile(name, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A directory holding a Delta table loads its current version: the log
// replayed from its newest checkpoint on, or from its first commit when
// there is none, or from the checkpoint alone once the commits before it
// are cleaned up; a file the table removed is not read.
func TestDeltaTableLoadsItsCurrentVersion(t *testing.T) {
	ins, err := expand([]string{filepath.Join(sourcetest.Testdata(), "delta", "events")})
	if err != nil {
		t.Fatal(err)
	}
	if got := deltaRels(t, filepath.Join(sourcetest.Testdata(), "delta", "events"), ins); strings.Join(got, " ") != strings.Join(deltaCurrent, " ") {
		t.Errorf("files %v, want %v", got, deltaCurrent)
	}
	for name, change := range map[string]func(root string){
		"no checkpoint": func(root string) {
			os.Remove(filepath.Join(root, source.DeltaLog, "00000000000000000001.checkpoint.parquet"))
		},
		"commits before the checkpoint cleaned up": func(root string) {
			os.Remove(filepath.Join(root, source.DeltaLog, "00000000000000000000.json"))
			os.Remove(filepath.Join(root, source.DeltaLog, "00000000000000000001.json"))
		},
	} {
		root := copyDelta(t)
		change(root)
		ins, err := expand([]string{root})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got := deltaRels(t, root, ins); strings.Join(got, " ") != strings.Join(deltaCurrent, " ") {
			t.Errorf("%s: files %v, want %v", name, got, deltaCurrent)
		}
	}
	// A partition value Hive escapes in its folder (e%3Au), whose path the
	// log escapes again as a URI (e%253Au).
	root := copyDelta(t)
	if err := os.MkdirAll(filepath.Join(root, "region=e%3Au"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(root, "region=eu", "part-0.parquet"))
	if err := os.WriteFile(filepath.Join(root, "region=e%3Au", "part-2.parquet"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	writeCommit(t, root, 3, `{"add":{"path":"region=e%253Au/part-2.parquet","partitionValues":{"region":"e:u"}}}`)
	if ins, err := expand([]string{root}); err != nil || len(ins) != 4 || !strings.HasSuffix(ins[0].Path, "region=e%3Au/part-2.parquet") {
		t.Errorf("a file in an escaped folder: %v, %v", ins, err)
	} else if r, err := (parquet.Format{}).Open(ins[0], nil, source.Options{}, source.Position{}); err == nil {
		rec, _ := r.Next()
		r.Close()
		if !strings.HasSuffix(string(rec.Data), `"region":"e:u"}`) {
			t.Errorf("its row %s: want region e:u", rec.Data)
		}
	}

	// The rows of a file of the table come with its partition column.
	r, err := parquet.Format{}.Open(ins[0], nil, source.Options{}, source.Position{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rec, err := r.Next()
	if err != nil || string(rec.Data) != `{"id":"eu0-0","tenant":"t0","n":0,"region":"eu"}` {
		t.Errorf("first row %s, %v", rec.Data, err)
	}
}

// What a reader of the current Parquet files cannot honour is refused,
// saying what: a gap in the log, rows deleted by a deletion vector, column
// mapping, an unknown reader feature, a file the log names that is not
// there, a partition value not in its file's folders, a file outside the
// table.
func TestDeltaTableRefusesWhatItCannotRead(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(root string)
		want   string
	}{
		{"a gap in the log", func(root string) {
			os.Remove(filepath.Join(root, source.DeltaLog, "00000000000000000001.checkpoint.parquet"))
			os.Remove(filepath.Join(root, source.DeltaLog, "00000000000000000001.json"))
		}, "has no commit 1"},
		{"a deletion vector", func(root string) {
			writeCommit(t, root, 3, `{"add":{"path":"region=us/part-1.parquet","partitionValues":{"region":"us"},"deletionVector":{"storageType":"u","pathOrInlineDv":"ab","sizeInBytes":1,"cardinality":1}}}`)
		}, "deletion vector"},
		{"column mapping", func(root string) {
			writeCommit(t, root, 3, `{"metaData":{"partitionColumns":["region"],"configuration":{"delta.columnMapping.mode":"name"}}}`)
		}, "maps its columns by name"},
		{"an unknown reader feature", func(root string) {
			writeCommit(t, root, 3, `{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["someFutureFeature"]}}`)
		}, `"someFutureFeature"`},
		{"a missing file", func(root string) {
			writeCommit(t, root, 3, `{"add":{"path":"region=eu/part-9.parquet","partitionValues":{"region":"eu"}}}`)
		}, "names region=eu/part-9.parquet, which is not there"},
		{"a partition value not in the folders", func(root string) {
			writeCommit(t, root, 3, `{"add":{"path":"region=us/part-1.parquet","partitionValues":{"region":"eu"}}}`)
		}, `partition value region="eu" is not in its folders`},
		{"a file outside the table", func(root string) {
			writeCommit(t, root, 3, `{"add":{"path":"abfss://c@a.dfs.core.windows.net/other/part-0.parquet","partitionValues":{"region":"eu"}}}`)
		}, "lies outside the table"},
	} {
		root := copyDelta(t)
		tc.change(root)
		_, err := expand([]string{root})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "is a Delta Lake table") {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	// Reader features it honours where they matter pass.
	root := copyDelta(t)
	writeCommit(t, root, 3, `{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["deletionVectors","timestampNtz"]}}`)
	if _, err := expand([]string{root}); err != nil {
		t.Errorf("deletion vectors on, none used: %v", err)
	}
}

// A multi-part checkpoint counts only with every part present.
func TestCompleteCheckpoint(t *testing.T) {
	p := func(s string) string { return source.DeltaLog + "/00000000000000000010.checkpoint" + s + ".parquet" }
	for _, tc := range []struct {
		parts []string
		want  bool
	}{
		{[]string{p("")}, true},
		{[]string{p(".0000000001.0000000002"), p(".0000000002.0000000002")}, true},
		{[]string{p(".0000000001.0000000002")}, false},
		{[]string{p(".0000000001.0000000003"), p(".0000000002.0000000003"), p(".0000000002.0000000003")}, false},
	} {
		if got := completeCheckpoint(tc.parts); got != tc.want {
			t.Errorf("completeCheckpoint(%v) = %v, want %v", tc.parts, got, tc.want)
		}
	}
}

// expand resolves args as a load does, a Delta table's directory through
// Local.
func expand(args []string) ([]source.Input, error) {
	return source.Expander{Table: Local}.Expand(args)
}
