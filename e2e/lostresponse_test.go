package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/internal/emulator"
)

// A lost response: the server applies the write, then the connection drops
// before the reply. The loader cannot tell it from a write that never
// arrived, so it resends; the result must still be exact. Upsert lands
// each item once; in create mode the resend meets 409 and counts as
// skipped-existing, never dead-lettered, and the counts add up.
func TestLostResponseIsRetriedExactly(t *testing.T) {
	t.Parallel()
	const n = 400
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "{\"id\":\"r%04d\",\"pk\":\"p%d\",\"v\":%d}\n", i, i%7, i)
	}
	for _, mode := range []string{"upsert", "create"} {
		t.Run(mode, func(t *testing.T) {
			tg := localTarget(t, emulator.Options{DefaultRU: 100000, DropAfterApplyRate: 0.15})
			dir := t.TempDir()
			input := writeFile(t, dir, "in.ndjson", []byte(b.String()))
			report := filepath.Join(dir, "r.json")
			dl := filepath.Join(dir, "dl.ndjson")
			res := runLoader(t, nil, append([]string{"import", input, "--report", report, "--dead-letter", dl,
				"--checkpoint", filepath.Join(dir, "ckpt.json")},
				// Point writes: one lost reply, one resent record.
				tg.args("e2e", "lost", "--create-container", "--partition-key", "/pk", "--mode", mode, "--batch", "off")...)...)
			if res.code != 0 {
				t.Fatalf("exit %d, want 0\n%s", res.code, res.stderr)
			}
			rep := readReport(t, report)
			written, skipped := rep["records_written"].(float64), rep["records_skipped_existing"].(float64)
			if rep["records_dead_lettered"].(float64) != 0 || len(readDeadLetters(t, dl)) != 0 {
				t.Errorf("dead-lettered %v (file %d lines), want none", rep["records_dead_lettered"], len(readDeadLetters(t, dl)))
			}
			if written+skipped != n || rep["records_read"].(float64) != n {
				t.Errorf("read %v written %v skipped %v: the counts do not add up to %d", rep["records_read"], written, skipped, n)
			}
			// The fault fired: some writes were sent again, counted as
			// connection retries.
			if sent := rep["requests_sent"].(float64); sent <= n {
				t.Errorf("requests_sent %v: no write was resent, the fault never fired", sent)
			}
			if rt, _ := rep["retries"].(map[string]any); rt == nil || !(rt["connection"].(float64) > 0) {
				t.Errorf("retries %v, want connection retries", rep["retries"])
			}
			switch mode {
			case "upsert":
				if skipped != 0 {
					t.Errorf("upsert skipped %v records", skipped)
				}
			case "create":
				// Each lost create is applied, and its resend finds it.
				if skipped == 0 {
					t.Errorf("create mode skipped none: the resent creates did not meet 409")
				}
			}
			docs := readAll(t, tg, "e2e", "lost")
			if len(docs) != n {
				t.Fatalf("%d documents, want %d", len(docs), n)
			}
			for i := range n {
				d := docs[fmt.Sprintf("r%04d", i)]
				if d == nil || d["v"] != float64(i) {
					t.Fatalf("r%04d: %v", i, d)
				}
			}
		})
	}
}
