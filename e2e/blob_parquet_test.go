package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/testenv"
)

// Parquet inputs in blob storage (Azurite): a glob of the independent
// writer's fixtures with a corrupt blob among them, dry-run, a kill and
// resume in the middle of a blob of many row groups, a shared load.

// genParquet writes rows rows (id prefix-i, tenant, seq, pad) in row
// groups of rowGroup rows with arrow-go, and returns the file and the
// documents it must land as.
func genParquet(t *testing.T, prefix string, rows, rowGroup int) ([]byte, map[string]map[string]any) {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "tenant", Type: arrow.BinaryTypes.String},
		{Name: "seq", Type: arrow.PrimitiveTypes.Int64},
		{Name: "pad", Type: arrow.BinaryTypes.String},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	want := map[string]map[string]any{}
	for i := 0; i < rows; i++ {
		id, tenant, pad := fmt.Sprintf("%s-%d", prefix, i), fmt.Sprintf("t%d", i%5), strings.Repeat(string(rune('a'+i%26)), 100+i%50)
		b.Field(0).(*array.StringBuilder).Append(id)
		b.Field(1).(*array.StringBuilder).Append(tenant)
		b.Field(2).(*array.Int64Builder).Append(int64(i))
		b.Field(3).(*array.StringBuilder).Append(pad)
		want[id] = map[string]any{"id": id, "tenant": tenant, "seq": float64(i), "pad": pad}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	tbl := array.NewTableFromRecords(schema, []arrow.RecordBatch{rec})
	defer tbl.Release()
	var buf bytes.Buffer
	if err := pqarrow.WriteTable(tbl, &buf, int64(rowGroup), parquet.NewWriterProperties(), pqarrow.DefaultWriterProps()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), want
}

func checkDocs(t *testing.T, got, want map[string]map[string]any) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d documents landed, want %d", len(got), len(want))
	}
	bad := 0
	for id, w := range want {
		if !reflect.DeepEqual(got[id], w) {
			if bad++; bad <= 5 {
				t.Errorf("document %s:\n got %v\nwant %v", id, got[id], w)
			}
		}
	}
}

func TestBlobParquetGlobLandsExactlyAndRefusesTheCorruptBlob(t *testing.T) {
	t.Parallel()
	az := testenv.Azurite(t)
	tg := localTarget(t, emulatorOptions())
	cc := blobContainer(t, az, "exports")
	for _, n := range []string{"types.parquet", "rows.parquet", "truncated.parquet"} {
		b, err := os.ReadFile(filepath.Join(repoRoot(), "testdata", "parquet", n))
		if err != nil {
			t.Fatal(err)
		}
		putBlob(t, cc, "2026-11/"+n, b)
	}
	putBlob(t, cc, "2026-11/part-1.ndjson", []byte(`{"id":"j1","pk":"p9"}`+"\n")) // not matched by the glob
	glob := az.BlobEndpoint() + "/exports/2026-11/*.parquet"
	conn := []string{"--source-connection-string", az.ConnectionString()}
	want := parquetFixtureDocs(t)

	dry := runLoader(t, nil, append([]string{"dry-run", glob, "--json"}, conn...)...)
	if dry.code != 0 || !strings.Contains(dry.stdout, `"records": 255`) || !strings.Contains(dry.stdout, `"reason": "corrupt_input"`) {
		t.Errorf("dry-run: exit %d, want 255 records and the corrupt blob\n%s\n%s", dry.code, dry.stdout, dry.stderr)
	}

	out := t.TempDir()
	dl, rep := filepath.Join(out, "dead.ndjson"), filepath.Join(out, "report.json")
	res := runLoader(t, nil, append(append([]string{"import", glob}, conn...), tg.args("e2e", "pqblob",
		"--create-container", "--partition-key", "/pk", "--dead-letter", dl, "--report", rep,
		"--checkpoint", filepath.Join(out, "ckpt.json"))...)...)
	if res.code != 3 {
		t.Fatalf("exit %d, want 3 (a refused input)\nstderr:\n%s", res.code, res.stderr)
	}
	checkDocs(t, readAll(t, tg, "e2e", "pqblob"), want)
	dead := readDeadLetters(t, dl)
	if len(dead) != 1 || dead[0]["source"] != az.BlobEndpoint()+"/exports/2026-11/truncated.parquet" ||
		dead[0]["reason"] != "corrupt_input" || !strings.Contains(dead[0]["error"].(string), "Parquet") {
		t.Fatalf("dead letters %v, want one corrupt_input entry naming the blob truncated.parquet", dead)
	}
	if r := readReport(t, rep); r["records_written"] != float64(len(want)) || r["records_dead_lettered"] != 1.0 {
		t.Errorf("report: written %v dead-lettered %v", r["records_written"], r["records_dead_lettered"])
	}
}

