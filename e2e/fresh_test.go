package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/testenv"
)

// freshEnv is the environment of a machine where the loader never ran:
// HOME and every XDG directory point into an empty temporary directory
// (the XDG ones do not even exist yet).
func freshEnv(t *testing.T) (home string, env []string) {
	home = t.TempDir()
	env = append(os.Environ(), "HOME="+home,
		"XDG_STATE_HOME="+filepath.Join(home, "xdg", "state"),
		"XDG_DATA_HOME="+filepath.Join(home, "xdg", "data"),
		"XDG_CONFIG_HOME="+filepath.Join(home, "xdg", "config"),
		"XDG_CACHE_HOME="+filepath.Join(home, "xdg", "cache"),
		"COSMOS_ENDPOINT=", "COSMOS_KEY=", "COSMOS_CONNECTION_STRING=", "LOADER_LEASE_CONNECTION_STRING=")
	return home, env
}

// startIn runs the loader in the background with env; wait returns its exit
// code and stderr.
func startIn(t *testing.T, env []string, args ...string) (cmd *exec.Cmd, wait func() (int, string)) {
	t.Helper()
	cmd = exec.Command(testenv.LoaderBinary(t), args...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, func() (int, string) {
		select {
		case err := <-done:
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			return code, errb.String()
		case <-time.After(patience):
			// A Go program prints every goroutine's stack on SIGQUIT.
			_ = cmd.Process.Signal(syscall.SIGQUIT)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
			t.Fatalf("the loader did not exit within %v; its stderr, goroutines last:\n%s", patience, errb.String())
			return 0, ""
		}
	}
}

func runIn(t *testing.T, env []string, args ...string) result {
	t.Helper()
	_, wait := startIn(t, env, args...)
	code, stderr := wait()
	return result{code: code, stderr: stderr}
}

// docsOrNone is readAll, with no documents for a container never created.
func docsOrNone(t *testing.T, tg target, db, container string) map[string]map[string]any {
	t.Helper()
	cc, err := client(t, tg).NewContainer(db, container)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cc.Read(context.Background(), nil); err != nil {
		var re *azcore.ResponseError
		if errors.As(err, &re) && re.StatusCode == http.StatusNotFound {
			return nil
		}
		t.Fatalf("read container %s/%s: %v", db, container, err)
	}
	return readAll(t, tg, db, container)
}

func deadLetterLines(t *testing.T, path string) []string {
	t.Helper()
	var raws []string
	for _, d := range readDeadLetters(t, path) {
		raws = append(raws, fmt.Sprint(d["raw"]))
	}
	return raws
}

// The first report: one bad line, from a HOME where nothing
// exists yet, with the embedded target and every default path.
func TestFreshHomeBadLinesAreDeadLettered(t *testing.T) {
	t.Parallel()
	home, env := freshEnv(t)
	input := writeFile(t, t.TempDir(), "t.ndjson", []byte("{\"id\":\"a\",\"pk\":\"p\"}\nnot json\n{\"id\":\"b\",\"pk\":\"p\"}\n{\"id\":\"c\"\n{\"id\":\"d\",\"pk\":\"p\"}\n"))
	res := runIn(t, env, "import", input)
	if res.code != 3 {
		t.Fatalf("import from a fresh HOME: exit %d, want 3\n%s", res.code, res.stderr)
	}
	ckpts, _ := filepath.Glob(filepath.Join(home, "xdg", "state", "loader", "checkpoints", "*.json"))
	if len(ckpts) != 1 {
		t.Fatalf("checkpoints under the fresh HOME: %v", ckpts)
	}
	ckpt := ckpts[0]
	dl := strings.TrimSuffix(ckpt, ".json") + ".deadletter.ndjson"
	check := func(when string) {
		t.Helper()
		got := deadLetterLines(t, dl)
		if want := []string{"not json", `{"id":"c"`}; strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%s: the dead-letter file holds %q, want exactly the bad lines %q", when, got, want)
		}
		st, err := checkpoint.Load(ckpt)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if st.Counters.RecordsDeadLettered != int64(len(got)) || st.Counters.RecordsWritten != 3 {
			t.Errorf("%s: checkpoint counts %d dead-lettered, %d written; the file holds %d lines",
				when, st.Counters.RecordsDeadLettered, st.Counters.RecordsWritten, len(got))
		}
	}
	check("after import")
	if !strings.Contains(res.stderr, dl) {
		t.Errorf("the summary does not name the dead-letter file %s:\n%s", dl, res.stderr)
	}

	res = runIn(t, env, "resume", ckpt)
	if res.code != 0 || !strings.Contains(flat(res.stderr), "already complete") {
		t.Errorf("resume of the finished load: exit %d\n%s", res.code, res.stderr)
	}
	// The same command again loads again: the file is rewritten, not appended to.
	res = runIn(t, env, "import", input)
	if res.code != 3 {
		t.Fatalf("second import: exit %d\n%s", res.code, res.stderr)
	}
	check("after a second import")
}

