package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/testenv"
)

// The repro, from an empty HOME on the built-in target: a CSV
// record over the record limit (a properly closed 3 MB quoted field) is
// one too_large dead letter with its file, line and the start of its
// text, and the rows after it load; an unclosed quote near the end is one
// dead letter for the rest of the file. A load stopped at the first
// (--max-errors 0) is resumed past both.
func TestLongCSVRecordsAreDeadLettered(t *testing.T) {
	t.Parallel()
	_, env := freshEnv(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "embedded")
	big := "4,a,\"" + strings.Repeat("v", 3_000_000) + "\""
	unclosed := "8,a,\"never closed\n9,a,x\n" + strings.Repeat("w", 3_000_000) + "\n"
	in := writeFile(t, dir, "big.csv", []byte("id,pk,v\n1,a,x\n2,a,y\n3,a,z\n"+big+"\n5,a,p\n6,a,q\n7,a,r\n"+unclosed))
	ckpt := filepath.Join(dir, "ckpt.json")
	dl := filepath.Join(dir, "dead.ndjson")
	common := []string{"--embedded-data", data, "-q"}

	res := runIn(t, env, append([]string{"import", in, "--partition-key", "/pk", "--create-container",
		"--checkpoint", ckpt, "--dead-letter", dl, "--max-errors", "0"}, common...)...)
	if res.code != 4 {
		t.Fatalf("import stopped by --max-errors 0: exit %d, want 4\n%s", res.code, res.stderr)
	}
	res = runIn(t, env, append([]string{"resume", ckpt, "--max-errors", "-1"}, common...)...)
	if res.code != 3 {
		t.Fatalf("resume: exit %d, want 3 (done, some dead-lettered)\n%s", res.code, res.stderr)
	}

	dls := readDeadLetters(t, dl)
	if len(dls) != 2 {
		t.Fatalf("%d dead letters, want 2: %v", len(dls), dls)
	}
	for i, want := range []struct {
		reason, says, raw string
		line              float64
	}{
		{"too_large", "longer than the 2 MiB limit", big[:100], 5},
		{"csv_syntax", "unclosed quote", "8,a,\"never closed\n9,a,x\nwww", 9},
	} {
		d := dls[i]
		raw, _ := d["raw"].(string)
		if d["reason"] != want.reason || d["line"] != want.line || !strings.HasSuffix(d["source"].(string), "big.csv") ||
			!strings.Contains(d["error"].(string), want.says) || !strings.HasPrefix(raw, want.raw) {
			t.Errorf("dead letter %d: reason %v, source %v, line %v, error %v, raw %.40q; want %s on line %.0f saying %q",
				i, d["reason"], d["source"], d["line"], d["error"], raw, want.reason, want.line, want.says)
		}
	}

	s, err := emulator.Start(context.Background(), emulator.Options{Addr: "127.0.0.1:0", DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	docs := readAll(t, target{name: "embedded", endpoint: s.URL(), key: s.Key(), local: true}, "loader", "items")
	ids := sortedKeys(docs)
	if want := []string{"1", "2", "3", "5", "6", "7"}; !slices.Equal(ids, want) {
		t.Errorf("landed %v, want %v", ids, want)
	}
}

// The CSV corpus (testdata/input/csvcorpus: RFC 4180 edge cases and a
// file DuckDB wrote) lands exactly as DuckDB reads it, with --csv-strings
// and --csv-empty null, read back from the target.
func TestCSVCorpusLandsAsWritten(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob(filepath.Join(testenv.RepoRoot(t), "testdata", "input", "csvcorpus", "*.csv"))
	if len(files) < 3 {
		t.Fatalf("corpus files: %v", files)
	}
	dir := t.TempDir()
	for _, tg := range targets(t) {
		for i, f := range files {
			checkCorpusFile(t, tg, dir, fmt.Sprintf("corpus%d", i), f)
		}
	}
}

// checkCorpusFile imports f into container and expects its documents to
// be the rows DuckDB reads from it.
func checkCorpusFile(t *testing.T, tg target, dir, container, f string) {
	t.Helper()
	res := runLoader(t, nil, append([]string{"import", f, "--csv-strings", "--csv-empty", "null", "--checkpoint", filepath.Join(dir, tg.name+container+".json")},
		tg.args("e2e", container, "--create-container", "--partition-key", "/id")...)...)
	if res.code != 0 {
		t.Fatalf("%s, %s: exit %d\n%s", tg.name, filepath.Base(f), res.code, res.stderr)
	}
	docs := readAll(t, tg, "e2e", container)
	b, err := os.ReadFile(strings.TrimSuffix(f, ".csv") + ".ndjson")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(docs) != len(lines) {
		t.Errorf("%s, %s: %d documents, DuckDB reads %d rows", tg.name, filepath.Base(f), len(docs), len(lines))
	}
	for _, line := range lines {
		var want map[string]any
		if err := json.Unmarshal([]byte(line), &want); err != nil {
			t.Fatal(err)
		}
		if got := docs[want["id"].(string)]; !reflect.DeepEqual(got, want) {
			t.Errorf("%s, %s: landed %q\nDuckDB reads %q", tg.name, filepath.Base(f), got, want)
		}
	}
}

// Typing never changes a value: read back from the target, an integer
// beyond 2^53 and a decimal a double does not hold are the strings they
// were; the integers and decimals that survive a double are numbers.
func TestCSVTypingKeepsValues(t *testing.T) {
	t.Parallel()
	tg := localTarget(t, emulator.Options{DefaultRU: 100000})
	dir := t.TempDir()
	in := writeFile(t, dir, "typed.csv", []byte("id,pk,n\n"+
		"a,p,9007199254740993\nb,p,9007199254740992\nc,p,0.1000000000000000055511151231257827\nd,p,0.1\ne,p,12345678901234567890\n"))
	res := runLoader(t, nil, append([]string{"import", in, "--checkpoint", filepath.Join(dir, "ck.json")},
		tg.args("e2e", "typed", "--create-container", "--partition-key", "/pk")...)...)
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	docs := readAll(t, tg, "e2e", "typed")
	for id, want := range map[string]any{
		"a": "9007199254740993", "b": float64(9007199254740992), "c": "0.1000000000000000055511151231257827",
		"d": 0.1, "e": "12345678901234567890",
	} {
		if got := docs[id]["n"]; got != want {
			t.Errorf("%s: landed %#v, want %#v", id, got, want)
		}
	}
}
