package e2e

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/emulator"
)

// sortedInput writes n records sorted by key (runs of perKey records under
// the field key, padded by pad bytes), with a truncated line in place of
// each record i where i%badEvery == badAt; it returns the good ids and the
// bad lines.
func sortedInput(t *testing.T, dir string, n, perKey, badEvery, badAt int, key string, pad int) (path string, good map[string]bool, bad []string) {
	t.Helper()
	var b bytes.Buffer
	good = map[string]bool{}
	for i := 0; i < n; i++ {
		if i%badEvery == badAt {
			line := fmt.Sprintf(`{"id":"bad-%d",%q:`, i, key) // truncated JSON
			bad = append(bad, line)
			b.WriteString(line + "\n")
			continue
		}
		id := fmt.Sprintf("r%05d", i)
		good[id] = true
		fmt.Fprintf(&b, `{"id":%q,%q:"customer-%d","pad":%q}`+"\n", id, key, i/perKey, strings.Repeat("x", pad))
	}
	return writeFile(t, dir, "sorted.ndjson", b.Bytes()), good, bad
}

// killAt says when killEach kills a run: once its checkpoint holds
// records written by this run and ready (nil: nothing more) holds of it;
// what names the moment, for a run that ends before it.
type killAt struct {
	what  string
	ready func(*checkpoint.State) bool
}

// killEach runs the import, then a resume per further kill, each SIGKILLed
// at its moment (it must not finish first), and hands check the checkpoint
// each kill left. The kills follow what the checkpoint says, not the
// clock, so a busy machine only makes them later.
func killEach(t *testing.T, kills []killAt, ckpt string, importArgs, resumeArgs []string, check func(*checkpoint.State)) {
	t.Helper()
	for i, k := range kills {
		args := importArgs
		if i > 0 {
			args = resumeArgs
		}
		killWhen(t, ckpt, k, args...)
		st, err := checkpoint.Load(ckpt)
		if err != nil {
			t.Fatalf("after kill %d: %v", i, err)
		}
		check(st)
	}
}

// killWhen runs the loader with args and SIGKILLs it at k.
func killWhen(t *testing.T, ckpt string, k killAt, args ...string) {
	t.Helper()
	var before int64
	if st, err := checkpoint.Load(ckpt); err == nil {
		before = st.Counters.RecordsWritten
	}
	cmd, wait := startLoader(t, args...)
	waitFor(t, "a checkpoint with "+k.what, func() bool {
		if cmd.Process.Signal(syscall.Signal(0)) != nil {
			return true // the run ended: said below
		}
		st, err := checkpoint.Load(ckpt)
		return err == nil && st.Counters.RecordsWritten > before && (k.ready == nil || k.ready(st))
	})
	_ = cmd.Process.Signal(syscall.SIGKILL)
	if code, stderr := wait(); code != -1 { // -1: ended by the signal
		t.Fatalf("%s ended (exit %d) before a checkpoint with %s:\n%s", args[0], code, k.what, stderr)
	}
}

// finishExactly resumes the load to its end and checks that it landed
// exactly: every bad line in the dead-letter file once, the checkpoint
// complete with matching counters, and every good record among docs (read
// once the load is done) once. It returns the final checkpoint.
func finishExactly(t *testing.T, ckpt, dl string, resumeArgs []string, good map[string]bool, bad []string,
	docs func() map[string]map[string]any) *checkpoint.State {
	t.Helper()
	res := runLoader(t, nil, resumeArgs...)
	if res.code != 3 {
		t.Fatalf("final resume: exit %d, want 3 (dead letters)\n%s", res.code, res.stderr)
	}
	got := deadLetterLines(t, dl)
	sort.Strings(got)
	want := slices.Sorted(slices.Values(bad))
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
	landed := docs()
	if len(landed) != len(good) {
		t.Errorf("%d documents landed, want %d", len(landed), len(good))
	}
	for id := range good {
		if landed[id] == nil {
			t.Errorf("record %s missing", id)
		}
	}
	return st
}

