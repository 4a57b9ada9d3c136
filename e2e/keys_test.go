package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cosmosloader/loader/internal/emulator"
)

// ordersFile writes n orders keyed by customerId, ids prefixed.
func ordersFile(t *testing.T, dir, name, prefix string, n int, customerField string) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `{"id":"%s%d","%s":"c%d","total":%d}`+"\n", prefix, i, customerField, i%7, i)
	}
	return writeFile(t, dir, name, []byte(b.String()))
}

func reportWritten(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		RecordsWritten int64 `json:"records_written"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r.RecordsWritten
}

// A second import into a container of the built-in target reads its
// partition key from the container, as on Azure: --partition-key is only
// needed to create it (issue 41, point 3).
func TestSecondImportIntoAnExistingLocalContainer(t *testing.T) {
	_, env := freshEnv(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	first := ordersFile(t, dir, "orders1.ndjson", "a", 20, "customerId")
	second := ordersFile(t, dir, "orders2.ndjson", "b", 30, "customerId")
	common := []string{"--embedded-data", data, "--database", "shop", "--container", "orders", "-q"}

	res := runIn(t, env, append([]string{"import", first, "--partition-key", "/customerId", "--report", filepath.Join(dir, "r1.json")}, common...)...)
	if res.code != 0 {
		t.Fatalf("first import: exit %d\n%s", res.code, res.stderr)
	}
	res = runIn(t, env, append([]string{"import", second, "--report", filepath.Join(dir, "r2.json")}, common...)...)
	if res.code != 0 {
		t.Fatalf("second import without --partition-key: exit %d\n%s", res.code, res.stderr)
	}
	if n := reportWritten(t, filepath.Join(dir, "r2.json")); n != 30 {
		t.Errorf("second import wrote %d records, want 30", n)
	}
	// A key that contradicts the container's is still refused.
	res = runIn(t, env, append([]string{"import", second, "--partition-key", "/id", "--restart"}, common...)...)
	if res.code != 2 || !strings.Contains(flat(res.stderr), "does not match the container's partition key /customerId") {
		t.Errorf("a contradicting --partition-key: exit %d\n%s", res.code, res.stderr)
	}
}

// A partition key none of the first records has stops the load before
// --create-container creates anything, and before the first write to an
// existing container, naming the fields the records have (point 4).
func TestWrongPartitionKeyStopsBeforeAnythingIsCreated(t *testing.T) {
	tg := localTarget(t, emulator.Options{DefaultRU: 100000})
	dir := t.TempDir()
	in := ordersFile(t, dir, "orders.ndjson", "o", 50, "customerId")

	res := runLoader(t, nil, append([]string{"import", in}, tg.args("shop", "typo", "--create-container", "--partition-key", "/customerid")...)...)
	if res.code != 2 || !strings.Contains(flat(res.stderr), "none of the first 50 records has the partition key /customerid: the container was not created") ||
		!strings.Contains(flat(res.stderr), "the records have: id, customerId, total") {
		t.Errorf("--create-container with a wrong key: exit %d\n%s", res.code, res.stderr)
	}
	if docsOrNone(t, tg, "shop", "typo") != nil {
		t.Error("the container was created")
	}

	// An existing container keyed on a field the records lack.
	other := ordersFile(t, dir, "other.ndjson", "x", 5, "tenant")
	if res := runLoader(t, nil, append([]string{"import", other}, tg.args("shop", "bycustomer", "--create-container", "--partition-key", "/tenant")...)...); res.code != 0 {
		t.Fatalf("setup: exit %d\n%s", res.code, res.stderr)
	}
	res = runLoader(t, nil, append([]string{"import", in}, tg.args("shop", "bycustomer")...)...)
	if res.code != 2 || !strings.Contains(flat(res.stderr), "none of the first 50 records has the container's partition key /tenant: nothing was written") ||
		!strings.Contains(flat(res.stderr), "--create-container --partition-key") {
		t.Errorf("an existing container: exit %d\n%s", res.code, res.stderr)
	}
	if n := len(readAll(t, tg, "shop", "bycustomer")); n != 5 {
		t.Errorf("%d documents in the container, want the 5 of the setup", n)
	}
}

// A --max-errors stop whose dead letters all lack the key, most of the
// records (the first few had it), says what to fix, not to resume.
func TestMaxErrorsStopOfOneFixableReason(t *testing.T) {
	tg := localTarget(t, emulator.Options{DefaultRU: 100000})
	dir := t.TempDir()
	good := ordersFile(t, dir, "good.ndjson", "g", 5, "customerId")
	bad := ordersFile(t, dir, "bad.ndjson", "b", 200, "customer")
	res := runLoader(t, nil, append([]string{"import", good, bad, "--max-errors", "10", "--checkpoint", filepath.Join(dir, "c.json")},
		tg.args("shop", "mixed", "--create-container", "--partition-key", "/customerId")...)...)
	if res.code != 4 {
		t.Fatalf("exit %d, want 4\n%s", res.code, res.stderr)
	}
	if !strings.Contains(flat(res.stderr), "Every record dead-lettered was refused for one reason, which resuming would not change") ||
		!strings.Contains(flat(res.stderr), "--restart") || strings.Contains(flat(res.stderr), "loader resume") {
		t.Errorf("stderr:\n%s", res.stderr)
	}
}

// The HTML report of an interrupted load carries the command that
// continues it, as stderr does; the resumed run's report says of every
// card whether it is the whole load's or this run's (point 8).
func TestInterruptedHTMLReportCarriesTheResumeCommand(t *testing.T) {
	_, env := freshEnv(t)
	tg, _, ckpt, _, args := slowLoad(t)
	html := filepath.Join(t.TempDir(), "r.html")
	cmd, wait := startIn(t, env, append(args, "--report-html", html, "--checkpoint-interval", "100ms")...)
	waitForCheckpoint(t, ckpt)
	_ = cmd.Process.Signal(syscall.SIGINT)
	if code, stderr := wait(); code != 130 || !strings.Contains(stderr, "loader resume "+ckpt) {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if page := readText(t, html); !strings.Contains(page, "Continue with: <code>loader resume "+ckpt+"</code>") {
		t.Errorf("the interrupted report has no resume command")
	}
	res := runIn(t, env, "resume", ckpt, "--endpoint", tg.endpoint, "--key", tg.key, "--report-html", html, "-q")
	if res.code != 0 {
		t.Fatalf("resume: exit %d\n%s", res.code, res.stderr)
	}
	page := readText(t, html)
	cards, whole := strings.Count(page, `<div class="figure`), strings.Count(page, "· whole load</small>")
	if cards == 0 || whole+1 != cards || strings.Count(page, "· this run</small>") != 1 || strings.Contains(page, "Continue with") {
		t.Errorf("resumed report: %d cards, %d of the whole load", cards, whole)
	}
}