// A table as Spark writes it to Azure Storage, partitioned by region: the
// region is only in the folder names, and is the container's partition
// key. Every row lands with its folder's region, an NDJSON part's records
// too; the writer's _SUCCESS and _committed_ files are not inputs.
func TestBlobParquetPartitionFoldersAreFields(t *testing.T) {
	t.Parallel()
	az := testenv.Azurite(t)
	tg := localTarget(t, emulatorOptions())
	cc := blobContainer(t, az, "lake")
	want := map[string]map[string]any{}
	for _, region := range []string{"eu", "us", "__HIVE_DEFAULT_PARTITION__"} {
		data, docs := genParquet(t, "r"+region[:2], 120, 50)
		putBlob(t, cc, "sales/region="+region+"/part-00000.snappy.parquet", data)
		for id, d := range docs {
			if region != "__HIVE_DEFAULT_PARTITION__" {
				d["region"] = region
			}
			want[id] = d
		}
	}
	// An NDJSON part in a folder of its own gets the folder's field too,
	// but a record's own region wins.
	var nd strings.Builder
	for i := range 20 {
		id := fmt.Sprintf("j%02d", i)
		d := map[string]any{"id": id, "tenant": "t1", "region": "apac", "n": float64(i)}
		if i == 7 {
			d["region"] = "own"
			fmt.Fprintf(&nd, `{"id":%q,"tenant":"t1","n":%d,"region":"own"}`+"\n", id, i)
		} else {
			fmt.Fprintf(&nd, `{"id":%q,"tenant":"t1","n":%d}`+"\n", id, i)
		}
		want[id] = d
	}
	putBlob(t, cc, "sales/region=apac/part-00000.json", []byte(nd.String()))
	putBlob(t, cc, "sales/_SUCCESS", nil)
	// A Data Lake Gen2 account lists its folders as empty blobs; Spark
	// names folders like files.
	folder := "true"
	if _, err := cc.NewBlockBlobClient("sales/region=eu/extra.parquet").UploadBuffer(context.Background(), nil,
		&blockblob.UploadBufferOptions{Metadata: map[string]*string{"hdi_isfolder": &folder}}); err != nil {
		t.Fatal(err)
	}
	putBlob(t, cc, "sales/region=eu/_committed_8212", []byte(`{"added":["part-00000.snappy.parquet"]}`))
	prefix := az.BlobEndpoint() + "/lake/sales/"
	conn := []string{"--source-connection-string", az.ConnectionString()}

	dry := runLoader(t, nil, append([]string{"dry-run", prefix, "--partition-key", "/tenant", "--json"}, conn...)...)
	if dry.code != 0 || !strings.Contains(dry.stdout, `"records": 380`) ||
		!strings.Contains(dry.stdout, "4 inputs sit in partition folders (region=…)") {
		t.Errorf("dry-run: exit %d, want 380 records and a note on the folders' fields\n%s\n%s", dry.code, dry.stdout, dry.stderr)
	}
	// Keyed by the folder's region, the null partition's rows (no region)
	// are refused; keyed by tenant, every row lands.
	dl := filepath.Join(t.TempDir(), "dead.ndjson")
	res := runLoader(t, nil, append(append([]string{"import", prefix}, conn...), tg.args("e2e", "byregion",
		"--create-container", "--partition-key", "/region", "--dead-letter", dl)...)...)
	if res.code != 3 {
		t.Fatalf("import keyed by region: exit %d, want 3 (the null partition's rows)\n%s", res.code, res.stderr)
	}
	docs := readAll(t, tg, "e2e", "byregion")
	if len(docs) != 260 {
		t.Errorf("%d documents keyed by region, want 260", len(docs))
	}
	for id, d := range docs {
		if want[id] == nil || d["region"] != want[id]["region"] {
			t.Errorf("%s: region %v, want %v", id, d["region"], want[id]["region"])
		}
	}
	if dead := readDeadLetters(t, dl); len(dead) != 120 || dead[0]["reason"] != "missing_partition_key" {
		t.Errorf("%d dead letters (first %v), want the null partition's 120, missing_partition_key", len(dead), dead[0])
	}
	res = runLoader(t, nil, append(append([]string{"import", prefix}, conn...), tg.args("e2e", "bytenant",
		"--create-container", "--partition-key", "/tenant")...)...)
	if res.code != 0 {
		t.Fatalf("import keyed by tenant: exit %d\n%s", res.code, res.stderr)
	}
	checkDocs(t, readAll(t, tg, "e2e", "bytenant"), want)
}

