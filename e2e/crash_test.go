package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/testenv"
)

// crashInput writes n NDJSON records, every seventh without an id (so
// generated ids are exercised), and returns the documents expected by
// content hash; generated ids are unknown up front, so those are keyed
// by their "seq" field.
func crashInput(t *testing.T, dir string, n int) (path string, want map[string]string) {
	return tenantInput(t, dir, "crash.ndjson", n, func(rng *rand.Rand) string { return fmt.Sprintf("t%02d", rng.Intn(50)) })
}

// tenantInput is crashInput with each record's tenant (partition key)
// drawn by tenant.
func tenantInput(t *testing.T, dir, name string, n int, tenant func(*rand.Rand) string) (path string, want map[string]string) {
	var b bytes.Buffer
	want = map[string]string{}
	rng := rand.New(rand.NewSource(42))
	for i := 0; i < n; i++ {
		doc := map[string]any{
			"seq":    float64(i),
			"tenant": tenant(rng),
			"name":   fmt.Sprintf("customer %d", i),
			"score":  float64(rng.Intn(1000)),
			"tags":   []any{"a", "b", strconv.Itoa(i % 13)},
			"pad":    strings.Repeat("x", 100+rng.Intn(200)),
		}
		if i%7 != 0 {
			doc["id"] = fmt.Sprintf("doc-%06d", i)
		}
		line, _ := json.Marshal(doc)
		b.Write(line)
		b.WriteByte('\n')
		want[strconv.Itoa(i)] = hashDoc(doc)
	}
	return writeFile(t, dir, name, b.Bytes()), want
}

// checkLanded asserts the container holds exactly the input's records: same
// count, same content, each once, and generated ids that are UUIDs.
func checkLanded(t *testing.T, docs map[string]map[string]any, want map[string]string) {
	t.Helper()
	seen := map[string]bool{}
	for id, doc := range docs {
		seq := strconv.Itoa(int(doc["seq"].(float64)))
		if seen[seq] {
			t.Errorf("record seq %s landed twice (id %s)", seq, id)
		}
		seen[seq] = true
		if strings.HasPrefix(id, "doc-") {
			// Documents with their own id landed with exactly their content.
		} else if !uuidRE.MatchString(id) {
			t.Errorf("unexpected id %q", id)
		} else {
			delete(doc, "id") // the generated id was not in the input
		}
		if h := hashDoc(doc); h != want[seq] {
			t.Errorf("record seq %s (id %s): content differs", seq, id)
		}
	}
	if len(docs) != len(want) {
		t.Errorf("%d documents landed, want %d", len(docs), len(want))
	}
}

// killRun starts the loader and SIGKILLs it after delay; it reports whether
// the run finished by itself first (with its exit code).
func killRun(t *testing.T, delay time.Duration, args ...string) (finished bool, code int, stderr string) {
	t.Helper()
	cmd, wait := startLoader(t, args...)
	var killed atomic.Bool
	kill := time.AfterFunc(delay, func() {
		killed.Store(true)
		_ = cmd.Process.Signal(syscall.SIGKILL)
	})
	code, stderr = wait()
	kill.Stop()
	if killed.Load() && code == -1 { // -1: ended by a signal
		return false, -1, stderr
	}
	return true, code, stderr
}

