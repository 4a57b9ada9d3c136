package e2e

import (
	"fmt"
	"github.com/cosmosloader/loader/internal/emulator"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// malformedCorpus writes a directory of inputs that mixes good records with
// every kind of bad one the loader must dead-letter, and returns the good
// documents as they must land and the bad records as (file, line, reason).
func malformedCorpus(t *testing.T) (dir string, good map[string]map[string]any, bad []string) {
	dir = t.TempDir()
	big := `{"id":"big","tenant":"a","blob":"` + strings.Repeat("x", 2<<20+100) + `"}`
	long := `{"id":"` + strings.Repeat("l", 1100) + `","tenant":"a"}`
	ndjson := strings.Join([]string{
		`{"id":"g1","tenant":"a","n":1}`,                      // 1
		`{"id":"g2","tenant":"b","nested":{"x":[1,2.5,"s"]}}`, // 2
		`{bad json`,                              // 3
		`[1,2,3]`,                                // 4
		`{"id":"nopk"}`,                          // 5
		`{"id":"has/slash","tenant":"a"}`,        // 6
		long,                                     // 7
		"{\"id\":\"u\",\"tenant\":\"\xff\xfe\"}", // 8
		``,                                       // 9 blank
		`{"tenant":"c","n":10}`,                  // 10 generated id
		`{"id":42,"tenant":"c"}`,                 // 11 numeric id
		big,                                      // 12 over 2 MB
		`{"id":"g13","tenant":"d"}`,              // 13
		`{"id":"trunc","tenant":"a"`,             // 14 truncated, no newline
	}, "\n")
	writeFile(t, dir, "a/mixed.ndjson", []byte(ndjson))
	writeFile(t, dir, "b/people.csv", []byte("id,tenant,age,address.city\r\nc1,a,30,Oslo\r\nc2,b,41\r\nc3,c,,Lyon\r\n"))
	writeFile(t, dir, "c/empty.ndjson", nil)
	good = map[string]map[string]any{
		"g1":  {"id": "g1", "tenant": "a", "n": 1.0},
		"g2":  {"id": "g2", "tenant": "b", "nested": map[string]any{"x": []any{1.0, 2.5, "s"}}},
		"42":  {"id": "42", "tenant": "c"},
		"g13": {"id": "g13", "tenant": "d"},
		"c1":  {"id": "c1", "tenant": "a", "age": 30.0, "address": map[string]any{"city": "Oslo"}},
		"c3":  {"id": "c3", "tenant": "c", "address": map[string]any{"city": "Lyon"}},
	}
	bad = []string{
		"mixed.ndjson:3", "mixed.ndjson:4", "mixed.ndjson:5", "mixed.ndjson:6", "mixed.ndjson:7",
		"mixed.ndjson:8", "mixed.ndjson:12", "mixed.ndjson:14", "people.csv:3",
	}
	return dir, good, bad
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestImportLandsExactlyTheGoodRecords(t *testing.T) {
	t.Parallel()
	dir, good, bad := malformedCorpus(t)
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			out := t.TempDir()
			dl := filepath.Join(out, "dead.ndjson")
			rep := filepath.Join(out, "report.json")
			args := append([]string{"import", dir}, tg.args("e2e", "mixed",
				"--create-container", "--partition-key", "/tenant",
				"--dead-letter", dl, "--report", rep, "--checkpoint", filepath.Join(out, "ckpt.json"))...)
			res := runLoader(t, nil, args...)
			if res.code != 3 {
				t.Fatalf("exit %d, want 3 (some dead-lettered)\nstderr:\n%s", res.code, res.stderr)
			}

			docs := readAll(t, tg, "e2e", "mixed")
			var generated string
			for id, doc := range docs {
				if uuidRE.MatchString(id) {
					generated = id
					if doc["tenant"] != "c" || doc["n"] != 10.0 {
						t.Errorf("generated-id document has %v", doc)
					}
					continue
				}
				want, ok := good[id]
				if !ok {
					t.Errorf("unexpected document %q landed: %v", id, doc)
					continue
				}
				if !reflect.DeepEqual(doc, want) {
					t.Errorf("document %q = %v, want %v", id, doc, want)
				}
			}
			if generated == "" {
				t.Errorf("the record without an id did not land with a generated UUIDv5 id; got ids %v", sortedKeys(docs))
			}
			if len(docs) != len(good)+1 {
				t.Errorf("%d documents landed, want %d: %v", len(docs), len(good)+1, sortedKeys(docs))
			}

			var gotBad []string
			for _, d := range readDeadLetters(t, dl) {
				gotBad = append(gotBad, fmt.Sprintf("%s:%v", filepath.Base(d["source"].(string)), d["line"]))
				if d["reason"] == "" || d["error"] == "" {
					t.Errorf("dead letter without a reason: %v", d)
				}
				if d["raw"] == nil && d["raw_base64"] == nil {
					t.Errorf("dead letter without the raw text: %v", d)
				}
			}
			// Dead letters are in input order within each file; files may
			// interleave.
			sort.Strings(gotBad)
			sort.Strings(bad)
			if !reflect.DeepEqual(gotBad, bad) {
				t.Errorf("dead-lettered %v, want %v", gotBad, bad)
			}

			r := readReport(t, rep)
			for field, want := range map[string]float64{
				"records_read": 16, "records_written": 7, "records_dead_lettered": 9, "records_skipped_existing": 0,
			} {
				if r[field] != want {
					t.Errorf("report %s = %v, want %v", field, r[field], want)
				}
			}
			for _, field := range []string{"requests_sent", "throttled_responses", "ru_consumed", "duration_seconds",
				"target_ru_per_sec", "achieved_ru_per_sec", "utilization", "dead_letter_path", "checkpoint_path", "naive", "paced"} {
				if _, ok := r[field]; !ok {
					t.Errorf("report lacks %s", field)
				}
			}

			// A second run of the same data, started over, regenerates the
			// same id: nothing is duplicated.
			res = runLoader(t, nil, append(args, "--restart")...)
			if res.code != 3 {
				t.Fatalf("rerun: exit %d\n%s", res.code, res.stderr)
			}
			if again := readAll(t, tg, "e2e", "mixed"); len(again) != len(docs) {
				t.Errorf("rerun: %d documents, want %d (generated ids must be deterministic)", len(again), len(docs))
			}
		})
	}
}

