package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/testenv"
)

// Blob inputs on Azurite: globs and prefixes, resume in the middle of a
// blob, a changed blob, clear 403/404, sharing over a prefix, no SAS leaks.

func blobContainer(t *testing.T, az *testenv.AzuriteServer, name string) *container.Client {
	t.Helper()
	cc, err := container.NewClientFromConnectionString(az.ConnectionString(), name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cc.Create(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	return cc
}

func putBlob(t *testing.T, cc *container.Client, name string, data []byte) {
	t.Helper()
	if _, err := cc.NewBlockBlobClient(name).UploadBuffer(context.Background(), data, nil); err != nil {
		t.Fatal(err)
	}
}

// blobInput uploads crashInput's records (ids prefixed) as a blob and
// returns the expected documents keyed by prefix/seq.
func blobInput(t *testing.T, cc *container.Client, name, prefix string, n int, want map[string]string) {
	t.Helper()
	path, w := crashInput(t, t.TempDir(), n)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if line == "" {
			continue
		}
		line = strings.Replace(line, `"id":"doc-`, `"id":"doc-`+prefix, 1)
		out.WriteString(`{"src":"` + prefix + `",` + line[1:])
	}
	putBlob(t, cc, name, []byte(out.String()))
	for seq, h := range w {
		want[prefix+"/"+seq] = h
	}
}

func TestBlobInputsGlobAndPrefixLandExactly(t *testing.T) {
	t.Parallel()
	az := testenv.Azurite(t)
	tg := localTarget(t, emulatorOptions())
	cc := blobContainer(t, az, "exports")
	putBlob(t, cc, "2026-11/part-1.ndjson", []byte(`{"id":"n1","k":"a"}`+"\n"+`{"id":"n2","k":"b"}`+"\n"))
	putBlob(t, cc, "2026-11/deep/part-2.ndjson", []byte(`{"id":"n3","k":"a"}`+"\n"))
	putBlob(t, cc, "2026-11/notes.txt", []byte("not an input\n"))
	putBlob(t, cc, "csv/people.csv", []byte("id,k,age\nc1,a,30\nc2,b,41\n"))
	putBlob(t, cc, "csv/more/people2.csv.gz", gzipBytes(t, []byte("id,k,age\nc3,a,7\n")))
	// What Spark and Hadoop writers leave beside their output is hidden.
	putBlob(t, cc, "csv/_SUCCESS", nil)
	putBlob(t, cc, "csv/_temporary/0/part-9.csv", []byte("id,k,age\nt1,a,1\n"))
	putBlob(t, cc, "csv/.staging/part-8.csv", []byte("id,k,age\ns1,a,1\n"))
	local := writeFile(t, t.TempDir(), "local.ndjson", []byte(`{"id":"l1","k":"z"}`+"\n"))
	base := az.BlobEndpoint() + "/exports/"

	args := []string{base + "2026-11/**.ndjson", local, base + "csv/", "--source-connection-string", az.ConnectionString()}
	dry := runLoader(t, nil, append([]string{"dry-run", "--json"}, args...)...)
	if dry.code != 0 || !strings.Contains(dry.stdout, `"records": 7`) && !strings.Contains(dry.stdout, `"records":7`) {
		t.Errorf("dry-run: exit %d\n%s\n%s", dry.code, dry.stdout, dry.stderr)
	}
	res := runLoader(t, nil, append(append([]string{"import"}, args...),
		tg.args("e2e", "blobs", "--create-container", "--partition-key", "/k", "--checkpoint", filepath.Join(t.TempDir(), "c.json"))...)...)
	if res.code != 0 {
		t.Fatalf("import: exit %d\n%s", res.code, res.stderr)
	}
	docs := readAll(t, tg, "e2e", "blobs")
	want := map[string]string{"n1": "a", "n2": "b", "n3": "a", "l1": "z", "c1": "a", "c2": "b", "c3": "a"}
	if len(docs) != len(want) {
		t.Errorf("%d documents landed, want %d: %v", len(docs), len(want), sortedKeys(docs))
	}
	for id, k := range want {
		if docs[id] == nil || docs[id]["k"] != k {
			t.Errorf("document %s: %v", id, docs[id])
		}
	}
	if docs["c1"] != nil && docs["c1"]["age"] != float64(30) {
		t.Errorf("CSV typing lost: %v", docs["c1"])
	}

	// A prefix holding a Delta Lake table is refused: its files include
	// versions the table no longer has.
	putBlob(t, cc, "delta/events/_delta_log/00000000000000000000.json", []byte(`{"commitInfo":{}}`+"\n"))
	putBlob(t, cc, "delta/events/part-0.ndjson", []byte(`{"id":"d1","k":"a"}`+"\n"))
	delta := runLoader(t, nil, "dry-run", base+"delta/", "--source-connection-string", az.ConnectionString())
	if delta.code == 0 || !strings.Contains(flat(delta.stderr), "Delta Lake table") || !strings.Contains(delta.stderr, "/exports/delta/events") {
		t.Errorf("dry-run of a prefix holding a Delta table: exit %d, want a refusal naming the table\n%s", delta.code, delta.stderr)
	}

	// Named itself, a Delta table loads its current version: its log
	// replayed from its checkpoint (testdata/delta, written by parquetjs);
	// the rows of a file it removed do not load.
	root := filepath.Join("..", "testdata", "delta", "events")
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		b, err := os.ReadFile(p)
		if err == nil {
			putBlob(t, cc, "lake/events/"+filepath.ToSlash(rel), b)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	res = runLoader(t, nil, append([]string{"import", base + "lake/events/", "--source-connection-string", az.ConnectionString()},
		tg.args("e2e", "delta", "--create-container", "--partition-key", "/tenant")...)...)
	if res.code != 0 {
		t.Fatalf("import of a Delta table: exit %d\n%s", res.code, res.stderr)
	}
	docs = readAll(t, tg, "e2e", "delta")
	var ids []string
	for id, d := range docs {
		ids = append(ids, id+"/"+fmt.Sprint(d["region"]))
	}
	sort.Strings(ids)
	if got := strings.Join(ids, " "); got != "eu0-0/eu eu0-1/eu eu0-2/eu us0-0/us us0-1/us us0-2/us us1-0/us us1-1/us us1-2/us" {
		t.Errorf("the Delta table's current rows: %s", got)
	}
}

func TestBlobKillResumeAndChangedBlob(t *testing.T) {
	t.Parallel()
	az := testenv.Azurite(t)
	tg := localTarget(t, emulator.Options{DefaultRU: 1000})
	cc := blobContainer(t, az, "inputs")
	want := map[string]string{}
	blobInput(t, cc, "big.ndjson", "", 600, want)
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "ckpt.json")
	conn := []string{"--source-connection-string", az.ConnectionString()}
	args := append([]string{"import", az.BlobEndpoint() + "/inputs/big.ndjson", "--checkpoint", ckpt, "--checkpoint-interval", "100ms"},
		tg.args("e2e", "resume", "--create-container", "--partition-key", "/tenant", "--ru", "1000")...)
	killWhen(t, ckpt, killAt{what: "progress"}, append(args, conn...)...)
	saved, err := os.ReadFile(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(saved), `"etag"`) {
		t.Errorf("the checkpoint has no ETag for the blob:\n%s", saved)
	}

	res := runLoader(t, nil, append([]string{"resume", ckpt, "--quiet", "--key", tg.key}, conn...)...)
	if res.code != 0 {
		t.Fatalf("resume: exit %d\n%s", res.code, res.stderr)
	}
	docs := readAll(t, tg, "e2e", "resume")
	for _, d := range docs {
		delete(d, "src")
	}
	checkLanded(t, docs, renameKeys(want))

	// The same checkpoint, mid-load, against a blob rewritten since.
	if err := os.WriteFile(ckpt, saved, 0o600); err != nil {
		t.Fatal(err)
	}
	putBlob(t, cc, "big.ndjson", []byte(`{"id":"other"}`+"\n"))
	res = runLoader(t, nil, append([]string{"resume", ckpt, "--quiet", "--key", tg.key}, conn...)...)
	if msg := flat(res.stderr); res.code == 0 || !strings.Contains(msg, "changed since the checkpoint") || !strings.Contains(msg, "ETag") {
		t.Errorf("resume over a changed blob: exit %d\n%s", res.code, res.stderr)
	}
}

// A key-sorted NDJSON blob is read at several places at once, as a local
// file is, cut without reading what lies before each cut; so is a CSV blob,
// its quoting followed in blocks read at once (quoted fields over two lines
// straddle the cuts). Killed twice and resumed, every good record lands
// once, and every bad line is dead-lettered once under its line in the
// blob (an NDJSON line counted only for the dead letter).
func TestSegmentedBlobKilledAndResumedLandsExactly(t *testing.T) {
	t.Parallel()
	az := testenv.Azurite(t)
	cc := blobContainer(t, az, "sorted")
	dir := t.TempDir()
	input, good, bad := sortedInput(t, dir, 4000, 500, 997, 13, "pk", 150)
	b, err := os.ReadFile(input)
	if err != nil {
		t.Fatal(err)
	}
	putBlob(t, cc, "export/sorted.ndjson", b)
	lineOf := map[string]int{}
	for i, l := range strings.Split(string(b), "\n") {
		lineOf[l] = i + 1
	}
	csv, csvLines := sortedCSV(2000, 250, 331, 150, good, &bad)
	putBlob(t, cc, "export/sorted.csv", csv)
	maps.Copy(lineOf, csvLines)
	data := filepath.Join(dir, "embedded")
	ckpt := filepath.Join(dir, "ckpt.json")
	dl := filepath.Join(dir, "dead.ndjson")
	flags := []string{"--checkpoint-interval", "20ms", "--checkpoint-every", "200", "--quiet", "--embedded-data", data,
		"--source-connection-string", az.ConnectionString()}
	importArgs := append([]string{"import", az.BlobEndpoint() + "/sorted/export/sorted.ndjson", az.BlobEndpoint() + "/sorted/export/sorted.csv", "--partition-key", "/pk",
		"--ru", "3000", "--segments", "4", "--checkpoint", ckpt, "--dead-letter", dl}, flags...)
	resumeArgs := append([]string{"resume", ckpt}, flags...)

	killEach(t, []killAt{{what: "progress"}, {what: "progress"}}, ckpt, importArgs, resumeArgs, func(st *checkpoint.State) {
		for _, in := range st.Inputs {
			if n := len(in.Segments); n < 4 {
				t.Fatalf("checkpoint has %d segments of %s, want 4 or more", n, in.Path)
			}
		}
	})
	st := finishExactly(t, ckpt, dl, resumeArgs, good, bad, func() map[string]map[string]any {
		s, err := emulator.Start(t.Context(), emulator.Options{Addr: "127.0.0.1:0", DataDir: data})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		return readAll(t, target{name: "embedded", endpoint: s.URL(), key: s.Key(), local: true}, "loader", "items")
	})
	for k, seg := range st.Inputs[0].Segments {
		if k > 0 && seg.Start.Base != seg.Start.Offset {
			t.Errorf("segment %d starts at byte %d with lines counted from %d: the cut counted the lines before it", k, seg.Start.Offset, seg.Start.Base)
		}
	}
	for _, d := range readDeadLetters(t, dl) {
		if want := lineOf[fmt.Sprint(d["raw"])]; d["line"] != float64(want) {
			t.Errorf("dead letter %v names line %v, want %d", d["raw"], d["line"], want)
		}
	}
}

// sortedCSV is a CSV of n records sorted by /pk (perKey a key), every
// fourth with a quoted field over two lines, padded to about pad bytes; a
// record every badEvery has no key (its cell empty), and is dead-lettered.
// The good ids go to good, and the bad rows to bad as the dead letter
// holds them (the row's JSON); lines maps each to the row's line.
func sortedCSV(n, perKey, badEvery, pad int, good map[string]bool, bad *[]string) ([]byte, map[string]int) {
	var b bytes.Buffer
	lines := map[string]int{}
	b.WriteString("id,pk,note\n")
	line := 2
	for i := range n {
		id := fmt.Sprintf("c%05d", i)
		pk := fmt.Sprintf("customer-%d", i/perKey)
		note, cell := strings.Repeat("y", pad), ""
		if i%4 == 0 {
			note = "a \"quoted\" note\nover two lines " + note
			cell = `"` + strings.ReplaceAll(note, `"`, `""`) + `"`
		} else {
			cell = note
		}
		if i%badEvery == 7 {
			fmt.Fprintf(&b, "%s,,%s\n", id, cell)
			j, _ := json.Marshal(note)
			raw := fmt.Sprintf(`{"id":%q,"note":%s}`, id, j)
			*bad = append(*bad, raw)
			lines[raw] = line
		} else {
			fmt.Fprintf(&b, "%s,%s,%s\n", id, pk, cell)
			good[id] = true
		}
		line += 1 + strings.Count(note, "\n")
	}
	return b.Bytes(), lines
}

func renameKeys(want map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range want {
		out[strings.TrimPrefix(k, "/")] = v
	}
	return out
}

func TestBlobErrorsAndSASNeverLeaks(t *testing.T) {
	t.Parallel()
	az := testenv.Azurite(t)
	tg := localTarget(t, emulatorOptions())
	cc := blobContainer(t, az, "sas")
	putBlob(t, cc, "data/a.ndjson", []byte(`{"id":"1","k":1}`+"\n{broken\n"+`{"id":"2","k":2}`+"\n"))
	// Parquet rows read through the cached random-access reader; they lack
	// /k, so they are dead-lettered, naming the blob.
	pq, _ := genParquet(t, "s", 3, 2)
	putBlob(t, cc, "data/p.parquet", pq)
	sasURL, err := cc.GetSASURL(sas.ContainerPermissions{Read: true, List: true}, time.Now().Add(time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(sasURL)
	query := u.RawQuery
	sig := u.Query().Get("sig")
	blobURL := az.BlobEndpoint() + "/sas/data/*.ndjson?" + query
	dir := t.TempDir()
	files := map[string]string{
		"report":     filepath.Join(dir, "report.json"),
		"checkpoint": filepath.Join(dir, "ckpt.json"),
		"dead":       filepath.Join(dir, "dead.ndjson"),
	}
	good := runLoader(t, nil, append([]string{"import", blobURL, az.BlobEndpoint() + "/sas/data/*.parquet?" + query, "--report", files["report"], "--checkpoint", files["checkpoint"],
		"--dead-letter", files["dead"]}, tg.args("e2e", "sas", "--create-container", "--partition-key", "/k")...)...)
	if good.code != 3 {
		t.Fatalf("import with a SAS: exit %d\n%s", good.code, good.stderr)
	}
	if n := len(readAll(t, tg, "e2e", "sas")); n != 2 {
		t.Errorf("%d documents landed, want 2", n)
	}

	// A SAS signed with the wrong key: 403. A blob that is not there: 404.
	wrong := strings.Replace(query, url.QueryEscape(sig), url.QueryEscape("AAAA"+sig[4:]), 1)
	forbidden := runLoader(t, nil, append([]string{"import", az.BlobEndpoint() + "/sas/data/a.ndjson?" + wrong},
		tg.args("e2e", "sas", "--checkpoint", filepath.Join(dir, "c2.json"))...)...)
	if forbidden.code != 2 || !strings.Contains(flat(forbidden.stderr), "denied (403") || !strings.Contains(forbidden.stderr, "/sas/data/a.ndjson") {
		t.Errorf("a bad SAS: exit %d\n%s", forbidden.code, forbidden.stderr)
	}
	missing := runLoader(t, nil, append([]string{"import", az.BlobEndpoint() + "/sas/data/nope.ndjson?" + query},
		tg.args("e2e", "sas", "--checkpoint", filepath.Join(dir, "c3.json"))...)...)
	if missing.code != 2 || !strings.Contains(flat(missing.stderr), "sas/data/nope.ndjson does not exist (404") {
		t.Errorf("a missing blob: exit %d\n%s", missing.code, missing.stderr)
	}
	viaConn := runLoader(t, nil, "dry-run", az.BlobEndpoint()+"/sas/data/", "--source-connection-string", az.ConnectionString())
	if viaConn.code != 0 {
		t.Errorf("dry-run with a connection string: exit %d\n%s", viaConn.code, viaConn.stderr)
	}

	outputs := map[string]string{"stderr": good.stderr + good.stdout, "403 stderr": forbidden.stderr,
		"404 stderr": missing.stderr, "connection-string stderr": viaConn.stderr + viaConn.stdout}
	for name, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		outputs[name] = string(b)
	}
	if !strings.Contains(outputs["dead"], "/sas/data/a.ndjson") || !strings.Contains(outputs["dead"], "/sas/data/p.parquet") {
		t.Errorf("the dead letter does not name the blob:\n%s", outputs["dead"])
	}
	for name, text := range outputs {
		for _, secret := range []string{sig, url.QueryEscape(sig), sig[4:], testenv.AzuriteKey, testenv.AzuriteKey[:20]} {
			if strings.Contains(text, secret) {
				t.Errorf("the %s contains a secret (%.8s…)", name, secret)
			}
		}
	}
}

func TestThreeLoadersShareOneBlobPrefix(t *testing.T) {
	t.Parallel()
	az, tg := sharedTarget(t)
	cc := blobContainer(t, az, "fleet")
	want := map[string]string{}
	blobInput(t, cc, "exports/a.ndjson", "a", 1000, want)
	blobInput(t, cc, "exports/b.ndjson", "b", 500, want)
	// A CSV blob is cut too: its quoting (fields over two lines, "" in
	// them) followed to its end by each loader before the shards start.
	var csv strings.Builder
	csv.WriteString("id,src,seq,tenant,note\n")
	for i := range 1500 {
		note := strings.Repeat("n", 100)
		if i%3 == 0 {
			note = "\"a \"\"quoted\"\" note\nover two lines " + note + "\""
		}
		fmt.Fprintf(&csv, "doc-c%d,c,%d,t%d,%s\n", i, i, i%7, note)
		doc := map[string]any{"id": fmt.Sprintf("doc-%d", i), "seq": float64(i), "tenant": fmt.Sprintf("t%d", i%7), "note": strings.Trim(strings.ReplaceAll(note, `""`, `"`), `"`)}
		want[fmt.Sprintf("c/%d", i)] = hashDoc(doc)
	}
	putBlob(t, cc, "exports/c.csv", []byte(csv.String()))
	var waits []func() (int, string)
	for p := 0; p < 3; p++ {
		// No local copies: every loader reads the same prefix.
		_, wait := startLoader(t, append([]string{"import", az.BlobEndpoint() + "/fleet/exports/",
			"--source-connection-string", az.ConnectionString(), "--shard-size", "60000"}, sharedArgs(tg, az)...)...)
		waits = append(waits, wait)
	}
	for i, wait := range waits {
		if code, stderr := wait(); code != 0 {
			t.Fatalf("loader %d: exit %d\n%s", i, code, stderr)
		}
	}
	docs := readAll(t, tg, "e2e", "shared")
	seen := map[string]bool{}
	for id, doc := range docs {
		key := fmt.Sprintf("%s/%d", doc["src"], int(doc["seq"].(float64)))
		if seen[key] {
			t.Errorf("record %s landed twice", key)
		}
		seen[key] = true
		if strings.HasPrefix(id, "doc-") {
			doc["id"] = "doc-" + strings.TrimPrefix(id, "doc-"+doc["src"].(string))
		} else {
			delete(doc, "id")
		}
		delete(doc, "src")
		if hashDoc(doc) != want[key] {
			t.Errorf("record %s: content differs", key)
		}
	}
	if len(docs) != len(want) {
		t.Errorf("%d documents landed, want %d", len(docs), len(want))
	}
	// The blobs were cut into byte ranges, aligned on lines and records by
	// reading them from storage: more shards than blobs.
	shards := shardBlobs(t, az)
	if len(shards) < 6 {
		t.Errorf("%d shard blobs for blobs of ~300 KB, ~150 KB and ~200 KB at --shard-size 60000", len(shards))
	}
	if n := len(slices.DeleteFunc(shards, func(name string) bool { return !strings.Contains(name, "/0002-") })); n < 3 {
		t.Errorf("the CSV blob was cut into %d shards, want 3 or more", n)
	}
}

// shardBlobs names the shards a shared load planned.
func shardBlobs(t *testing.T, az *testenv.AzuriteServer) []string {
	t.Helper()
	leases, err := container.NewClientFromConnectionString(az.ConnectionString(), "loader-leases", nil)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "shards/"
	var shards []string
	for pager := leases.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: &prefix}); pager.More(); {
		page, err := pager.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range page.Segment.BlobItems {
			shards = append(shards, *b.Name)
		}
	}
	return shards
}

// shardProgress returns how many shards a shared load planned and the rows
// their saved progress says were written.
func shardProgress(t *testing.T, az *testenv.AzuriteServer) (shards int, written int64) {
	t.Helper()
	leases, err := container.NewClientFromConnectionString(az.ConnectionString(), "loader-leases", nil)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "shards/"
	for pager := leases.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: &prefix}); pager.More(); {
		page, err := pager.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range page.Segment.BlobItems {
			shards++
			resp, err := leases.NewBlobClient(*item.Name).DownloadStream(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var p struct {
				Written int64 `json:"written"`
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || json.Unmarshal(body, &p) != nil {
				t.Fatalf("shard %s: %v %q", *item.Name, err, body)
			}
			written += p.Written
		}
	}
	return shards, written
}

func gzipBytes(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(data)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