// Every path the run will write is checked before anything is sent: an
// unusable one is a usage error naming the flag and the path.
func TestUnusableOutputPathsAreUsageErrors(t *testing.T) {
	t.Parallel()
	tg := localTarget(t, emulator.Options{DefaultRU: 100000})
	dir := t.TempDir()
	input := writeFile(t, dir, "in.ndjson", []byte("{\"id\":\"a\",\"pk\":\"p\"}\nnot json\n"))
	file := writeFile(t, dir, "plain-file", []byte("x"))
	aDir := filepath.Join(dir, "a-dir")
	if err := os.Mkdir(aDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct{ flag, path string }{
		{"--report", filepath.Join(file, "r.json")},
		{"--report-html", filepath.Join(file, "dir", "r.html")},
		{"--report", aDir},
		{"--dead-letter", filepath.Join(file, "dl.ndjson")},
		{"--checkpoint", filepath.Join(file, "c.json")},
	} {
		t.Run(strings.TrimPrefix(c.flag, "--")+strconv.Itoa(i), func(t *testing.T) {
			_, env := freshEnv(t)
			ckpt := filepath.Join(t.TempDir(), "c.json")
			coll := "bad" + strconv.Itoa(i)
			args := append([]string{"import", input, "--checkpoint", ckpt},
				tg.args("e2e", coll, "--create-container", "--partition-key", "/pk")...)
			args = append(args, c.flag, c.path) // the last --checkpoint wins
			res := runIn(t, env, args...)
			if res.code != 2 {
				t.Fatalf("exit %d, want 2\n%s", res.code, res.stderr)
			}
			if !strings.Contains(res.stderr, c.flag) || !strings.Contains(res.stderr, c.path) {
				t.Errorf("the error does not name %s %s:\n%s", c.flag, c.path, res.stderr)
			}
			if docs := docsOrNone(t, tg, "e2e", coll); len(docs) > 0 {
				t.Errorf("%d documents written despite the usage error", len(docs))
			}
			if _, err := os.Stat(ckpt); c.flag != "--checkpoint" && err == nil {
				t.Errorf("a checkpoint was written despite the usage error")
			}
		})
	}

	// A report directory that does not exist yet is created (--report and
	// --report-html alike), before the load.
	_, env := freshEnv(t)
	rj, rh := filepath.Join(dir, "new", "a", "r.json"), filepath.Join(dir, "new", "b", "r.html")
	res := runIn(t, env, append([]string{"import", input, "--report", rj, "--report-html", rh, "--checkpoint", filepath.Join(dir, "ok.json")},
		tg.args("e2e", "ok", "--create-container", "--partition-key", "/pk")...)...)
	if res.code != 3 {
		t.Fatalf("import with new report directories: exit %d\n%s", res.code, res.stderr)
	}
	for _, p := range []string{rj, rh} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("report not written: %v", err)
		}
	}
}

// --quiet hides progress and the summary, never why the run failed.
func TestQuietStillSaysWhyItStopped(t *testing.T) {
	t.Parallel()
	tg := localTarget(t, emulator.Options{DefaultRU: 100000})
	_, env := freshEnv(t)
	dir := t.TempDir()
	input := writeFile(t, dir, "in.ndjson", []byte("{\"id\":\"a\",\"pk\":\"p\"}\nnot json\n{\"id\":\"b\",\"pk\":\"p\"}\n"))
	base := append([]string{"import", input, "--restart"}, tg.args("e2e", "quiet", "--create-container", "--partition-key", "/pk")...)

	res := runIn(t, env, append(base, "--checkpoint", filepath.Join(dir, "c1.json"))...)
	if res.code != 3 || !strings.Contains(res.stderr, "dead-lettered") {
		t.Errorf("--quiet, exit 3: stderr does not say records were dead-lettered:\n%q", res.stderr)
	}
	res = runIn(t, env, append(base, "--checkpoint", filepath.Join(dir, "c2.json"), "--max-errors", "0")...)
	if res.code != 4 || !strings.Contains(flat(res.stderr), "too many records dead-lettered") {
		t.Errorf("--quiet, exit 4: stderr does not say why:\n%q", res.stderr)
	}
}

// One loader per checkpoint: a second import or resume of it exits 2 at
// once naming the first one's PID; once the first is killed, its lock
// blocks nobody.
func TestTwoLoadersOnOneCheckpoint(t *testing.T) {
	t.Parallel()
	tg, _, ckpt, want, args := slowLoad(t)
	_, env := freshEnv(t)
	first, _ := startIn(t, env, append(args, "--checkpoint-interval", "100ms")...)
	waitForCheckpoint(t, ckpt)
	pid := "PID " + strconv.Itoa(first.Process.Pid)

	// Stopped, the first loader holds its lock and cannot finish: a
	// second one that waited for the lock instead of refusing would wait
	// until the test gives up.
	if err := first.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for _, second := range [][]string{
		append(append([]string{}, args...), "--restart"),
		{"resume", ckpt, "--endpoint", tg.endpoint, "--key", tg.key, "--quiet"},
	} {
		res := runIn(t, env, second...)
		if res.code != 2 || !strings.Contains(res.stderr, pid) {
			t.Errorf("%s while another loader holds the checkpoint: exit %d, want 2 naming %s\n%s", second[0], res.code, pid, res.stderr)
		}
	}
	_ = first.Process.Signal(syscall.SIGKILL)
	_, _ = first.Process.Wait()
	res := runIn(t, env, "resume", ckpt, "--endpoint", tg.endpoint, "--key", tg.key, "--quiet")
	if res.code != 0 {
		t.Fatalf("resume after the holder was killed: exit %d\n%s", res.code, res.stderr)
	}
	checkLanded(t, readAll(t, tg, "e2e", "sig"), want)
}

