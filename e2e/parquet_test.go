package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/emulator"
)

// parquetFixtures copies the fixtures written by an independent writer
// (parquetjs, testdata/parquet/gen.mjs) into a temporary directory.
func parquetFixtures(t *testing.T, names ...string) (dir string) {
	t.Helper()
	dir = t.TempDir()
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(repoRoot(), "testdata", "parquet", n))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, dir, n, b)
	}
	return dir
}

// parquetRow is row i of rows.parquet as it must land.
func parquetRow(i int) map[string]any {
	doc := map[string]any{"id": fmt.Sprintf("r%d", i), "pk": fmt.Sprintf("k%d", i%7), "n": float64(i)}
	if i%10 != 0 {
		doc["name"] = fmt.Sprintf("row %d", i)
	}
	return doc
}

// parquetFixtureDocs are the documents of rows.parquet and types.parquet
// as they must land.
func parquetFixtureDocs(t *testing.T) map[string]map[string]any {
	t.Helper()
	want := map[string]map[string]any{}
	for i := 1; i <= 250; i++ {
		want[fmt.Sprintf("r%d", i)] = parquetRow(i)
	}
	for _, s := range []string{
		`{"id":"a1","pk":"p1","i32":-7,"i64":9007199254740993,"i8":-128,"u32":2147483647,"f32":1.5,"f64":0.1,"ok":true,"s":"héllo \"quoted\"\n\ttab","bin":"AAEC/w==","ts":"2026-11-24T05:08:27.123Z","tsus":"2025-11-25T05:08:27.123456Z","day":"2026-02-28","price":123.5,"big":"900719925474099.2","tags":["x","y"],"addr":{"city":"Oslo","zip":150},"attrs":{"a":1,"b":2}}`,
		`{"id":"a2","pk":"p2"}`,
		`{"id":"a3","pk":"p1","i32":0,"i64":0,"f64":-2.5e-300,"ok":false,"s":"","tags":["z",null],"addr":{},"attrs":{}}`,
		`{"id":"a4","pk":"p3","price":-0.5,"tags":[],"addr":{}}`,
		`{"id":"a5","pk":"p2","s":"日本語","day":"1969-12-31"}`,
	} {
		var doc map[string]any
		if err := json.Unmarshal([]byte(s), &doc); err != nil {
			t.Fatal(err)
		}
		want[doc["id"].(string)] = doc
	}
	return want
}

func TestParquetImportLandsExactlyAndRefusesTheCorruptFile(t *testing.T) {
	t.Parallel()
	dir := parquetFixtures(t, "types.parquet", "rows.parquet", "truncated.parquet")
	writeFile(t, dir, "more.ndjson", []byte(`{"id":"j1","pk":"p9"}`+"\n"))
	want := parquetFixtureDocs(t)
	want["j1"] = map[string]any{"id": "j1", "pk": "p9"}
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			out := t.TempDir()
			dl := filepath.Join(out, "dead.ndjson")
			rep := filepath.Join(out, "report.json")
			res := runLoader(t, nil, append([]string{"import", dir}, tg.args("e2e", "pq",
				"--create-container", "--partition-key", "/pk",
				"--dead-letter", dl, "--report", rep, "--checkpoint", filepath.Join(out, "ckpt.json"))...)...)
			if res.code != 3 {
				t.Fatalf("exit %d, want 3 (a refused input)\nstderr:\n%s", res.code, res.stderr)
			}
			got := readAll(t, tg, "e2e", "pq")
			if len(got) != len(want) {
				t.Errorf("%d documents landed, want %d", len(got), len(want))
			}
			for id, w := range want {
				if !reflect.DeepEqual(got[id], w) {
					t.Errorf("document %s:\n got %v\nwant %v", id, got[id], w)
				}
			}
			dead := readDeadLetters(t, dl)
			if len(dead) != 1 || filepath.Base(dead[0]["source"].(string)) != "truncated.parquet" ||
				dead[0]["reason"] != "corrupt_input" || !strings.Contains(dead[0]["error"].(string), "Parquet") {
				t.Fatalf("dead letters %v, want one corrupt_input entry for truncated.parquet", dead)
			}
			r := readReport(t, rep)
			if r["records_written"] != float64(len(want)) || r["records_dead_lettered"] != 1.0 {
				t.Errorf("report: written %v dead-lettered %v", r["records_written"], r["records_dead_lettered"])
			}
		})
	}
}