// crashLoop loads input with SIGKILLs at kills random moments, resuming each
// time, then lets the last run finish.
func crashLoop(t *testing.T, kills int, ckpt string, importArgs, resumeArgs []string) {
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	killed := 0
	for attempt := 0; attempt < kills*4 && killed < kills; attempt++ {
		args := importArgs
		if _, err := os.Stat(ckpt); err == nil {
			args = resumeArgs
		}
		// Early kills land in start-up and the first checkpoint writes,
		// later ones mid-load; checkpoints are saved every 20 ms, so many
		// kills land while one is being written.
		delay := time.Duration(150+rng.Intn(650)) * time.Millisecond
		finished, code, stderr := killRun(t, delay, args...)
		if finished {
			if code == 0 {
				break // done before we could kill it again: resume runs once more below
			}
			t.Fatalf("run %d (%s) exited %d before the kill:\n%s", attempt, args[0], code, stderr)
		}
		killed++
		// A kill before the first save leaves no checkpoint (Load wraps
		// the error): the next run imports again.
		if st, err := checkpoint.Load(ckpt); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("after kill %d the checkpoint is unreadable: %v", killed, err)
		} else if err == nil && st.Complete {
			break
		}
	}
	t.Logf("killed the loader %d times", killed)
	if killed < kills {
		t.Errorf("only %d kills happened before the load finished; make the load longer", killed)
	}
	args := resumeArgs
	if _, err := os.Stat(ckpt); err != nil {
		args = importArgs
	}
	res := runLoader(t, nil, args...)
	if res.code != 0 {
		t.Fatalf("final %s: exit %d\n%s", args[0], res.code, res.stderr)
	}
	st, err := checkpoint.Load(ckpt)
	if err != nil || !st.Complete {
		t.Fatalf("final checkpoint: %v complete=%v", err, st != nil && st.Complete)
	}
	// Resuming a complete load says so and writes nothing.
	res = runLoader(t, nil, resumeArgs...)
	if res.code != 0 || !strings.Contains(flat(res.stderr), "already complete") {
		t.Errorf("resume of a complete checkpoint: exit %d, %q", res.code, res.stderr)
	}
}

const crashRecords = 12000

var crashFlags = []string{"--checkpoint-interval", "20ms", "--checkpoint-every", "500", "--quiet"}

func TestCrashResumeAgainstStandaloneTarget(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("crash test: not in -short")
	}
	dir := t.TempDir()
	input, want := crashInput(t, dir, crashRecords)
	endpoint := startStandalone(t, "--ru", "6000", "--partitions", "4", "--data", filepath.Join(dir, "data"))
	tg := target{name: "standalone", endpoint: endpoint, key: emulator.WellKnownKey, local: true}

	ckpt := filepath.Join(dir, "ckpt.json")
	common := append([]string{"--endpoint", endpoint, "--key", emulator.WellKnownKey}, crashFlags...)
	// Four cursors over four partitions: every kill lands with several
	// segments part-way, each with its own low-water mark.
	importArgs := append([]string{"import", input, "--database", "crash", "--container", "c",
		"--create-container", "--partition-key", "/tenant", "--ru", "6000", "--checkpoint", ckpt, "--segments", "4"}, common...)
	resumeArgs := append([]string{"resume", ckpt}, common...)
	crashLoop(t, 20, ckpt, importArgs, resumeArgs)
	checkLanded(t, readAll(t, tg, "crash", "c"), want)
}

func TestCrashResumeWithEmbeddedTarget(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("crash test: not in -short")
	}
	dir := t.TempDir()
	input, want := crashInput(t, dir, crashRecords)
	data := filepath.Join(dir, "embedded")
	ckpt := filepath.Join(dir, "ckpt.json")
	importArgs := append([]string{"import", input, "--embedded-data", data, "--partition-key", "/tenant",
		"--ru", "6000", "--checkpoint", ckpt}, crashFlags...)
	resumeArgs := append([]string{"resume", ckpt, "--embedded-data", data}, crashFlags...)
	// Each SIGKILL takes the embedded target down with the loader: only
	// what its log acknowledged survives, and that must be enough.
	crashLoop(t, 20, ckpt, importArgs, resumeArgs)

	s, err := emulator.Start(context.Background(), emulator.Options{Addr: "127.0.0.1:0", DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tg := target{name: "embedded", endpoint: s.URL(), key: s.Key(), local: true}
	checkLanded(t, readAll(t, tg, "loader", "items"), want)
}

// startStandalone runs `loader emulator` with args on a free port until
// the test ends and returns its endpoint once it answers.
func startStandalone(t *testing.T, args ...string) (endpoint string) {
	t.Helper()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(testenv.FreePort(t)))
	emu := exec.Command(testenv.LoaderBinary(t), append([]string{"emulator", "--addr", addr}, args...)...)
	if err := emu.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = emu.Process.Signal(syscall.SIGTERM)
		_ = emu.Wait()
	})
	endpoint = "http://" + addr + "/"
	waitHTTP(t, endpoint+"_emulator/stats")
	return endpoint
}

func waitHTTP(t *testing.T, url string) {
	t.Helper()
	waitFor(t, url+" to answer", func() bool {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
}
