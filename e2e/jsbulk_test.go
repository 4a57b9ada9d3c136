package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/testenv"
)

// The official JavaScript SDK's bulk API (@azure/cosmos
// executeBulkOperations, from the committed npm lock) against `loader
// emulator`: its range batches run, every document reads back as written.
func TestJavaScriptSDKBulkAgainstLoaderEmulator(t *testing.T) {
	t.Parallel()
	testenv.NodePackage(t, "@azure/cosmos")
	endpoint := startStandalone(t, "--partitions", "4", "--ru", "40000")
	const count, keys = 400, 97
	out := testenv.RunNode(t, nil, "e2e/testdata/jsbulk.mjs", endpoint, emulator.WellKnownKey,
		"jsdb", "items", fmt.Sprint(count), fmt.Sprint(keys), "Create")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var summary struct {
		Written  int            `json:"written"`
		Statuses map[string]int `json:"statuses"`
		Charge   float64        `json:"charge"`
		Read     int            `json:"read"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &summary); err != nil {
		t.Fatalf("summary %q: %v", out, err)
	}
	if summary.Written != count || summary.Statuses["201"] != count || summary.Read != count || summary.Charge <= 0 {
		t.Errorf("the SDK's bulk load: %+v", summary)
	}

	// Read back independently of the SDK that wrote them.
	docs := readAll(t, target{endpoint: endpoint, key: emulator.WellKnownKey}, "jsdb", "items")
	if len(docs) != count {
		t.Errorf("%d documents, want %d", len(docs), count)
	}
	for i := 0; i < count; i++ {
		d := docs[fmt.Sprint("doc-", i)]
		if d == nil || d["pk"] != fmt.Sprint("key-", i%keys) || d["n"] != float64(i) {
			t.Errorf("doc-%d read back as %v", i, d)
		}
	}

	// Batched by range: a handful of requests for the writes (and the
	// read-back's query pages), every partition written to.
	var st emulator.Stats
	getJSON(t, endpoint+"_emulator/stats", &st)
	c := st.Containers[0]
	if c.Requests >= count/4 {
		t.Errorf("%d requests for %d documents: not batched", c.Requests, count)
	}
	for _, p := range c.Partitions {
		if p.Items == 0 {
			t.Errorf("partition %s holds no document", p.ID)
		}
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("decode %s: %v", url, err)
	}
}
