package source

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{
		"b.ndjson", "a.csv", "c.json.gz", "notes.txt",
		"sub/z.jsonl", "sub/deeper/y.tsv", "sub/.hidden.ndjson", ".git/x.ndjson",
		"glob/one.ndjson", "glob/two.ndjson", "glob/three.csv", "empty/README.md",
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
	paths := func(ins []Input) []string {
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
		{"glob sorted", []string{j("glob", "*.ndjson")}, []string{j("glob", "one.ndjson"), j("glob", "two.ndjson")}, ""},
		{"directory recursive sorted, known extensions, no hidden", []string{dir}, []string{
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
			got, err := Expand(tc.args)
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
	_, err := Expand([]string{j("nope.ndjson")})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: err %v does not wrap fs.ErrNotExist", err)
	}
}
