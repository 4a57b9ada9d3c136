package e2e

import (
	"strings"
	"testing"

	"github.com/cosmosloader/loader/internal/emulator"
)

// --create-container with less throughput than Cosmos DB provisions is a
// usage error naming the minimum, and creates nothing.
func TestCreateContainerBelowTheMinimumIsAUsageError(t *testing.T) {
	t.Parallel()
	tg := localTarget(t, emulator.Options{DefaultRU: 100000})
	_, env := freshEnv(t)
	in := writeFile(t, t.TempDir(), "in.ndjson", []byte(`{"id":"1","tenant":"t"}`+"\n"))
	res := runIn(t, env, append([]string{"import", in}, tg.args("e2e", "small", "--create-container", "--partition-key", "/tenant", "--ru", "300")...)...)
	if res.code != 2 || !strings.Contains(flat(res.stderr), "400 RU/s") {
		t.Errorf("--ru 300: exit %d, want 2 naming 400 RU/s\n%s", res.code, res.stderr)
	}
	if n := len(docsOrNone(t, tg, "e2e", "small")); n != 0 {
		t.Errorf("%d documents landed", n)
	}
}
