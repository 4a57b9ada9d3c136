package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/testenv"
)

// SIGHUP (a closed terminal) drains and saves like SIGTERM: exit 130 and
// the resume line.
func TestSIGHUPDrainsLikeSIGTERM(t *testing.T) {
	t.Parallel()
	tg, _, ckpt, want, args := slowLoad(t)
	_, env := freshEnv(t)
	args = append(args, "--checkpoint-interval", "100ms")
	cmd, wait := startIn(t, env, args...)
	waitForCheckpoint(t, ckpt)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	code, stderr := wait()
	if code != 130 || !strings.Contains(stderr, "loader resume "+ckpt) {
		t.Fatalf("SIGHUP: exit %d, want 130 and the resume line\n%s", code, stderr)
	}
	// Drained: what landed is what the checkpoint committed (or a little
	// more, replayed harmlessly), never less.
	st, err := checkpoint.Load(ckpt)
	if err != nil || st.Complete {
		t.Fatalf("checkpoint after SIGHUP: %v", err)
	}
	if n := int64(len(readAll(t, tg, "e2e", "sig"))); n < st.Counters.RecordsWritten || int(n) >= len(want) {
		t.Errorf("%d documents landed, the checkpoint committed %d of %d", n, st.Counters.RecordsWritten, len(want))
	}
}

// An output pipe that closes (`loader import … 2>&1 | head -1`) stops the
// load as SIGTERM does — drained, checkpoint saved, exit 130 — instead of
// killing it at its next line (SIGPIPE, 141).
func TestClosedOutputPipeDrainsLikeSIGTERM(t *testing.T) {
	t.Parallel()
	tg := localTarget(t, emulator.Options{DefaultRU: 100000})
	_, env := freshEnv(t)
	dir := t.TempDir()
	in, want := crashInput(t, dir, 500)
	ckpt := filepath.Join(dir, "ckpt.json")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // nobody reads: the loader's first line meets a closed pipe
	cmd := exec.Command(testenv.LoaderBinary(t), "import", in, "--checkpoint", ckpt, "--endpoint", tg.endpoint, "--key", tg.key,
		"--database", "e2e", "--container", "pipe", "--create-container", "--partition-key", "/tenant")
	cmd.Env, cmd.Stdout, cmd.Stderr = env, w, w
	err = cmd.Run()
	w.Close()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("with its output closed: %v (%v), want exit 130", err, cmd.ProcessState)
	}
	if st, err := checkpoint.Load(ckpt); err != nil || st.Complete {
		t.Fatalf("checkpoint after the closed pipe: %v", err)
	}
	if res := runIn(t, env, "resume", ckpt, "--quiet", "--key", tg.key); res.code != 0 {
		t.Fatalf("resume: exit %d\n%s", res.code, res.stderr)
	}
	checkLanded(t, readAll(t, tg, "e2e", "pipe"), want)
}
