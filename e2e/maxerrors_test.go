package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/internal/emulator"
)

// --max-errors stops a load with the dead letters that tipped it listed
// and counted, and the limit is the load's: the printed resume keeps it
// (counting the earlier runs' dead letters) until a resume raises it.
// Every good record lands once; every bad one is listed once.
func TestMaxErrorsIsKeptAndItsDeadLettersListed(t *testing.T) {
	t.Parallel()
	tg := localTarget(t, emulator.Options{DefaultRU: 100000})
	_, env := freshEnv(t)
	dir := t.TempDir()
	in, want, bad := tenantRecords(t, dir, 3000, func(i int) string {
		if (i >= 10 && i < 25) || (i >= 2500 && i < 2505) {
			return cutShort(i)
		}
		return ""
	})
	ckpt, dl, rep := filepath.Join(dir, "ckpt.json"), filepath.Join(dir, "dead.ndjson"), filepath.Join(dir, "report.json")

	first := runIn(t, env, append([]string{"import", in, "--max-errors", "10", "--checkpoint", ckpt, "--dead-letter", dl,
		"--report", rep, "--read-ahead", "256"}, tg.args("e2e", "maxerr", "--create-container", "--partition-key", "/tenant")...)...)
	if first.code != 4 || !strings.Contains(first.stderr, "--max-errors 10") {
		t.Fatalf("import: exit %d, want 4\n%s", first.code, first.stderr)
	}
	listed := len(readDeadLetters(t, dl))
	if n := int(readReport(t, rep)["records_dead_lettered"].(float64)); listed <= 10 || n != listed {
		t.Fatalf("stopped with %d dead letters in the file and %d in the report; want the same, more than 10", listed, n)
	}
	if !strings.Contains(first.stderr, "give a higher --max-errors") {
		t.Errorf("the stop does not say the resume keeps the limit:\n%s", first.stderr)
	}

	// The resume it printed keeps the limit: the load already has more
	// than 10, so it stops again at the next bad record.
	again := runIn(t, env, "resume", ckpt, "--quiet", "--key", tg.key, "--report", rep)
	if again.code != 4 || !strings.Contains(again.stderr, "--max-errors 10") {
		t.Fatalf("resume: exit %d, want 4 (the import's limit)\n%s", again.code, again.stderr)
	}
	listed = len(readDeadLetters(t, dl))
	if n := int(readReport(t, rep)["records_dead_lettered"].(float64)); n != listed {
		t.Fatalf("resume: %d dead letters in the file, %d in the report", listed, n)
	}

	// Raised, it finishes: exactly the good records, each bad one listed once.
	last := runIn(t, env, "resume", ckpt, "--quiet", "--key", tg.key, "--report", rep, "--max-errors", "-1")
	if last.code != 3 {
		t.Fatalf("resume --max-errors -1: exit %d, want 3\n%s", last.code, last.stderr)
	}
	if n := len(readDeadLetters(t, dl)); n != bad {
		t.Errorf("%d dead letters in the file, want %d", n, bad)
	}
	if n := int(readReport(t, rep)["records_dead_lettered"].(float64)); n != bad {
		t.Errorf("the report counts %d dead letters, want %d", n, bad)
	}
	checkTenants(t, readAll(t, tg, "e2e", "maxerr"), want)
}

// tenantRecords writes n records with ids r0… over seven tenants into dir,
// record i replaced by badLine(i) unless that is "", and returns the input,
// what checkTenants wants and how many records are bad.
func tenantRecords(t *testing.T, dir string, n int, badLine func(i int) string) (path string, want map[string]string, bad int) {
	t.Helper()
	var b strings.Builder
	want = map[string]string{}
	for i := range n {
		if line := badLine(i); line != "" {
			b.WriteString(line + "\n")
			bad++
			continue
		}
		fmt.Fprintf(&b, "{\"id\":\"r%d\",\"tenant\":\"t%d\"}\n", i, i%7)
		want[fmt.Sprintf("r%d", i)] = fmt.Sprintf("t%d", i%7)
	}
	return writeFile(t, dir, "in.ndjson", []byte(b.String())), want, bad
}

// cutShort is record i of tenantRecords cut short: invalid JSON.
func cutShort(i int) string { return fmt.Sprintf(`{"id":"r%d","tenant":`, i) }

// noBadRecords is tenantRecords' badLine for an input without any.
func noBadRecords(int) string { return "" }

// checkTenants checks that docs are exactly want's ids, each with its
// tenant.
func checkTenants(t *testing.T, docs map[string]map[string]any, want map[string]string) {
	t.Helper()
	for id, doc := range docs {
		if w, ok := want[id]; !ok || doc["tenant"] != w {
			t.Errorf("document %s (tenant %v) landed, want tenant %q (wanted: %v)", id, doc["tenant"], w, ok)
		}
	}
	if len(docs) != len(want) {
		t.Errorf("%d documents landed, want %d", len(docs), len(want))
	}
}