// A key-sorted file read at four places at once, killed twice and resumed:
// every good record lands once, every bad line is in the dead-letter file
// exactly once, and the checkpoint keeps one low-water mark per segment.
func TestSegmentedLoadKilledAndResumedLandsExactly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Sorted by key: 8 customers in long runs.
	input, good, bad := sortedInput(t, dir, 4000, 500, 997, 13, "pk", 150)
	data := filepath.Join(dir, "embedded")
	ckpt := filepath.Join(dir, "ckpt.json")
	dl := filepath.Join(dir, "dead.ndjson")
	flags := []string{"--checkpoint-interval", "20ms", "--checkpoint-every", "200", "--quiet", "--embedded-data", data}
	importArgs := append([]string{"import", input, "--partition-key", "/pk", "--ru", "3000", "--segments", "4",
		"--checkpoint", ckpt, "--dead-letter", dl}, flags...)
	resumeArgs := append([]string{"resume", ckpt}, flags...)

	killEach(t, []killAt{{what: "progress"}, {what: "progress"}}, ckpt, importArgs, resumeArgs, func(st *checkpoint.State) {
		if n := len(st.Inputs[0].Segments); n != 4 {
			t.Fatalf("checkpoint has %d segments, want 4", n)
		}
	})
	finishExactly(t, ckpt, dl, resumeArgs, good, bad, func() map[string]map[string]any {
		s, err := emulator.Start(t.Context(), emulator.Options{Addr: "127.0.0.1:0", DataDir: data})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		return readAll(t, target{name: "embedded", endpoint: s.URL(), key: s.Key(), local: true}, "loader", "items")
	})
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
	input, good, bad := sortedInput(t, dir, 12000, 1500, 1499, 7, "tenant", 120)
	endpoint := startStandalone(t, "--ru", "6000", "--partitions", "4")
	ckpt := filepath.Join(dir, "ckpt.json")
	dl := filepath.Join(dir, "dead.ndjson")
	common := []string{"--endpoint", endpoint, "--key", emulator.WellKnownKey, "--checkpoint-interval", "20ms", "--checkpoint-every", "200", "--quiet"}
	importArgs := append([]string{"import", input, "--database", "seg", "--container", "c", "--create-container",
		"--partition-key", "/tenant", "--ru", "6000", "--read-ahead", "256", "--checkpoint", ckpt, "--dead-letter", dl}, common...)
	resumeArgs := append([]string{"resume", ckpt}, common...)

	split := killAt{what: "the file split while loading", ready: func(st *checkpoint.State) bool { return len(st.Inputs[0].Segments) >= 2 }}
	killEach(t, []killAt{split, {what: "progress"}}, ckpt, importArgs, resumeArgs, func(st *checkpoint.State) {
		if n := len(st.Inputs[0].Segments); n < 2 {
			t.Errorf("the split segments are not in the checkpoint after the kill: %d segments", n)
		}
	})
	st := finishExactly(t, ckpt, dl, resumeArgs, good, bad, func() map[string]map[string]any {
		return readAll(t, target{name: "standalone", endpoint: endpoint, key: emulator.WellKnownKey, local: true}, "seg", "c")
	})
	t.Logf("%d segments in the end", len(st.Inputs[0].Segments))
}

// A table cut into files of one key each (a key-sorted export in parts,
// or Spark's output partitioned by key), on four partitions: read one file
// after another, one partition would be busy at a time. The import reads
// several files at once — the checkpoints of two kills show three or more
// part-way together — and, resumed, lands every good record once and
// dead-letters every bad line once.
func TestKeyedFilesReadAtOnceSurviveKills(t *testing.T) {
	t.Parallel()
	loadKeyedFilesWithKills(t, 12, 500, nil, func(in checkpoint.Input) bool {
		return in.Committed.Line > 0 && in.Committed.Line < 500 && len(in.Segments) == 0
	})
}

