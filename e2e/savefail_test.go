package e2e

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/testenv"
)

// A save that fails (here the dead-letter file cannot grow: a full disk
// gives ENOSPC where this gives EFBIG) is never followed by "Checkpoint
// saved"; the checkpoint saved before it is intact, and resuming from it
// once there is room lands every record once.
func TestFailedSaveIsNotCalledSaved(t *testing.T) {
	t.Parallel()
	tg := localTarget(t, emulator.Options{DefaultRU: 100000})
	_, env := freshEnv(t)
	dir := t.TempDir()
	in, want, bad := tenantRecords(t, dir, 400, func(i int) string {
		if i%2 == 0 {
			return cutShort(i) + `"` + strings.Repeat("x", 3000) // a dead letter of 3 KB
		}
		return ""
	})
	ckpt, dl := filepath.Join(dir, "ckpt.json"), filepath.Join(dir, "dead.ndjson")
	args := append([]string{"import", in, "--checkpoint", ckpt, "--dead-letter", dl},
		tg.args("e2e", "full", "--create-container", "--partition-key", "/tenant")...)
	// No file of the loader's may grow past 64 KiB: the checkpoint fits,
	// the dead letters do not.
	cmd := exec.Command("sh", append([]string{"-c", `ulimit -f 128 && exec "$0" "$@"`, testenv.LoaderBinary(t)}, args...)...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 4 {
		t.Fatalf("with the dead letters unable to grow: %v, want exit 4\n%s", err, out)
	}
	if strings.Contains(string(out), "Checkpoint saved") || !strings.Contains(string(out), "could not be saved") ||
		!strings.Contains(string(out), "loader resume "+ckpt) {
		t.Errorf("the stop message:\n%s", out)
	}

	res := runIn(t, env, "resume", ckpt, "--quiet", "--key", tg.key)
	if res.code != 3 {
		t.Fatalf("resume: exit %d, want 3\n%s", res.code, res.stderr)
	}
	if n := len(readDeadLetters(t, dl)); n != bad {
		t.Errorf("%d dead letters, want %d", n, bad)
	}
	checkTenants(t, readAll(t, tg, "e2e", "full"), want)
}
