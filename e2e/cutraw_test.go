package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/internal/emulator"
)

// A dead letter whose raw text was cut says so, and how long the record
// was: a line too long to load (3 MB) and one that is not JSON (100 KB).
func TestCutRawTextSaysItsLength(t *testing.T) {
	t.Parallel()
	tg := localTarget(t, emulator.Options{DefaultRU: 100000})
	_, env := freshEnv(t)
	dir := t.TempDir()
	long := `{"id":"long","tenant":"t","v":"` + strings.Repeat("z", 3<<20) + `"}`
	broken := `{"id":"broken","v":"` + strings.Repeat("y", 100000)
	in := writeFile(t, dir, "in.ndjson", []byte(long+"\n"+`{"id":"ok","tenant":"t"}`+"\n"+broken+"\n"))
	dl := filepath.Join(dir, "dead.ndjson")
	res := runIn(t, env, append([]string{"import", in, "--dead-letter", dl}, tg.args("e2e", "cut", "--create-container", "--partition-key", "/tenant")...)...)
	if res.code != 3 {
		t.Fatalf("exit %d, want 3\n%s", res.code, res.stderr)
	}
	lengths := map[float64]int{float64(len(long)): 0, float64(len(broken)): 0}
	for _, d := range readDeadLetters(t, dl) {
		raw, _ := d["raw"].(string)
		if d["truncated"] != true || len(raw) != 64<<10 {
			t.Errorf("dead letter at line %v: truncated %v, %d bytes of raw text; want a cut to 64 KiB, marked", d["line"], d["truncated"], len(raw))
		}
		n, _ := d["raw_length"].(float64)
		if _, ok := lengths[n]; !ok {
			t.Errorf("dead letter at line %v: raw_length %v, want the record's length (%d or %d)", d["line"], d["raw_length"], len(long), len(broken))
		}
		lengths[n]++
	}
	for n, c := range lengths {
		if c != 1 {
			t.Errorf("%d dead letters of %.0f bytes, want 1", c, n)
		}
	}
}
