package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/internal/emulator"
)

// A create-mode load over records already there splits each batch about
// once per record (every 207 names the first existing one), so a batch of
// 100 becomes a chain of about 100 requests. With faults injected along
// it — dropped connections before and after the write is applied, 503s,
// 408s — the chain meets more faults than one request may. Each request
// counts its own: the load finishes, every record counted as existing,
// nothing dead-lettered. (A count kept per chain stopped such loads with
// exit 4, "gave up after 10 attempts".)
func TestSplitBatchChainWithFaultsFinishes(t *testing.T) {
	t.Parallel()
	const n, keys = 600, 3
	export, _ := startEmulatorProcess(t, nil, "--ru", "100000",
		"--drop-after-apply", "0.05", "--drop", "0.03", "--fail-503", "0.03", "--fail-408", "0.02")
	tg := targetOf(t, export)
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "{\"id\":\"r%04d\",\"pk\":\"p%d\",\"v\":%d}\n", i, i%keys, i)
	}
	dir := t.TempDir()
	input := writeFile(t, dir, "in.ndjson", []byte(b.String()))
	load := func(name, mode string) map[string]any {
		t.Helper()
		report := filepath.Join(dir, name+".json")
		res := runLoader(t, nil, append([]string{"import", input, "--report", report,
			"--dead-letter", filepath.Join(dir, name+"-dl.ndjson"), "--checkpoint", filepath.Join(dir, name+"-ckpt.json")},
			tg.args("e2e", "chain", "--create-container", "--partition-key", "/pk", "--ru", "100000",
				"--mode", mode, "--batch", "auto")...)...)
		if res.code != 0 {
			t.Fatalf("%s load: exit %d, want 0\n%s", mode, res.code, res.stderr)
		}
		return readReport(t, report)
	}
	load("seed", "upsert")
	rep := load("create", "create")
	if rep["records_skipped_existing"] != float64(n) || rep["records_written"] != float64(0) || rep["records_dead_lettered"] != float64(0) {
		t.Errorf("create over existing records: written %v, skipped %v, dead-lettered %v; want 0, %d, 0",
			rep["records_written"], rep["records_skipped_existing"], rep["records_dead_lettered"], n)
	}
	// The faults fired along the chains: more resends than any one
	// request may make.
	rt, _ := rep["retries"].(map[string]any)
	faults := 0.0
	for _, k := range []string{"timeout", "unavailable", "connection"} {
		f, _ := rt[k].(float64)
		faults += f
	}
	if faults <= 10 {
		t.Errorf("retries %v: %v resent after faults, want more than one request's 10", rt, faults)
	}
	// The batches split into chains: about a request per record.
	if sent, _ := rep["requests_sent"].(float64); sent < n/2 {
		t.Errorf("requests_sent %v for %d records: the batches did not split into chains", sent, n)
	}
	// Counted by the target: a query through the same faults would meet
	// them (the SDK does not resend a query page answered 503 or 408).
	var st emulator.Stats
	getJSON(t, tg.endpoint+"_emulator/stats", &st)
	items := -1
	for _, c := range st.Containers {
		if c.Database == "e2e" && c.Container == "chain" {
			items = c.Items
		}
	}
	if items != n {
		t.Errorf("%d documents in e2e/chain, want %d", items, n)
	}
}

// targetOf is the emulator process whose export line is export.
func targetOf(t *testing.T, export string) target {
	t.Helper()
	var tg target
	for _, f := range strings.Fields(export) {
		if v, ok := strings.CutPrefix(f, "COSMOS_ENDPOINT="); ok {
			tg.endpoint = v
		}
		if v, ok := strings.CutPrefix(f, "COSMOS_KEY="); ok {
			tg.key = v
		}
	}
	if tg.endpoint == "" || tg.key == "" {
		t.Fatalf("no endpoint and key in %q", export)
	}
	tg.name, tg.local = "emulator process", true
	return tg
}