// A load killed in the middle of a Parquet blob of many row groups
// resumes from the committed row: every row lands exactly once.
func TestBlobParquetKillAndResume(t *testing.T) {
	t.Parallel()
	az := testenv.Azurite(t)
	tg := localTarget(t, emulator.Options{DefaultRU: 1000})
	cc := blobContainer(t, az, "inputs")
	const rows = 1000
	data, want := genParquet(t, "p", rows, 100)
	putBlob(t, cc, "big.parquet", data)
	ckpt := filepath.Join(t.TempDir(), "ckpt.json")
	conn := []string{"--source-connection-string", az.ConnectionString()}
	args := append([]string{"import", az.BlobEndpoint() + "/inputs/big.parquet", "--checkpoint", ckpt, "--checkpoint-interval", "100ms"},
		tg.args("e2e", "pqresume", "--create-container", "--partition-key", "/tenant", "--ru", "1000")...)
	// Past two row groups, so the resume skips whole ones.
	killWhen(t, ckpt, killAt{what: "row 200 committed", ready: func(st *checkpoint.State) bool { return st.Inputs[0].Committed.Line >= 200 }},
		append(args, conn...)...)
	st, err := checkpoint.Load(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	c := st.Inputs[0].Committed
	if st.Complete || c.Line <= 0 || c.Line >= rows || !strings.Contains(st.Inputs[0].Path, "/inputs/big.parquet") {
		t.Fatalf("checkpoint after SIGKILL: complete=%v input %s committed=%+v", st.Complete, st.Inputs[0].Path, c)
	}
	t.Logf("killed at row %d of %d (row group %d of %d)", c.Line, rows, c.Line/100+1, rows/100)

	res := runLoader(t, nil, append([]string{"resume", ckpt, "--quiet", "--key", tg.key}, conn...)...)
	if res.code != 0 {
		t.Fatalf("resume: exit %d\n%s", res.code, res.stderr)
	}
	checkDocs(t, readAll(t, tg, "e2e", "pqresume"), want)
	if st, err := checkpoint.Load(ckpt); err != nil || !st.Complete || st.Inputs[0].Committed.Line != rows {
		t.Errorf("checkpoint after resume: %+v, %v", st, err)
	}
}

// A Parquet blob read in three segments of row groups (6 of 100 rows),
// each a reader of its own over the blob, killed and resumed: every row
// once, each segment ending where the next begins.
func TestBlobParquetSegmentsKillAndResume(t *testing.T) {
	t.Parallel()
	az := testenv.Azurite(t)
	tg := localTarget(t, emulator.Options{DefaultRU: 1000})
	cc := blobContainer(t, az, "inputs")
	const rows = 600
	data, want := genParquet(t, "p", rows, 100)
	putBlob(t, cc, "big.parquet", data)
	ckpt := filepath.Join(t.TempDir(), "ckpt.json")
	conn := []string{"--source-connection-string", az.ConnectionString()}
	args := append([]string{"import", az.BlobEndpoint() + "/inputs/big.parquet", "--segments", "3", "--checkpoint", ckpt, "--checkpoint-interval", "100ms"},
		tg.args("e2e", "pqsegs", "--create-container", "--partition-key", "/tenant", "--ru", "1000")...)
	killWhen(t, ckpt, killAt{what: "100 rows written", ready: func(st *checkpoint.State) bool { return st.Counters.RecordsWritten >= 100 }},
		append(args, conn...)...)
	st, err := checkpoint.Load(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	segs := st.Inputs[0].Segments
	if st.Complete || len(segs) != 3 || segs[1].Start.Line != 200 || segs[2].Start.Line != 400 {
		t.Fatalf("checkpoint after SIGKILL: complete=%v, segments %+v; want three, from rows 0, 200 and 400", st.Complete, segs)
	}
	res := runLoader(t, nil, append([]string{"resume", ckpt, "--quiet", "--key", tg.key}, conn...)...)
	if res.code != 0 {
		t.Fatalf("resume: exit %d\n%s", res.code, res.stderr)
	}
	checkDocs(t, readAll(t, tg, "e2e", "pqsegs"), want)
	if st, err = checkpoint.Load(ckpt); err != nil || !st.Complete {
		t.Fatalf("checkpoint after resume: %+v, %v", st, err)
	}
	for k, s := range st.Inputs[0].Segments {
		if want := int64(200 * (k + 1)); s.Committed.Line != want {
			t.Errorf("segment %d ended at row %d, want %d", k, s.Committed.Line, want)
		}
	}
}

// Three loaders over one prefix of Parquet blobs, cut into shards of 4 KiB
// (a blob's rows scaled to its size, each shard from its first row there,
// inside a row group or not): every row written once.
func TestThreeLoadersShareParquetBlobs(t *testing.T) {
	t.Parallel()
	az, tg := sharedTarget(t)
	cc := blobContainer(t, az, "fleet")
	want := map[string]map[string]any{}
	for _, f := range []struct {
		name string
		rows int
	}{{"a", 400}, {"b", 300}, {"c", 200}} {
		data, w := genParquet(t, f.name, f.rows, 64)
		putBlob(t, cc, "pq/"+f.name+".parquet", data)
		for id, d := range w {
			want[id] = d
		}
	}
	var waits []func() (int, string)
	for p := 0; p < 3; p++ {
		_, wait := startLoader(t, append([]string{"import", az.BlobEndpoint() + "/fleet/pq/",
			"--source-connection-string", az.ConnectionString(), "--shard-size", "4096"}, sharedArgs(tg, az)...)...)
		waits = append(waits, wait)
	}
	for i, wait := range waits {
		if code, stderr := wait(); code != 0 {
			t.Fatalf("loader %d: exit %d\n%s", i, code, stderr)
		}
	}
	checkDocs(t, readAll(t, tg, "e2e", "shared"), want)
	n, written := shardProgress(t, az)
	if n <= 3 || written != int64(len(want)) {
		t.Errorf("%d shards wrote %d rows; want more than one shard per blob and %d rows, each once", n, written, len(want))
	}
}