func TestImportMissingFileIsAUsageErrorAndWritesNothing(t *testing.T) {
	t.Parallel()
	tg := localTarget(t, emulatorOptions())
	res := runLoader(t, nil, append([]string{"import", "/no/such/file.ndjson"}, tg.args("e2e", "missing", "--create-container", "--partition-key", "/id")...)...)
	if res.code != 2 {
		t.Fatalf("exit %d, want 2\n%s", res.code, res.stderr)
	}
	if !strings.Contains(res.stderr, "/no/such/file.ndjson") {
		t.Errorf("the error does not name the file: %q", res.stderr)
	}
	if st := tg.srv.Stats(); st.Total.Requests != 0 || len(st.Containers) != 0 {
		t.Errorf("the target was touched: %d item requests, %d containers", st.Total.Requests, len(st.Containers))
	}
}

func TestImportCreateModeCountsExistingAsSkipped(t *testing.T) {
	t.Parallel()
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			dir := t.TempDir()
			first := writeFile(t, dir, "first.ndjson", []byte("{\"id\":\"1\",\"k\":\"a\"}\n{\"id\":\"2\",\"k\":\"a\"}\n"))
			both := writeFile(t, dir, "both.ndjson", []byte("{\"id\":\"1\",\"k\":\"a\"}\n{\"id\":\"2\",\"k\":\"a\"}\n{\"id\":\"3\",\"k\":\"b\"}\n"))
			base := tg.args("e2e", "create", "--create-container", "--partition-key", "/k", "--mode", "create")
			if res := runLoader(t, nil, append([]string{"import", first}, base...)...); res.code != 0 {
				t.Fatalf("first: exit %d\n%s", res.code, res.stderr)
			}
			rep := filepath.Join(dir, "r.json")
			if res := runLoader(t, nil, append([]string{"import", both, "--report", rep}, base...)...); res.code != 0 {
				t.Fatalf("second: exit %d\n%s", res.code, res.stderr)
			}
			r := readReport(t, rep)
			if r["records_written"] != 1.0 || r["records_skipped_existing"] != 2.0 {
				t.Errorf("written %v skipped %v, want 1 and 2", r["records_written"], r["records_skipped_existing"])
			}
			if n := len(readAll(t, tg, "e2e", "create")); n != 3 {
				t.Errorf("%d documents, want 3", n)
			}
		})
	}
}

func TestImportFromStdin(t *testing.T) {
	t.Parallel()
	tg := localTarget(t, emulatorOptions())
	in := []byte("{\"id\":\"s1\",\"k\":1}\n{\"id\":\"s2\",\"k\":2}\n")
	res := runLoader(t, in, append([]string{"import", "-"}, tg.args("e2e", "stdin", "--create-container", "--partition-key", "/k")...)...)
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	if docs := readAll(t, tg, "e2e", "stdin"); len(docs) != 2 || docs["s2"]["k"] != 2.0 {
		t.Errorf("got %v", docs)
	}
}

func emulatorOptions() emulator.Options { return emulator.Options{DefaultRU: 100000} }