// loadKeyedFilesWithKills loads keyedFiles(files, perFile) into a
// standalone target of four partitions with the flags given, killing it
// twice — each time once partWay says three or more files are part-way —
// and resuming it, and checks that it lands exactly. A load that reads its
// files one after another ends before such a checkpoint.
func loadKeyedFilesWithKills(t *testing.T, files, perFile int, flags []string, partWay func(checkpoint.Input) bool) {
	t.Helper()
	dir := t.TempDir()
	inputs, good, bad := keyedFiles(t, dir, files, perFile)
	endpoint := startStandalone(t, "--ru", "6000", "--partitions", "4")
	ckpt := filepath.Join(dir, "ckpt.json")
	dl := filepath.Join(dir, "dead.ndjson")
	common := []string{"--endpoint", endpoint, "--key", emulator.WellKnownKey, "--checkpoint-interval", "20ms", "--checkpoint-every", "200", "--quiet"}
	importArgs := append(append([]string{"import"}, inputs...), append(append([]string{"--database", "files", "--container", "c", "--create-container",
		"--partition-key", "/tenant", "--ru", "6000", "--read-ahead", "256", "--checkpoint", ckpt, "--dead-letter", dl}, flags...), common...)...)
	resumeArgs := append([]string{"resume", ckpt}, common...)

	together := func(st *checkpoint.State) int {
		n := 0
		for _, in := range st.Inputs {
			if partWay(in) {
				n++
			}
		}
		return n
	}
	atOnce := killAt{what: "three or more files part-way", ready: func(st *checkpoint.State) bool { return together(st) >= 3 }}
	killEach(t, []killAt{atOnce, atOnce}, ckpt, importArgs, resumeArgs, func(st *checkpoint.State) {
		t.Logf("%d files part-way", together(st))
	})
	finishExactly(t, ckpt, dl, resumeArgs, good, bad, func() map[string]map[string]any {
		return readAll(t, target{name: "standalone", endpoint: endpoint, key: emulator.WellKnownKey, local: true}, "files", "c")
	})
}

// keyedFiles writes files NDJSON files of perFile records, all of file f
// under the key customer-f, with a truncated line in place of every 97th;
// it returns the files, the good ids and the bad lines.
func keyedFiles(t *testing.T, dir string, files, perFile int) (inputs []string, good map[string]bool, bad []string) {
	t.Helper()
	good = map[string]bool{}
	for f := range files {
		var b bytes.Buffer
		for i := range perFile {
			id := fmt.Sprintf("f%02d-%04d", f, i)
			if i%97 == 13 {
				line := fmt.Sprintf(`{"id":%q,"tenant":`, id) // truncated JSON
				bad = append(bad, line)
				b.WriteString(line + "\n")
				continue
			}
			good[id] = true
			fmt.Fprintf(&b, `{"id":%q,"tenant":"customer-%d","pad":%q}`+"\n", id, f, strings.Repeat("x", 150))
		}
		inputs = append(inputs, writeFile(t, dir, fmt.Sprintf("part-%02d.ndjson", f), b.Bytes()))
	}
	return inputs, good, bad
}

// Files of one key each, read in segments (--segments 3): the cursors take
// every file's first segment before any file's second, so several
// partitions are fed at once — the checkpoints of two kills show segments
// of three or more files part-way — and, resumed, every good record lands
// once and every bad line is dead-lettered once.
func TestSegmentsOfKeyedFilesAreReadAcrossFiles(t *testing.T) {
	t.Parallel()
	loadKeyedFilesWithKills(t, 4, 1500, []string{"--segments", "3"}, func(in checkpoint.Input) bool {
		return slices.ContainsFunc(in.Segments, func(s checkpoint.Segment) bool {
			return s.Committed.Offset > s.Start.Offset && (s.End == 0 || s.Committed.Offset < s.End)
		})
	})
}
