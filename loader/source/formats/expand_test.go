package formats

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/loader/source"
)

func TestExpand(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{
		"b.ndjson", "a.csv", "c.json.gz", "notes.txt",
		"sub/z.jsonl", "sub/deeper/y.tsv", "sub/.hidden.ndjson", ".git/x.ndjson",
		"glob/one.ndjson", "glob/two.ndjson", "glob/three.csv", "empty/README.md",
		// What Spark and Hadoop writers leave beside their output.
		"sub/_SUCCESS", "sub/_temporary/0/part-1.ndjson", "_partial.ndjson", "glob/_c.ndjson",
	} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	j := func(p ...string) string { return filepath.Join(append([]string{dir}, p...)...) }
	paths := func(ins []source.Input) []string {
		var out []string
		for _, in := range ins {
			out = append(out, in.Path)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
		err  string
	}{
		{"files in argument order", []string{j("b.ndjson"), j("a.csv")}, []string{j("b.ndjson"), j("a.csv")}, ""},
		{"explicit unknown extension is kept", []string{j("notes.txt")}, []string{j("notes.txt")}, ""},
		{"glob sorted, matching what it says", []string{j("glob", "*.ndjson")}, []string{j("glob", "_c.ndjson"), j("glob", "one.ndjson"), j("glob", "two.ndjson")}, ""},
		{"directory recursive sorted, known extensions, no hidden (. or _)", []string{dir}, []string{
			j("a.csv"), j("b.ndjson"), j("c.json.gz"), j("glob", "one.ndjson"), j("glob", "three.csv"), j("glob", "two.ndjson"),
			j("sub", "deeper", "y.tsv"), j("sub", "z.jsonl"),
		}, ""},
		{"duplicates read once", []string{j("a.csv"), j("*.csv"), dir + "/./a.csv"}, []string{j("a.csv")}, ""},
		{"stdin", []string{"-", j("a.csv")}, []string{"-", j("a.csv")}, ""},
		{"stdin twice", []string{"-", "-"}, nil, "more than once"},
		{"missing file", []string{j("a.csv"), j("nope.ndjson")}, nil, j("nope.ndjson")},
		{"glob without match", []string{j("*.parquet")}, nil, `no input files match "` + j("*.parquet") + `"`},
		{"directory without inputs", []string{j("empty")}, nil, j("empty")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Expand(tc.args, nil)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Expand(%q) err %v, want containing %q", tc.args, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Expand(%q): %v", tc.args, err)
			}
			if !reflect.DeepEqual(paths(got), tc.want) {
				t.Errorf("Expand(%q) =\n%q\nwant\n%q", tc.args, paths(got), tc.want)
			}
			for _, in := range got {
				if in.Stdin != (in.Path == "-") {
					t.Errorf("%+v: Stdin flag wrong", in)
				}
			}
		})
	}
	_, err := Expand([]string{j("nope.ndjson")}, nil)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: err %v does not wrap fs.ErrNotExist", err)
	}
}

// A directory holding a Delta Lake table is refused whole, since its
// Parquet files include versions the table no longer has; a glob over it
// loads what it matches.
func TestExpandRefusesADeltaTableDirectory(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"events/_delta_log/00000000000000000000.json", "events/part-0.parquet", "events/part-1.parquet"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, arg := range []string{dir, filepath.Join(dir, "events")} {
		if _, err := Expand([]string{arg}, nil); err == nil || !strings.Contains(err.Error(), "Delta Lake table") || !strings.Contains(err.Error(), arg) {
			t.Errorf("Expand(%s): %v, want a Delta Lake refusal naming it", arg, err)
		}
	}
	got, err := Expand([]string{filepath.Join(dir, "events", "*.parquet")}, nil)
	if err != nil || len(got) != 2 {
		t.Errorf("a glob over the table: %v, %v; want its two files", got, err)
	}
}

func TestInputNamesBelowAPrefix(t *testing.T) {
	for rel, want := range map[string]bool{
		"a.ndjson": true, "x/y/part-0.snappy.parquet": true, "d.csv.gz": true, "notes.txt": false,
		"_SUCCESS": false, "_temporary/0/a.ndjson": false, "x/.staging/a.ndjson": false, "x/_c.parquet": false,
		"date=2026-11-01/part-0.parquet": true,
	} {
		if got := source.IsInputName(rel); got != want {
			t.Errorf("IsInputName(%q) = %v, want %v", rel, got, want)
		}
	}
	for rel, want := range map[string]bool{
		"_delta_log/0.json": true, "t/_delta_log/0.json": true, "t/x_delta_log/0.json": false, "_delta_logs/0.json": false, "part-0.parquet": false,
	} {
		if got := source.InDeltaLog(rel); got != want {
			t.Errorf("InDeltaLog(%q) = %v, want %v", rel, got, want)
		}
	}
}
