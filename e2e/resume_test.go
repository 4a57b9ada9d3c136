package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/loader/readplan"
)

// startLoader runs the loader in the background with no account in the
// environment; wait returns its exit code and stderr.
func startLoader(t *testing.T, args ...string) (cmd *exec.Cmd, wait func() (int, string)) {
	t.Helper()
	return startIn(t, append(os.Environ(), "COSMOS_ENDPOINT=", "COSMOS_KEY=", "COSMOS_CONNECTION_STRING="), args...)
}

// slowRecords is slowLoad's size: paced at 1,000 RU/s it takes a few
// seconds, so a test can interrupt it once a checkpoint holds progress.
const slowRecords = 600

// slowLoad sets up a load of slowRecords paced at 1,000 RU/s.
func slowLoad(t *testing.T) (tg target, input, ckpt string, want map[string]string, args []string) {
	tg = localTarget(t, emulator.Options{DefaultRU: 1000})
	dir := t.TempDir()
	input, want = crashInput(t, dir, slowRecords)
	ckpt = filepath.Join(dir, "ckpt.json")
	args = append([]string{"import", input, "--checkpoint", ckpt},
		tg.args("e2e", "sig", "--create-container", "--partition-key", "/tenant", "--ru", "1000")...)
	return tg, input, ckpt, want, args
}

func waitForCheckpoint(t *testing.T, ckpt string) {
	t.Helper()
	waitFor(t, "a checkpoint with progress", func() bool {
		st, err := checkpoint.Load(ckpt)
		return err == nil && st.Counters.RecordsWritten > 0
	})
}

