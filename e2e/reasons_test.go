package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/internal/testenv"
)

// Issue 15.4: the sample file loaded into a container keyed on a field it
// lacks dead-letters every record; the summary and both reports say why,
// by reason, with the first example, and what likely fixes it.
func TestDeadLettersByReasonWithAHint(t *testing.T) {
	t.Parallel()
	_, env := freshEnv(t)
	dir := t.TempDir()
	report, html := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.html")
	// One record with the key first: with none among the first records,
	// the load would stop before creating the container (keys_test.go).
	sample, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "testdata", "sample", "people.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	input := writeFile(t, dir, "people.ndjson", append([]byte(`{"id":"first","pk":"p"}`+"\n"), sample...))
	res := runIn(t, env, "import", input, "--partition-key", "/pk", "--create-container", "--report", report, "--report-html", html)
	if res.code != 3 {
		t.Fatalf("exit %d, want 3\n%s", res.code, res.stderr)
	}
	hint := "2,000 records have no /pk: wrong --partition-key? The file's records have: id, tenant, name, email"
	for _, want := range []string{"missing_partition_key", "2,000  first at " + input + ":2", hint} {
		if !strings.Contains(flat(res.stderr), flat(want)) {
			t.Errorf("the summary lacks %q:\n%s", want, res.stderr)
		}
	}
	rep := readReport(t, report)
	by, _ := rep["dead_letters_by_reason"].([]any)
	if len(by) != 1 {
		t.Fatalf("dead_letters_by_reason %v, want one reason", rep["dead_letters_by_reason"])
	}
	r0 := by[0].(map[string]any)
	if r0["reason"] != "missing_partition_key" || r0["count"] != 2000.0 || r0["first"] != input+":2" {
		t.Errorf("dead_letters_by_reason[0] = %v", r0)
	}
	if h, _ := rep["dead_letter_hint"].(string); !strings.HasPrefix(h, hint) {
		t.Errorf("dead_letter_hint %q, want it to start %q", h, hint)
	}
	page := readText(t, html)
	for _, want := range []string{"Dead letters by reason", "missing_partition_key", "wrong --partition-key?"} {
		if !strings.Contains(page, want) {
			t.Errorf("the HTML report lacks %q", want)
		}
	}
}

func readText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
