package e2e

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/internal/emulator"
)

func ndjsonDocs(prefix string, n int) []byte {
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `{"id":"%s-%d","tenant":"t%d","n":%d}`+"\n", prefix, i, i%4, i)
	}
	return b.Bytes()
}

func gzipped(b []byte) []byte {
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(b)
	zw.Close()
	return z.Bytes()
}

// refusalRun imports dir from a fresh HOME and checks that exactly the
// documents with the good prefixes landed, that each refused file is one
// dead letter with its reason, and the report's counts.
func refusalRun(t *testing.T, dir string, goodPrefixes map[string]int, refused map[string]string) {
	t.Helper()
	_, env := freshEnv(t)
	tg := localTarget(t, emulator.Options{DefaultRU: 100000})
	out := t.TempDir()
	dl := filepath.Join(out, "dead.ndjson")
	rep := filepath.Join(out, "report.json")
	res := runIn(t, env, append([]string{"import", dir}, tg.args("e2e", "refuse",
		"--create-container", "--partition-key", "/tenant",
		"--dead-letter", dl, "--report", rep, "--checkpoint", filepath.Join(out, "ckpt.json"))...)...)
	if res.code != 3 {
		t.Fatalf("exit %d, want 3 (inputs refused, the rest loaded)\nstderr:\n%s", res.code, res.stderr)
	}
	docs := readAll(t, tg, "e2e", "refuse")
	want := 0
	for _, n := range goodPrefixes {
		want += n
	}
	for id := range docs {
		if _, ok := goodPrefixes[id[:strings.LastIndex(id, "-")]]; !ok {
			t.Errorf("document %q landed from a refused input", id)
		}
	}
	if len(docs) != want {
		t.Errorf("%d documents landed, want the %d good ones", len(docs), want)
	}
	got := map[string]string{}
	for _, d := range readDeadLetters(t, dl) {
		name := filepath.Base(d["source"].(string))
		if _, dup := got[name]; dup {
			t.Errorf("%s dead-lettered more than once", name)
		}
		got[name] = d["reason"].(string)
		if msg, _ := d["error"].(string); !strings.Contains(msg, "none of its records loaded") {
			t.Errorf("dead letter for %s does not say the whole file was refused: %v", name, d)
		}
		if _, ok := d["offset"]; !ok {
			t.Errorf("dead letter without an offset: %v", d)
		}
	}
	if !reflect.DeepEqual(got, refused) {
		t.Errorf("dead letters %v, want %v", got, refused)
	}
	r := readReport(t, rep)
	n := float64(len(refused))
	if r["inputs_refused"] != n || r["records_dead_lettered"] != n || r["records_written"] != float64(want) {
		t.Errorf("report: inputs_refused %v, records_dead_lettered %v, records_written %v; want %v, %v, %d",
			r["inputs_refused"], r["records_dead_lettered"], r["records_written"], n, n, want)
	}
}

// A gzip file whose CRC check fails decompresses every record before the
// error, and a truncated one most of them: both are refused before any
// record is loaded, while the good inputs beside them land exactly.
func TestCorruptGzipInputsAreRefusedWhole(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	crc := gzipped(ndjsonDocs("crc", 300))
	crc[len(crc)-8] ^= 0xff // the stored CRC-32
	trunc := gzipped(ndjsonDocs("trunc", 3000))
	trunc = trunc[:len(trunc)*3/4]
	writeFile(t, dir, "a-good.ndjson", ndjsonDocs("plain", 40))
	writeFile(t, dir, "b-crc.ndjson.gz", crc)
	writeFile(t, dir, "c-good.ndjson.gz", gzipped(ndjsonDocs("zipped", 30)))
	writeFile(t, dir, "d-trunc.ndjson.gz", trunc)
	writeFile(t, dir, "e-good.csv", []byte("id,tenant,n\ncsv-1,t1,1\ncsv-2,t2,2\n"))
	refusalRun(t, dir, map[string]int{"plain": 40, "zipped": 30, "csv": 2},
		map[string]string{"b-crc.ndjson.gz": "corrupt_input", "d-trunc.ndjson.gz": "corrupt_input"})
}

// A CSV header that repeats a column cannot say which value a field gets:
// the file is refused, the others load.
func TestDuplicateHeaderCSVIsRefusedWhole(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "a-good.csv", []byte("id,tenant,n\ncsv-1,t1,1\ncsv-2,t2,2\ncsv-3,t3,3\n"))
	writeFile(t, dir, "b-dup.csv", []byte("id,tenant,id\ndup-1,t1,x\ndup-2,t2,y\n"))
	writeFile(t, dir, "c-good.ndjson", ndjsonDocs("plain", 25))
	refusalRun(t, dir, map[string]int{"csv": 3, "plain": 25},
		map[string]string{"b-dup.csv": "csv_header"})
}

// Retries are on the record: with the local target failing a share of item
// writes with 503 and 408, every record still lands and the report counts
// the retries of each injected class.
func TestReportCountsRetriesByClass(t *testing.T) {
	t.Parallel()
	_, env := freshEnv(t)
	tg := localTarget(t, emulator.Options{DefaultRU: 100000, FailRate503: 0.15, FailRate408: 0.15})
	dir := t.TempDir()
	in := writeFile(t, dir, "in.ndjson", ndjsonDocs("doc", 300))
	rep := filepath.Join(dir, "report.json")
	res := runIn(t, env, append([]string{"import", in}, tg.args("e2e", "retries",
		"--create-container", "--partition-key", "/tenant", "--report", rep, "--batch", "off", // a retry per request
		"--checkpoint", filepath.Join(dir, "ckpt.json"))...)...)
	if res.code != 0 {
		t.Fatalf("exit %d, want 0\nstderr:\n%s", res.code, res.stderr)
	}
	// Reading back through the same faults would fail the query (the SDK
	// does not resend a 408): the report's committed counts say it.
	r := readReport(t, rep)
	if r["records_written"] != 300.0 || r["records_dead_lettered"] != 0.0 {
		t.Errorf("records_written %v, records_dead_lettered %v; want 300, 0", r["records_written"], r["records_dead_lettered"])
	}
	retries, ok := r["retries"].(map[string]any)
	if !ok {
		t.Fatalf("report has no retries object: %v", r["retries"])
	}
	var keys []string
	for k := range retries {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if want := []string{"connection", "other", "throttled", "timeout", "unavailable"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("retries has %v, want %v", keys, want)
	}
	if u, _ := retries["unavailable"].(float64); u <= 0 {
		t.Errorf("retries.unavailable = %v with 15%% of writes answered 503", retries["unavailable"])
	}
	if to, _ := retries["timeout"].(float64); to <= 0 {
		t.Errorf("retries.timeout = %v with 15%% of writes answered 408", retries["timeout"])
	}
	if c, _ := retries["connection"].(float64); c != 0 {
		t.Errorf("retries.connection = %v with no connection faults", c)
	}
	// Every attempt is a request: 300 successes plus the retries.
	if total := retries["unavailable"].(float64) + retries["timeout"].(float64) + retries["throttled"].(float64) + retries["other"].(float64); r["requests_sent"] != 300+total {
		t.Errorf("requests_sent %v, want 300 + %v retries", r["requests_sent"], total)
	}
}