func TestSIGINTDrainsSavesAndResumes(t *testing.T) {
	t.Parallel()
	tg, _, ckpt, want, args := slowLoad(t)
	cmd, wait := startLoader(t, append(args, "--checkpoint-interval", "200ms")...)
	waitForCheckpoint(t, ckpt)
	_ = cmd.Process.Signal(syscall.SIGINT)
	code, stderr := wait()
	if code != 130 {
		t.Fatalf("exit %d after SIGINT, want 130\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "loader resume "+ckpt) {
		t.Errorf("stderr does not print the resume command:\n%s", stderr)
	}
	st, err := checkpoint.Load(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	if st.Complete || st.Inputs[0].Committed.Offset == 0 {
		t.Fatalf("checkpoint after SIGINT: complete=%v committed=%+v", st.Complete, st.Inputs[0].Committed)
	}
	// The calibrated cost model is saved, so the resumed run starts calibrated.
	var cal struct {
		Observations int64 `json:"observations"`
	}
	if err := json.Unmarshal(st.Calibration, &cal); err != nil || cal.Observations == 0 {
		t.Errorf("the checkpoint holds no calibration: %s (%v)", st.Calibration, err)
	}
	// The drain acknowledged everything in flight. Batches group a key's
	// records ahead of other keys', so some may have landed beyond the
	// low-water mark (a resume replays them harmlessly), but never fewer
	// than the checkpoint committed, nor more than one read-ahead beyond.
	landed := readAll(t, tg, "e2e", "sig")
	if n := int64(len(landed)); n < st.Counters.RecordsWritten || n > st.Counters.RecordsWritten+int64(readplan.DefaultReadAhead(1)) {
		t.Errorf("after a clean interrupt the container holds %d documents but the checkpoint committed %d", n, st.Counters.RecordsWritten)
	}

	// import refuses to start over silently and explains resume and --restart.
	res := runLoader(t, nil, args...)
	if res.code != 2 || !strings.Contains(flat(res.stderr), "loader resume") || !strings.Contains(res.stderr, "--restart") {
		t.Errorf("import over an unfinished checkpoint: exit %d\n%s", res.code, res.stderr)
	}

	res = runLoader(t, nil, "resume", ckpt, "--endpoint", tg.endpoint, "--key", tg.key, "--quiet")
	if res.code != 0 {
		t.Fatalf("resume: exit %d\n%s", res.code, res.stderr)
	}
	checkLanded(t, readAll(t, tg, "e2e", "sig"), want)
}

func TestSecondSIGINTExitsAtOnceWithAValidCheckpoint(t *testing.T) {
	t.Parallel()
	_, _, ckpt, _, args := slowLoad(t)
	// A long drain timeout: only the second signal can make it exit fast.
	cmd, wait := startLoader(t, append(args, "--checkpoint-interval", "50ms", "--drain-timeout", "1m")...)
	waitForCheckpoint(t, ckpt)
	_ = cmd.Process.Signal(syscall.SIGINT)
	time.Sleep(20 * time.Millisecond)
	_ = cmd.Process.Signal(syscall.SIGINT)
	code, stderr := wait()
	if code != 130 {
		t.Fatalf("exit %d, want 130\n%s", code, stderr)
	}
	if _, err := checkpoint.Load(ckpt); err != nil {
		t.Fatalf("checkpoint after a second signal: %v", err)
	}
}

// interrupted runs slowLoad's import with env (nil: startLoader's) and
// stops it with sig once a checkpoint is saved: it must exit 130.
func interrupted(t *testing.T, env []string, sig os.Signal) (tg target, input, ckpt string) {
	t.Helper()
	tg, input, ckpt, _, args := slowLoad(t)
	args = append(args, "--checkpoint-interval", "100ms")
	var (
		cmd  *exec.Cmd
		wait func() (int, string)
	)
	if env == nil {
		cmd, wait = startLoader(t, args...)
	} else {
		cmd, wait = startIn(t, env, args...)
	}
	waitForCheckpoint(t, ckpt)
	_ = cmd.Process.Signal(sig)
	if code, stderr := wait(); code != 130 {
		t.Fatalf("exit %d after %v, want 130\n%s", code, sig, stderr)
	}
	return tg, input, ckpt
}

func TestResumeRefuses(t *testing.T) {
	t.Parallel()
	tg, input, ckpt := interrupted(t, nil, syscall.SIGTERM)
	good, err := os.ReadFile(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	resume := func() result {
		return runLoader(t, nil, "resume", ckpt, "--endpoint", tg.endpoint, "--key", tg.key, "--quiet")
	}
	before := tg.srv.Stats().Total.Requests

	t.Run("truncated checkpoint", func(t *testing.T) {
		writeFile(t, filepath.Dir(ckpt), filepath.Base(ckpt), good[:len(good)/2])
		res := resume()
		if res.code != 2 || !strings.Contains(res.stderr, "truncated") {
			t.Errorf("exit %d: %s", res.code, res.stderr)
		}
	})
	t.Run("unknown version", func(t *testing.T) {
		writeFile(t, filepath.Dir(ckpt), filepath.Base(ckpt), withVersion(t, good, 99))
		res := resume()
		if res.code != 2 || !strings.Contains(flat(res.stderr), "version 99") {
			t.Errorf("exit %d: %s", res.code, res.stderr)
		}
	})
	t.Run("changed input", func(t *testing.T) {
		writeFile(t, filepath.Dir(ckpt), filepath.Base(ckpt), good)
		f, err := os.OpenFile(input, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("{\"id\":\"late\",\"tenant\":\"x\",\"seq\":-1}\n")
		f.Close()
		res := resume()
		if res.code != 2 || !strings.Contains(res.stderr, input) || !strings.Contains(res.stderr, "size") {
			t.Errorf("exit %d: %s", res.code, res.stderr)
		}
	})
	if after := tg.srv.Stats().Total.Requests; after != before {
		t.Errorf("a refused resume wrote: %d item requests", after-before)
	}
}

// withVersion rewrites a checkpoint to claim another format version, with
// a checksum that is valid for it: a file from a newer loader.
func withVersion(t *testing.T, file []byte, version int) []byte {
	var env struct {
		State json.RawMessage `json:"state"`
	}
	if err := json.Unmarshal(file, &env); err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, env.State); err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	h.Write([]byte("loader checkpoint " + itoa(version) + "\n"))
	h.Write(compact.Bytes())
	out, _ := json.Marshal(map[string]any{
		"version": version, "checksum": "sha256:" + hex.EncodeToString(h.Sum(nil)), "state": json.RawMessage(compact.Bytes()),
	})
	return out
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }
