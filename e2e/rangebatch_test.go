package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/testenv"
)

// uniqueInput writes n records, each of its own tenant (partition key), in
// shuffled order — no two share a key, so only range batches group them —
// and returns the documents expected by id.
func uniqueInput(t *testing.T, dir string, n int) (path string, want map[string]string) {
	var b bytes.Buffer
	want = map[string]string{}
	rng := rand.New(rand.NewSource(7))
	for _, i := range rng.Perm(n) {
		doc := map[string]any{
			"id":     fmt.Sprintf("doc-%06d", i),
			"seq":    float64(i),
			"tenant": fmt.Sprintf("t%06d", i),
			"pad":    strings.Repeat("x", 100+rng.Intn(200)),
		}
		line, _ := json.Marshal(doc)
		b.Write(line)
		b.WriteByte('\n')
		want[doc["id"].(string)] = hashDoc(doc)
	}
	return writeFile(t, dir, "unique.ndjson", b.Bytes()), want
}

// Range batches under SIGKILL: the real binary against `loader emulator`,
// killed at random moments and resumed, lands every record exactly once —
// acknowledgements per record, whatever batch carried it — and sends far
// fewer requests than records, though no two records share a key.
func TestRangeBatchesKillAndResumeLandExactly(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("crash test: not in -short")
	}
	dir := t.TempDir()
	input, want := uniqueInput(t, dir, crashRecords)
	tg := crashStandalone(t, dir, input, "ranges", "8000", 10, "--batch", "auto")

	var st emulator.Stats
	getJSON(t, tg.endpoint+"_emulator/stats", &st)
	for _, c := range st.Containers {
		// Paced at 8,000 RU/s over 4 partitions, a batch holds a few
		// records; point writes would be one request a record at least.
		if c.Container == "ranges" && c.Requests > crashRecords/2 {
			t.Errorf("%d requests for %d records of unique keys: not sent in range batches", c.Requests, crashRecords)
		}
	}
	checkLandedByID(t, readAll(t, tg, "crash", "ranges"), want)
}

// checkLandedByID asserts the container holds exactly want's documents,
// by id, each with its content.
func checkLandedByID(t *testing.T, docs map[string]map[string]any, want map[string]string) {
	t.Helper()
	if len(docs) != len(want) {
		t.Errorf("%d documents landed, want %d", len(docs), len(want))
	}
	for id, doc := range docs {
		if hashDoc(doc) != want[id] {
			t.Errorf("%s: content differs, or not in the input", id)
		}
	}
}

// @vercel/cosmosdb-server executes range batches (each operation by its
// own key, always answering 200): the probe finds them, and a shuffled
// file of unique keys lands whole in a few requests.
func TestRangeBatchesLandInCosmosDBServer(t *testing.T) {
	ep, key := testenv.CosmosDBServer(t)
	if ep == "" {
		t.Skip("cosmosdb-server not available")
	}
	tg := target{name: "cosmosdb-server", endpoint: ep, key: key}
	dir := t.TempDir()
	const n = 3000
	input, want := uniqueInput(t, dir, n)
	rep := filepath.Join(dir, "r.json")
	res := runLoader(t, nil, append([]string{"import", input, "--report", rep, "--checkpoint", filepath.Join(dir, "c.json")},
		tg.args("e2e", "ranges", "--create-container", "--partition-key", "/tenant")...)...)
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	if strings.Contains(res.stderr, "not supported") || strings.Contains(res.stderr, "not available") {
		t.Errorf("the server's range batches were refused:\n%s", res.stderr)
	}
	r := readReport(t, rep)
	t.Logf("%v requests, %v records per request", r["requests_sent"], r["records_per_request"])
	if r["records_written"] != float64(n) || r["batch"] != "auto" {
		t.Errorf("report: written %v, batch %v", r["records_written"], r["batch"])
	}
	// Until the probe answers, records go as point writes.
	if sent, _ := r["requests_sent"].(float64); sent > n/4 {
		t.Errorf("%v requests for %d records: not sent in range batches", sent, n)
	}
	docs := readAll(t, tg, "e2e", "ranges")
	checkLandedByID(t, docs, want)
}