// A SIGKILL at any moment, even before the first periodic save (every 5 s
// by default), leaves a checkpoint that resume accepts; a kill before it
// exists must have written nothing.
func TestKillInTheFirstSecondsThenResume(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("kills: not in -short")
	}
	tg := localTarget(t, emulator.Options{DefaultRU: 3000})
	dir := t.TempDir()
	input, want := crashInput(t, dir, 3000)
	for _, delay := range []time.Duration{200 * time.Millisecond, time.Second, 3 * time.Second} {
		t.Run(delay.String(), func(t *testing.T) {
			t.Parallel() // each kill has its own container and its own throughput
			_, env := freshEnv(t)
			coll := "kill" + strconv.Itoa(int(delay.Milliseconds()))
			ckpt := filepath.Join(t.TempDir(), "ckpt.json")
			args := append([]string{"import", input, "--checkpoint", ckpt},
				tg.args("e2e", coll, "--create-container", "--partition-key", "/tenant", "--ru", "3000")...)
			cmd, wait := startIn(t, env, args...)
			time.Sleep(delay)
			_ = cmd.Process.Signal(syscall.SIGKILL)
			if code, stderr := wait(); code == 0 {
				t.Fatalf("the load finished before the kill at %s; make it longer\n%s", delay, stderr)
			}
			next := []string{"resume", ckpt, "--endpoint", tg.endpoint, "--key", tg.key, "--quiet"}
			if _, err := os.Stat(ckpt); err != nil {
				if n := len(docsOrNone(t, tg, "e2e", coll)); n > 0 {
					t.Fatalf("killed at %s with no checkpoint, but %d documents were written", delay, n)
				}
				next = args
			} else if _, err := checkpoint.Load(ckpt); err != nil {
				t.Fatalf("killed at %s: the checkpoint is unusable: %v", delay, err)
			}
			res := runIn(t, env, next...)
			if res.code != 0 {
				t.Fatalf("%s after a kill at %s: exit %d\n%s", next[0], delay, res.code, res.stderr)
			}
			checkLanded(t, readAll(t, tg, "e2e", coll), want)
		})
	}
}

// After resume the summary and the JSON report tell this run from the
// whole load, and the start says where it continues.
func TestResumeSeparatesThisRunFromTheWholeLoad(t *testing.T) {
	t.Parallel()
	_, env := freshEnv(t)
	tg, input, ckpt := interrupted(t, env, syscall.SIGINT)
	st, err := checkpoint.Load(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	before := st.Counters.RecordsRead
	report := filepath.Join(t.TempDir(), "r.json")
	res := runIn(t, env, "resume", ckpt, "--endpoint", tg.endpoint, "--key", tg.key, "--report", report)
	if res.code != 0 {
		t.Fatalf("resume: exit %d\n%s", res.code, res.stderr)
	}
	wantStart := fmt.Sprintf("%s: from line %d", input, st.Inputs[0].Committed.Line+1)
	if !strings.Contains(flat(res.stderr), wantStart) || !strings.Contains(flat(res.stderr), "records already committed") {
		t.Errorf("the start does not say where it continues (%q):\n%s", wantStart, res.stderr)
	}
	if !strings.Contains(flat(res.stderr), "this run") {
		t.Errorf("the summary does not separate this run:\n%s", res.stderr)
	}
	rep := readReport(t, report)
	this, ok := rep["this_run"].(map[string]any)
	if !ok {
		t.Fatalf("no this_run in the report: %v", rep)
	}
	if got := rep["records_read"].(float64); got != slowRecords {
		t.Errorf("records_read %v, want the whole load's %d", got, slowRecords)
	}
	if got := this["records"].(float64); int64(got) != slowRecords-before {
		t.Errorf("this_run.records %v, want %d", got, slowRecords-before)
	}
	if this["requests_sent"].(float64) >= rep["requests_sent"].(float64) || this["ru_consumed"].(float64) >= rep["ru_consumed"].(float64) {
		t.Errorf("this run's requests/RU %v/%v are not below the whole load's %v/%v",
			this["requests_sent"], this["ru_consumed"], rep["requests_sent"], rep["ru_consumed"])
	}
	if this["duration_seconds"].(float64) >= rep["duration_seconds"].(float64) {
		t.Errorf("this run's duration %v is not below the whole load's %v", this["duration_seconds"], rep["duration_seconds"])
	}
}
