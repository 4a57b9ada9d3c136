package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/internal/emulator"
)

// A CSV read as NDJSON (on stdin, or named .txt) and an NDJSON named .csv
// stop an import and a dry-run before anything is written: exit 2, naming
// the --format that fits. With it, they load.
func TestWrongFormatIsAUsageErrorNamingTheFormat(t *testing.T) {
	t.Parallel()
	tg := localTarget(t, emulator.Options{DefaultRU: 100000})
	dir := t.TempDir()
	var rows, lines strings.Builder
	rows.WriteString("id,pk,v\n")
	for i := range 10 {
		fmt.Fprintf(&rows, "r%d,p,%d\n", i, i)
		fmt.Fprintf(&lines, `{"id":"n%d","pk":"p"}`+"\n", i)
	}
	txt := writeFile(t, dir, "rows.txt", []byte(rows.String()))
	misnamed := writeFile(t, dir, "lines.csv", []byte(lines.String()))
	for _, tc := range []struct {
		name  string
		stdin []byte
		args  []string
		flag  string
	}{
		{"csv on stdin", []byte(rows.String()), []string{"-"}, "--format csv"},
		{"csv named .txt", nil, []string{txt}, "--format csv"},
		{"ndjson named .csv", nil, []string{misnamed}, "--format ndjson"},
	} {
		for _, command := range []string{"import", "dry-run"} {
			args := append(append([]string{command}, tc.args...), tg.args("e2e", "fit", "--create-container", "--partition-key", "/pk",
				"--checkpoint", filepath.Join(dir, "ck.json"))...)
			if command == "dry-run" {
				args = append([]string{command}, append(tc.args, "--partition-key", "/pk", "--ru", "1000")...)
			}
			res := runLoader(t, tc.stdin, args...)
			if res.code != 2 || !strings.Contains(flat(res.stderr), "give "+tc.flag+" ") {
				t.Errorf("%s, %s: exit %d, want 2 naming %s\n%s", tc.name, command, res.code, tc.flag, res.stderr)
			}
		}
	}
	res := runLoader(t, []byte(rows.String()), append([]string{"import", "-", "--format", "csv"}, tg.args("e2e", "fit", "--partition-key", "/pk", "--create-container",
		"--checkpoint", filepath.Join(dir, "ck2.json"))...)...)
	if res.code != 0 {
		t.Fatalf("with --format csv: exit %d\n%s", res.code, res.stderr)
	}
	if docs := readAll(t, tg, "e2e", "fit"); len(docs) != 10 {
		t.Errorf("%d documents, want the 10 CSV rows: the runs that stopped wrote nothing", len(docs))
	}
	// NDJSON whose first line is an array: that line is one dead letter, the
	// others load.
	first := writeFile(t, dir, "first.ndjson", []byte("[1]\n"+lines.String()))
	res = runLoader(t, nil, append([]string{"import", first}, tg.args("e2e", "fit", "--partition-key", "/pk",
		"--checkpoint", filepath.Join(dir, "ck3.json"), "--dead-letter", filepath.Join(dir, "dl.ndjson"))...)...)
	if res.code != 3 {
		t.Fatalf("NDJSON starting with [1]: exit %d, want 3\n%s", res.code, res.stderr)
	}
	if dls := readDeadLetters(t, filepath.Join(dir, "dl.ndjson")); len(dls) != 1 || dls[0]["line"] != float64(1) {
		t.Errorf("dead letters %v, want only line 1", dls)
	}
	if docs := readAll(t, tg, "e2e", "fit"); len(docs) != 20 {
		t.Errorf("%d documents, want the 10 CSV rows and the 10 NDJSON lines", len(docs))
	}
}