// An import interrupted in the middle of a Parquet file resumes from the
// committed row: every row lands once. The load selects columns
// (--columns n: the id and the partition key are kept), and the resume
// must select them too: no document may carry "name".
func TestParquetInterruptAndResumeMidFile(t *testing.T) {
	t.Parallel()
	tg := localTarget(t, emulator.Options{DefaultRU: 400})
	dir := parquetFixtures(t, "rows.parquet")
	input := filepath.Join(dir, "rows.parquet")
	ckpt := filepath.Join(dir, "ckpt.json")
	args := append([]string{"import", input, "--columns", "n", "--checkpoint", ckpt, "--checkpoint-interval", "100ms"},
		tg.args("e2e", "pqresume", "--create-container", "--partition-key", "/pk", "--ru", "400")...)
	cmd, wait := startLoader(t, args...)
	waitForCheckpoint(t, ckpt)
	_ = cmd.Process.Signal(syscall.SIGINT)
	if code, stderr := wait(); code != 130 {
		t.Fatalf("exit %d after SIGINT, want 130 (did the load finish first?)\n%s", code, stderr)
	}
	st, err := checkpoint.Load(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(0)
	if fi, err := os.Stat(input); err == nil {
		size = fi.Size()
	}
	c := st.Inputs[0].Committed
	if st.Complete || c.Line <= 0 || c.Line >= 250 || c.Offset <= 0 || c.Offset >= size {
		t.Fatalf("checkpoint after SIGINT: complete=%v committed=%+v (file %d bytes)", st.Complete, c, size)
	}
	res := runLoader(t, nil, "resume", ckpt, "--endpoint", tg.endpoint, "--key", tg.key, "--quiet")
	if res.code != 0 {
		t.Fatalf("resume: exit %d\n%s", res.code, res.stderr)
	}
	got := readAll(t, tg, "e2e", "pqresume")
	if len(got) != 250 {
		t.Errorf("%d documents landed, want 250", len(got))
	}
	for i := 1; i <= 250; i++ {
		want := parquetRow(i)
		delete(want, "name")
		if id := fmt.Sprintf("r%d", i); !reflect.DeepEqual(got[id], want) {
			t.Errorf("document %s: %v", id, got[id])
		}
	}
}

// A Parquet file is read at several places at once, a segment per range of
// row groups (rows.parquet: 100, 100 and 50 rows), as a key-sorted NDJSON
// file is; killed mid-load, resume reads on in every segment from its own
// committed row, and every row lands once.
func TestParquetSegmentsKilledAndResumed(t *testing.T) {
	t.Parallel()
	tg := localTarget(t, emulator.Options{DefaultRU: 400})
	dir := parquetFixtures(t, "rows.parquet")
	input := filepath.Join(dir, "rows.parquet")
	ckpt := filepath.Join(dir, "ckpt.json")
	args := append([]string{"import", input, "--segments", "3", "--checkpoint", ckpt, "--checkpoint-interval", "100ms"},
		tg.args("e2e", "pqsegments", "--create-container", "--partition-key", "/pk", "--ru", "400")...)
	cmd, wait := startLoader(t, args...)
	waitForCheckpoint(t, ckpt)
	_ = cmd.Process.Kill()
	wait()
	st, err := checkpoint.Load(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	segs := st.Inputs[0].Segments
	if st.Complete || len(segs) != 3 {
		t.Fatalf("checkpoint after kill: complete=%v, %d segments, want 3: %+v", st.Complete, len(segs), segs)
	}
	for k, s := range segs {
		if s.Start.Line != int64(100*k) || s.Committed.Line < s.Start.Line {
			t.Errorf("segment %d: %+v, want it to start at row %d", k, s, 100*k)
		}
	}
	if segs[0].Committed.Line >= 100 && segs[1].Committed.Line >= 200 && segs[2].Committed.Line >= 250 {
		t.Fatalf("every segment was done before the kill: %+v", segs)
	}
	res := runLoader(t, nil, "resume", ckpt, "--endpoint", tg.endpoint, "--key", tg.key, "--quiet")
	if res.code != 0 {
		t.Fatalf("resume: exit %d\n%s", res.code, res.stderr)
	}
	// Each segment ended where the next begins, not at the file's end.
	if st, err = checkpoint.Load(ckpt); err != nil {
		t.Fatal(err)
	}
	for k, s := range st.Inputs[0].Segments {
		if want := min(int64(100*(k+1)), 250); s.Committed.Line != want {
			t.Errorf("segment %d ended at row %d, want %d", k, s.Committed.Line, want)
		}
	}
	got := readAll(t, tg, "e2e", "pqsegments")
	if len(got) != 250 {
		t.Errorf("%d documents landed, want 250", len(got))
	}
	for i := 1; i <= 250; i++ {
		if id := fmt.Sprintf("r%d", i); !reflect.DeepEqual(got[id], parquetRow(i)) {
			t.Errorf("document %s: %v", id, got[id])
		}
	}
}

// A row group that does not decode, read in segments (rows.parquet: 100,
// 100 and 50 rows, the second's page header broken): it refuses the rest
// of its own segment, with one dead letter, and the other segments land;
// the checkpoint marks that segment refused, so a resume reads on in the
// others only.
func TestParquetCorruptRowGroupRefusesOnlyItsSegment(t *testing.T) {
	t.Parallel()
	tg := localTarget(t, emulator.Options{DefaultRU: 100000})
	dir := parquetFixtures(t, "rows.parquet")
	input := filepath.Join(dir, "rows.parquet")
	b, err := os.ReadFile(input)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := file.OpenParquetFile(input, false)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := pf.MetaData().RowGroup(1).ColumnChunk(0)
	if err != nil {
		t.Fatal(err)
	}
	off := cc.DataPageOffset()
	pf.Close()
	for i := off; i < off+24; i++ {
		b[i] = 0xff
	}
	writeFile(t, dir, "rows.parquet", b)
	dl := filepath.Join(dir, "dead.ndjson")
	ckpt := filepath.Join(dir, "ckpt.json")
	res := runLoader(t, nil, append([]string{"import", input, "--segments", "3", "--dead-letter", dl, "--checkpoint", ckpt},
		tg.args("e2e", "pqbadseg", "--create-container", "--partition-key", "/pk")...)...)
	if res.code != 3 {
		t.Fatalf("exit %d, want 3\n%s", res.code, res.stderr)
	}
	got := readAll(t, tg, "e2e", "pqbadseg")
	if len(got) != 150 {
		t.Errorf("%d documents landed, want 150 (rows 1-100 and 201-250)", len(got))
	}
	for i := 1; i <= 250; i++ {
		id := fmt.Sprintf("r%d", i)
		if _, ok := got[id]; ok != (i <= 100 || i > 200) {
			t.Errorf("document %s landed: %v", id, ok)
		}
	}
	dead := readDeadLetters(t, dl)
	if len(dead) != 1 || dead[0]["reason"] != "corrupt_input" || dead[0]["line"] != 101.0 {
		t.Fatalf("dead letters %v, want one corrupt_input entry at row 101", dead)
	}
	st, err := checkpoint.Load(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	segs := st.Inputs[0].Segments
	if len(segs) != 3 || segs[0].Refused || !segs[1].Refused || segs[2].Refused {
		t.Errorf("segments %+v, want only the second refused", segs)
	}
}
