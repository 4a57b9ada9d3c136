package e2e

import (
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/emulator"
	"github.com/cosmosloader/loader/internal/testenv"
)

// A key-sorted file read at four places at once, killed twice and resumed:
// every good record lands once, every bad line is in the dead-letter file
// exactly once, and the checkpoint keeps one low-water mark per segment.
func TestSegmentedLoadKilledAndResumedLandsExactly(t *testing.T) {
	// Exactness, not speed, is checked: these kill-and-resume loops run
	// side by side with each other after the timing-sensitive tests.
	t.Parallel()
	dir := t.TempDir()
	var b bytes.Buffer
	var bad []string
	good := map[string]bool{}
	for i := 0; i < 8000; i++ {
		if i%997 == 13 {
			line := fmt.Sprintf(`{"id":"bad-%d","pk":`, i) // truncated JSON
			bad = append(bad, line)
			b.WriteString(line + "\n")
			continue
		}
		id := fmt.Sprintf("r%05d", i)
		good[id] = true
		// Sorted by key: 8 customers in long runs.
		fmt.Fprintf(&b, `{"id":%q,"pk":"customer-%d","pad":%q}`+"\n", id, i/1000, strings.Repeat("x", 150))
	}
	input := writeFile(t, dir, "sorted.ndjson", b.Bytes())
	data := filepath.Join(dir, "embedded")
	ckpt := filepath.Join(dir, "ckpt.json")
	dl := filepath.Join(dir, "dead.ndjson")
	flags := []string{"--checkpoint-interval", "20ms", "--checkpoint-every", "200", "--quiet", "--embedded-data", data}
	importArgs := append([]string{"import", input, "--partition-key", "/pk", "--ru", "3000", "--segments", "4",
		"--checkpoint", ckpt, "--dead-letter", dl}, flags...)
	resumeArgs := append([]string{"resume", ckpt}, flags...)

	for i, delay := range []time.Duration{900 * time.Millisecond, 1200 * time.Millisecond} {
		args := importArgs
		if i > 0 {
			args = resumeArgs
		}
		if finished, code, stderr := killRun(t, delay, args...); finished {
			t.Fatalf("run %d finished (exit %d) before the kill; make the load longer:\n%s", i, code, stderr)
		}
		st, err := checkpoint.Load(ckpt)
		if err != nil {
			t.Fatalf("after kill %d: %v", i, err)
		}
		if n := len(st.Inputs[0].Segments); n != 4 {
			t.Fatalf("checkpoint has %d segments, want 4", n)
		}
	}
	res := runLoader(t, nil, resumeArgs...)
	if res.code != 3 {
		t.Fatalf("final resume: exit %d, want 3 (dead letters)\n%s", res.code, res.stderr)
	}

	got := deadLetterLines(t, dl)
	sort.Strings(got)
	want := append([]string(nil), bad...)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("dead letters:\n%s\nwant exactly:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	st, err := checkpoint.Load(ckpt)
	if err != nil || !st.Complete {
		t.Fatalf("final checkpoint: %v", err)
	}
	if st.Counters.RecordsDeadLettered != int64(len(bad)) || st.Counters.RecordsWritten != int64(len(good)) {
		t.Errorf("counters: written %d, dead-lettered %d; want %d, %d", st.Counters.RecordsWritten, st.Counters.RecordsDeadLettered, len(good), len(bad))
	}

	s, err := emulator.Start(t.Context(), emulator.Options{Addr: "127.0.0.1:0", DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	docs := readAll(t, target{name: "embedded", endpoint: s.URL(), key: s.Key(), local: true}, "loader", "items")
	if len(docs) != len(good) {
		t.Errorf("%d documents landed, want %d", len(docs), len(good))
	}
	for id := range good {
		if docs[id] == nil {
			t.Errorf("record %s missing", id)
		}
	}
}

// A key-sorted file too small for segments up front (one cursor) on four
// partitions, with runs of one key longer than the read-ahead: the cursor parks on one partition while three idle, so the
// loader splits the file while loading. Killed and resumed twice, the
// split segments are in the checkpoint and every record lands once.
func TestSegmentsSplitWhileLoadingSurviveKills(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("kill test: not in -short")
	}
	dir := t.TempDir()
	var b bytes.Buffer
	var bad []string
	good := map[string]bool{}
	for i := 0; i < 12000; i++ {
		if i%1499 == 7 {
			line := fmt.Sprintf(`{"id":"bad-%d","tenant":`, i)
			bad = append(bad, line)
			b.WriteString(line + "\n")
			continue
		}
		id := fmt.Sprintf("r%05d", i)
		good[id] = true
		fmt.Fprintf(&b, `{"id":%q,"tenant":"customer-%d","pad":%q}`+"\n", id, i/1500, strings.Repeat("x", 120))
	}
	input := writeFile(t, dir, "sorted.ndjson", b.Bytes())
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(testenv.FreePort(t)))
	emu := exec.Command(testenv.LoaderBinary(t), "emulator", "--addr", addr, "--ru", "6000", "--partitions", "4")
	if err := emu.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = emu.Process.Signal(syscall.SIGTERM)
		_ = emu.Wait()
	})
	endpoint := "http://" + addr + "/"
	waitHTTP(t, endpoint+"_emulator/stats")
	ckpt := filepath.Join(dir, "ckpt.json")
	dl := filepath.Join(dir, "dead.ndjson")
	common := []string{"--endpoint", endpoint, "--key", emulator.WellKnownKey, "--checkpoint-interval", "20ms", "--checkpoint-every", "200", "--quiet"}
	importArgs := append([]string{"import", input, "--database", "seg", "--container", "c", "--create-container",
		"--partition-key", "/tenant", "--ru", "6000", "--read-ahead", "256", "--checkpoint", ckpt, "--dead-letter", dl}, common...)
	resumeArgs := append([]string{"resume", ckpt}, common...)

	split := 0
	for i, delay := range []time.Duration{2500 * time.Millisecond, 1500 * time.Millisecond} {
		args := importArgs
		if i > 0 {
			args = resumeArgs
		}
		if finished, code, stderr := killRun(t, delay, args...); finished {
			t.Fatalf("run %d finished (exit %d) before the kill; make the load longer:\n%s", i, code, stderr)
		}
		st, err := checkpoint.Load(ckpt)
		if err != nil {
			t.Fatalf("after kill %d: %v", i, err)
		}
		split = max(split, len(st.Inputs[0].Segments))
	}
	if split < 2 {
		t.Errorf("no split reached the checkpoint: %d segments", split)
	}
	res := runLoader(t, nil, resumeArgs...)
	if res.code != 3 {
		t.Fatalf("final resume: exit %d, want 3 (dead letters)\n%s", res.code, res.stderr)
	}
	got := deadLetterLines(t, dl)
	sort.Strings(got)
	sort.Strings(bad)
	if strings.Join(got, "\n") != strings.Join(bad, "\n") {
		t.Errorf("dead letters:\n%s\nwant exactly:\n%s", strings.Join(got, "\n"), strings.Join(bad, "\n"))
	}
	st, err := checkpoint.Load(ckpt)
	if err != nil || !st.Complete {
		t.Fatalf("final checkpoint: %v", err)
	}
	t.Logf("%d segments in the end", len(st.Inputs[0].Segments))
	if st.Counters.RecordsDeadLettered != int64(len(bad)) || st.Counters.RecordsWritten != int64(len(good)) {
		t.Errorf("counters: written %d, dead-lettered %d; want %d, %d", st.Counters.RecordsWritten, st.Counters.RecordsDeadLettered, len(good), len(bad))
	}
	docs := readAll(t, target{name: "standalone", endpoint: endpoint, key: emulator.WellKnownKey, local: true}, "seg", "c")
	if len(docs) != len(good) {
		t.Errorf("%d documents landed, want %d", len(docs), len(good))
	}
	for id := range good {
		if docs[id] == nil {
			t.Errorf("record %s missing", id)
		}
	}
}
